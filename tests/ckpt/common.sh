# Shared by the checkpoint script tests: a tiny model, its data, helpers.
# Needs FSDPC (the executable) from ctest's environment.
set -u
: "${FSDPC:?run through ctest}"
T=$(mktemp -d /tmp/fsdpc-ckpt-test.XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
"$FSDPC" data synth --task qa --out qa.tok >/dev/null 2>&1 || fail "data synth"
cat > tiny.yaml <<'YAML'
model:
  vocab_size: 259
  hidden_size: 32
  intermediate_size: 64
  num_hidden_layers: 2
  num_attention_heads: 4
  num_key_value_heads: 2
  max_position_embeddings: 64
  tie_word_embeddings: true
data:
  train: qa.tok
  seq_len: 32
optim:
  name: adamw
  lr: 3.0e-3
  weight_decay: 0.01
schedule:
  name: cosine
  warmup_steps: 2
train:
  max_steps: 8
  micro_batch_size: 2
  global_batch_size: 8
  threads: 1
checkpoint:
  final_dtype: fp32
log:
  progress: off
YAML
# run NAME NPROC [overrides...]: trains into NAME/ (logs) and NAME/ck/ (checkpoints).
run() {
  local name=$1 n=$2
  shift 2
  timeout 60 "$FSDPC" train tiny.yaml log.dir="$name" checkpoint.dir="$name/ck" "$@" \
    --nproc-per-node "$n" --master-port 0 >"$name.log" 2>&1
}
losses() { grep -o '"step":[0-9]*,"loss":[^,]*' "$1/metrics.jsonl"; }
# same_losses A B: B's steps equal A's lines for the same steps, bit for bit.
same_losses() {
  losses "$2" | while read -r l; do
    grep -qxF "$l" <(losses "$1") || fail "$2: $l differs from $1"
  done
}
# close_losses A B TOL: relative difference of each of B's steps <= TOL.
close_losses() {
  join -t, <(losses "$1" | sed 's/"step":\([0-9]*\),"loss":/\1,/' | sort) \
    <(losses "$2" | sed 's/"step":\([0-9]*\),"loss":/\1,/' | sort) |
    awk -F, -v tol="$3" '{d = $2 - $3; if (d < 0) d = -d; r = d / ($2 < 0 ? -$2 : $2);
      if (r > tol) { print "step " $1 ": " $2 " vs " $3 " (rel " r ")"; bad = 1 } n++ }
      END { exit (bad || n == 0) }' || fail "$2: losses differ from $1 beyond $3"
}
