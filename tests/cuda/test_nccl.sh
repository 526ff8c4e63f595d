#!/usr/bin/env bash
# The nccl plugin over 2 ranks with one GPU each, through the fsdpc launcher.
# Usage: test_nccl.sh PROBE. Skips (exit 77) with fewer than 2 GPUs.
set -u
PROBE=$1
n=$("$PROBE" gpus 2>/dev/null || echo 0)
if [ "${n:-0}" -lt 1 ]; then
  echo "skipped: no GPU"
  exit 77
elif [ "$n" -lt 2 ]; then
  echo "skipped: needs 2 GPUs, found $n"
  exit 77
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; echo "--- output:"; cat "$TMP"/*.log; exit 1; }

timeout 120 "$PROBE" launch --nproc-per-node 2 -- "$PROBE" ok >"$TMP/ok.log" 2>&1
rc=$?
[ $rc -eq 0 ] || fail "ok: launcher exited $rc"
[ "$(grep -c 'probe ok: world 2' "$TMP/ok.log")" -eq 2 ] || fail "ok: expected 2 ranks ok"
grep 'probe ok' "$TMP/ok.log"

timeout 60 "$PROBE" launch --nproc-per-node 2 -- "$PROBE" hang "${HANG_VARIANT:-warm}" >"$TMP/hang.log" 2>&1
rc=$?
[ $rc -eq 0 ] || fail "hang: launcher exited $rc"
grep -q '\[rank 0\] watchdog ok' "$TMP/hang.log" || fail "hang: no watchdog line from rank 0"
grep 'watchdog ok' "$TMP/hang.log"
echo "nccl: ok"
