#!/usr/bin/env bash
# The README's chat path, end to end: make the chat JSONL, train
# configs/tiny-chat-cpu.yaml on it (prepared on the fly with the ChatML
# template, loss on assistant turns, whole conversations packed), and check
# that the loss falls and that the model answers held-out prompts (a
# phrasing never paired with that fact in the data) in chat format:
# the answer followed by <|im_end|>.
set -u
: "${FSDPC:?}" "${FSDPC_SOURCE_DIR:?}"
TMP=$(mktemp -d /tmp/fsdpc-demo-chat.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; tail -30 "$TMP/train.log"; exit 1; }
"$FSDPC" data synth --task chat --out "$TMP/chat.jsonl" >/dev/null || fail "data synth"
"$FSDPC" train "$FSDPC_SOURCE_DIR/configs/tiny-chat-cpu.yaml" data.train="$TMP/chat.jsonl" \
  data.chat_template="$FSDPC_SOURCE_DIR/configs/templates/chatml.jinja" \
  log.dir="$TMP/out" >"$TMP/train.log" 2>&1 || fail "training failed"
ls "$TMP"/chat.jsonl.*.tok >/dev/null 2>&1 || fail "the prepared data was not cached next to the JSONL"
grep -q "examples packing" "$TMP/train.log" || fail "no data summary before the first step"
python3 - "$TMP/out/metrics.jsonl" "$TMP/train.log" <<'PY' || fail "the chat demo did not learn"
import json, re, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
first, last = rows[0], rows[-1]
print(f"loss at step {first['step']}: {first['loss']:.3f}; final {last['loss']:.3f}, "
      f"eval {last.get('eval_loss')}")
assert last["eval_loss"] < 0.3, "eval loss on the assistant turns did not fall below 0.3"
want = {"Quick question: capital of Kenya?": "Nairobi", "capital of France?": "Paris",
        "color of the sky?": "blue", "Quick question: opposite of light?": "dark"}
got = dict(re.findall(r'generate: "<\|im_start\|>user\\n(.*?)<\|im_end\|>\\n<\|im_start\|>'
                      r'assistant\\n" -> "(.*)"', open(sys.argv[2]).read()))
print("answers:", got)
right = sum(got.get(q, "").startswith(a + "<|im_end|>") for q, a in want.items())
assert right >= 3, f"only {right} of 4 held-out prompts answered as '<answer><|im_end|>'"
PY
echo "PASS: the chat demo learns"
