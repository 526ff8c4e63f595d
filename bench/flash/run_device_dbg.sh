#!/bin/bash
# Debug call: single cases in their own processes on each build under var/,
# then the first case on build SAN_V (default "new") under compute-sanitizer
# and that build's SASS. Staged by bench/flash/stage.sh into the carry folder
# CARRY (default: the folder this script is in). Usage, in the repository
# root on the GPU machine:
#   [SAN_V=name] bash .carry/flash/run_device_dbg.sh
set -u
C=${CARRY:-$(dirname "$0")}
sv=${SAN_V:-new}
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
timeout 150 compute-sanitizer --tool memcheck python3 dbg_case.py var/$sv 2 1 8 8 64 1 0 2>&1 |
  grep -v "^=========     Host Frame" | head -60 | tee "$OUT/sanitizer.log"
cuobjdump --dump-sass var/$sv/libfsdpc-attention-flash.so > "$OUT/$sv.sass" 2>&1
grep -c HGMMA "$OUT/$sv.sass"
