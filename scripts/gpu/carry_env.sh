# Sourced first by the scripts of this folder when they run on the GPU host
# from a carry made by carry.sh (which copies this file next to them):
#   . "$(dirname "$0")/carry_env.sh"
# Unpacks the runtime libraries into /tmp/rt and the build at its own
# absolute path, and sets
#   C    the carry folder (where the scripts are)
#   OUT  the results folder (the device tool's $OUT; /tmp/out without one)
#   B    the build folder, F its fsdpc executable
# and exports LD_LIBRARY_PATH (the runtime, then the build's lib) unless
# CARRY_LIBS=0 (for scripts that run PyTorch with the host's libraries or
# several builds, each with its own). It also defines
#   carry_fixtures  copies the carry's src/tests/fixtures under SRC, the
#                   source folder the build was compiled in (where the
#                   tests look for them), and sets SRC
#   part NAME CMD...  runs CMD with its output in $OUT/NAME.log, prints
#                   "===== NAME: PASS" or "FAIL (exit N)" and its time, and
#                   sets rc=1 on a failure (rc starts at 0)
# shellcheck shell=bash disable=SC2034 # F and rc are for the scripts that source this
set -u
C=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${OUT:-/tmp/out}
mkdir -p /tmp/rt "$OUT"
tar xf "$C/runtime.tar.xz" -C /tmp/rt
tar xf "$C/build.tar.xz" -C /
B=$(cat "$C/build_dir")
F=$B/bin/fsdpc
[ "${CARRY_LIBS:-1}" = 0 ] || export LD_LIBRARY_PATH=/tmp/rt:$B/lib:${LD_LIBRARY_PATH:-}

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
