#!/bin/bash
# Issue 37 (QLoRA) on the GPU host in one call (about 2 minutes; the fsdpc
# runs are the CPU engine's, the GPU is only asked for the refusal), from a
# carry of scripts/gpu/carry.sh:
#   here:   bash scripts/gpu/carry.sh /work/main/.carry/qlora /work/main/build-cuda
#   device: OUT=$OUT bash tests/gpu/qlora_check.sh .carry/qlora     (from the repo root)
# Prints one "===== NAME: PASS|FAIL|SKIP" line per part and RESULT lines:
#   1. dequant: SKIP until the CUDA dequantize kernel exists (the CUDA engine
#      refuses nf4; docs/lora.md, "Where it stands");
#   2. base: a tiny random fp32 HF Llama (check_lora_peft.py base) and its
#      NF4 base made in Python by tests/quant/nf4_ref.py (numpy, written from
#      bitsandbytes' algorithm): fsdpc's merged export of a QLoRA run at lr 0
#      (B = 0, so merged = its dequantized base) equals it bit for bit;
#   3. track: 20 steps of fsdpc QLoRA (CPU engine, fp32, r 4 on all seven
#      projections, AdamW, clipping) against PyTorch + PEFT on that NF4 base
#      with fsdpc's initial adapters, the same batches, fp32 adapters:
#      losses and grad norms within 1e-3 (relative), the final adapters
#      within 1e-2;
#   4. cuda: `fsdpc train ... train.device=cuda quantization.method=nf4` is
#      refused in one line that names the CPU engine (the 8B QLoRA vs bf16
#      LoRA speed and peak rows wait for the CUDA dequantization: SKIP).
# Logs in $OUT/qlora_logs.tar.xz, the lines in $OUT/results.txt.
CARRY=${1:?usage: qlora_check.sh CARRY_DIR}
. "$CARRY/carry_env.sh" # C, OUT, B, F, part; LD_LIBRARY_PATH
export FSDPC_PLUGIN_PATH=$B/plugins PYTHONUNBUFFERED=1
W=$(mktemp -d)
# Python with the host's libraries (the carry's runtime is for fsdpc)
PY() { LD_LIBRARY_PATH='' python3 "$@"; }
P="PY $C/check_lora_peft.py"
R="$OUT/results.txt"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$R"
PY -c 'import torch, transformers, peft; print("torch", torch.__version__, "transformers",
  transformers.__version__, "peft", peft.__version__)' | tee -a "$R"
verdict() { echo "===== $1: $2" | tee -a "$R"; }

verdict dequant "SKIP (no CUDA dequantize kernel yet: the CUDA engine refuses nf4)"

T=32 G=4
$P base "$W/base" | tee -a "$R"
$P data "$W/data.tok" 259 $T $G | tee -a "$R"
cat >"$W/qlora.yaml" <<YAML
model: {config: $W/base, init: {from: $W/base}}
data: {train: $W/data.tok, seq_len: $T, shuffle: false, eval_fraction: 0.0}
attention: {impl: naive}
optim: {name: adamw, lr: 1.0e-2, weight_decay: 0.0}
schedule: {name: constant, warmup_steps: 0}
peft: {method: lora, r: 4, alpha: 8, dropout: 0.0, target_modules: [all-linear]}
quantization: {method: nf4, double_quant: true, block_size: 64}
train: {max_steps: 20, micro_batch_size: $G, global_batch_size: $G, max_grad_norm: 1.0,
        log_every: 1, eval_every: 0, seed: 7}
checkpoint: {final_dtype: fp32}
YAML
run() { # name overrides...
  local n=$1
  shift
  timeout 300 "$F" train "$W/qlora.yaml" log.dir="$W/$n" checkpoint.dir="$W/$n/ck" "$@" \
    >"$W/$n.log" 2>&1
  local rc=$?
  echo "fsdpc $n: exit $rc; $(grep -E "step 20/|error" "$W/$n.log" | tail -1)" | tee -a "$R"
  return $rc
}

# 2. the NF4 base, two ways
$P nf4base "$W/base" "$W/nf4base" tests/quant | tee -a "$R"
if run init optim.lr=0.0 train.max_steps=1 peft.merge_on_save=true &&
  $P same "$W/nf4base" "$W/init/ck/final-merged" | tee -a "$R" | grep -q " OK$"; then
  verdict base PASS
else
  verdict base FAIL
fi

# 3. 20 steps against PyTorch + PEFT on the NF4 base
if run cpu && $P track "$W/nf4base" "$W/init/ck/final" "$W/cpu" "$W/data.tok" $T $G --lr 1e-2 \
  --steps 20 --rtol 1e-3 >"$W/track.txt" 2>&1; then
  verdict track PASS
else
  verdict track FAIL
fi
tail -3 "$W/track.txt" | tee -a "$R"

# 4. the CUDA engine's refusal
run gpu train.device=cuda
rc=$?
lines=$(grep -c "error" "$W/gpu.log")
if [ $rc -ne 0 ] && [ "$lines" -eq 1 ] && grep -q "only the CPU engine holds a 4-bit base" "$W/gpu.log"; then
  verdict cuda-refusal PASS
else
  verdict cuda-refusal "FAIL (exit $rc, $lines error lines)"
fi
verdict 8b-speed-memory "SKIP (the CUDA engine refuses nf4 until its gather dequantizes)"

tar cJf "$OUT/qlora_logs.tar.xz" -C "$W" --exclude='*.tok' --exclude='*.safetensors' . 2>/dev/null
rm -rf "$W"
