#!/usr/bin/env bash
# The C BPE tokenizer against the independent Python reference
# (tests/fixtures/tokenizers/ref_bpe.py) on a corpus of tricky strings, with
# special tokens parsed and not; then the CLI: tokenize --tokenizer, encode,
# decode, and one-line errors.
set -u
: "${FSDPC:?FSDPC must point at the fsdpc executable}"
: "${FSDPC_SOURCE_DIR:?}"
fix="$FSDPC_SOURCE_DIR/tests/fixtures/tokenizers"
dir=$(mktemp -d "${FSDPC_BINARY_DIR:-/tmp}/bpe-ref-XXXXXX")
trap 'rm -rf "$dir"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
command -v python3 >/dev/null || { echo "FAIL: python3 is needed for the reference" >&2; exit 1; }

for special in "" --no-special; do
  python3 "$fix/ref_bpe.py" encode "$fix/llama3-tiny/tokenizer.json" "$fix/corpus.txt" $special \
    >"$dir/ref.txt" || fail "ref_bpe.py failed"
  "$FSDPC" data encode --tokenizer "$fix/llama3-tiny" --escaped-lines "$fix/corpus.txt" $special \
    >"$dir/c.txt" || fail "fsdpc data encode failed"
  n=$(grep -cv '^\(#\|$\)' "$fix/corpus.txt")
  [ "$(wc -l <"$dir/c.txt")" -eq "$n" ] || fail "expected $n encoded lines"
  if ! diff "$dir/ref.txt" "$dir/c.txt" >"$dir/diff"; then
    fail "C and Python encodings differ ($special):"; head -20 "$dir/diff" >&2
  fi
done

# The fixture is a faithful copy of make_fixtures.py's output.
cp -r "$fix" "$dir/regen"
python3 "$dir/regen/make_fixtures.py" || fail "make_fixtures.py failed"
for f in llama3-tiny/tokenizer.json llama3-tiny/tokenizer_config.json llama2-tiny/tokenizer.json; do
  cmp -s "$fix/$f" "$dir/regen/$f" || fail "$f differs from make_fixtures.py's output"
done

# encode/decode round trip through the CLI.
text=$'Hello  world!\n\tIt\'s 1234567 caf\u00e9 \U0001F600 <|eot_id|>'
ids=$("$FSDPC" data encode --tokenizer "$fix/llama3-tiny/tokenizer.json" --text "$text")
back=$("$FSDPC" data decode --tokenizer "$fix/llama3-tiny" $ids; echo x)
[ "${back%x}" = "$text" ] || fail "decode(encode(text)) = '${back%x}'"
case " $ids " in *" 565 "*) ;; *) fail "<|eot_id|> was not parsed to 565: $ids" ;; esac
"$FSDPC" data decode --tokenizer "$fix/llama3-tiny" --escaped 498 198 | grep -qx '"Hello\\n"' \
  || fail "decode --escaped"

# tokenize with a tokenizer.json: vocab and EOS from the tokenizer.
printf 'Hello world! The quick brown fox.\n\nSecond paragraph<|eot_id|>\n' >"$dir/t.txt"
out=$("$FSDPC" data tokenize --in "$dir/t.txt" --out "$dir/t.tok" --tokenizer "$fix/llama3-tiny")
echo "$out" | grep -q "2 documents from 1 file(s) (bpe tokenizer, vocab 567, eos 557)" \
  || fail "tokenize summary: $out"
info=$("$FSDPC" data info "$dir/t.tok")
echo "$info" | grep -q "vocab_size   567" || fail "token file vocab: $info"
echo "$info" | grep -q "eos_id       557" || fail "token file eos: $info"
echo "$info" | grep -q "tokens       $(( $("$FSDPC" data encode --tokenizer "$fix/llama3-tiny" --text $'Hello world! The quick brown fox.\n' | wc -w) + $("$FSDPC" data encode --tokenizer "$fix/llama3-tiny" --text $'Second paragraph<|eot_id|>\n' | wc -w) ))" \
  || fail "token count differs from encode: $info"

# info shows raw ids for a BPE file, text with its tokenizer.
"$FSDPC" data info "$dir/t.tok" | grep -Eq '^  \[0\] [0-9]+ tokens: [0-9]+( [0-9]+)+$' \
  || fail "info without --tokenizer should print ids"
"$FSDPC" data info "$dir/t.tok" --tokenizer "$fix/llama3-tiny" \
  | grep -qxF '  [1] 18 tokens: "Second paragraph<|eot_id|>\n"' || fail "info --tokenizer preview"

printf 'abc\n' >"$dir/b.txt"
"$FSDPC" data tokenize --in "$dir/b.txt" --out "$dir/b.tok" >/dev/null || fail "byte tokenize"
# Errors: one line, exit 1 (bad tokenizer) or 2 (usage).
expect() {
  local code=$1 pat=$2; shift 2
  "$@" >/dev/null 2>"$dir/err"; rc=$?
  [ "$rc" -eq "$code" ] || fail "'$*' exited $rc, expected $code: $(cat "$dir/err")"
  grep -qF -- "$pat" "$dir/err" || fail "'$*' error lacks '$pat': $(cat "$dir/err")"
  [ "$(wc -l <"$dir/err")" -eq 1 ] || fail "'$*' error is not one line: $(cat "$dir/err")"
}
printf '{"model": {"type": "BPE", "vocab": {}, "merges": []},\n "pre_tokenizer": {"type": "Whitespace"}}' >"$dir/ms.json"
expect 1 "$dir/ms.json: pre_tokenizer 'Whitespace' is not supported yet" \
  "$FSDPC" data tokenize --in "$dir/t.txt" --out "$dir/x.tok" --tokenizer "$dir/ms.json"
[ ! -e "$dir/x.tok" ] || fail "failed tokenize left a file"
printf '{"model": {\n  "vocab": [1,]\n}}' >"$dir/bad.json"
expect 1 "$dir/bad.json:2:15: invalid JSON" "$FSDPC" data encode --tokenizer "$dir/bad.json" --text hi
expect 1 "cannot read tokenizer" "$FSDPC" data encode --tokenizer "$dir/none" --text hi
expect 1 "id 9999 at position 1 is not in its vocabulary" \
  "$FSDPC" data decode --tokenizer "$fix/llama3-tiny" 1 9999
expect 2 "one of --text, --in, --escaped-lines" "$FSDPC" data encode --tokenizer "$fix/llama3-tiny"
expect 2 "--tokenizer is required" "$FSDPC" data decode 1 2
expect 1 "tokenizer vocab 567 exceeds the file's 259" \
  "$FSDPC" data info "$dir/b.tok" --tokenizer "$fix/llama3-tiny"
expect 2 "--id expects an integer" "$FSDPC" data decode --tokenizer "$fix/llama3-tiny" 12x
for sub in encode decode; do
  "$FSDPC" data $sub --help | grep -q "usage: fsdpc data $sub" || fail "$sub --help"
done

if [ "$fails" -ne 0 ]; then echo "$fails check(s) failed" >&2; exit 1; fi
echo "bpe reference and CLI checks passed"
