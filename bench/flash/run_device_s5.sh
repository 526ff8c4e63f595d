#!/bin/bash
# Session 5, one call on the GPU machine (staged by stage_s5.sh into
# .carry/fbwd): test_flash_gpu (vs the CPU naive plugin) on the builds
# named in TESTV, bench_variants.py check (vs fp32 attention) and bench
# (TFLOP/s with SDPA's flash and cuDNN backends) on the builds named in VARS;
# with FINAL=1 also bench_flash.py check and bench (the acceptance table) on
# var/new and, unless SKIP_TRAIN=1, 20 training steps of the Llama-3.2-1B
# shape with var/old's and var/new's flash plugin (the train carry packed by
# scripts/gpu/pack_train_carry.sh .carry/fbwd/train), losses compared.
# With FINAL=1, BENCHV (default "new") names the builds bench_flash.py bench
# times and TRAINV (default "old new") the builds trained, each compared with
# the first. The logs come back as $OUT/logs.tgz (the device tool returns a
# few files only). Usage:
#   VARS="old new ..." TESTV="new" [FINAL=1] bash .carry/fbwd/run_device_s5.sh
set -u
C=.carry/fbwd
FINAL_OUT=${OUT:-/tmp/out}
OUT=/tmp/logs
trap 'tar czf "$FINAL_OUT/logs.tgz" -C /tmp logs' EXIT
mkdir -p /tmp/rt "$OUT" "$FINAL_OUT" && tar xf $C/rt.tar.xz -C /tmp/rt && export LD_LIBRARY_PATH=/tmp/rt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv |
  tee "$OUT/gpu.txt"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
for v in ${TESTV:-}; do
  OMP_NUM_THREADS=${TEST_OMP:-6} timeout ${TEST_S:-240} $C/test_flash_gpu --plugins $C/var/$v \
    >"$OUT/test_$v.log" 2>&1 &
done
# Session 5: the tests first (a build that hangs or fails them is left out of
# the checks and timings, which run every build in one process).
wait
drop=""
for v in ${TESTV:-}; do
  grep -qE "^([0-9]+) of \1 configurations passed" "$OUT/test_$v.log" || drop="$drop $v"
done
echo "left out after test_flash_gpu:${drop:- none}"
vars=$(for v in ${VARS:-}; do case " $drop " in *" $v "*) ;; *) echo var/$v ;; esac; done)
[ -n "$vars" ] && (cd $C && timeout ${CHECK_S:-200} python3 bench_variants.py check $vars >"$OUT/vcheck.log" 2>&1)
[ "${FINAL:-0}" = 1 ] && (cd $C && timeout ${CHECK_S:-200} python3 bench_flash.py check var/new >"$OUT/check.log" 2>&1)
wait
echo "tests+checks done after $(($(date +%s) - t0)) s"
for v in ${TESTV:-}; do echo "test_flash_gpu $v: $(grep -c '^ok ' "$OUT/test_$v.log") ok"; grep -v "^ok " "$OUT/test_$v.log" | tail -3; done
[ -n "$vars" ] && grep "^check" "$OUT/vcheck.log"
[ "${FINAL:-0}" = 1 ] && tail -1 "$OUT/check.log"
[ -n "$vars" ] && (cd $C && timeout ${VBENCH_S:-240} python3 bench_variants.py bench $vars 2>&1 | tee "$OUT/vbench.log")
echo "variants done after $(($(date +%s) - t0)) s"
[ "${FINAL:-0}" = 1 ] || exit 0
for v in ${BENCHV:-new}; do
  (cd $C && timeout ${BENCH_S:-150} python3 bench_flash.py bench var/$v 2>&1 | tee "$OUT/bench_$v.log")
done
echo "bench done after $(($(date +%s) - t0)) s"
[ "${SKIP_TRAIN:-0}" = 1 ] && exit 0
T=$C/train
tar xf "$T/runtime.tar.xz" -C /tmp/rt && tar xf "$T/build.tar.xz" -C /
B=$(cat "$T/build_dir")
export LD_LIBRARY_PATH=/tmp/rt:$B/lib
TRAINV=${TRAINV:-old new}
for run in $TRAINV; do
  mkdir -p /tmp/p$run && cp $B/plugins/*.so /tmp/p$run/ && cp $C/var/$run/libfsdpc-attention-flash.so /tmp/p$run/
done
W=$(mktemp -d)
$B/bin/fsdpc data synth --task copy --n 300000 --out "$W/copy.tok" >/dev/null
for run in $TRAINV; do
  FSDPC_PLUGIN_PATH=/tmp/p$run timeout ${TRAIN_S:-100} $B/bin/fsdpc train configs/bench/llama3-1b-base.yaml \
    data.train="$W/copy.tok" train.micro_batch_size=4 train.max_steps=20 train.log_every=1 \
    attention.impl=flash log.dir="$W/$run" --nproc-per-node 1 >"$OUT/train-$run.log" 2>&1
  echo "train $run exit $?"; grep -E "step (1|20)/|error" "$OUT/train-$run.log" | tail -3
  cp "$W/$run/metrics.jsonl" "$OUT/train-$run.metrics.jsonl" 2>/dev/null
done
python3 - "$W" $TRAINV <<'PY' | tee "$OUT/train-compare.txt"
import json, statistics, sys
w, names = sys.argv[1], sys.argv[2:]
r = {n: [x for x in map(json.loads, open(f"{w}/{n}/metrics.jsonl")) if "step" in x] for n in names}
for n, rows in r.items():
    st = statistics.median(x["step_s"] for x in rows if x["step"] > 4)
    print(f"{n}: steps {len(rows)} loss first {rows[0]['loss']:.4f} last {rows[-1]['loss']:.4f}"
          f" median step_s (steps 5+) {st:.4f} tok/s {4 * 2048 / st:.0f}")
a0 = names[0]
for n in names[1:]:
    worst = max(abs(a["loss"] - b["loss"]) / abs(a["loss"]) for a, b in zip(r[a0], r[n]))
    print(f"per-step loss, {a0} vs {n}:", " ".join(f"{a['loss']:.4f}/{b['loss']:.4f}" for a, b in zip(r[a0], r[n])))
    print(f"max relative loss difference {a0} vs {n} over {min(len(r[a0]), len(r[n]))} steps: {worst:.2e}")
PY
echo "all done after $(($(date +%s) - t0)) s"
