#!/usr/bin/env bash
# Inputs that must be refused in one line, never narrowed, crashed on or
# waited on forever (issue 19, findings 6 and 9):
#   integers past their real range (vocab_size=4294967555 used to train a
#   259-token model, num_hidden_layers=4294967298 two layers, threads=100000
#   crashed in OpenMP); a FIFO, /dev/zero or a 17 MiB file as the config; a
#   FIFO named model.safetensors; a plan over 20,000 layers (linear time).
set -u
: "${FSDPC:?path to the fsdpc executable}" "${FSDPC_SOURCE_DIR:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# refused WHAT PATTERN CMD...: CMD must exit non-zero (not 124: a hang,
# nor >128: a crash) within 10 s, with one stderr line matching PATTERN.
refused() {
  local what=$1 pat=$2
  shift 2
  (ulimit -v 4000000; timeout 10 "$@") >"$tmp/out" 2>"$tmp/err" </dev/null
  local rc=$?
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ "$rc" -gt 128 ]; then
    fail "$what: exited $rc; stderr: $(head -c 300 "$tmp/err")"
    return
  fi
  [ "$(grep -vc "^warn" "$tmp/err")" -eq 1 ] || fail "$what: stderr is not one line: $(head -c 300 "$tmp/err")"
  grep -q -- "$pat" "$tmp/err" || fail "$what: no '$pat' in: $(cat "$tmp/err")"
}

cat >"$tmp/good.yaml" <<'YAML'
model: {vocab_size: 259, hidden_size: 16, intermediate_size: 32, num_hidden_layers: 2,
        num_attention_heads: 4}
YAML
"$FSDPC" config check "$tmp/good.yaml" >/dev/null || fail "the base config is refused"

refused "vocab_size past 32 bits" "model.vocab_size.*4294967555 is out of range" \
  "$FSDPC" config check "$tmp/good.yaml" model.vocab_size=4294967555
refused "num_hidden_layers past 32 bits" "model.num_hidden_layers.*4294967298 is out of range" \
  "$FSDPC" config check "$tmp/good.yaml" model.num_hidden_layers=4294967298
refused "threads=100000" "train.threads.*100000 is out of range" \
  "$FSDPC" config check "$tmp/good.yaml" train.threads=100000
refused "train.max_steps past 32 bits" "train.max_steps.*out of range" \
  "$FSDPC" config check "$tmp/good.yaml" train.max_steps=4294967297
printf 'model: {vocab_size: 4294967555}\n' >"$tmp/big.yaml"
refused "vocab_size in YAML" "vocab_size.*out of range" "$FSDPC" config check "$tmp/big.yaml"

mkfifo "$tmp/fifo.yaml"
refused "a FIFO as the config" "not a regular file" "$FSDPC" config check "$tmp/fifo.yaml"
refused "/dev/zero as the config" "not a regular file" "$FSDPC" config check /dev/zero
head -c $((17 << 20)) /dev/zero | tr '\0' '#' >"$tmp/huge.yaml"
refused "a 17 MiB config" "larger than the limit" "$FSDPC" config check "$tmp/huge.yaml"

mkdir "$tmp/hf"
cp "$FSDPC_SOURCE_DIR/tests/fixtures/hf_tiny_untied/config.json" "$tmp/hf/"
mkfifo "$tmp/hf/model.safetensors"
refused "a FIFO named model.safetensors" "not a regular file" \
  "$FSDPC" convert "$tmp/hf" "$tmp/conv" --to sharded

# A wrap plan and unit layout over 20,000 layers (180,000 parameters) is
# linear: `fsdpc plan` ends in well under a second here; a quadratic one
# took minutes (92 s before the first step of a run).
cat >"$tmp/deep.yaml" <<'YAML'
model: {vocab_size: 64, hidden_size: 8, intermediate_size: 16, num_hidden_layers: 20000,
        num_attention_heads: 2, max_position_embeddings: 32}
YAML
timeout 30 "$FSDPC" plan "$tmp/deep.yaml" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] || fail "fsdpc plan of 20,000 layers exited $rc (124: not done in 30 s)"

[ "$fails" -eq 0 ] || exit 1
echo "PASS"
