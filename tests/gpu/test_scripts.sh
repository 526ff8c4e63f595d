#!/usr/bin/env bash
# The GPU scripts stay runnable where no GPU runs them:
# - every scripts/gpu/*.sh parses (bash -n), and every Python file of
#   scripts/gpu/lib and tests/gpu (ast: nothing is imported);
# - each script with modes refuses a missing or unknown mode with its usage
#   line and exit 2, before it unpacks or writes anything;
# - carry.sh packs a build (here the CPU build) into a carry that holds every
#   file the scripts read from it as "$C/NAME".
set -u
: "${FSDPC_SOURCE_DIR:?FSDPC_SOURCE_DIR must point at the source tree}"
: "${FSDPC_BINARY_DIR:?FSDPC_BINARY_DIR must point at the build tree}"
src=$FSDPC_SOURCE_DIR
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}
for f in "$src"/scripts/gpu/*.sh; do bash -n "$f" || fail "$f does not parse"; done
for f in "$src"/scripts/gpu/lib/*.py "$src"/tests/gpu/*.py; do
  python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])' "$f" ||
    fail "$f does not parse"
done
for s in tests agree hf memory speed profile; do
  for m in "" no-such-mode; do
    out=$(cd "$TMP" && OUT=$TMP/out bash "$src/scripts/gpu/$s.sh" $m 2>&1)
    rc=$?
    { [ $rc = 2 ] && [[ $out == usage:* ]]; } || fail "$s.sh '$m': exit $rc, '$out'"
  done
done
[ -e "$TMP/out" ] && fail "a refused mode made \$OUT"
# the runtime packer of the GPU host's missing libraries: an empty archive here
# shellcheck disable=SC2016 # the packer's own $1
printf '#!/bin/bash\ntar cJf "$1" -T /dev/null\n' >"$TMP/pack.sh"
chmod +x "$TMP/pack.sh"
# (XZ_OPT -0: the fastest compression, the same archive contents)
XZ_OPT=-0 PACK_RUNTIME="$TMP/pack.sh" bash "$src/scripts/gpu/carry.sh" "$TMP/carry" "$FSDPC_BINARY_DIR" >/dev/null ||
  fail "carry.sh exited $?"
[ "$(cat "$TMP/carry/build_dir" 2>/dev/null)" = "$(realpath "$FSDPC_BINARY_DIR")" ] || fail "build_dir is not the build"
tar tJf "$TMP/carry/build.tar.xz" 2>/dev/null | grep -q "/bin/fsdpc$" || fail "build.tar.xz has no bin/fsdpc"
n=0
# shellcheck disable=SC2013,SC2016 # one name a word; $C is the text searched for
for name in $(grep -ohE '\$C/[A-Za-z0-9_./-]+' "$src"/scripts/gpu/*.sh | sed 's#^\$C/##' | sort -u); do
  case $name in
  ../.. | *- | base* | before*) continue ;; # the repository, a name made at run time, carry.sh's BASE
  esac
  n=$((n + 1))
  [ -e "$TMP/carry/$name" ] || fail "the scripts read \$C/$name; carry.sh does not pack it"
done
echo "gpu scripts: $n carried files checked, $fails failure(s)"
[ $fails = 0 ]
