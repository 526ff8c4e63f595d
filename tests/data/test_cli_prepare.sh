#!/usr/bin/env bash
# `fsdpc data prepare`: every format, detection, .jsonl.gz, weights and
# per-message train flags, the dry-run preview with masks, and each kind of
# bad input as one line naming file:line and the field, exit 1, and no output
# file left behind; --skip-bad skips and counts.
. "$(dirname "$0")/../common/cli_expect.sh" data-prep # dir, fail, expect
: "${FSDPC_SOURCE_DIR:?}"
TPL="$FSDPC_SOURCE_DIR/configs/templates/chatml.jinja"
prep() { "$FSDPC" data prepare --tokenizer byte "$@"; }
prepc() { "$FSDPC" data prepare --tokenizer byte --chat-template "$TPL" "$@"; }

expect 0 "usage: fsdpc data prepare" "$FSDPC" data prepare --help

# --- formats (byte tokenizer: one token per byte, EOS 257 appended to plain layouts)
printf '{"text":"hello"}\n\n{"text":"ab"}\n' >"$dir/t.jsonl"
expect 0 "prepared 2 examples (text): 9 tokens, 7 targets" prep --in "$dir/t.jsonl" --out "$dir/t.tok"
expect 0 "documents    2" "$FSDPC" data info "$dir/t.tok"
printf '{"prompt":"2+2=","completion":"4"}\n' >"$dir/pc.jsonl"
expect 0 "(prompt_completion): 6 tokens, 2 targets" prep --in "$dir/pc.jsonl" --out "$dir/pc.tok"
expect 0 '{{2+2=}}4' "$FSDPC" data info "$dir/pc.tok" --tokenizer byte --docs 1
printf '{"instruction":"Add","input":"1 2","output":"3"}\n' >"$dir/i.jsonl"
expect 0 '}}3<eos>' prep --in "$dir/i.jsonl" --dry-run
expect 0 "(instruction): " prep --in "$dir/i.jsonl" --out "$dir/i.tok"
# with a chat template, instruction data is rendered as a user/assistant exchange
expect 0 '{{<|im_start|>user
Add

1 2<|im_end|>' prepc --in "$dir/i.jsonl" --dry-run
# chat, OpenAI and ShareGPT style, in a gzip file; targets = assistant content + <|im_end|>
printf '%s\n%s\n' \
  '{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Yo"}]}' \
  '{"conversations":[{"from":"human","value":"A"},{"from":"gpt","value":"B"}]}' | gzip >"$dir/c.jsonl.gz"
expect 0 "prepared 2 examples (chat)" prepc --in "$dir/c.jsonl.gz" --out "$dir/c.tok"
expect 0 "23 targets" prepc --in "$dir/c.jsonl.gz" --out "$dir/c.tok"   # "Yo<|im_end|>" + "B<|im_end|>"
expect 0 '}}Yo<|im_end|>{{' prepc --in "$dir/c.jsonl.gz" --dry-run
# train_on all; a message with "train": false; "weight": 2 repeats, 0 leaves out
printf '%s\n' '{"messages":[{"role":"user","content":"Q"},{"role":"assistant","content":"A","train":false},{"role":"user","content":"R"},{"role":"assistant","content":"S"}]}' >"$dir/tf.jsonl"
expect 0 "11 targets" prepc --in "$dir/tf.jsonl" --dry-run  # only "S<|im_end|>"
printf '%s\n%s\n' '{"text":"x","weight":2}' '{"text":"y","weight":0}' >"$dir/w.jsonl"
expect 0 "prepared 2 examples" prep --in "$dir/w.jsonl" --out "$dir/w.tok"
expect 0 "left out 1 example(s) of weight 0" prep --in "$dir/w.jsonl" --out "$dir/w.tok"
# field names
printf '{"body":"zz"}\n' >"$dir/f.jsonl"
expect 0 "(text): 3 tokens" prep --in "$dir/f.jsonl" --format text --text-field body --out "$dir/f.tok"

