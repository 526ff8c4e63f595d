#!/usr/bin/env bash
# Issue 43 item 3 (JSONL lost data silently) and issue 42 item 8 (JSON-array
# files): `fsdpc data prepare` reads a dataset as Python reads it. Each check
# below failed on the code before the fix: {...}{...} and {...} garbage kept
# the first object, CR-only line ends made 1 example of 2, a duplicate key
# kept its first value, a 100 MB line took 2.96 GB and a small .jsonl.gz
# expanded without bound, a JSON array was "expected a JSON object per line".
. "$(dirname "$0")/../common/cli_expect.sh" data-jsonl # dir, fail, expect
prep() { "$FSDPC" data prepare --tokenizer byte --format text "$@"; }
# peak RSS in MB of a command (its exit code and one-line stderr go to files)
peak_mb() {
  python3 - "$@" <<'PY'
import resource, subprocess, sys
try:
    r = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=60)
    rc, msg = r.returncode, r.stderr.strip().replace("\n", " | ")
except subprocess.TimeoutExpired:
    rc, msg = 124, "still running after 60 s"
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, rc, msg)
PY
}

# --- exactly one JSON value per line; trailing text names line and column
printf '{"text":"a"}\n{"text":"b"}{"text":"c"}\n' >"$dir/two.jsonl"
expect 1 "two.jsonl:2: column 13: extra data after the JSON value" prep --in "$dir/two.jsonl" --out "$dir/o.tok"
printf '{"text":"a"} garbage\n' >"$dir/g.jsonl"
expect 1 "g.jsonl:1: column 14: extra data after the JSON value" prep --in "$dir/g.jsonl" --out "$dir/o.tok"
printf '%s' "$err" | grep -qF "near 'garbage'" || fail "the message does not quote the extra text: $err"
[ ! -e "$dir/o.tok" ] || fail "output written for a bad file"
printf '{"text":"a"}  \t\n' >"$dir/ws.jsonl" # white space after the value is fine
expect 0 "prepared 1 examples" prep --in "$dir/ws.jsonl" --out "$dir/o.tok"
# what json.loads refuses and cJSON alone took: a leading zero, '+', raw control characters
printf '{"text":"a","n":01}\n' >"$dir/n.jsonl"
expect 1 "n.jsonl:1: column 17: an invalid number" prep --in "$dir/n.jsonl" --out "$dir/o.tok"
printf '{"text":"a\001"}\n' >"$dir/c.jsonl"
expect 1 "c.jsonl:1: column 11: a raw control character inside a string" prep --in "$dir/c.jsonl" --out "$dir/o.tok"
printf '{"text":"\xff"}\n' >"$dir/u.jsonl"
expect 1 "u.jsonl:1: column 10: invalid UTF-8" prep --in "$dir/u.jsonl" --out "$dir/o.tok"

# --- line ends: LF, CRLF and a lone CR (Python's universal newlines)
printf '{"text":"a"}\r{"text":"bb"}\r' >"$dir/cr.jsonl"
expect 0 "prepared 2 examples (text): 5 tokens" prep --in "$dir/cr.jsonl" --out "$dir/cr.tok"
printf '{"text":"a"}\r\n\r\n{"text":"bb"}\r\n{"text":"c"}' >"$dir/crlf.jsonl"
expect 0 "prepared 3 examples (text): 7 tokens" prep --in "$dir/crlf.jsonl" --out "$dir/crlf.tok"
printf '{"text":"a"}\r\n\r\n{"text":"bb"\r\n' >"$dir/crl.jsonl" # the bad line is line 3
expect 1 "crl.jsonl:3: column " prep --in "$dir/crl.jsonl" --out "$dir/o.tok"
printf '%s' "$err" | grep -q "malformed JSON" || fail "CRLF: $err"

# --- duplicate keys: the last one wins, at every depth (Python's dict)
printf '{"text":"first","text":"last"}\n' >"$dir/dup.jsonl"
expect 0 "{{l}}ast<eos>" prep --in "$dir/dup.jsonl" --dry-run --show 1
# with numbers, whose literal texts are read before the duplicates are resolved
printf '{"text":"first","n":1,"text":"last","n":20.0}\n' >"$dir/dupn.jsonl"
expect 0 "{{l}}ast<eos>" prep --in "$dir/dupn.jsonl" --dry-run --show 1
printf '{"messages":[{"role":"user","content":"x","content":"Q"},{"role":"assistant","content":"A"}],"messages":[{"role":"user","content":"q","content":"Q2"},{"role":"assistant","content":"y","content":"A2"}]}\n' >"$dir/dupc.jsonl"
expect 0 "Q2<|im_end|>" "$FSDPC" data prepare --tokenizer byte --chat-template \
  "$FSDPC_SOURCE_DIR/configs/templates/chatml.jinja" --in "$dir/dupc.jsonl" --dry-run --show 1
