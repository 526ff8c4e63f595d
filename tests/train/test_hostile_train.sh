#!/usr/bin/env bash
# Training-time hardening (issue 19):
#   skip    a global batch without a target token (masked QA data, short
#           sequences) is skipped with a warning and counted, never an abort
# Usage: test_hostile_train.sh CASE   (FSDPC = the fsdpc executable)
set -u
: "${FSDPC:?FSDPC must point at the fsdpc executable}"
CASE=$1
TMP=$(mktemp -d /tmp/fsdpc-hostile-train.XXXXXX)
trap 'pkill -KILL -f "$TMP" 2>/dev/null; rm -rf "$TMP"' EXIT
fail() {
  echo "FAIL ($CASE): $*"
  for f in "$TMP"/*.log; do [ -e "$f" ] && { echo "--- $f"; tail -15 "$f"; }; done
  exit 1
}
"$FSDPC" data synth --task qa --n 500 --seed 3 --out "$TMP/qa.tok" >/dev/null || fail "data synth"
cat >"$TMP/tiny.yaml" <<YAML
model: {vocab_size: 259, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2,
        num_attention_heads: 2, num_key_value_heads: 1, max_position_embeddings: 32}
data: {train: $TMP/qa.tok, seq_len: 32, eval_fraction: 0.05}
attention: {impl: naive}
optim: {name: adamw, lr: 1.0e-3}
train: {max_steps: 6, micro_batch_size: 4, log_every: 1, eval_every: 0, threads: 1}
YAML

case $CASE in
skip)
  # 16-token windows of one QA pair each: some hold only the masked prompt.
  timeout 120 "$FSDPC" train "$TMP/tiny.yaml" data.seq_len=16 train.micro_batch_size=1 \
    train.max_steps=60 "log.dir=$TMP/run" >"$TMP/run.log" 2>&1
  rc=$?
  [ $rc -eq 0 ] || fail "the run exited $rc"
  grep -q "the global batch has no target tokens (every label masked): step skipped" "$TMP/run.log" ||
    fail "no warning about a skipped step (did the data change so no batch is target-less?)"
  n=$(tail -1 "$TMP/run/metrics.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["skipped_steps"])')
  [ "$n" -ge 1 ] || fail "metrics count $n skipped steps"
  [ "$(grep -c . "$TMP/run/metrics.jsonl")" -eq 60 ] || fail "not every step was logged"
  echo "skipped $n of 60 steps"
  ;;
*)
  fail "unknown case"
  ;;
esac
echo "PASS ($CASE)"
