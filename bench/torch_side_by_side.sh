#!/usr/bin/env bash
# PyTorch FSDP2 and fsdpc on the same shapes, in one device call, rows merged.
#
#   bench/torch_side_by_side.sh 1b|8b [NPROC]      (from the repository root)
#
# 1. runs bench/torch_fsdp2_baseline.py under torchrun once per strategy
#    (full, grad_op, no_shard, hybrid) into OUT/torch.jsonl; a strategy that
#    fails (out of memory) is skipped with a note;
# 2. makes a token file for fsdpc if data/copy.tok is missing;
# 3. runs `fsdpc bench configs/bench/llama3-<model>-4gpu.yaml --baseline
#    OUT/torch.jsonl`, which writes the merged table, bench.csv, bench.json,
#    bench.svg and bench.png into OUT.
# Environment: FSDPC (the fsdpc executable; default build/bin/fsdpc), TORCHRUN
# (default torchrun), OUT (default bench/results/<date>-llama3-<model>-<N>gpu).
set -euo pipefail
model=${1:?usage: bench/torch_side_by_side.sh 1b|8b [NPROC]}
nproc=${2:-4}
case "$model" in
  1b) bs=${BS:-4} ac=0 ;;   # micro-batch 4: the shape of shared/device/README.md's table
  8b) bs=1 ac=1 ;;
  *) echo "torch_side_by_side: model must be 1b or 8b, got '$model'" >&2; exit 2 ;;
esac
FSDPC=${FSDPC:-build/bin/fsdpc}
TORCHRUN=${TORCHRUN:-torchrun}
OUT=${OUT:-bench/results/$(date +%F)-llama3-$model-${nproc}gpu}
bench_file=configs/bench/llama3-$model-4gpu.yaml
[ -x "$FSDPC" ] || { echo "torch_side_by_side: $FSDPC is not built (cmake --build build)" >&2; exit 1; }
command -v "$TORCHRUN" >/dev/null || { echo "torch_side_by_side: $TORCHRUN not found (pip install torch transformers)" >&2; exit 1; }
mkdir -p "$OUT"
: > "$OUT/torch.jsonl"

echo "== PyTorch FSDP2, $model, $nproc GPUs, bs $bs, seq 2048, ac $ac"
for strategy in full grad_op no_shard hybrid; do
  echo "-- torch $strategy"
  if ! "$TORCHRUN" --standalone --nproc_per_node="$nproc" bench/torch_fsdp2_baseline.py \
      --model "$model" --strategy "$strategy" --ac "$ac" --bs "$bs" --seq 2048 \
      --steps 12 --warmup 4 --out "$OUT/torch.jsonl" >"$OUT/torch-$strategy.log" 2>&1; then
    echo "   failed (see $OUT/torch-$strategy.log): $(grep -m1 -E 'OutOfMemory|Error' "$OUT/torch-$strategy.log" || tail -1 "$OUT/torch-$strategy.log")"
  fi
done

[ -s data/copy.tok ] || "$FSDPC" data synth --task copy --n 200000 --out data/copy.tok

echo "== fsdpc bench $bench_file"
baseline=()
[ -s "$OUT/torch.jsonl" ] && baseline=(--baseline "$OUT/torch.jsonl")
# The 8b bench file has activation checkpointing as an axis; the torch rows
# use --ac as set above.
"$FSDPC" bench "$bench_file" --nproc-per-node "$nproc" --out "$OUT" \
  train.micro_batch_size=$bs ${BENCH_ARGS:-} "${baseline[@]}" | tee "$OUT/table.txt"
echo "== merged rows in $OUT (bench.json, bench.csv, bench.svg, bench.png, table.txt)"
