#!/bin/bash
# On one 80 GB GPU (device kind nvidia-h100-x1): what PyTorch FSDP2 reaches
# with the 8B shape (seq 2048, micro-batch 1, activation checkpointing):
#   pure-bf16  bf16 params, grads and AdamW state, no fp32 master (8 bytes a
#              parameter), 8 and 1 micro-batches a step
#   default    fp32 params + bf16 compute + fp32 AdamW (16 bytes a parameter):
#              expected not to fit (the row says how it ends)
#   bash scripts/gpu/run_torch_8b_one_gpu.sh   (RESULT lines and logs in $OUT)
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" | tee -a "$OUT/gpu.txt"
row() { # NAME args...
  local n=$1 t0=$(date +%s)
  shift
  PYTHONUNBUFFERED=1 timeout 200 torchrun --standalone --nproc_per_node=1 bench/torch_fsdp2_baseline.py \
    --model 8b --ac 1 --bs 1 --seq 2048 --steps 6 --warmup 2 "$@" >"$OUT/$n.log" 2>&1
  echo "$n exit $? ($(($(date +%s) - t0)) s): $(grep -h '^RESULT' "$OUT/$n.log" || grep -h -m1 -E 'OutOfMemory|Error' "$OUT/$n.log" | cut -c1-300)"
}
row bf16-a8 --pure-bf16 --accum 8
row bf16-a1 --pure-bf16 --accum 1
row fp32master-a8 --accum 8
