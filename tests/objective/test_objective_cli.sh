#!/usr/bin/env bash
# objective.name through the CLI: the default and a pinned `sft` train to
# the same bits (the objective is a plugin now, the numbers are not new),
# and every refusal is one line with a non-zero exit: an unknown name, a
# preference objective with a reference on a full fine-tune without
# objective.reference: precompute, and out-of-range keys.
source "$FSDPC_SOURCE_DIR/tests/train/common.sh"
CMP="python3 $FSDPC_SOURCE_DIR/tests/train/compare_runs.py"

run dflt train.max_steps=4 train.eval_every=2 || fail "default objective"
run sft objective.name=sft train.max_steps=4 train.eval_every=2 || fail "objective.name=sft"
$CMP "$TMP/dflt" "$TMP/sft" --rtol 0 --keys loss,eval_loss,grad_norm ||
  fail "objective.name=sft differs from the default"
grep -q '"loss"' "$TMP/sft/metrics.jsonl" || fail "no loss in metrics.jsonl"

# refused: what, where, what to do, on the last line; nothing trained
refused() { # NAME WANT... : run NAME must fail, its last line holding each WANT
  local name=$1
  shift
  run "$name" "${OVER[@]}" && fail "$name: trained, want a refusal"
  local last
  last=$(tail -n 1 "$TMP/$name.log")
  for w in "$@"; do
    grep -qF -- "$w" <<<"$last" || fail "$name: '$w' not in its last line: $last"
  done
  [ ! -s "$TMP/$name/metrics.jsonl" ] || fail "$name: wrote metrics before refusing"
}
OVER=(objective.name=kto)
refused kto "objective.name" "objective 'kto' not found" \
  "libfsdpc-objective-kto.so" "available objective plugins:" "sft"
OVER=(objective.name=dpo)
refused dpo "objective 'dpo'" "needs a reference model" \
  "objective.reference: precompute"
OVER=(objective.beta=0)
refused beta "objective.beta"
OVER=(objective.label_smoothing=0.7)
refused ls "objective.label_smoothing"
echo "objective cli: ok"
