#!/bin/bash
# Session 3, the full call on the GPU machine: correctness of var/v1 (this
# tree: wgmma forward and backward) with test_flash_gpu (vs the CPU naive
# plugin) and bench_flash.py check (vs fp32 attention); the acceptance table
# (bench_flash.py bench: fsdpc vs SDPA flash and cuDNN); base vs v1 side by
# side (bench_variants.py bench); then 20 training steps of the Llama-3.2-1B
# shape at world 1 with each build's flash plugin, losses compared.
# Staged by stage_s3.sh + scripts/gpu/pack_train_carry.sh .carry/flash3/train.
# Usage: [SKIP_TRAIN=1] bash .carry/flash3/run_device_s3b.sh
set -u
C=.carry/flash3
OUT=${OUT:-/tmp/out}
mkdir -p /tmp/rt "$OUT" && tar xf $C/rt.tar.xz -C /tmp/rt && export LD_LIBRARY_PATH=/tmp/rt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv |
  tee "$OUT/gpu.txt"
export PYTHONUNBUFFERED=1
OMP_NUM_THREADS=12 timeout ${TEST_S:-240} $C/test_flash_gpu --plugins $C/var/v1 >"$OUT/test_v1.log" 2>&1 &
(cd $C && timeout ${CHECK_S:-200} python3 bench_flash.py check var/v1 >"$OUT/check.log" 2>&1)
wait
tail -1 "$OUT/check.log"; grep -v "^ok " "$OUT/test_v1.log"
(cd $C && timeout ${BENCH_S:-150} python3 bench_flash.py bench var/v1 2>&1 | tee "$OUT/bench.log")
(cd $C && timeout ${VBENCH_S:-120} python3 bench_variants.py bench var/base var/v1 >"$OUT/variants.log" 2>&1)
# training: the packed build (v1 plugins) and the same with base's flash
[ "${SKIP_TRAIN:-0}" = 1 ] && exit 0
T=$C/train
tar xf "$T/runtime.tar.xz" -C /tmp/rt && tar xf "$T/build.tar.xz" -C /
B=$(cat "$T/build_dir")
export LD_LIBRARY_PATH=/tmp/rt:$B/lib
mkdir -p /tmp/pbase && cp $B/plugins/*.so /tmp/pbase/ && cp $C/var/base/libfsdpc-attention-flash.so /tmp/pbase/
W=$(mktemp -d)
$B/bin/fsdpc data synth --task copy --n 300000 --out "$W/copy.tok" >/dev/null
for run in base v1; do
  pp=$B/plugins; [ $run = base ] && pp=/tmp/pbase
  FSDPC_PLUGIN_PATH=$pp timeout 200 $B/bin/fsdpc train configs/bench/llama3-1b-base.yaml \
    data.train="$W/copy.tok" train.micro_batch_size=4 train.max_steps=20 train.log_every=1 \
    attention.impl=flash log.dir="$W/$run" --nproc-per-node 1 >"$OUT/train-$run.log" 2>&1
  echo "train $run exit $?"; grep -E "step (1|20)/|error" "$OUT/train-$run.log" | tail -3
  cp "$W/$run/metrics.jsonl" "$OUT/train-$run.metrics.jsonl" 2>/dev/null
done
python3 - "$W" <<'PY' | tee "$OUT/train-compare.txt"
import json, statistics, sys
w = sys.argv[1]
r = {n: [x for x in map(json.loads, open(f"{w}/{n}/metrics.jsonl")) if "step" in x] for n in ("base", "v1")}
worst = max(abs(a["loss"] - b["loss"]) / abs(a["loss"]) for a, b in zip(r["base"], r["v1"]))
for n, rows in r.items():
    st = statistics.median(x["step_s"] for x in rows if x["step"] > 4)
    print(f"{n}: steps {len(rows)} loss first {rows[0]['loss']:.4f} last {rows[-1]['loss']:.4f}"
          f" median step_s (steps 5+) {st:.4f} tok/s {4 * 2048 / st:.0f}")
print("per-step loss, base vs v1:", " ".join(f"{a['loss']:.4f}/{b['loss']:.4f}" for a, b in zip(r["base"], r["v1"])))
print(f"max relative loss difference over {min(len(r['base']), len(r['v1']))} steps: {worst:.2e}")
PY
