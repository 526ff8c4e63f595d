# Sourced by fail.sh and nodes.sh (part fail): the configs of issue 33's GPU
# checks.
#   fail_yaml DIR   writes DIR/fail.yaml (a small model that starts in
#                   seconds, trains until stopped) and DIR/70b.yaml (the
#                   Llama 2 70B shape, which fits neither one H200 nor four:
#                   about 1.1 TB of fp32 shards, gradients and AdamW state);
#                   both read DIR/copy.tok
# shellcheck shell=bash
fail_yaml() {
  cat >"$1/fail.yaml" <<YAML
model: {vocab_size: 259, hidden_size: 256, intermediate_size: 768, num_hidden_layers: 4,
        num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 128}
data: {train: $1/copy.tok, seq_len: 64}
optim: {name: adamw, lr: 1.0e-3}
train: {device: cuda, max_steps: 100000000, micro_batch_size: 2, log_every: 1, eval_every: 0}
log: {progress: off}
YAML
  cat >"$1/70b.yaml" <<YAML
model: {vocab_size: 32000, hidden_size: 8192, intermediate_size: 28672, num_hidden_layers: 80,
        num_attention_heads: 64, num_key_value_heads: 8, max_position_embeddings: 4096}
data: {train: $1/copy.tok, seq_len: 128}
fsdp: {activation_checkpointing: true}
train: {device: cuda, micro_batch_size: 1, max_steps: 5, eval_every: 0}
log: {progress: off}
YAML
}
