#!/bin/bash
# Session 3, one call on the GPU machine: correctness of every build under
# var/ (test_flash_gpu vs the CPU naive plugin on v1, in the background, and
# bench_variants.py check vs fp32 attention on all), then the acceptance
# table (bench_flash.py bench on v1: fsdpc vs SDPA flash and cuDNN), then
# the variants side by side. Usage: bash .carry/flash3/run_device_s3.sh
set -u
C=.carry/flash3
OUT=${OUT:-/tmp/out}
mkdir -p /tmp/rt "$OUT" && tar xf $C/rt.tar.xz -C /tmp/rt && export LD_LIBRARY_PATH=/tmp/rt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv |
  tee "$OUT/gpu.txt"
export PYTHONUNBUFFERED=1
vars=$(ls $C/var)
OMP_NUM_THREADS=12 timeout ${TEST_S:-240} $C/test_flash_gpu --plugins $C/var/v1 >"$OUT/test_v1.log" 2>&1 &
cd $C
timeout ${CHECK_S:-200} python3 bench_variants.py check $(for v in $vars; do echo var/$v; done) 2>&1 |
  tee "$OUT/check.log"
wait
grep -v "^ok " "$OUT/test_v1.log"
timeout ${BENCH_S:-150} python3 bench_flash.py bench var/v1 2>&1 | tee "$OUT/bench.log"
ok=$(for v in $vars; do
  grep -q "^B=.*| $v ok" "$OUT/check.log" && ! grep -q "| $v FAIL" "$OUT/check.log" && echo var/$v
done)
echo "variants that passed: $ok"
timeout ${VBENCH_S:-120} python3 bench_variants.py bench $ok 2>&1 | tee "$OUT/variants.log"
