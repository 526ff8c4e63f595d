#!/usr/bin/env bash
# tests/gpu/arena_check.sh (issue 32's one-GPU acceptance) in its CPU mode:
# a tiny row trains, its arena is the planner's within 2%, the checks that
# need a card say SKIP, and the summary line counts what ran.
set -u
: "${FSDPC:?FSDPC must point at the fsdpc executable}"
: "${FSDPC_SOURCE_DIR:?FSDPC_SOURCE_DIR must point at the source tree}"
OUT=$(mktemp -d /tmp/fsdpc-arena-check.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
fail() { echo "FAIL: $*"; cat "$OUT/log.txt"; exit 1; }
cd "$FSDPC_SOURCE_DIR" || exit 1
DEVICE=cpu OUT=$OUT STEPS=3 bash tests/gpu/arena_check.sh >"$OUT/log.txt" 2>&1 || fail "arena_check.sh exited $?"
cat "$OUT/log.txt"
grep -q "^PASS 1b fits (free = plan + 2%: exit 0)" "$OUT/log.txt" || fail "no fits line"
grep -qE "^PASS 1b arena \(reserved [0-9]+ MiB vs planned arena \+ late [0-9]+ MiB: [+-][0-9.]+%\)" "$OUT/log.txt" ||
  fail "no arena line"
grep -q "^SKIP 1b refused" "$OUT/log.txt" || fail "no refused line"
grep -qE "^RESULT 1b tok_s [0-9]+ " "$OUT/log.txt" || fail "no RESULT line"
grep -qE "^arena_check: 2 passed, 0 failed" "$OUT/log.txt" || fail "no summary line"
tar tJf "$OUT/arena_check.tar.xz" | grep -q "logs/1b.plan.json" || fail "the logs are not in arena_check.tar.xz"
# an unknown row is a failure, not a silent pass
DEVICE=cpu OUT=$OUT/bad ROWS=1b T_END=0 bash tests/gpu/arena_check.sh >"$OUT/bad.txt" 2>&1 &&
  fail "a row past T_END passed"
grep -q "^arena_check: 0 passed, 1 failed" "$OUT/bad.txt" || fail "no failure counted past T_END"
echo PASS
