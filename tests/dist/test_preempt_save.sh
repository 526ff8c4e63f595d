#!/usr/bin/env bash
# Preemption that saves (issue 19, finding 5): SIGTERM to the launcher of a
# 2-rank job whose checkpoint save takes 5 s (the commit rename is slowed
# by an LD_PRELOAD shim). The ranks finish the step, save and exit; the
# launcher must not SIGKILL them mid-save:
#   1. default grace (dist.term_grace_s = 25): the checkpoint is written
#   2. dist.term_grace_s=2: the ranks said a save is under way, the launcher
#      waits for it and says so; the checkpoint is written
# Usage: test_preempt_save.sh SLOW_RENAME_SO   (FSDPC = the fsdpc executable)
set -u
: "${FSDPC:?FSDPC must point at the fsdpc executable}"
SHIM=$1
TMP=$(mktemp -d /tmp/fsdpc-preempt.XXXXXX)
trap 'pkill -KILL -f "$TMP" 2>/dev/null; rm -rf "$TMP"' EXIT
fail() {
  echo "FAIL: $*"
  for f in "$TMP"/*.log; do [ -e "$f" ] && { echo "--- $f"; tail -12 "$f"; }; done
  exit 1
}
"$FSDPC" data synth --task qa --n 500 --seed 3 --out "$TMP/qa.tok" >/dev/null || fail "data synth"
cat >"$TMP/tiny.yaml" <<YAML
model: {vocab_size: 259, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2,
        num_attention_heads: 2, num_key_value_heads: 1, max_position_embeddings: 32}
data: {train: $TMP/qa.tok, seq_len: 32}
attention: {impl: naive}
train: {max_steps: 1000000, micro_batch_size: 4, log_every: 1, threads: 1}
YAML
run() { # NAME [overrides...]
  local name=$1
  shift
  LD_PRELOAD="$SHIM" FSDPC_TEST_SLOW_RENAME_MS=5000 "$FSDPC" train "$TMP/tiny.yaml" \
    --nproc-per-node 2 "checkpoint.dir=$TMP/$name-ck" "log.dir=$TMP/$name" "$@" >"$TMP/$name.log" 2>&1 &
  local pid=$!
  for _ in $(seq 300); do [ -s "$TMP/$name/metrics.jsonl" ] && break; sleep 0.1; done
  [ -s "$TMP/$name/metrics.jsonl" ] || fail "$name: training did not start"
  kill -TERM "$pid"
  for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && fail "$name: the launcher is still running 60 s after SIGTERM"
  ls -d "$TMP/$name-ck"/step-* >/dev/null 2>&1 ||
    fail "$name: no checkpoint after SIGTERM (the save was killed)"
  grep -q "killed by signal 9" "$TMP/$name.log" && fail "$name: a rank was SIGKILLed"
  return 0
}
run default
run short dist.term_grace_s=2
grep -q "launcher: rank [01] is writing a checkpoint: waiting for it beyond the 2.0 s grace" \
  "$TMP/short.log" || fail "short: the launcher did not say it waits for the save"
echo "PASS"
