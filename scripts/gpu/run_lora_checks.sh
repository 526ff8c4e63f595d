#!/bin/bash
# On the GPU host: fsdpc LoRA against Hugging Face PEFT (issue 14).
#   bash .carry/lora/run_lora_checks.sh
# 1. A tiny random fp32 Llama (transformers) and a token file whose 4 windows
#    are every step's batch.
# 2. fsdpc (CPU, fp32) trains LoRA r 4 on all seven projections for 20 steps
#    from it (the adapters after a 1-step run at lr 0 are the initial ones);
#    PyTorch + PEFT trains from the same base, initial adapters and batch with
#    AdamW and clipping: losses and grad norms within 1e-4, final adapters too.
# 3. PeftModel.from_pretrained loads fsdpc's adapter folder (final/) onto the
#    base: logits vs fsdpc's (fp32 on the CPU within 1e-5; bf16 on the GPU);
#    transformers loads the merged folder (final-merged/): same logits.
# 4. The CUDA path: the same LoRA run on the GPU (bf16) vs the CPU run (bf16
#    tolerance), and with dropout + activation checkpointing.
# Packed by: scripts/gpu/pack_lora_carry.sh /work/main/.carry/lora
. "$(dirname "$0")/carry_env.sh" # C, OUT, B, F; LD_LIBRARY_PATH
export FSDPC_PLUGIN_PATH=$B/plugins
P="python3 $C/check_lora_peft.py"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -c 'import torch, transformers, peft; print("torch", torch.__version__, "transformers",
  transformers.__version__, "peft", peft.__version__)' | tee -a "$OUT/gpu.txt"
W=$(mktemp -d)
T=32 G=4
$P base "$W/base" || exit 1
$P data "$W/data.tok" 259 $T $G || exit 1
cat >"$W/lora.yaml" <<YAML
model: {config: $W/base, init: {from: $W/base}}
data: {train: $W/data.tok, seq_len: $T, shuffle: false, eval_fraction: 0.0}
attention: {impl: naive}
optim: {name: adamw, lr: 1.0e-2, weight_decay: 0.0}
schedule: {name: constant, warmup_steps: 0}
peft: {method: lora, r: 4, alpha: 8, dropout: 0.0, target_modules: [all-linear], merge_on_save: true}
train: {max_steps: 20, micro_batch_size: $G, global_batch_size: $G, max_grad_norm: 1.0,
        log_every: 1, eval_every: 0, seed: 7}
checkpoint: {final_dtype: fp32}
YAML
run() { # name overrides...
  local n=$1; shift
  $F train "$W/lora.yaml" log.dir="$W/$n" checkpoint.dir="$W/$n/ck" "$@" >"$OUT/$n.log" 2>&1
  echo "== fsdpc $n: exit $?"; grep -E "step 20/|error" "$OUT/$n.log" | tail -2
  cp "$W/$n/metrics.jsonl" "$OUT/$n.metrics.jsonl" 2>/dev/null
}
run init optim.lr=0.0 train.max_steps=1 peft.merge_on_save=false
run cpu
echo "--- 2. 20 steps: fsdpc (CPU fp32) vs PyTorch + PEFT (CPU fp32)"
$P track "$W/base" "$W/init/ck/final" "$W/cpu" "$W/data.tok" $T $G --lr 1e-2 --steps 20 \
  2>&1 | tee "$OUT/track.txt" | tail -4
echo "--- 3. PEFT loads fsdpc's adapter folder; transformers loads the merged folder"
cp "$W/cpu/ck/final/adapter_config.json" "$OUT/adapter_config.json"
$B/bin/fsdpc_dump_logits "$W/cpu/ck/final-merged" "$W/fsdpc_logits.safetensors" 32 >"$OUT/dump.log" 2>&1
echo "dump logits (fsdpc, merged): exit $?"
$P logits "$W/base" "$W/cpu/ck/final" "$W/fsdpc_logits.safetensors" 2>&1 | tail -2
$P logits "$W/base" "$W/cpu/ck/final" "$W/fsdpc_logits.safetensors" --device cuda --dtype fp32 2>&1 | tail -1
$P logits "$W/base" "$W/cpu/ck/final" "$W/fsdpc_logits.safetensors" --device cuda --dtype bf16 \
  --tol 3e-2 2>&1 | tail -1
python3 "$C/check_hf_load.py" "$W/cpu/ck/final-merged" "$W/fsdpc_logits.safetensors" 2>&1 | tail -2
echo "--- 4. the CUDA path (bf16) vs the CPU reference"
run gpu train.device=cuda
run gpu_ckpt_drop train.device=cuda fsdp.activation_checkpointing=true peft.dropout=0.1
run cpu_ckpt_drop fsdp.activation_checkpointing=true peft.dropout=0.1
python3 "$C/compare_runs.py" "$W/cpu" "$W/gpu" --rtol 3e-2 --keys loss 2>&1 | tail -2
python3 "$C/compare_runs.py" "$W/cpu_ckpt_drop" "$W/gpu_ckpt_drop" --rtol 3e-2 --keys loss 2>&1 | tail -2
# the GPU run's merged folder holds the bf16 base (the frozen base lives in the
# compute dtype): bf16 tolerance against PEFT over the fp32 base
$B/bin/fsdpc_dump_logits "$W/gpu/ck/final-merged" "$W/gpu_logits.safetensors" 32 >/dev/null 2>&1
$P logits "$W/base" "$W/gpu/ck/final" "$W/gpu_logits.safetensors" --tol 3e-2 2>&1 | tail -1
echo "done"
