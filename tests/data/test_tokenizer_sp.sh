#!/usr/bin/env bash
# Two independent tokenizers that must agree: fsdpc's BPE over a Llama 2
# tokenizer.json (written from the real tokenizer.model by sp_to_json.py, as
# transformers' converter lays it out) and libsentencepiece over the
# tokenizer.model itself, on the corpus and a large varied text; ids and
# offsets. Then hand-checked ids, the Metaspace layout (Mistral v0.3's
# prepend_scheme "first"), and the model-folder choice (tokenizer.json
# first, tokenizer.model alone -> SentencePiece).
set -u
: "${FSDPC:?FSDPC must point at the fsdpc executable}"
: "${FSDPC_SOURCE_DIR:?}"
fix="$FSDPC_SOURCE_DIR/tests/fixtures/tokenizers"
model="$FSDPC_SOURCE_DIR/tests/fixtures/tokenizers/vocab/llama2/tokenizer.model"
dir=$(mktemp -d "${FSDPC_BINARY_DIR:-/tmp}/sp-XXXXXX")
trap 'rm -rf "$dir"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

mkdir -p "$dir/json" "$dir/sp" "$dir/ms" "$dir/both"
cp "$model" "$dir/sp/" && cp "$model" "$dir/both/" || fail "fixture $model missing"
python3 "$fix/sp_to_json.py" "$model" "$dir/json/tokenizer.json" || fail "sp_to_json.py"
python3 "$fix/sp_to_json.py" "$model" "$dir/ms/tokenizer.json" --layout metaspace || fail "metaspace"
cp "$dir/json/tokenizer.json" "$dir/both/"
# Valid UTF-8 lines only: SentencePiece replaces invalid bytes with U+FFFD,
# Hugging Face never sees them (Python strings).
python3 - "$fix/corpus.txt" "$dir/corpus.txt" <<'PY'
import sys
sys.path.insert(0, sys.argv[1].rsplit("/", 1)[0])
from ref_bpe import unescape
out = []
for line in open(sys.argv[1], encoding="utf-8").read().split("\n"):
    if line and not line.startswith("#"):
        try:
            unescape(line).decode("utf-8")
            out.append(line)
        except UnicodeDecodeError:
            pass
open(sys.argv[2], "w", encoding="utf-8").write("\n".join(out) + "\n")
PY
python3 "$fix/gen_varied.py" 1500 7 >>"$dir/corpus.txt" || fail "gen_varied.py"
n=$(grep -cv '^\(#\|$\)' "$dir/corpus.txt")
for mode in "" --offsets; do
  "$FSDPC" data encode --tokenizer "$dir/json" --escaped-lines "$dir/corpus.txt" $mode >"$dir/a" \
    || fail "encode with tokenizer.json $mode"
  "$FSDPC" data encode --tokenizer "$dir/sp" --escaped-lines "$dir/corpus.txt" $mode >"$dir/b" \
    || fail "encode with tokenizer.model $mode"
  [ "$(wc -l <"$dir/a")" -eq "$n" ] || fail "expected $n lines $mode"
  if ! diff "$dir/a" "$dir/b" >"$dir/diff"; then
    fail "BPE and SentencePiece differ ($mode) on $(grep -c '^<' "$dir/diff") of $n lines:"
    head -6 "$dir/diff" >&2
  fi
done

expect_ids() { # tokenizer text want
  local got
  got=$("$FSDPC" data encode --tokenizer "$1" --text "$2") || { fail "encode '$2' with $1"; return; }
  [ "$got" = "$3" ] || fail "'$2' with ${1##*/}: got '$got', expected '$3'"
}
# Llama 2's well-known ids: "Hello world!" = ▁Hello ▁world !, <s> = 1.
for t in "$dir/json" "$dir/sp" "$dir/both"; do
  expect_ids "$t" "Hello world!" "15043 3186 29991"
  expect_ids "$t" "<s>Hello" "1 15043"
  expect_ids "$t" " Hello" "29871 15043"
done
# Metaspace, prepend_scheme first: no second ▁ before a leading space, and
# no ▁ at all for a piece that does not start the text.
expect_ids "$dir/ms" "Hello world!" "15043 3186 29991"
expect_ids "$dir/ms" " Hello" "15043"
expect_ids "$dir/ms" "<s>Hello" "1 10994"
expect_ids "$dir/json" "Hello" "15043"
"$FSDPC" data encode --tokenizer "$dir/ms" --text "Hello" | grep -qx 15043 || fail "ms Hello"
[ "$("$FSDPC" data decode --tokenizer "$dir/ms" 1 15043 3186)" = "Hello world" ] || fail "ms decode"
[ "$("$FSDPC" data decode --tokenizer "$dir/sp" 15043 3186 29991)" = "Hello world!" ] \
  || fail "sp decode"
"$FSDPC" data encode --tokenizer "$dir/both" --offsets --text "Hi caf$(printf '\xc3\xa9')" \
  | grep -qx '6324:0-2 274:2-4 28059:4-8' || fail "offsets: $("$FSDPC" data encode \
  --tokenizer "$dir/both" --offsets --text "Hi caf$(printf '\xc3\xa9')")"

# Errors: one line naming the file.
printf 'not a model' >"$dir/bad.model"
out=$("$FSDPC" data encode --tokenizer "$dir/bad.model" --text hi 2>&1 >/dev/null)
[ $? -ne 0 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q "bad.model: " \
  || fail "bad tokenizer.model: $out"
out=$("$FSDPC" data encode --tokenizer "$dir" --text hi 2>&1 >/dev/null)
echo "$out" | grep -q "has neither tokenizer.json nor tokenizer.model" || fail "empty folder: $out"

if [ "$fails" -ne 0 ]; then echo "$fails check(s) failed" >&2; exit 1; fi
echo "SentencePiece cross-check passed ($n lines)"
