#!/bin/bash
# Session 2, one call on the GPU machine: test_flash_gpu (vs CPU naive) on
# every variant in the background while bench_variants.py checks them all
# against fp32 attention; then, the GPU to itself, the benchmark of the
# variants that passed both. Usage: bash .carry/flash2/run_device_s2.sh
set -u
C=.carry/flash2
OUT=${OUT:-/tmp/out}
mkdir -p /tmp/rt "$OUT" && tar xf $C/rt.tar.xz -C /tmp/rt && export LD_LIBRARY_PATH=/tmp/rt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv |
  tee "$OUT/gpu.txt"
export PYTHONUNBUFFERED=1
vars=$(ls $C/var)
for v in $vars; do
  [ "$v" = base ] && continue
  OMP_NUM_THREADS=3 timeout ${TEST_S:-170} $C/test_flash_gpu --plugins $C/var/$v >/tmp/test_$v.log 2>&1 &
done
cd $C
timeout 170 python3 bench_variants.py check $(for v in $vars; do echo var/$v; done) 2>&1 |
  tee "$OUT/check.log"
wait
for v in $vars; do echo "== $v"; grep -v "^ok " /tmp/test_$v.log 2>/dev/null; done > "$OUT/tests.log"
ok=$(for v in $vars; do
  [ "$v" = base ] || grep -Eq "^([0-9]+) of \1 configurations passed" /tmp/test_$v.log || continue
  grep -Eq "check $v: ([0-9]+) of \1 " "$OUT/check.log" && echo var/$v; done)
echo "benchmarking: $ok"
timeout 120 python3 bench_variants.py bench $ok 2>&1 | tee "$OUT/bench.log"
