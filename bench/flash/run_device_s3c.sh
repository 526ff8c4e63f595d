#!/bin/bash
# Session 3: the 1B side by side at world 1 on one H200 (micro-batch 4, seq
# 2048): PyTorch FSDP2 eager and with --compile (this tree's
# bench/torch_fsdp2_baseline.py, carried), then fsdpc (flash plugin, this
# build). Usage: bash .carry/flash3/run_device_s3c.sh
set -u
C=.carry/flash3
OUT=${OUT:-/tmp/out}
mkdir -p /tmp/rt "$OUT"
export PYTHONUNBUFFERED=1
for mode in eager compile; do
  flag=""; [ $mode = compile ] && flag=--compile
  timeout ${TORCH_S:-240} torchrun --standalone --nproc_per_node=1 $C/torch_fsdp2_baseline.py \
    --model 1b --strategy full --ac 0 --bs 4 --seq 2048 --steps 14 --warmup 6 $flag \
    >"$OUT/torch-$mode.log" 2>&1
  echo "torch $mode exit $?"; grep RESULT "$OUT/torch-$mode.log" || tail -5 "$OUT/torch-$mode.log"
done
T=$C/train
tar xf "$T/runtime.tar.xz" -C /tmp/rt && tar xf "$T/build.tar.xz" -C /
B=$(cat "$T/build_dir")
export LD_LIBRARY_PATH=/tmp/rt:$B/lib FSDPC_PLUGIN_PATH=$B/plugins
W=$(mktemp -d)
$B/bin/fsdpc data synth --task copy --n 300000 --out "$W/copy.tok" >/dev/null
timeout 200 $B/bin/fsdpc train configs/bench/llama3-1b-base.yaml data.train="$W/copy.tok" \
  train.micro_batch_size=4 train.max_steps=20 train.log_every=1 attention.impl=flash \
  log.dir="$W/f" --nproc-per-node 1 >"$OUT/fsdpc.log" 2>&1
echo "fsdpc exit $?"
python3 - "$W/f/metrics.jsonl" <<'PY' | tee "$OUT/fsdpc-result.txt"
import json, statistics, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if "step" in r]
st = statistics.median(r["step_s"] for r in rows if r["step"] > 4)
print(f"RESULT fsdpc step_s {st:.4f} tok_s_gpu {4 * 2048 / st:.0f} loss {rows[-1]['loss']:.4f}")
PY