printf '%s\n' "$out" | grep -q "A2<|im_end|>" || fail "nested duplicate: not the last value: $out"

# --- key names from the file are escaped in messages
printf '{"te\\u001b[31mxt":1}\n' >"$dir/esc.jsonl"
expect 1 "'te\\x1b[31mxt'" "$FSDPC" data prepare --tokenizer byte --in "$dir/esc.jsonl" --out "$dir/o.tok"
printf '%s' "$err" | grep -q $'\x1b' && fail "a raw escape character reached the terminal"

# --- a JSON array of objects (alpaca_data.json), pretty-printed or on one line
cat >"$dir/alpaca.json" <<'EOF'
[
    {
        "instruction": "Add the numbers.",
        "input": "1 2",
        "output": "3"
    },
    {
        "instruction": "Say hi.",
        "input": "",
        "output": "hi"
    }
]
EOF
expect 0 "prepared 2 examples (instruction)" "$FSDPC" data prepare --tokenizer byte --in "$dir/alpaca.json" --out "$dir/a.tok"
expect 0 "### Response:" "$FSDPC" data info "$dir/a.tok" --docs 2
printf '[{"text":"a"},{"text":"bb"}]' | gzip >"$dir/one.json.gz"
expect 0 "prepared 2 examples (text): 5 tokens" prep --in "$dir/one.json.gz" --out "$dir/o.tok"
printf '[\n {"text":"a"},\n {"text":5}\n]\n' >"$dir/arr.json"
expect 1 "arr.json:3: text: expected a string, got a number" prep --in "$dir/arr.json" --out "$dir/o.tok"
printf '[\n {"text":"a"},\n {"text":"b",}\n]\n' >"$dir/arr2.json"
expect 1 "arr2.json:3: column 14: malformed JSON" prep --in "$dir/arr2.json" --out "$dir/o.tok"
printf '[{"text":"a"}] [' >"$dir/arr3.json"
expect 1 "arr3.json:1: column 16: extra data after the JSON array" prep --in "$dir/arr3.json" --out "$dir/o.tok"
printf '[{"text":"a"},' >"$dir/arr4.json"
expect 1 "the file ends before the JSON array is closed" prep --in "$dir/arr4.json" --out "$dir/o.tok"

# --- limits: a 100 MB line is refused in one line within bounded memory
big=$dir
[ -d /dev/shm ] && [ -w /dev/shm ] && big=$(mktemp -d /dev/shm/fsdpc-jsonl-XXXXXX) # no disk writes
python3 -c "import sys; sys.stdout.write('{\"text\":\"' + 'a' * (100 << 20) + '\"}\n')" >"$big/big.jsonl"
read -r mb rc msg < <(peak_mb "$FSDPC" data prepare --tokenizer byte --in "$big/big.jsonl" --out "$dir/o.tok")
[ "$big" != "$dir" ] && rm -rf "$big"
[ "$rc" = 1 ] || fail "100 MB line: exit $rc"
case $msg in *"big.jsonl:1: a line longer than 33554432 bytes (data.max_line_bytes)"*) ;;
  *) fail "100 MB line: message '$msg'" ;; esac
[ "$mb" -lt 400 ] || fail "100 MB line took $mb MB"
# a 1 MB .jsonl.gz that expands to a 1 GiB line (1024 gzip members of 1 MiB each,
# which gzip and zlib read as one stream)
python3 - "$dir/bomb.jsonl.gz" <<'PY'
import gzip, sys
block = gzip.compress(b"a" * (1 << 20), 9)
with open(sys.argv[1], "wb") as f:
    f.write(gzip.compress(b'{"text":"') + block * 1024 + gzip.compress(b'"}\n'))
PY
# the decompressed size of a whole file (data.max_input_bytes)
python3 -c "
import gzip
with gzip.open('$dir/many.jsonl.gz', 'wb') as f:
    f.write(b'{\"text\":\"abc\"}\n' * 20000)"
printf '%s\n' 'model: {vocab_size: 259, hidden_size: 8, intermediate_size: 8, num_hidden_layers: 1,' \
  '  num_attention_heads: 1}' 'data: {max_input_bytes: 100000, tokenizer: byte, format: text}' >"$dir/lim.yaml"
expect 1 "many.jsonl.gz: more than 100000 bytes after decompression (data.max_input_bytes)" \
  "$FSDPC" data prepare --config "$dir/lim.yaml" --in "$dir/many.jsonl.gz" --out "$dir/o.tok"

[ "$fails" -eq 0 ] && echo "PASS" || exit 1
