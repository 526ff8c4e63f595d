#!/usr/bin/env bash
# Issue 43 item 5 through the CLI: a run never writes rank0.json or
# metrics.jsonl through a planted link, metrics.jsonl as a FIFO fails the run
# at once instead of hanging it, `generate --file FIFO` fails instead of
# hanging, `fsdpc plot` replaces a link at its output instead of writing
# through it, and `fsdpc metrics` escapes the strings it reads from the file.
# Before the fix the victim files were overwritten, the two FIFO cases hung
# (the timeouts below turn that into a failure) and run_id was printed raw.
. "$(dirname "$0")/../common/cli_expect.sh" obs-logdir # dir, fail, expect
cd "$dir" || exit 1
"$FSDPC" data synth --task qa --n 400 --out qa.tok >/dev/null || fail "synth"
cat >tiny.yaml <<'EOF'
model: {vocab_size: 259, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1,
        num_attention_heads: 2, max_position_embeddings: 64}
data: {train: qa.tok, seq_len: 32}
attention: {impl: naive}
optim: {name: adamw, lr: 1.0e-3}
train: {max_steps: 2, micro_batch_size: 2, threads: 1}
checkpoint: {final_dtype: fp32}
log: {progress: off}
EOF
# train_fails PATTERN ARGS...: exit 1 with PATTERN in the last line (the error)
train_fails() {
  local pat=$1; shift
  timeout -k 5 60 "$FSDPC" train tiny.yaml "$@" >tf.log 2>&1; rc=$?
  [ "$rc" = 1 ] || fail "train $*: exit $rc (124: it hung), want 1"
  tail -1 tf.log | grep -qF -- "$pat" || fail "train $*: last line is not '$pat': $(tail -1 tf.log)"
}
echo "the victim's own contents" >victim.txt
cp victim.txt victim.orig

# rank0.json and metrics.jsonl planted as links
mkdir -p L
ln -s "$dir/victim.txt" L/rank0.json
timeout -k 5 60 "$FSDPC" train tiny.yaml log.dir=L >l1.log 2>&1 || fail "train with a link at rank0.json: $(tail -2 l1.log)"
cmp -s victim.txt victim.orig || fail "rank0.json was written through a link"
[ -f L/rank0.json ] && [ ! -L L/rank0.json ] || fail "L/rank0.json is not a file of its own"
mkdir -p M
ln -s "$dir/victim.txt" M/metrics.jsonl
train_fails "metrics.jsonl is a symbolic link" log.dir=M
cmp -s victim.txt victim.orig || fail "metrics.jsonl was written through a link"

# metrics.jsonl as a FIFO: refused at once
mkdir -p F
mkfifo F/metrics.jsonl
train_fails "metrics.jsonl exists and is not a regular file" log.dir=F

# generate --file FIFO: refused at once
timeout -k 5 60 "$FSDPC" train tiny.yaml log.dir=G checkpoint.dir=G/ck >g.log 2>&1 || fail "train for generate: $(tail -2 g.log)"
mkfifo prompts.jsonl
expect 1 "prompts.jsonl: cannot open: not a regular file" timeout -k 5 60 "$FSDPC" generate G/ck/final \
  --file prompts.jsonl
[ "$rc" = 124 ] && fail "generate hung on a FIFO --file"

# fsdpc plot: a link planted at the figure is replaced, never written through
mkdir -p P
ln -s "$dir/victim.txt" P/loss.svg
ln -s "$dir/victim.txt" P/loss.png
ln -s "$dir/victim.txt" P/loss.svg.tmp # the temporary name plot used before
"$FSDPC" plot G -o P/loss.svg >p.log 2>&1 || fail "plot svg over a link: $(tail -1 p.log)"
"$FSDPC" plot G -o P/loss.png >p.log 2>&1 || fail "plot png over a link: $(tail -1 p.log)"
cmp -s victim.txt victim.orig || fail "fsdpc plot wrote through a link"
[ ! -L P/loss.svg ] && [ ! -L P/loss.png ] && head -c 4 P/loss.png | grep -q PNG ||
  fail "plot: P/loss.svg or P/loss.png is not a figure of its own"
mkfifo P/fifo.svg
expect 1 "P/fifo.svg exists and is a FIFO" timeout -k 5 60 "$FSDPC" plot G -o P/fifo.svg
ls -A P | grep -q '^\..*\.tmp$' && fail "plot left a temporary file: $(ls -A P)"

# fsdpc metrics: strings from the file are escaped
mkdir -p E
printf '%s\n' '{"event":"start","run_id":"evil\u001b[2J\u0007","resumed_from":0,"world":1}' \
  '{"step":1,"loss":2.5}' >E/metrics.jsonl
expect 0 'run evil\x1b[2J\x07' "$FSDPC" metrics E
printf '%s' "$out" | grep -q $'\x1b' && fail "fsdpc metrics printed a raw escape character"

[ "$fails" -eq 0 ] && echo "PASS" || exit 1
