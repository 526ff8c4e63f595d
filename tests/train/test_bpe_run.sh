#!/usr/bin/env bash
# Training and generation with a Hugging Face tokenizer.json (the Llama-3-style
# fixture): text tokenized with it trains a small model, data.tokenizer makes
# the generation prompts go through it, and the model repeats a line it learnt.
set -u
: "${FSDPC:?}" "${FSDPC_SOURCE_DIR:?}"
TMP=$(mktemp -d /tmp/fsdpc-bpe-run.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; tail -20 "$TMP/train.log" 2>/dev/null; exit 1; }
TOK=$FSDPC_SOURCE_DIR/tests/fixtures/tokenizers/llama3-tiny
for i in $(seq 300); do echo "the quick brown fox jumps over the lazy dog"; echo; done >"$TMP/text.txt"
"$FSDPC" data tokenize --tokenizer "$TOK" --in "$TMP/text.txt" --out "$TMP/text.tok" \
  >"$TMP/tok.log" 2>&1 || { cat "$TMP/tok.log"; fail "tokenize"; }
V=$("$FSDPC" data info "$TMP/text.tok" | awk '/^vocab_size/ {print $2}')
[ -n "$V" ] && [ "$V" -gt 259 ] || fail "token file vocab '$V' is not the BPE tokenizer's"
cat >"$TMP/cfg.yaml" <<YAML
model: {vocab_size: $V, hidden_size: 64, intermediate_size: 160, num_hidden_layers: 2,
        num_attention_heads: 4, max_position_embeddings: 64}
data: {train: $TMP/text.tok, seq_len: 32, tokenizer: $TOK}
optim: {name: adamw, lr: 3.0e-3}
schedule: {name: constant}
train: {max_steps: 120, micro_batch_size: 8, log_every: 40,
        generate_prompts: ["the quick brown"], generate_tokens: 12}
log: {dir: $TMP/out}
YAML
"$FSDPC" train "$TMP/cfg.yaml" >"$TMP/train.log" 2>&1 || fail "training failed"
grep -q 'generate: "the quick brown" -> " fox jumps over the lazy dog"' "$TMP/train.log" ||
  fail "the BPE model did not complete the line it learnt"
grep generate "$TMP/train.log"
echo "PASS: BPE tokenizer in training and generation"
