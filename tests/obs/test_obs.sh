#!/usr/bin/env bash
# Watching a run (issue 18): metrics.jsonl across a SIGTERM and a resume,
# TensorBoard event files read back independently (upstream field numbers), `fsdpc metrics`,
# `fsdpc plot`, and the exit codes of a run stopped by a signal.
set -u
: "${FSDPC:?run through ctest}"
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d /tmp/fsdpc-obs-test.XXXXXX)
trap 'pkill -KILL -f "$T" 2>/dev/null; rm -rf "$T"' EXIT
cd "$T"
fail() {
  echo "FAIL: $*" >&2
  for f in "$T"/*.log; do [ -e "$f" ] && { echo "--- $f"; tail -5 "$f"; }; done
  exit 1
}
"$FSDPC" data synth --task qa --n 3000 --out qa.tok >/dev/null 2>&1 || fail "data synth"
cat > tiny.yaml <<'YAML'
model: {vocab_size: 259, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2,
        num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 64,
        tie_word_embeddings: true}
data: {train: qa.tok, seq_len: 32, eval_fraction: 0.05}
optim: {name: adamw, lr: 3.0e-3}
schedule: {name: cosine, warmup_steps: 5}
train: {max_steps: 120, micro_batch_size: 2, global_batch_size: 8, threads: 1, log_every: 1,
        eval_every: 20, eval_batches: 2}
checkpoint: {final_dtype: fp32}
log: {progress: off, tensorboard: true}
YAML
steps() { python3 -c "
import json,sys
print(' '.join(str(o['step']) for o in map(json.loads, open('$1/metrics.jsonl')) if 'step' in o))"; }
seq_str() { seq -s ' ' "$1" "$2"; }

# 1. SIGTERM after step 45 with a checkpoint folder: exit 0, says where.
FSDPC_TEST_SIGNAL_AT_STEP=45 "$FSDPC" train tiny.yaml log.dir=P checkpoint.dir=P/ck >p1.log 2>&1
rc=$?
[ $rc -eq 0 ] || fail "SIGTERM with a checkpoint exited $rc, want 0"
grep -q "stopped by SIGTERM after step 45; saved P/ck/step-000045" p1.log || fail "no line naming the checkpoint"
[ "$(steps P)" = "$(seq_str 1 45)" ] || fail "steps before the resume: $(steps P)"
"$FSDPC" train tiny.yaml log.dir=P checkpoint.dir=P/ck checkpoint.resume=auto >p2.log 2>&1 ||
  fail "resume to 120"
[ "$(steps P)" = "$(seq_str 1 120)" ] || fail "after the resume, steps are not 1..120 once: $(steps P)"
[ "$(grep -c '"event":"start"' P/metrics.jsonl)" -eq 2 ] || fail "want 2 run records"
grep -q '"resumed_from":45' P/metrics.jsonl || fail "the resume's run record lacks resumed_from 45"
python3 "$HERE/read_tfevents.py" P || fail "event files do not match metrics.jsonl"

# Same losses as a run without the interruption (resume is bit-exact).
"$FSDPC" train tiny.yaml log.dir=S "checkpoint.dir=''" >s.log 2>&1 || fail "straight run"
python3 - <<'PY' || fail "resumed losses differ from the straight run"
import json
def load(d):
    return {o["step"]: o["loss"] for o in map(json.loads, open(d + "/metrics.jsonl")) if "step" in o}
a, b = load("S"), load("P")
assert a == b, [s for s in a if a[s] != b.get(s)][:5]
PY

# 2. Resume from an older checkpoint after the run went further: the steps
#    after it are dropped from metrics.jsonl, and TensorBoard (SessionLog
#    START) drops them too.
"$FSDPC" train tiny.yaml log.dir=Q checkpoint.dir=Q/ck train.max_steps=30 checkpoint.save_steps=10 \
  checkpoint.keep=0 >q1.log 2>&1 || fail "run to 30"
"$FSDPC" train tiny.yaml log.dir=Q checkpoint.dir=Q/ck train.max_steps=30 \
  checkpoint.resume=Q/ck/step-000010 >q2.log 2>&1 || fail "resume from step 10"
[ "$(steps Q)" = "$(seq_str 1 30)" ] || fail "resume from 10: steps are not 1..30 once: $(steps Q)"
python3 "$HERE/read_tfevents.py" Q || fail "event files after a resume from an older step"

# 3. A fresh rerun appends a new run; readers take the last one.
"$FSDPC" train tiny.yaml log.dir=Q "checkpoint.dir=''" train.max_steps=12 optim.lr=1e-3 >q3.log 2>&1 ||
  fail "fresh rerun"
"$FSDPC" metrics Q >m.txt 2>&1 || fail "fsdpc metrics: $(cat m.txt)"
python3 "$HERE/read_tfevents.py" Q || fail "event files after a fresh rerun in the same folder"
grep -q "1 earlier run in the file" m.txt || fail "fsdpc metrics does not see the earlier run: $(cat m.txt)"
grep -q "steps logged  12 (step 1 .. 12)" m.txt || fail "fsdpc metrics: $(cat m.txt)"
"$FSDPC" metrics P >m.txt 2>&1 || fail "fsdpc metrics P"
grep -q "2 starts (last resumed from step 45)" m.txt || fail "fsdpc metrics P: $(cat m.txt)"
"$FSDPC" metrics nowhere >m.txt 2>&1 && fail "fsdpc metrics of a missing folder succeeded"
grep -q "^fsdpc metrics: nowhere: no metrics.jsonl" m.txt || fail "unclear error: $(cat m.txt)"

# 4. fsdpc plot: two runs, PNG and SVG, into a folder that does not exist yet.
"$FSDPC" plot P S -o figs/a/loss.png >plot.log 2>&1 || fail "plot png: $(cat plot.log)"
"$FSDPC" plot P S -o figs/loss.svg --title "two runs" >>plot.log 2>&1 || fail "plot svg: $(cat plot.log)"
python3 - <<'PY' || fail "the plot is not a real figure"
import struct, xml.dom.minidom, zlib
png = open("figs/a/loss.png", "rb").read()
assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
w, h = struct.unpack(">II", png[16:24])
assert (w, h) == (1200, 860) and len(png) > 30000, (w, h, len(png))
# decode the image: many distinct colours (lines of two runs, text), not a blank canvas
i, idat = 8, b""
while i < len(png):
    n, = struct.unpack(">I", png[i:i + 4]); kind = png[i + 4:i + 8]
    if kind == b"IDAT": idat += png[i + 8:i + 8 + n]
    i += 12 + n
raw = zlib.decompress(idat)
assert len(set(raw[j:j + 3] for j in range(1, len(raw) - 3, 7))) > 20, "too few colours"
svg = xml.dom.minidom.parse("figs/loss.svg")
assert svg.documentElement.tagName == "svg"
paths = svg.getElementsByTagName("path")
assert len(paths) > 50, len(paths)  # series, grid, glyphs
PY
"$FSDPC" plot nowhere -o x.png >plot.log 2>&1 && fail "plot of a missing run succeeded"
grep -q "nowhere: no metrics.jsonl" plot.log || fail "plot error: $(cat plot.log)"
"$FSDPC" plot P -o x.txt >plot.log 2>&1 && fail "plot to .txt succeeded"
grep -q "must end in .png or .svg" plot.log || fail "plot error: $(cat plot.log)"
[ ! -e x.txt ] && [ ! -e x.png ] || fail "a failed plot left a file"

# 5. Exit codes of a signal stop without a checkpoint folder: 128 + 15.
FSDPC_TEST_SIGNAL_AT_STEP=5 "$FSDPC" train tiny.yaml log.dir=N "checkpoint.dir=''" >n1.log 2>&1
rc=$?
[ $rc -eq 143 ] || fail "SIGTERM without a checkpoint exited $rc, want 143"
grep -q "stopped by SIGTERM after step 5 without a checkpoint.*exit code 143" n1.log ||
  fail "no line saying nothing was saved"
# ... through the launcher (2 ranks): the same codes.
FSDPC_TEST_SIGNAL_AT_STEP=5 "$FSDPC" train tiny.yaml log.dir=N2 "checkpoint.dir=''" \
  --nproc-per-node 2 --master-port 0 >n2.log 2>&1
rc=$?
[ $rc -eq 143 ] || fail "launcher: SIGTERM without a checkpoint exited $rc, want 143"
FSDPC_TEST_SIGNAL_AT_STEP=5 "$FSDPC" train tiny.yaml log.dir=C2 checkpoint.dir=C2/ck \
  --nproc-per-node 2 --master-port 0 >c2.log 2>&1
rc=$?
[ $rc -eq 0 ] || fail "launcher: SIGTERM with a checkpoint exited $rc, want 0"
# A real SIGTERM to the launcher mid-run, with a checkpoint folder: 0.
"$FSDPC" train tiny.yaml log.dir=L checkpoint.dir=L/ck train.max_steps=100000 train.eval_every=0 \
  --nproc-per-node 2 --master-port 0 >l.log 2>&1 &
pid=$!
for _ in $(seq 200); do grep -q '"step":3,' L/metrics.jsonl 2>/dev/null && break; sleep 0.05; done
kill -TERM $pid
wait $pid
rc=$?
[ $rc -eq 0 ] || fail "launcher SIGTERM with a checkpoint exited $rc, want 0"
grep -q "every rank saved and exited 0" l.log || fail "the launcher does not say the ranks saved"
ls -d L/ck/step-* >/dev/null 2>&1 || fail "no checkpoint after the launcher's SIGTERM"
# The global batch grows with the world when it is not set: the run says so.
"$FSDPC" train tiny.yaml log.dir=W2 "checkpoint.dir=''" train.max_steps=6 train.global_batch_size=0 \
  train.eval_every=0 log.tensorboard=false --nproc-per-node 2 --master-port 0 >w2.log 2>&1 ||
  fail "world 2 with no global batch"
grep -q "global batch grows with the world: 4 windows at world 2 (2 at world 1)" w2.log ||
  fail "the changed global batch is not stated"

# 6. Progress: the bar goes to stderr; auto draws it on a terminal (script
#    gives one), not under mpirun (a pty per rank); every log line has an ETA.
"$FSDPC" train tiny.yaml log.dir=G "checkpoint.dir=''" train.max_steps=6 log.tensorboard=false \
  log.progress=on >g.out 2>g.err || fail "progress run"
grep -q $'\r\[#' g.err || fail "log.progress=on drew no bar on stderr"
grep -q $'\r' g.out && fail "the progress bar went to stdout"
grep -q "step 6/6 loss .* elapsed .* ETA 0s" g.err || fail "log lines lack the ETA: $(grep 'step 6/6' g.err)"
script -qec "'$FSDPC' train tiny.yaml log.dir=G2 \"checkpoint.dir=''\" train.max_steps=6 log.tensorboard=false log.progress=auto" \
  /dev/null >g2.out 2>&1 || fail "run under a terminal"
grep -q $'\r\[#' g2.out || fail "log.progress=auto drew no bar on a terminal"
script -qec "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 OMPI_COMM_WORLD_LOCAL_RANK=0 \
  OMPI_COMM_WORLD_LOCAL_SIZE=1 '$FSDPC' train tiny.yaml log.dir=G3 \"checkpoint.dir=''\" \
  train.max_steps=6 log.tensorboard=false log.progress=auto" /dev/null >g3.out 2>&1 || fail "run as an mpirun rank"
grep -q "world 1 (mpi)" g3.out || fail "not detected as an mpirun rank: $(head -3 g3.out)"
grep -q $'\r\[#' g3.out && fail "log.progress=auto drew a bar under mpirun"
echo "PASS"
