#!/bin/bash
# The CLI on the public API on a GPU host (issue 40.3/40.4): the fsdpc
# executable links libfsdpc.so, and every plugin's entry point is
# FSDPC_PLUGIN_DEFINE. Run from a carry made by scripts/gpu/carry.sh (which
# copies this file next to carry_env.sh), one call:
#   bash .carry/NAME/cli_api_check.sh
# Prints one "===== NAME: PASS|FAIL" line per check and exits 0 when all
# pass; the logs go to $OUT/cli_api_logs.tar.xz (one file).
#   plugins    every CUDA plugin (attention/flash, collectives/nccl, optim
#              adamw/adamw8bit/sgd) loads through the entry macro: listed,
#              nothing refused
#   generate   greedy generation on CUDA from the tiny HF fixture through
#              fsdpc_model_load/fsdpc_generate equals the CPU's ids
#   eval       fsdpc eval of a tiny model (trained here on the CPU) on CUDA:
#              its loss within 2% of the CPU's (bf16), via
#              fsdpc_eval_config/fsdpc_evaluate
#   train2     two ranks on two GPUs when there are two (launcher, NCCL); skipped
#              on one GPU
. "$(dirname "$0")/carry_env.sh"
carry_fixtures
H=$SRC/tests/fixtures/hf_tiny_untied
W=$(mktemp -d)

plugins() {
  "$F" plugins list >"$W/list.txt" || return 1
  cat "$W/list.txt"
  for p in "attention  *flash" "collectives  *nccl" "optim  *adamw8bit"; do
    grep -Eq "^$p " "$W/list.txt" || { echo "missing: $p"; return 1; }
  done
  ! grep -q '^refused:' "$W/list.txt"
}

generate() {
  local cpu cuda
  cpu=$("$F" generate "$H" --prompt-ids=5,6,7 --max-new-tokens=8 --device=cpu --json) || return 1
  cuda=$("$F" generate "$H" --prompt-ids=5,6,7 --max-new-tokens=8 --device=cuda --json) || return 1
  echo "cpu:  $cpu"
  echo "cuda: $cuda"
  [ "$(echo "$cpu" | sed 's/.*"ids":\[\([^]]*\)\].*/\1/')" = \
    "$(echo "$cuda" | sed 's/.*"ids":\[\([^]]*\)\].*/\1/')" ]
}

# A tiny byte-tokenizer model trained for two steps on the CPU.
tiny() {
  [ -d "$W/ck/final" ] && return 0
  "$F" data synth --task qa --out "$W/qa.tok" >/dev/null || return 1
  cat >"$W/c.yaml" <<YAML
model: {vocab_size: 259, hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2,
        num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 64}
data: {train: $W/qa.tok, seq_len: 32}
train: {max_steps: 2, micro_batch_size: 2, global_batch_size: 4}
checkpoint: {dir: $W/ck}
log: {dir: $W/lg, progress: off}
YAML
  "$F" train "$W/c.yaml" >"$W/train.log" 2>&1 || { tail -3 "$W/train.log"; return 1; }
}

eval_cuda() {
  tiny || return 1
  local c g
  c=$("$F" eval "$W/ck/final" --data="$W/qa.tok" --batches=2 --device=cpu) || return 1
  g=$("$F" eval "$W/ck/final" --data="$W/qa.tok" --batches=2 --device=cuda) || return 1
  echo "cpu:  $c"
  echo "cuda: $g"
  python3 -c 'import json,sys; a,b=json.loads(sys.argv[1]),json.loads(sys.argv[2]); assert abs(a["loss"]-b["loss"])<2e-2*a["loss"], (a["loss"],b["loss"])' "$c" "$g"
}

train2() {
  [ "$(nvidia-smi -L | wc -l)" -ge 2 ] || { echo "one GPU: skipped"; return 0; }
  tiny || return 1
  "$F" train "$W/c.yaml" --nproc_per_node=2 train.device=cuda collectives.impl=nccl \
    train.max_steps=4 checkpoint.dir="''" log.dir="$W/lg2"
}

part plugins plugins
part generate generate
part eval eval_cuda
part train2 train2
(cd "$OUT" && tar cJf cli_api_logs.tar.xz plugins.log generate.log eval.log train2.log &&
  rm -f plugins.log generate.log eval.log train2.log)
exit $rc
