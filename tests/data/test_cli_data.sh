#!/usr/bin/env bash
# `fsdpc data ...`: synth, tokenize, info, batch, --help, and one-line errors
# with the right exit codes (0 ok, 1 failure, 2 usage).
. "$(dirname "$0")/../common/cli_expect.sh" data-cli # dir, fail, expect

for sub in synth tokenize info batch; do
  expect 0 "usage: fsdpc data $sub" "$FSDPC" data "$sub" --help
done
expect 0 "usage: fsdpc data" "$FSDPC" data --help
expect 2 "unknown command 'frob'" "$FSDPC" data frob
expect 2 "unknown command 'nosuchcommand'" "$FSDPC" nosuchcommand

# synth + info
expect 0 "arith, 100 documents" "$FSDPC" data synth --task arith --n 100 --seed 3 --out "$dir/a.tok"
expect 0 "documents    100" "$FSDPC" data info "$dir/a.tok"
"$FSDPC" data info "$dir/a.tok" --docs 5 | grep -Eq '^  \[4\] [0-9]+ tokens: "[0-9]+\+[0-9]+=[0-9]+\\n"$' \
  || fail "info preview of arith is not 'a+b=c\\n'"
expect 0 'loss on answers only' "$FSDPC" data synth --task qa --n 50 --out "$dir/q.tok"
expect 0 'loss mask    yes' "$FSDPC" data info "$dir/q.tok"
expect 0 '{{Q: ' "$FSDPC" data info "$dir/q.tok" --docs 1
expect 0 'reverse' "$FSDPC" data synth --task=reverse --n=20 --out="$dir/r.tok"
expect 0 'loss mask    no' "$FSDPC" data info "$dir/r.tok"
# Same seed, same bytes.
"$FSDPC" data synth --task arith --n 100 --seed 3 --out "$dir/a2.tok" >/dev/null
cmp -s "$dir/a.tok" "$dir/a2.tok" || fail "synth is not deterministic"
expect 2 "--task 'sort': expected one of arith, qa, copy, reverse, codes, chat, tools" "$FSDPC" data synth --task sort --out "$dir/x.tok"
expect 2 "--task and --out are required" "$FSDPC" data synth --task arith
expect 2 "--n expects an integer" "$FSDPC" data synth --task arith --n many --out "$dir/x.tok"
expect 2 "unknown option '--bogus'" "$FSDPC" data synth --bogus
expect 2 "--out needs a value" "$FSDPC" data synth --task arith --out

# tokenize: paragraphs (a whitespace-only line separates too), lines, files.
printf 'first para\nline two\n\n   \nsecond para\n\n\nthird\n' >"$dir/t1.txt"
printf 'other file\nno trailing newline' >"$dir/t2.txt"
expect 0 "4 documents from 2 file(s)" "$FSDPC" data tokenize --in "$dir/t1.txt" --in "$dir/t2.txt" --out "$dir/p.tok"
# (the file's first token is never trained on: nothing predicts it)
expect 0 '[0] 20 tokens: "{{f}}irst para\nline two\n"' "$FSDPC" data info "$dir/p.tok" --docs 4
expect 0 '[3] 30 tokens: "other file\nno trailing newline"' "$FSDPC" data info "$dir/p.tok" --docs 4
expect 0 "6 documents" "$FSDPC" data tokenize --in "$dir/t1.txt" --in "$dir/t2.txt" --doc-per line --out "$dir/l.tok"
expect 0 "2 documents" "$FSDPC" data tokenize --in "$dir/t1.txt" --in "$dir/t2.txt" --doc-per file --out "$dir/f.tok"
expect 1 "cannot open" "$FSDPC" data tokenize --in "$dir/missing.txt" --out "$dir/m.tok"
[ ! -e "$dir/m.tok" ] && [ ! -e "$dir/m.tok.tmp" ] || fail "failed tokenize left a file behind"
expect 2 "--doc-per 'word': expected one of paragraph, line, file" "$FSDPC" data tokenize --in "$dir/t1.txt" --doc-per word --out "$dir/x.tok"

# info on corrupt files: one line naming the file, exit 1.
echo "hello, not a token file, but longer than sixty-four bytes .............." >"$dir/bad.tok"
expect 1 "$dir/bad.tok: bad magic" "$FSDPC" data info "$dir/bad.tok"
head -c 100 "$dir/a.tok" >"$dir/short.tok"
expect 1 "$dir/short.tok: truncated" "$FSDPC" data info "$dir/short.tok"
cp "$dir/a.tok" "$dir/flip.tok"
printf '\x01' | dd of="$dir/flip.tok" bs=1 seek=70 conv=notrunc status=none
expect 1 "checksum mismatch" "$FSDPC" data info "$dir/flip.tok"
expect 1 "cannot open token file" "$FSDPC" data info "$dir/nope.tok"

# batch: the loader's view.
expect 0 "step 2 (epoch 0): 4 windows of 16 tokens" "$FSDPC" data batch "$dir/a.tok" --seq-len 16 --global-batch 4 --step 2
expect 0 "<eos>" "$FSDPC" data batch "$dir/a.tok" --seq-len 16 --global-batch 4 --no-shuffle
expect 1 "fewer than one global batch" "$FSDPC" data batch "$dir/a.tok" --seq-len 16 --global-batch 100000
expect 1 "eval_fraction > 0" "$FSDPC" data batch "$dir/a.tok" --seq-len 16 --global-batch 1 --split eval

# Writers create the output's folders and name the user's path, never PATH.tmp.
expect 0 "wrote $dir/new/sub/c.jsonl" "$FSDPC" data synth --task chat --n 5 --out "$dir/new/sub/c.jsonl"
touch "$dir/afile"
expect 1 "afile' exists and is not a folder" "$FSDPC" data synth --task chat --n 5 --out "$dir/afile/x/c.jsonl"

if [ "$fails" -ne 0 ]; then echo "$fails check(s) failed" >&2; exit 1; fi
echo "all fsdpc data CLI checks passed"
