#!/bin/bash
# On the GPU host (one GPU): the merged tree's CUDA tests, then short 1B runs
# of the features that met in one engine this session (adamw8bit, the two
# offload modes, LoRA, the optimizer's bf16 copy), each beside the plain run.
#   bash scripts/gpu/pack_train_carry.sh .carry/merge   (here)
#   bash .carry/merge/run_merge_check.sh                 (device, carry .carry/merge)
# One line per run: RUN <name> exit X losses <l1 .. lN> tok_s <last step's> peak_gib <rank0.json>
. "$(dirname "$0")/carry_env.sh" # C, OUT, B, F; LD_LIBRARY_PATH
export FSDPC_PLUGIN_PATH=$B/plugins
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
for t in ops fused optim adamw8bit attention init_world infer_decode flash_gpu; do
  x=$B/bin/test_cuda_$t
  [ "$t" = flash_gpu ] && x=$B/bin/test_flash_gpu
  [ -x "$x" ] || { echo "TEST $t missing"; continue; }
  timeout 300 "$x" >"$OUT/test_$t.log" 2>&1
  echo "TEST $t exit $? $(grep -E '^[0-9]+%: Checks|configurations passed' "$OUT/test_$t.log" | tail -1)"
done
W=$(mktemp -d)
$F data synth --task copy --n 100000 --out "$W/copy.tok" >/dev/null
cfg=$C/llama3-1b-base.yaml
runs=(
  "plain|"
  "param_copy|fsdp.param_copy=true"
  "adamw8bit|optim.name=adamw8bit"
  "adamw8bit_cpu_offload|optim.name=adamw8bit fsdp.cpu_offload=true"
  "offload_optimizer|fsdp.offload.optimizer=true"
  "adamw8bit_offload_optimizer|optim.name=adamw8bit fsdp.offload.optimizer=true"
  "cpu_offload|fsdp.cpu_offload=true"
  "lora|peft.method=lora peft.r=16 peft.alpha=32 peft.dropout=0"
  "lora_cpu_offload|peft.method=lora peft.r=16 peft.alpha=32 peft.dropout=0 fsdp.cpu_offload=true"
)
for r in "${runs[@]}"; do
  name=${r%%|*}
  read -r -a ov <<<"${r#*|}"
  timeout 240 $F train "$cfg" data.train="$W/copy.tok" train.max_steps=8 train.log_every=1 \
    train.micro_batch_size=4 train.global_batch_size=4 \
    train.generate_prompts=[] train.eval_every=0 log.dir="$W/$name" checkpoint.dir="$W/ck-$name" \
    "${ov[@]}" >"$OUT/train-$name.log" 2>&1
  rc=$?
  losses=$(grep -oE '^step +[0-9]+/[0-9]+ loss [0-9.]+' "$OUT/train-$name.log" | awk '{print $4}' | tr '\n' ' ')
  toks=$(grep -oE 'tok/s [0-9]+' "$OUT/train-$name.log" | tail -1 | awk '{print $2}')
  peak=$(grep -oE 'peak [0-9.]+ [GM]iB' "$OUT/train-$name.log" | tail -1)
  echo "RUN $name exit $rc losses $losses tok_s ${toks:-?} $peak"
  [ $rc -eq 0 ] || tail -3 "$OUT/train-$name.log"
done
