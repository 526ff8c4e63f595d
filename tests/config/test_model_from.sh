#!/usr/bin/env bash
# Issue 42.1, model folders: `model.from: DIR` (or model.init.from alone)
# supplies the shape, the weights and the tokenizer; model.config alone is
# the shape only and says so; a shape key that contradicts the folder whose
# weights are loaded is refused in one line, before any step.
set -u
: "${FSDPC:?run through ctest}"
: "${FSDPC_SOURCE_DIR:?}"
T=$(mktemp -d /tmp/fsdpc-model-from.XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T"
fail() {
  echo "FAIL: $*"
  exit 1
}
first_loss() { sed -n 's/^step 1\/[0-9]* loss \([0-9.]*\).*/\1/p' "$1" | head -1; }

"$FSDPC" data synth --task qa --n 2000 --out qa.tok >/dev/null 2>&1 || fail "data synth"
cat >base.yaml <<'YAML'
model: {vocab_size: 320, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2,
        num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 64,
        tie_word_embeddings: true}
data: {train: qa.tok, seq_len: 32}
optim: {name: adamw, lr: 1.0e-2}
train: {max_steps: 60, micro_batch_size: 8, threads: 1, log_every: 1}
checkpoint: {dir: base, final_dtype: fp32}
log: {dir: log-base, progress: off}
YAML
"$FSDPC" train base.yaml >base.log 2>&1 || fail "base run: $(tail -2 base.log)"
base_last=$(sed -n 's/^step 60\/60 loss \([0-9.]*\).*/\1/p' base.log)

# A config with no shape keys: the folder supplies everything.
cat >ft.yaml <<'YAML'
data: {train: qa.tok, seq_len: 32}
optim: {name: adamw, lr: 1.0e-3}
train: {max_steps: 1, micro_batch_size: 8, threads: 1, log_every: 1}
log: {progress: off}
YAML
"$FSDPC" train ft.yaml model.from=base/final log.dir=l1 >from.log 2>&1 || fail "model.from: $(tail -2 from.log)"
"$FSDPC" train ft.yaml model.init.from=base/final log.dir=l2 >init.log 2>&1 ||
  fail "model.init.from alone: $(tail -2 init.log)"
"$FSDPC" train ft.yaml model.config=base/final log.dir=l3 >config.log 2>&1 ||
  fail "model.config alone: $(tail -2 config.log)"
python3 - "$base_last" "$(first_loss from.log)" "$(first_loss init.log)" "$(first_loss config.log)" <<'PY' ||
import math, sys
base, frm, init, cfg = map(float, sys.argv[1:])
print("base's last loss %.4f; first loss: model.from %.4f, model.init.from %.4f, model.config %.4f"
      % (base, frm, init, cfg))
assert frm == init, "model.from and model.init.from alone load different weights"
assert frm < 0.6 * math.log(320), "model.from did not load the trained weights"
assert cfg > 0.9 * math.log(320), "model.config alone should start from random weights"
PY
  fail "first losses"
grep -q "model.config 'base/final' gives the shape only: the weights start random" config.log ||
  fail "model.config alone does not say it is the shape only"
grep -q "gives the shape only" from.log && fail "model.from says 'shape only'"

# The same folder under another spelling is fine; another folder is not.
"$FSDPC" config check ft.yaml model.from=./base//final/ model.init.from="$T/base/final" >same.log 2>&1 ||
  fail "the same folder, spelt twice: $(tail -1 same.log)"
cp -r base/final other
"$FSDPC" config check ft.yaml model.from=base/final model.config=other >other.log 2>&1 &&
  fail "model.config naming another folder than model.from was accepted"
grep -q "model.config 'other' is another folder than model.from 'base/final'" other.log ||
  fail "model.config vs model.from: $(cat other.log)"

# Shape keys that contradict the weights' folder: refused by config check
# and by train before step 1, naming where the key was given.
printf 'model: {from: base/final, num_hidden_layers: 3}\n' >contra.yaml
cat ft.yaml >>contra.yaml
for cmd in "config check" train; do
  $FSDPC $cmd contra.yaml log.dir=l4 >contra.log 2>&1 && fail "$cmd accepted 3 layers for a 2-layer folder"
  grep -q "contra.yaml:1:46: model.num_hidden_layers=3 contradicts the model folder base/final (config.json num_hidden_layers 2)" contra.log ||
    fail "$cmd: $(cat contra.log)"
  grep -q "^step 1/" contra.log && fail "$cmd: refused only after a step"
done
"$FSDPC" config check ft.yaml model.from=base/final model.hidden_size=64 >contra2.log 2>&1 &&
  fail "a hidden_size override against the folder was accepted"
grep -q "override 'model.hidden_size=64': model.hidden_size=64 contradicts the model folder" contra2.log ||
  fail "override: $(cat contra2.log)"
# Keys that shape no tensor may still be set (a longer context, another theta).
"$FSDPC" config check ft.yaml model.from=base/final model.max_position_embeddings=128 >ok.log 2>&1 ||
  fail "max_position_embeddings with model.from: $(tail -1 ok.log)"

# The folder's tokenizer comes with it (unless data.tokenizer is given).
cp "$FSDPC_SOURCE_DIR/tests/fixtures/tokenizers/llama2-tiny/tokenizer.json" other/
"$FSDPC" config check ft.yaml model.from=other >tok.log 2>&1 || fail "config check with a tokenizer: $(tail -1 tok.log)"
grep -q "^  tokenizer: other$" tok.log || fail "data.tokenizer is not the folder: $(grep tokenizer: tok.log)"
"$FSDPC" config check ft.yaml model.from=other data.tokenizer=byte >tok2.log 2>&1 || fail "config check"
grep -q "^  tokenizer: byte$" tok2.log || fail "a given data.tokenizer was replaced"
# A checkpoint of a model.from run loads where its base is gone: its
# config.yaml holds the whole shape (the folders it names are not read).
"$FSDPC" train ft.yaml model.from=other data.tokenizer=byte log.dir=l5 checkpoint.dir=ftck \
  checkpoint.save_steps=1 train.max_steps=2 >ft.log 2>&1 || fail "train into ftck: $(tail -1 ft.log)"
mv other gone
"$FSDPC" eval ftck/final --data qa.tok --seq-len 32 >ev.log 2>&1 || fail "eval without the base: $(tail -1 ev.log)"
"$FSDPC" eval ftck/step-000001 --data qa.tok >ev2.log 2>&1 || fail "eval of a step without the base: $(tail -1 ev2.log)"
"$FSDPC" generate ftck/final --prompt-ids 1,2 --max-new-tokens 2 >gen.log 2>&1 ||
  fail "generate without the base: $(tail -1 gen.log)"
"$FSDPC" convert ftck/step-000001 conv --to hf >cv.log 2>&1 || fail "convert without the base: $(tail -1 cv.log)"
echo "PASS: model folders (model.from, model.init.from alone, model.config alone, contradictions)"
