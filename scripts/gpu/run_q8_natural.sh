#!/bin/bash
# On the GPU host (one H200): adamw vs adamw8bit on natural text, Llama-3.2-1B
# shape, 300 steps (micro-batch 4 x 2048, 2 micro-batches a step, lr 3e-4
# cosine, warmup 30, clip 1.0), the same init and batches; a third run,
# adamw with eps x 1.0001, measures how far two fp32 runs drift apart anyway.
#   bash .carry/X/run_q8_natural.sh TOKENS   (TOKENS: a token file, e.g. made
#   by `fsdpc data tokenize` from real text; metrics and logs in $OUT)
. "$(dirname "$0")/carry_env.sh" # C, OUT, B, F; LD_LIBRARY_PATH
TOK=$(realpath "$1")
export FSDPC_PLUGIN_PATH=$B/plugins
W=$(mktemp -d)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
$F data info "$TOK" | head -8 | tee "$OUT/data.txt"
run() { # NAME overrides...
  local n=$1 t0=$(date +%s)
  shift
  timeout 240 $F train configs/bench/llama3-1b-base.yaml data.train="$TOK" \
    optim.lr=3e-4 schedule.name=cosine schedule.warmup_steps=30 train.micro_batch_size=4 \
    train.global_batch_size=8 train.max_steps=300 train.log_every=1 log.tensorboard=false \
    log.dir="$W/$n" "$@" >"$OUT/$n.log" 2>&1
  echo "$n exit $? ($(($(date +%s) - t0)) s)"
  cp "$W/$n/metrics.jsonl" "$OUT/$n.metrics.jsonl"
}
run adamw optim.name=adamw
run adamw8bit optim.name=adamw8bit
run adamw-eps optim.name=adamw optim.eps=1.0001e-8
python3 "$C/loss_gap.py" "$OUT/adamw.metrics.jsonl" "$OUT/adamw8bit.metrics.jsonl" \
  "$OUT/adamw-eps.metrics.jsonl" | tee "$OUT/gap.txt"
grep -h "optim\|peak" "$OUT"/adamw.log "$OUT"/adamw8bit.log | grep -i "shard bytes\|memory (end)" | head -4
