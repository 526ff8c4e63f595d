#!/usr/bin/env bash
# Issue 42 item 8: several datasets, each with its own format and keys, mixed
# by weight (data.datasets), with each dataset's count in the data block; and
# `data info` and `data batch` marking the same tokens as targets. Before the
# fix data.datasets was an unknown key, and batch marked each input by the
# token after it (shifted by one against info).
. "$(dirname "$0")/../common/cli_expect.sh" data-mix # dir, fail, expect
: "${FSDPC_SOURCE_DIR:?}"
cd "$dir" || exit 1
TPL=$FSDPC_SOURCE_DIR/configs/templates/chatml.jinja
python3 - <<'PY'
import json
with open("a.jsonl", "w") as f:
    for i in range(400):
        f.write(json.dumps({"text": "aaaa %d" % i}) + "\n")
with open("b.jsonl", "w") as f:
    for i in range(400):
        f.write(json.dumps({"body": "bbbb %d" % i}) + "\n")
PY
"$FSDPC" data synth --task chat --n 100 --out c.jsonl >/dev/null || fail "synth"
cat >mix.yaml <<EOF
model: {vocab_size: 259, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1,
        num_attention_heads: 2, max_position_embeddings: 256}
data:
  seq_len: 256
  format: text
  datasets:
    - {path: a.jsonl, weight: 3}
    - {path: b.jsonl, weight: 1, text_field: body}
attention: {impl: naive}
optim: {name: adamw, lr: 1.0e-3}
train: {max_steps: 1, micro_batch_size: 2, threads: 1}
log: {dir: out, progress: off}
EOF
train() { "$FSDPC" train "$@" >run.log 2>&1; }

# 1. weights 3:1 over two datasets of 400: counts 600 and 200, in the data block
train mix.yaml || fail "train: $(tail -3 run.log)"
grep -q "data: 2 datasets mixed by weight, 800 examples" run.log || fail "no mix line: $(grep data: run.log)"
grep -q "data:   a.jsonl: weight 3, 600 examples in the mix (75.0%) from its 400 (repeated)" run.log ||
  fail "a.jsonl's count: $(grep 'a.jsonl' run.log)"
grep -q "data:   b.jsonl: weight 1, 200 examples in the mix (25.0%) from its 400 (a sample)" run.log ||
  fail "b.jsonl's count: $(grep 'b.jsonl' run.log)"
grep -q "data: 800 examples" run.log || fail "the run does not train on the mix"
mix=$(find out/data-cache -name 'mix.*.tok' | head -1)
"$FSDPC" data info "$mix" --docs 800 >info.txt || fail "data info of the mix"
na=$(grep -c 'aaa [0-9]' info.txt)
nb=$(grep -c 'bbb [0-9]' info.txt)
python3 -c "import sys; a, b = $na, $nb; sys.exit(0 if b and abs(a / b - 3) <= 0.06 else 1)" ||
  fail "examples in the mix: $na of a, $nb of b (want 3:1 within 2%)"
# every example of b appears at most once (a sample), every example of a 1 or 2 times
grep -o 'bbb [0-9]*' info.txt | sort | uniq -d | grep -q . && fail "b's sample repeats an example"
[ "$(grep -o 'aaa [0-9]*' info.txt | sort -u | wc -l)" -eq 400 ] || fail "a is not repeated whole"
# the same run again reuses everything
train mix.yaml || fail "second train"
grep -q "a.jsonl prepared before" run.log || fail "second run did not reuse a.jsonl"

# 2. datasets of different formats, each with its own keys
train mix.yaml "data.datasets=[{path: a.jsonl, weight: 1}, {path: c.jsonl, format: chat, chat_template: $TPL}]" ||
  fail "text + chat: $(tail -3 run.log)"
grep -q "c.jsonl: weight 1, 250 examples in the mix (50.0%) from its 100 (repeated)" run.log ||
  fail "text + chat counts: $(grep 'data:' run.log)"

# 3. mistakes in an item are one line each, naming the item
cfgerr() { # PATTERN OVERRIDE
  train mix.yaml "$2"
  [ $? -eq 1 ] && tail -1 run.log | grep -qF -- "$1" || fail "'$2': $(tail -1 run.log)"
}
cfgerr "did you mean 'weight'" "data.datasets=[{path: a.jsonl, wieght: 3}]"
cfgerr "data.datasets[1].weight: 0" "data.datasets=[{path: a.jsonl}, {path: b.jsonl, weight: 0}]"
cfgerr "data.datasets[0].format: 'prose' is not one of" "data.datasets=[{path: a.jsonl, format: prose}]"
cfgerr "data.datasets[0]: expected a mapping" "data.datasets=[a.jsonl]"
cfgerr "data.train and data.datasets are both set" "data.train=a.jsonl"
cfgerr "missing required option 'data.datasets[0].path'" "data.datasets=[{weight: 2}]"

# 4. data info and data batch mark the same tokens (every example of a chat file and a text file)
"$FSDPC" data prepare --in c.jsonl --tokenizer byte --chat-template "$TPL" --out c.tok >/dev/null
"$FSDPC" data prepare --in a.jsonl --tokenizer byte --out a.tok >/dev/null
for f in c a; do
  "$FSDPC" data info $f.tok --docs 6 >info.$f || fail "info $f"
  "$FSDPC" data batch $f.tok --seq-len 256 --global-batch 6 --packing none --no-shuffle >batch.$f ||
    fail "batch $f"
  python3 - info.$f batch.$f <<'PY' || fail "data info and data batch disagree on $f.tok"
import re, sys
docs = re.findall(r'^  \[\d+\] \d+ tokens: "(.*)"(\.\.\.)?$', open(sys.argv[1]).read(), re.M)
rows = re.findall(r'^  \[\d+\] window \d+, \d+ targets: "(.*)"$', open(sys.argv[2]).read(), re.M)
rows = [r.split(" || ")[0] for r in rows]  # the example, without the row's padding
assert len(docs) == 6 and len(rows) == 6, (docs, rows)
for (d, cut), r in zip(docs, rows):  # info shows 200 tokens at most ("...")
    assert (r.startswith(d) if cut else r == d), (d, r)
assert all("}}" in d for d, _ in docs)  # something is masked: the comparison means something
PY
done

[ "$fails" -eq 0 ] && echo "PASS" || exit 1
