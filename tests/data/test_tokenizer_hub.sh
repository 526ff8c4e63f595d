#!/usr/bin/env bash
# The Hub-shaped tokenizer folders (make_hub.py, over the real vocabularies
# in tests/fixtures/tokenizers/vocab): fsdpc against the independent Python reference
# (ref_bpe.py) on Llama 3.2's and Qwen2.5's byte-level BPE, against
# libsentencepiece on Mistral v0.1's tokenizer.model, hand-checked ids,
# special tokens in the text, NFC, add_bos_token, the empty string.
set -u
: "${FSDPC:?FSDPC must point at the fsdpc executable}"
: "${FSDPC_SOURCE_DIR:?}"
fix="$FSDPC_SOURCE_DIR/tests/fixtures/tokenizers"
dir=$(mktemp -d "${FSDPC_BINARY_DIR:-/tmp}/hub-XXXXXX")
trap 'rm -rf "$dir"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
hub="$dir/hub"
python3 "$fix/make_hub.py" "$hub" llama3.2-instruct llama3-instruct qwen2.5-instruct \
  mistral-v0.1-instruct mistral-v0.3-instruct mistral-v0.3-spm llama2-chat zephyr-7b-beta \
  llama2-chat-spm \
  || { echo "FAIL: make_hub.py" >&2; exit 1; }
cp "$FSDPC_SOURCE_DIR/tests/fixtures/tokenizers/vocab/mistral-v0.1/tokenizer.model" "$dir/m1.model"

python3 "$fix/gen_varied.py" 600 5 >"$dir/text.txt" && cat "$fix/corpus.txt" >>"$dir/text.txt" \
  || fail "gen_varied.py"
for t in llama3.2-instruct qwen2.5-instruct; do
  python3 "$fix/ref_bpe.py" encode "$hub/$t/tokenizer.json" "$dir/text.txt" >"$dir/ref" \
    || fail "ref_bpe.py on $t"
  "$FSDPC" data encode --tokenizer "$hub/$t" --escaped-lines "$dir/text.txt" >"$dir/c" \
    || fail "fsdpc on $t"
  if ! diff "$dir/ref" "$dir/c" >"$dir/diff"; then
    fail "$t: C and Python differ on $(grep -c '^<' "$dir/diff") lines:"; head -4 "$dir/diff" >&2
  fi
done

# Mistral v0.1: BPE over the tokenizer.json vs libsentencepiece over the
# tokenizer.model (valid UTF-8 lines: gen_varied.py writes only those), both
# alone (no tokenizer_config.json: the files' own legacy normalizer).
python3 "$fix/gen_varied.py" 600 9 >"$dir/valid.txt"
mkdir -p "$dir/m1json" && cp "$hub/mistral-v0.1-instruct/tokenizer.json" "$dir/m1json/"
"$FSDPC" data encode --tokenizer "$dir/m1json" --escaped-lines "$dir/valid.txt" \
  --offsets >"$dir/a" || fail "fsdpc mistral json"
"$FSDPC" data encode --tokenizer "$dir/m1.model" --escaped-lines "$dir/valid.txt" --offsets \
  >"$dir/b" || fail "fsdpc mistral model"
diff -q "$dir/a" "$dir/b" >/dev/null || fail "mistral v0.1: tokenizer.json and tokenizer.model differ"

# The same folders as transformers 5 reads them (tokenizer_class
# LlamaTokenizer: Metaspace, the tokenizer.json's normalizer dropped): the
# BPE over tokenizer.json and libsentencepiece over tokenizer.model (dummy
# prefix off, "▁" prepended per legacy) agree, ids and offsets.
for pair in "llama2-chat llama2-chat-spm" "mistral-v0.3-instruct mistral-v0.3-spm"; do
  set -- $pair
  "$FSDPC" data encode --tokenizer "$hub/$1" --escaped-lines "$dir/valid.txt" --offsets \
    >"$dir/a" || fail "fsdpc $1"
  "$FSDPC" data encode --tokenizer "$hub/$2" --escaped-lines "$dir/valid.txt" --offsets \
    >"$dir/b" || fail "fsdpc $2"
  if ! diff "$dir/a" "$dir/b" >"$dir/diff"; then
    fail "$1 and $2 differ on $(grep -c '^<' "$dir/diff") lines:"; head -4 "$dir/diff" >&2
  fi
done

