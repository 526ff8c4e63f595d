# Shared by the multi-rank training tests: a tiny model config, data, and
# helpers to read metrics. Source it; it sets TMP, CFG and defines fail().
set -u
: "${FSDPC:?FSDPC must point at the fsdpc executable}"
TMP=$(mktemp -d /tmp/fsdpc-train-test.XXXXXX)
# Every rank's command line holds log.dir=$TMP/..., which is how leftover
# processes are found.
trap 'pkill -KILL -f "$TMP" 2>/dev/null; rm -rf "$TMP"' EXIT

fail() {
  echo "FAIL: $*"
  for f in "$TMP"/*.log; do [ -e "$f" ] && { echo "--- $f"; tail -20 "$f"; }; done
  exit 1
}

"$FSDPC" data synth --task qa --n 2000 --seed 3 --out "$TMP/qa.tok" >/dev/null || fail "data synth"
CFG="$TMP/tiny.yaml"
cat >"$CFG" <<YAML
model:
  vocab_size: 259
  hidden_size: 64
  intermediate_size: 160
  num_hidden_layers: 3
  num_attention_heads: 4
  num_key_value_heads: 2
  max_position_embeddings: 64
  tie_word_embeddings: false
data: {train: $TMP/qa.tok, seq_len: 32, eval_fraction: 0.05}
attention: {impl: naive}
optim: {name: adamw, lr: 3.0e-3, weight_decay: 0.1}
schedule: {name: cosine, warmup_steps: 2}
train:
  max_steps: 10
  micro_batch_size: 2
  global_batch_size: 8
  max_grad_norm: 1.0
  log_every: 1
  eval_every: 5
  threads: 1
YAML

# run NAME [overrides...] [-- launch options]: trains into $TMP/NAME, log in $TMP/NAME.log
run() {
  local name=$1
  shift
  local over=() launch=()
  while [ $# -gt 0 ]; do
    if [ "$1" = "--" ]; then shift; launch=("$@"); break; fi
    over+=("$1")
    shift
  done
  timeout 120 "$FSDPC" train "$CFG" "${over[@]}" log.dir="$TMP/$name" \
    checkpoint.dir="$TMP/$name/ck" checkpoint.final_dtype=fp32 "${launch[@]}" \
    --master-port 0 >"$TMP/$name.log" 2>&1
}
