#!/usr/bin/env bash
# Issue 43 item 7, signals during saves and the rotation of a diverged run:
#   sigterm_in_save  SIGTERM to the launcher of a 2-rank job while its
#                    periodic save of step 3 is under way (the commit rename
#                    slowed by an LD_PRELOAD shim): the run stops after that
#                    save, which is the stop checkpoint; it used to train
#                    step 4 and save again, past the grace
#   diverged         a run resumed with a learning rate that makes the loss
#                    climb (finite) saves diverging checkpoints with keep=1:
#                    rotation keeps the last one that was not diverging
# Usage: test_save_signals.sh CASE SLOW_RENAME_SO   (FSDPC = the fsdpc executable)
set -u
: "${FSDPC:?FSDPC must point at the fsdpc executable}"
CASE=$1
SHIM=$2
TMP=$(mktemp -d /tmp/fsdpc-save-signals.XXXXXX)
LPID=
trap '[ -n "$LPID" ] && kill -KILL "$LPID" 2>/dev/null; rm -rf "$TMP"' EXIT
fail() {
  echo "FAIL ($CASE): $*"
  for f in "$TMP"/*.log; do [ -e "$f" ] && { echo "--- $f"; tail -12 "$f" | cut -c1-300; }; done
  exit 1
}
. "$(dirname "$0")/../common/tiny_job.sh"
tiny_job "$TMP" "checkpoint: {dir: $TMP/ck, keep: 1}" || fail "data synth"

case $CASE in
sigterm_in_save)
  LD_PRELOAD="$SHIM" FSDPC_TEST_SLOW_RENAME_MS=3000 "$FSDPC" train "$TMP/tiny.yaml" \
    --nproc-per-node 2 checkpoint.save_steps=3 dist.term_grace_s=10 "log.dir=$TMP/log" \
    >"$TMP/run.log" 2>&1 &
  LPID=$!
  for _ in $(seq 600); do [ -d "$TMP/ck/.tmp-step-000003" ] && break; sleep 0.02; done
  [ -d "$TMP/ck/.tmp-step-000003" ] || fail "the save of step 3 did not start"
  kill -TERM "$LPID"
  for _ in $(seq 300); do kill -0 "$LPID" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$LPID" 2>/dev/null && fail "the launcher still runs 30 s after SIGTERM"
  wait "$LPID"
  rc=$?
  LPID=
  [ $rc = 0 ] || fail "launcher exited $rc, want 0 (every rank saved)"
  grep -q "stopped by SIGTERM after step 3; saved $TMP/ck/step-000003" "$TMP/run.log" ||
    fail "the save under way was not the stop checkpoint"
  [ -d "$TMP/ck/step-000004" ] && fail "step 4 was trained and saved after the SIGTERM"
  grep -q '"step": 4' "$TMP/log/metrics.jsonl" && fail "step 4 was trained after the SIGTERM"
  grep -q "killed by signal" "$TMP/run.log" && fail "a rank was killed"
  echo "PASS ($CASE): the save of step 3 under way became the stop checkpoint"
  ;;
diverged)
  "$FSDPC" train "$TMP/tiny.yaml" train.max_steps=20 optim.lr=0.05 schedule.name=constant checkpoint.save_steps=5 \
    "log.dir=$TMP/log1" >"$TMP/good.log" 2>&1 || fail "the first run failed"
  [ -d "$TMP/ck/step-000015" ] || fail "no step-000015 after the first run"
  # The same run resumed with a learning rate 40x higher: the loss climbs
  # from about 3 to 10-20 and stays finite.
  "$FSDPC" train "$TMP/tiny.yaml" train.max_steps=30 optim.lr=2.0 schedule.name=constant checkpoint.save_steps=5 \
    checkpoint.resume=auto "log.dir=$TMP/log2" >"$TMP/bad.log" 2>&1 || fail "the second run failed"
  grep -q "step-000025 is marked diverging" "$TMP/bad.log" || fail "step 25 was not marked diverging"
  [ -d "$TMP/ck/step-000025" ] || fail "no step-000025 (keep=1 keeps the newest)"
  [ -d "$TMP/ck/step-000015" ] || fail "rotation deleted step-000015, the last checkpoint whose loss was not diverging"
  [ -d "$TMP/ck/step-000020" ] && fail "rotation kept step-000020 (diverging, not the newest)"
  grep -Eq '"diverging":[[:space:]]*false' "$TMP/ck/step-000015/train_loss.json" || fail "step-000015 is not marked good"
  grep -Eq '"diverging":[[:space:]]*true' "$TMP/ck/step-000025/train_loss.json" || fail "step-000025 is not marked diverging"
  echo "PASS ($CASE): $(ls "$TMP/ck" | tr '\n' ' ')kept; $(grep -m1 -o 'step 25: the mean loss[^:]*' "$TMP/bad.log")"
  ;;
*)
  fail "unknown case"
  ;;
esac
