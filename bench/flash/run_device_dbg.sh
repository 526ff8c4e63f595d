#!/bin/bash
# Debug call: single cases in their own processes on each build under var/,
# then the first failing one under compute-sanitizer. Usage:
#   bash .carry/flash3/run_device_dbg.sh
set -u
C=.carry/flash3
OUT=${OUT:-/tmp/out}
mkdir -p /tmp/rt "$OUT" && tar xf $C/rt.tar.xz -C /tmp/rt && export LD_LIBRARY_PATH=/tmp/rt
export PYTHONUNBUFFERED=1
cd $C
for v in $(ls var); do
  for cs in "2 1 8 8 64 1 0" "2 17 8 8 64 1 0" "2 128 8 8 64 1 0" "1 256 8 8 64 1 0" "2 128 8 2 128 1 0" \
    "1 1000 8 8 128 1 0" "1 1024 8 8 64 0 0" "1 2048 8 2 128 1 0" "1 2048 8 2 64 1 1"; do
    timeout 60 python3 dbg_case.py var/$v $cs 2>&1 | grep -E "ok|FAIL|Error|error" | tail -2
  done
done 2>&1 | tee "$OUT/cases.log"
timeout 150 compute-sanitizer --tool memcheck python3 dbg_case.py var/v1 2 1 8 8 64 1 0 2>&1 |
  grep -v "^=========     Host Frame" | head -60 | tee "$OUT/sanitizer.log"
cuobjdump --dump-sass var/v1/libfsdpc-attention-flash.so > "$OUT/v1.sass" 2>&1
grep -c HGMMA "$OUT/v1.sass"