expect() { # folder text want [flags]
  local got
  got=$("$FSDPC" data encode --tokenizer "$hub/$1" ${4:-} --text "$2") \
    || { fail "encode '$2' with $1"; return; }
  [ "$got" = "$3" ] || fail "$1 '$2' ${4:-}: got '$got', expected '$3'"
}
expect llama3.2-instruct "Hello world!" "9906 1917 0"
expect llama3.2-instruct "<|start_header_id|>user<|end_header_id|>" "128006 882 128007"
expect llama3.2-instruct "Hi<|eot_id|>" "13347 128009"
expect llama3.2-instruct "<|python_tag|>" "128010"
expect llama3-instruct "<|python_tag|>" "27 91 12958 9556 91 29" # a reserved id in Llama 3.0
expect llama3.2-instruct "Hi" "128000 13347" --add-special
expect qwen2.5-instruct "Hello world!" "9707 1879 0"
expect qwen2.5-instruct "<|im_start|>user" "151644 872"
expect qwen2.5-instruct "Hi" "13048" --add-special
expect qwen2.5-instruct "caf$(printf 'e\xcc\x81')" "$("$FSDPC" data encode --tokenizer "$hub/qwen2.5-instruct" \
  --text "caf$(printf '\xc3\xa9')")" # NFC: e + U+0301 is é
expect qwen2.5-instruct "caf$(printf 'e\xcc\x81')" "924:0-2 58858:2-6" --offsets # the é of e + U+0301 spans both
# NFC lengthens U+2ADC (3 bytes) to 4 byte-level ids: the id buffer must allow it.
expect qwen2.5-instruct "$(printf '\xe2\xab\x9c')" "145773 251 136 116"
# NFC offsets per segment, not per changed run: U+2ADC (3 bytes) becomes
# U+2ADD U+0338, 4 byte-level ids that all map to bytes 0-3 (what HF gave
# on the GPU host); the second one, at bytes 6-9, maps to its own bytes
# (" " + U+2ADD: 5-9, then 6-9), and " " + the é of e + U+0301 to 9-13 (the
# é to both its characters).
nfc_text="$(printf '\xe2\xab\x9c x \xe2\xab\x9c e\xcc\x81')"
got=$("$FSDPC" data encode --tokenizer "$hub/qwen2.5-instruct" --offsets --text "$nfc_text" |
  tr ' ' '\n' | cut -d: -f2 | tr '\n' ' ') || fail "encode nfc offsets"
want="0-3 0-3 0-3 0-3 3-5 5-9 6-9 6-9 6-9 6-9 9-13 "
case "$got" in
  "$want") ;;
  *) fail "qwen2.5 NFC offsets: got '$got', expected '$want'" ;;
esac
expect llama2-chat "Hello world!" "15043 3186 29991"
expect llama2-chat "Hi" "1 6324" --add-special
expect mistral-v0.1-instruct "Hello world!" "22557 1526 28808"
expect mistral-v0.3-instruct "[INST] Hi [/INST]" "3 16127 29473 4" # no ▁ prepended after [INST]
expect mistral-v0.3-instruct " Hi" "16127"
expect mistral-v0.3-spm "Hello world!" "23325 2294 29576"
# tokenizer_class LlamaTokenizer: transformers 5 drops the tokenizer.json's
# legacy normalizer for Metaspace, prepend_scheme "first" (legacy false) or
# "always" (legacy true), so a text that starts with a space gets no second
# "▁" (29871 "▁", not 259 "▁▁"), and after a special token "first" adds none.
expect llama2-chat " " "29871"
expect llama2-chat "Hello <s>." "15043 29871 1 29889" # 29889 ".": transformers' legacy=False example
expect zephyr-7b-beta "Hello <s>." "22557 28705 1 842"  # legacy true: 842 "▁."
expect mistral-v0.3-instruct "<s>Hello" "1 16998"     # 16998 "Hello", not 23325 "▁Hello"
expect llama2-chat-spm " " "29871"
expect llama2-chat-spm "Hello <s>." "15043 29871 1 29889"
expect mistral-v0.3-spm " " "29473" # "▁"; 1027 is "▁▁"
expect mistral-v0.3-spm "<s>Hello" "1 16998"
got=$("$FSDPC" data encode --tokenizer "$dir/m1json" --text " ") || fail "encode ' ' json alone"
[ "$got" = "259" ] || fail "mistral v0.1 tokenizer.json alone ' ': got '$got', expected 259 (▁▁)"
for t in llama3.2-instruct qwen2.5-instruct llama2-chat mistral-v0.3-spm; do
  expect "$t" "" ""
done

if [ "$fails" -ne 0 ]; then echo "$fails check(s) failed" >&2; exit 1; fi
echo "hub tokenizer checks passed"
