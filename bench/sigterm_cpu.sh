#!/usr/bin/env bash
# Issue 43's acceptance for signals during saves: SIGTERM at a random point
# of a 269M-parameter CPU run (4 ranks, Gloo, AdamW) under load, TRIALS
# times: every trial must end with a stop checkpoint within the grace
# (dist.term_grace_s, default 25 s) and resume bit-exactly.
#
#   bench/sigterm_cpu.sh BUILD_DIR WORK_DIR [TRIALS]     (default 20 trials)
#
# 1. A reference run of STEPS steps, uninterrupted (its per-step losses).
# 2. Each trial: a run of the same config with a periodic save every 3 steps
#    gets SIGTERM at a random moment between its first logged step and about
#    STEPS - 2 steps in (so it lands in steps and in saves alike). It must
#    exit 0 within the grace after the SIGTERM, having saved its stop
#    checkpoint step-S (no rank killed); then checkpoint.resume=auto trains
#    steps S+1 and S+2, whose losses must equal the reference's bit for bit
#    (17 significant digits in metrics.jsonl).
# "Under load": whatever else the machine runs (the load average is printed
# before and after), plus LOAD busy processes of the bench's own (default 0).
# Prints one line per trial and a summary; writes WORK_DIR/trials.tsv.
set -u
B=$(realpath "$1")
W=$(realpath -m "$2")
TRIALS=${3:-20}
STEPS=${STEPS:-10}
LOAD=${LOAD:-0}
F=$B/bin/fsdpc
export FSDPC_PLUGIN_PATH=$B/plugins
mkdir -p "$W"
cd "$W" || exit 1
[ -f copy.tok ] || "$F" data synth --task copy --n 20000 --out copy.tok >/dev/null
# 269.0M parameters: 32000 x 1024 embedding and head, 18 layers of 1024 /
# 2816 (SwiGLU) with 16 heads of 64 and 4 KV heads.
cat >big.yaml <<YAML
model: {vocab_size: 32000, hidden_size: 1024, intermediate_size: 2816, num_hidden_layers: 18,
        num_attention_heads: 16, num_key_value_heads: 4, max_position_embeddings: 256,
        tie_word_embeddings: false}
data: {train: $W/copy.tok, seq_len: 16}
attention: {impl: naive}
optim: {name: adamw, lr: 1.0e-4}
schedule: {name: constant}
train: {max_steps: $STEPS, micro_batch_size: 1, global_batch_size: 4, log_every: 1,
        eval_every: 0, generate_tokens: 0}
checkpoint: {keep: 1, final_format: sharded}
log: {progress: off}
YAML
now() { date +%s.%N; }
loads=()
for _ in $(seq "$LOAD"); do
  (while :; do :; done) &
  loads+=($!)
done
trap 'for p in "${loads[@]}"; do kill "$p" 2>/dev/null; done' EXIT

losses() { # METRICS -> "step loss" lines, loss as written
  sed -n 's/^{"step":\([0-9]*\),"loss":\([^,]*\),.*/\1 \2/p' "$1"
}

echo "sigterm_cpu: $TRIALS trials, $STEPS steps, $LOAD busy loops, $(nproc) cores, $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$F" train big.yaml --nproc-per-node 4 log.dir="$W/ref" >ref.log 2>&1 || {
  echo "reference run failed"
  tail -5 ref.log
  exit 1
}
losses ref/metrics.jsonl >ref.losses
echo "reference: $(grep -c . ref.losses) steps"
step_s=$(awk -F'"step_s":' 'NR > 2 && $2 { split($2, a, ","); s += a[1]; n++ } END { printf "%.1f", n ? s / n : 5 }' ref/metrics.jsonl)
echo "reference step time: $step_s s"
printf "trial\tdelay_s\tstopped_after\tstop_s\tin_grace\tresumed_bit_exact\n" >trials.tsv
ok=0
for t in $(seq "$TRIALS"); do
  rm -rf ck run resume
  "$F" train big.yaml --nproc-per-node 4 checkpoint.dir="$W/ck" checkpoint.save_steps=3 \
    log.dir="$W/run" >run.log 2>&1 &
  pid=$!
  for _ in $(seq 3000); do grep -q '"step":1,' run/metrics.jsonl 2>/dev/null && break; sleep 0.1; done
  # a random moment in the next (STEPS - 3) steps
  delay=$(awk -v s="$step_s" -v n="$STEPS" -v r="$RANDOM" 'BEGIN { printf "%.1f", (r / 32768) * s * (n - 3) }')
  sleep "$delay"
  t0=$(now)
  kill -TERM "$pid"
  wait "$pid"
  rc=$?
  stop_s=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
  after=$(sed -n 's/.*stopped by SIGTERM after step \([0-9]*\); saved.*/\1/p' run.log | head -1)
  in_grace=no
  [ "$rc" = 0 ] && [ -n "$after" ] && ! grep -q "killed by signal" run.log &&
    awk -v d="$stop_s" 'BEGIN { exit !(d <= 25) }' && in_grace=yes
  exact=no
  if [ -n "$after" ] && [ "$after" -le $((STEPS - 2)) ]; then
    "$F" train big.yaml --nproc-per-node 4 checkpoint.dir="$W/ck" checkpoint.resume=auto \
      train.max_steps=$((after + 2)) log.dir="$W/resume" >resume.log 2>&1
    losses resume/metrics.jsonl | awk -v a="$after" '$1 > a' >resume.losses
    awk -v a="$after" '$1 > a && $1 <= a + 2' ref.losses >want.losses
    [ -s resume.losses ] && cmp -s resume.losses want.losses && exact=yes
  elif [ -n "$after" ]; then
    exact="n/a (stopped after step $after)"
  fi
  [ "$in_grace" = yes ] && [ "$exact" = yes ] && ok=$((ok + 1))
  printf "%d\t%s\t%s\t%s\t%s\t%s\n" "$t" "$delay" "${after:-none}" "$stop_s" "$in_grace" "$exact" |
    tee -a trials.tsv
done
echo "sigterm_cpu: $ok of $TRIALS trials ended with a stop checkpoint within the grace and resumed bit-exactly; load average $(cut -d' ' -f1-3 /proc/loadavg)"
[ "$ok" = "$TRIALS" ]
