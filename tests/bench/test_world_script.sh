#!/usr/bin/env bash
# Issue 20's script in its CPU mode (tiny shapes, Gloo, 2 ranks): the
# FULL_SHARD row with the planner's peak beside the measured one, and the
# world-2 vs world-1 agreement of every strategy, and the ROW line of the
# run with its reservation against the plan (scripts/gpu/world.sh).
set -u
: "${FSDPC:?FSDPC must point at the fsdpc executable}"
: "${FSDPC_SOURCE_DIR:?FSDPC_SOURCE_DIR must point at the source tree}"
OUT=$(mktemp -d /tmp/fsdpc-world-script.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
fail() { echo "FAIL: $*"; cat "$OUT/log.txt"; exit 1; }
cd "$FSDPC_SOURCE_DIR" || exit 1
DEVICE=cpu OUT=$OUT STRATS=full STEPS=5 bash scripts/gpu/world.sh 2 1b,agree >"$OUT/log.txt" 2>&1 ||
  fail "world.sh exited $?"
cat "$OUT/log.txt"
grep -qE '^\| 1b-full \| 0 \| [0-9.]+ \| [0-9,]+ ' "$OUT/summary.md" || fail "no measured 1b-full row"
grep -qE '^\| 1b-full .*\| [+-][0-9.]+% \|' "$OUT/summary.md" || fail "no planner error in the 1b-full row"
grep -qE '^ROW fsdpc 1b-full exit 0 .* reserved_vs_plan [+-][0-9.]+% PASS ' "$OUT/log.txt" ||
  fail "no ROW line of 1b-full with its reservation against the plan"
for s in full grad_op no_shard hybrid; do
  grep -qE "^   $s: .*worst relative difference [0-9.e+-]+ over 20 steps" "$OUT/agree.txt" ||
    fail "no agreement line for $s"
done
echo PASS
