# Sourced by the multi-process script tests: a tiny Llama and its data.
#   tiny_job DIR [KEY: VALUE ...]   writes DIR/qa.tok (500 examples) and
#                                   DIR/tiny.yaml; extra top-level sections
#                                   (e.g. "checkpoint: {keep: 1}") are added
# The model trains a step in milliseconds on one thread; train.max_steps is
# a million (the tests stop it). Needs FSDPC (the executable).
tiny_job() {
  local dir=$1
  shift
  "$FSDPC" data synth --task qa --n 500 --seed 3 --out "$dir/qa.tok" >/dev/null || return 1
  {
    cat <<YAML
model: {vocab_size: 259, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2,
        num_attention_heads: 2, num_key_value_heads: 1, max_position_embeddings: 32}
data: {train: $dir/qa.tok, seq_len: 32}
attention: {impl: naive}
train: {max_steps: 1000000, micro_batch_size: 2, log_every: 1, eval_every: 0, threads: 1}
log: {progress: off}
YAML
    for section in "$@"; do echo "$section"; done
  } >"$dir/tiny.yaml"
}
