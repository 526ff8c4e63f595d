#!/bin/bash
# One call of the flash experiments on the GPU machine, staged by
# bench/flash/stage.sh into the carry folder CARRY (default: the folder this
# script is in, e.g. .carry/flash; paths relative to the repository root,
# where the device tool runs commands). Steps, each chosen by environment:
# - SASSV: builds whose SASS to dump (cuobjdump is on the GPU machine, not
#   here), with the opcode counts of their forward kernels side by side.
# - TESTV: builds that test_flash_gpu runs on (vs the CPU naive plugin), in
#   the background beside the checks; with TESTS_FIRST=1 the tests run
#   first and a build that hangs or fails them is left out of VARS.
# - VARS: builds bench_variants.py checks (vs fp32 attention) and benches
#   (TFLOP/s with SDPA's flash and cuDNN backends) in one process, VB_REPS
#   times (vbench.log, vbench2.log, ...; BV_SHAPES=acc: the acceptance shapes).
# - FINAL=1: bench_flash.py check on CHECKV (default "new") and bench (the
#   acceptance table) on BENCHV (default "new"), then, unless SKIP_TRAIN=1,
#   20 training steps of the Llama-3.2-1B shape with the flash plugin of
#   each build in TRAINV (default "old new"), losses compared with the
#   first (needs the train carry: scripts/gpu/carry.sh CARRY/train).
# Time limits: TEST_S CHECK_S VBENCH_S BENCH_S TRAIN_S; TEST_OMP threads per
# test. The logs come back as $OUT/logs.tgz (the device tool returns a few
# files only). Usage, in the repository root on the GPU machine:
#   VARS="old new ..." TESTV="new" [FINAL=1] [SASSV="new x"] bash .carry/flash/run_device.sh
set -u
C=${CARRY:-$(dirname "$0")}
FINAL_OUT=${OUT:-/tmp/out}
OUT=/tmp/logs
trap 'tar czf "$FINAL_OUT/logs.tgz" -C /tmp logs' EXIT
mkdir -p /tmp/rt "$OUT" "$FINAL_OUT" && tar xf $C/rt.tar.xz -C /tmp/rt && export LD_LIBRARY_PATH=/tmp/rt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv |
  tee "$OUT/gpu.txt"
export PYTHONUNBUFFERED=1
# SASSV: builds whose machine code to dump, e.g. SASSV="new dnostore" to
# compare the forward's main loops.
for v in ${SASSV:-}; do
  (command -v cuobjdump || ls /usr/local/cuda/bin/cuobjdump) >/dev/null 2>&1 &&
    PATH=$PATH:/usr/local/cuda/bin cuobjdump -sass $C/var/$v/libfsdpc-attention-flash.so >"$OUT/sass_$v.txt" 2>&1
done
# Per forward kernel of each dumped build: the count of each opcode (the
# first word of every instruction, predicates dropped).
[ -n "${SASSV:-}" ] && python3 - "$OUT" ${SASSV:-} <<'PY' | tee "$OUT/sass_summary.txt"
import collections, re, sys
out, names = sys.argv[1], sys.argv[2:]
counts = {}
for n in names:
    fn = None
    for line in open(f"{out}/sass_{n}.txt", errors="replace"):
        m = re.search(r"Function : (\S+)", line)
        if m:
            fn = m.group(1) if "fwd90" in m.group(1) else None
            continue
        m = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]*)", line)
        if fn and m:
            hd = "hd128" if "ILi128E" in fn else "hd64"
            counts.setdefault((n, hd), collections.Counter())[m.group(2)] += 1
for hd in ("hd128", "hd64"):
    ops = sorted(set().union(*[c for (n, h), c in counts.items() if h == hd] or [set()]))
    print(f"{hd}: opcode " + " ".join(names) + "  (rows where the builds differ, and HGMMA/STG/STS always)")
    for op in ops:
        row = [counts.get((n, hd), {}).get(op, 0) for n in names]
        if len(set(row)) > 1 or op.split(".")[0] in ("HGMMA", "STG", "STS", "UTMASTG", "UTMALDG"):
            print(f"  {op:40s} " + " ".join(f"{x:5d}" for x in row))
    print(f"  {'total':40s} " + " ".join(f"{sum(counts.get((n, hd), {}).values()):5d}" for n in names))
PY
t0=$(date +%s)
for v in ${TESTV:-}; do
  OMP_NUM_THREADS=${TEST_OMP:-6} timeout ${TEST_S:-240} $C/test_flash_gpu --plugins $C/var/$v \
    >"$OUT/test_$v.log" 2>&1 &
done
# TESTS_FIRST=1: wait for the tests and leave a build that hangs or fails
# them out of the checks and timings (which run every build in one process).
drop=""
if [ "${TESTS_FIRST:-0}" = 1 ]; then
  wait
  for v in ${TESTV:-}; do
    grep -qE "^([0-9]+) of \1 configurations passed" "$OUT/test_$v.log" || drop="$drop $v"
  done
  echo "left out after test_flash_gpu:${drop:- none}"
fi
vars=$(for v in ${VARS:-}; do case " $drop " in *" $v "*) ;; *) echo var/$v ;; esac; done)
[ -n "$vars" ] && (cd $C && timeout ${CHECK_S:-200} python3 bench_variants.py check $vars >"$OUT/vcheck.log" 2>&1)
# CHECKV (default "new"): the builds bench_flash.py check runs on (hd 80 / 96 too)
if [ "${FINAL:-0}" = 1 ]; then
  for v in ${CHECKV:-new}; do
    (cd $C && timeout ${CHECK_S:-200} python3 bench_flash.py check var/$v >"$OUT/check_$v.log" 2>&1)
  done
fi
wait
echo "tests+checks done after $(($(date +%s) - t0)) s"
for v in ${TESTV:-}; do echo "test_flash_gpu $v: $(grep -c '^ok ' "$OUT/test_$v.log") ok"; grep -v "^ok " "$OUT/test_$v.log" | tail -3; done
[ -n "$vars" ] && grep "^check" "$OUT/vcheck.log"
if [ "${FINAL:-0}" = 1 ]; then for v in ${CHECKV:-new}; do echo "bench_flash check $v: $(tail -1 "$OUT/check_$v.log")"; done; fi
# VB_REPS: bench_variants.py bench that many times (vbench.log, vbench2.log, ...)
for r in $(seq ${VB_REPS:-1}); do
  log=vbench$([ "$r" = 1 ] || echo "$r").log
  [ -n "$vars" ] && (cd $C && timeout ${VBENCH_S:-240} python3 bench_variants.py bench $vars 2>&1 | tee "$OUT/$log")
done
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
