#!/bin/bash
# One call on the GPU machine: the C test against naive, the SDPA accuracy
# check over the grid (T up to 8192) and the benchmark. Builds
# nothing: bench/flash/stage.sh puts the binaries in .carry/flash first.
# Usage (in the root of the carried checkout): bash .carry/flash/run_device.sh
set -u
C=.carry/flash
OUT=${OUT:-/tmp/out}
mkdir -p /tmp/rt "$OUT" && tar xf $C/rt.tar.xz -C /tmp/rt && export LD_LIBRARY_PATH=/tmp/rt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv |
  tee "$OUT/gpu.txt"
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
rc=0
timeout 200 $C/test_flash_gpu --plugins $C/plugins 2>&1 | tee "$OUT/test_flash_gpu.log"
rc=$((rc | PIPESTATUS[0]))
cd $C
timeout 200 python3 bench_flash.py check plugins 2>&1 | tee "$OUT/check.log"
rc=$((rc | PIPESTATUS[0]))
[ "${SKIP_BENCH:-0}" = 1 ] || timeout 150 python3 bench_flash.py bench plugins 2>&1 | tee "$OUT/bench.log"
echo "exit code (test | check): $rc"