# --- bad input: one line, file:line and the field, exit 1, nothing written
bad() { # bad PATTERN FILE-CONTENT [ARGS]
  local pat=$1 content=$2; shift 2
  printf '%s\n' "$content" >"$dir/bad.jsonl"
  rm -f "$dir/bad.tok"
  expect 1 "$pat" prepc --in "$dir/bad.jsonl" --out "$dir/bad.tok" "$@"
  [ ! -e "$dir/bad.tok" ] && [ -z "$(ls -A "$dir" | grep '^\.bad\.tok\..*\.tmp$')" ] ||
    fail "output left behind for '$pat'"
}
ok='{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}'
bad "bad.jsonl:2: column 13: malformed JSON" "$ok
{\"messages\":[" --format chat
bad "bad.jsonl:1: missing field 'messages'" '{"msgs":[]}' --format chat
bad "bad.jsonl:1: messages[1].role: expected a string, got a number" '{"messages":[{"role":"user","content":"a"},{"role":7,"content":"b"}]}'
bad "bad.jsonl:1: messages[0].content: expected a string, a list of content parts or null, got a number" '{"messages":[{"role":"user","content":5}]}'
bad "bad.jsonl:1: missing field 'output'" '{"instruction":"a","out":"b"}' --format instruction
bad "bad.jsonl:1: weight: expected a whole number" '{"text":"a","weight":0.5}'
bad "empty dataset" ''
bad "cannot tell the dataset format" '{"foo":1}'
bad "bad.jsonl:2: expected a JSON object per line, got an array" '{"text":"a"}
[1]' --format text
bad "bad.jsonl:1: column 2: element 0 of the JSON array: expected a JSON object" '[1]' --format text
printf 'not a tokenizer' >"$dir/tokenizer.json"
rm -f "$dir/x.tok"
expect 1 "tokenizer.json" "$FSDPC" data prepare --in "$dir/t.jsonl" --tokenizer "$dir/tokenizer.json" --out "$dir/x.tok"
[ ! -e "$dir/x.tok" ] || fail "output left behind for a bad tokenizer"
expect 1 "cannot open dataset" prep --in "$dir/nope.jsonl" --out "$dir/x.tok"
# a failure after good lines leaves no partial file either
{ for i in $(seq 1 5000); do echo "$ok"; done; echo '{"messages":5}'; } >"$dir/late.jsonl"
expect 1 "late.jsonl:5001: messages: expected a non-empty array" prepc --in "$dir/late.jsonl" --out "$dir/late.tok"
[ ! -e "$dir/late.tok" ] && [ -z "$(ls -A "$dir" | grep '^\.late\.tok\..*\.tmp$')" ] ||
  fail "partial output after a late error"
# --skip-bad skips and counts
printf '%s\n%s\n%s\n' "$ok" '{"messages":[{"role":5,"content":"a"}]}' '{bad' >"$dir/sk.jsonl"
expect 0 "skipped 2 bad example(s) of 3 lines; first: " prepc --in "$dir/sk.jsonl" --format chat --skip-bad --out "$dir/sk.tok"
expect 0 "documents    1" "$FSDPC" data info "$dir/sk.tok"
printf '%s\n' '{"messages":[{"role":"user","content":{"a":1}}]}' >"$dir/allbad.jsonl"
expect 1 "empty dataset" prepc --in "$dir/allbad.jsonl" --format chat --skip-bad --out "$dir/ab.tok"

# data batch packs whole examples of a prepared file and reports overlong ones
expect 0 "packing examples: 2 examples in 1 rows" "$FSDPC" data batch "$dir/c.tok" --seq-len 128 --global-batch 1
expect 0 "1 truncated, 0 dropped" "$FSDPC" data batch "$dir/c.tok" --seq-len 64 --global-batch 1
expect 0 "0 truncated, 1 dropped" "$FSDPC" data batch "$dir/c.tok" --seq-len 64 --global-batch 1 --overlong drop
# (a token is shown as trained when it is predicted with loss, as `data info` shows it)
expect 0 '}}Yo<|im_end|>{{\n}} || {{<|im_start|>' "$FSDPC" data batch "$dir/c.tok" --seq-len 128 --global-batch 1 --no-shuffle

# --- threads do not change the output
"$FSDPC" data synth --task chat --n 3000 --out "$dir/s.jsonl" >/dev/null
prepc --in "$dir/s.jsonl" --out "$dir/s1.tok" --threads 1 >/dev/null || fail "prepare threads 1"
prepc --in "$dir/s.jsonl" --out "$dir/s2.tok" --threads 3 >/dev/null || fail "prepare threads 3"
cmp -s "$dir/s1.tok" "$dir/s2.tok" || fail "output depends on the thread count"

[ "$fails" -eq 0 ] && echo "PASS" || exit 1
