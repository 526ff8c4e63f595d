#!/bin/bash
# The flash part of issue 40's merge check in one GPU call (about 3-4 min on
# one H200): the plugin of commit BASE_REV ("old", staged as var/old) against
# this build ("new", var/new), staged by
#   BASE_REV=4472969 bash bench/flash/stage.sh
# (here: CARRY=.carry/flash). On the GPU machine, from the repository root:
#   bash .carry/flash/gpu_check.sh
# Parts, each printing PASS or FAIL lines (INFO lines are not counted):
#   1. test_flash_gpu on old and on new (flash vs the CPU naive plugin), in
#      the background beside part 2;
#   2. bench_flash.py check on old and on new: the 44-case grid against fp32
#      attention (T up to 8192, hd 64-128, GQA, causal, full, documents);
#   3. INFO: the kernels' machine code, old vs new (compare_sass.py --so:
#      cuobjdump of both plugins);
#   4. bench_variants.py bench old new on the acceptance shapes (the 1B
#      attention shape and bench_flash.py's 8 rows) beside SDPA's flash and
#      cuDNN backends in one process, REPS times (default 2), tabled by
#      speed_table.py: PASS when new / old (forward + backward) is at least
#      MIN_ROW (0.97) on every row and MIN_MEAN (0.99) in the geometric mean.
# Last line: "gpu_check: N passed, M failed". Logs in $OUT (and $OUT/logs.tgz).
set -u
C=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
L=$OUT/flash_check
mkdir -p /tmp/rt "$L" && tar xf "$C/rt.tar.xz" -C /tmp/rt && export LD_LIBRARY_PATH=/tmp/rt
export PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
trap 'tar czf "$OUT/logs.tgz" -C "$OUT" flash_check' EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
passed=0 failed=0
verdict() { # name, 0 or not
  if [ "$2" = 0 ]; then echo "PASS $1"; passed=$((passed + 1)); else echo "FAIL $1"; failed=$((failed + 1)); fi
}
t0=$SECONDS
for v in old new; do
  OMP_NUM_THREADS=${TEST_OMP:-6} timeout ${TEST_S:-240} "$C/test_flash_gpu" --plugins "$C/var/$v" \
    >"$L/test_$v.log" 2>&1 &
done
for v in old new; do
  (cd "$C" && timeout ${CHECK_S:-200} python3 bench_flash.py check "var/$v" >"$L/check_$v.log" 2>&1)
  echo "bench_flash check $v: $(tail -1 "$L/check_$v.log")"
  grep -q "^check: 44 of 44 cases" "$L/check_$v.log"
  verdict "check_$v (44 of 44 within 1e-2 of fp32 attention)" $?
done
wait
for v in old new; do
  echo "test_flash_gpu $v: $(grep -E "configurations passed" "$L/test_$v.log" | tail -1)"
  grep -qE "^([0-9]+) of \1 configurations passed" "$L/test_$v.log"
  verdict "test_flash_gpu_$v" $?
done
echo "== correctness done after $((SECONDS - t0)) s"
python3 "$C/compare_sass.py" --so "$C/var/old/libfsdpc-attention-flash.so" \
  "$C/var/new/libfsdpc-attention-flash.so" --md "$L/sass.md" >"$L/sass.log" 2>&1
echo "INFO sass (compare_sass.py exit $?; identical kernels: $(grep -c "| identical |" "$L/sass.md" 2>/dev/null))"
sed -n '/^| kernel/,/^$/p' "$L/sass.md" 2>/dev/null
logs=()
for r in $(seq ${REPS:-2}); do
  (cd "$C" && BV_SHAPES=acc timeout ${BENCH_S:-150} python3 bench_variants.py bench var/old var/new \
    >"$L/vbench$r.log" 2>&1)
  logs+=("$L/vbench$r.log")
done
python3 "$C/speed_table.py" --min-row "${MIN_ROW:-0.97}" --min-mean "${MIN_MEAN:-0.99}" "${logs[@]}" |
  tee "$L/speed.md" | grep -v "^PASS\|^FAIL"
grep -q "^PASS speed" "$L/speed.md"
st=$?
verdict "speed ($(grep -oE "geometric mean [0-9.]+.*" "$L/speed.md"))" $st
echo "== all done after $((SECONDS - t0)) s"
echo "gpu_check: $passed passed, $failed failed"
