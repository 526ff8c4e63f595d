# Sourced first by the scripts/gpu/run_*.sh scripts that run on the GPU host
# from a carry made by pack_train_carry.sh (or pack_lora_carry.sh), which
# copies this file next to them:
#   . "$(dirname "$0")/carry_env.sh"
# Unpacks the runtime libraries into /tmp/rt and the build at its own
# absolute path, and sets
#   C    the carry folder (where the scripts are)
#   OUT  the results folder (the device tool's $OUT; /tmp/out without one)
#   B    the build folder, F its fsdpc executable
# and exports LD_LIBRARY_PATH (the runtime, then the build's lib). It also
# defines
#   carry_fixtures  copies the carry's src/tests/fixtures under SRC, the
#                   source folder the build was compiled in (where the
#                   tests look for them), and sets SRC
#   part NAME CMD...  runs CMD with its output in $OUT/NAME.log, prints
#                   "===== NAME: PASS" or "FAIL (exit N)" and its time, and
#                   sets rc=1 on a failure (rc starts at 0)
set -u
C=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${OUT:-/tmp/out}
mkdir -p /tmp/rt "$OUT"
tar xf "$C/runtime.tar.xz" -C /tmp/rt
tar xf "$C/build.tar.xz" -C /
B=$(cat "$C/build_dir")
F=$B/bin/fsdpc
export LD_LIBRARY_PATH=/tmp/rt:$B/lib:${LD_LIBRARY_PATH:-}

carry_fixtures() {
  SRC=$(dirname "$B")
  mkdir -p "$SRC/tests/fixtures" && cp -r "$C"/src/tests/fixtures/* "$SRC/tests/fixtures/"
}

rc=0
part() { # name command...
  local n=$1
  shift
  echo "===== $n"
  local t0=$SECONDS
  "$@" 2>&1 | tee "$OUT/$n.log"
  local r=${PIPESTATUS[0]}
  echo "===== $n: $([ "$r" = 0 ] && echo PASS || echo "FAIL (exit $r)") ($((SECONDS - t0)) s)"
  [ "$r" = 0 ] || rc=1
}
