#!/usr/bin/env bash
# A config that pins a plugin the loader refused (ABI major 2) fails the run
# with the refusal's one line; the other plugins still load and an unpinned
# choice still works.
set -u
: "${FSDPC:?}" "${FSDPC_TEST_PLUGIN_DIR:?}"
tmp=$(mktemp -d /tmp/fsdpc-pinned-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat "$tmp/out.log" 2>/dev/null; exit 1; }
"$FSDPC" data synth --task qa --n 300 --out "$tmp/qa.tok" >/dev/null || fail "data synth"
cat >"$tmp/cfg.yaml" <<YAML
model: {vocab_size: 259, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1,
        num_attention_heads: 2, max_position_embeddings: 32}
data: {train: $tmp/qa.tok, seq_len: 16}
schedule: {name: constant}
train: {max_steps: 2, micro_batch_size: 2}
plugins: {paths: [$FSDPC_TEST_PLUGIN_DIR]}
log: {dir: $tmp/run}
YAML
"$FSDPC" train "$tmp/cfg.yaml" optim.name=test-abi2 >"$tmp/out.log" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "exit code $rc, want 1"
grep -q "optim.name: .*libfsdpc-optim-test-abi2.so: ABI 2.0, this fsdpc speaks 1.x" "$tmp/out.log" ||
  fail "the run does not give the refusal reason"
[ "$(grep -c . "$tmp/out.log")" -le 2 ] || fail "more than a banner and one error line"
"$FSDPC" train "$tmp/cfg.yaml" >"$tmp/out.log" 2>&1 || fail "an unpinned run fails next to a refused plugin"
echo "PASS: pinned refused plugin"
