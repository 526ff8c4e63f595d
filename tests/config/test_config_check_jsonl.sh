#!/usr/bin/env bash
# Issue 42.3: `config check` runs the validation `train` runs on JSONL data
# and chat templates: the shipped configs/tiny-chat-cpu.yaml passes it, and
# a bad example or a missing template fails it with train's own line.
set -u
: "${FSDPC:?run through ctest}"
: "${FSDPC_SOURCE_DIR:?}"
T=$(mktemp -d /tmp/fsdpc-check-jsonl.XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T"
fail() {
  echo "FAIL: $*"
  exit 1
}
ln -s "$FSDPC_SOURCE_DIR/configs" configs
"$FSDPC" data synth --task chat --n 300 --out data/chat.jsonl >/dev/null 2>&1 || fail "data synth"
"$FSDPC" config check configs/tiny-chat-cpu.yaml >ok.log 2>&1 ||
  fail "config check refuses the shipped chat config: $(tail -1 ok.log)"
ls data | grep -q '\.tok$' && fail "config check wrote a prepared file: $(ls data)"

# A bad example: config check and train say the same line.
cp data/chat.jsonl data/bad.jsonl
echo '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant"}]}' >>data/bad.jsonl
"$FSDPC" config check configs/tiny-chat-cpu.yaml data.train=data/bad.jsonl >c.log 2>&1 &&
  fail "config check accepted a conversation without content"
"$FSDPC" train configs/tiny-chat-cpu.yaml data.train=data/bad.jsonl train.max_steps=1 log.dir=o \
  >t.log 2>&1 && fail "train accepted a conversation without content"
# (main's prepare passes messages as given: the template finds the gap)
want="data/bad.jsonl:301: chat template: configs/templates/chatml.jinja:1:73: 'content' is undefined"
grep -qF "$want" c.log || fail "config check: $(tail -1 c.log)"
grep -qF "$want" t.log || fail "train: $(grep -m1 error t.log)"

# A template that is missing, or does not parse.
"$FSDPC" config check configs/tiny-chat-cpu.yaml data.chat_template=none.jinja >m.log 2>&1 &&
  fail "config check accepted a missing template"
grep -q "none.jinja: cannot read" m.log || fail "missing template: $(tail -1 m.log)"
printf '{%% for m in messages %%}{{ m.content }}' >broken.jinja
"$FSDPC" config check configs/tiny-chat-cpu.yaml data.chat_template=broken.jinja >b.log 2>&1 &&
  fail "config check accepted a template without endfor"
grep -q "broken.jinja" b.log || fail "broken template: $(tail -1 b.log)"
echo "PASS: config check validates JSONL data and templates as train does"
