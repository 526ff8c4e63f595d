#!/usr/bin/env bash
# fsdpc config check / schema and the command dispatch: exit codes, one-line
# errors on stderr, and docs/config.md matching the schema table.
set -u
: "${FSDPC:?path to the fsdpc executable}" "${FSDPC_SOURCE_DIR:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect RC CMD...: runs CMD, keeps stdout/stderr in $tmp/out, $tmp/err.
expect() {
  local want=$1
  shift
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" -eq "$want" ] || fail "'$*' exited $rc, want $want; stderr: $(cat "$tmp/err")"
}

cat >"$tmp/good.yaml" <<'YAML'
model:
  vocab_size: 64
  hidden_size: 16
  intermediate_size: 32
  num_hidden_layers: 2
  num_attention_heads: 4
optim:
  lr: 1e-3
YAML

expect 0 "$FSDPC" config check "$tmp/good.yaml" fsdp.sharding_strategy=NO_SHARD
grep -q '^  sharding_strategy: NO_SHARD$' "$tmp/out" || fail "dump lacks the override"
grep -q '^  lr: 0.001$' "$tmp/out" || fail "dump lacks optim.lr"
grep -q '^  head_dim: 4$' "$tmp/out" || fail "dump lacks the derived head_dim"
[ -s "$tmp/err" ] && fail "stderr not empty on success: $(cat "$tmp/err")"

# The dump is a config: checking it again prints the same thing.
cp "$tmp/out" "$tmp/dump.yaml"
expect 0 "$FSDPC" config check "$tmp/dump.yaml"
diff <(tail -n +2 "$tmp/dump.yaml") <(tail -n +2 "$tmp/out") >/dev/null || fail "dump is not a fixed point"
# Other YAML readers see the same types (PyYAML: python3-yaml, from the setup).
python3 - "$tmp/dump.yaml" <<'PY' || fail "PyYAML reads the dump differently"
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
assert d["optim"]["lr"] == 0.001 and d["model"]["rms_norm_eps"] == 1e-5, d["model"]
assert d["data"]["train"] == "" and d["train"]["generate_prompts"] == []
assert d["fsdp"]["mixed_precision"]["param_dtype"] == "auto"
PY

# Errors: exit 1, exactly one line on stderr naming file:line:col and the key.
printf 'model:\n  vocab_size: 64\nfsdp:\n  shardng_strategy: NO_SHARD\n' >"$tmp/bad.yaml"
expect 1 "$FSDPC" config check "$tmp/bad.yaml"
[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "error is not one line: $(cat "$tmp/err")"
grep -q "bad.yaml:4:3: unknown key 'fsdp.shardng_strategy' (did you mean 'sharding_strategy'?)" \
  "$tmp/err" || fail "unexpected error: $(cat "$tmp/err")"
[ -s "$tmp/out" ] && fail "stdout not empty on error"

expect 1 "$FSDPC" config check "$tmp/good.yaml" optim.lr=abc
grep -q "^override 'optim.lr=abc': optim.lr: expected a number" "$tmp/err" || fail "override error: $(cat "$tmp/err")"
expect 1 "$FSDPC" config check "$tmp/good.yaml" fsdp.max_inflight_allgathers=3
grep -q "fsdp.max_inflight_allgathers=3 is not implemented in this build" "$tmp/err" || fail "not-implemented: $(cat "$tmp/err")"
expect 1 "$FSDPC" config check "$tmp/missing.yaml"
grep -q "missing.yaml: cannot open config" "$tmp/err" || fail "missing file: $(cat "$tmp/err")"

# Usage.
expect 2 "$FSDPC" config check
expect 2 "$FSDPC" config frobnicate
expect 0 "$FSDPC" config --help
grep -q "fsdpc config check CFG" "$tmp/out" || fail "config --help"
expect 0 "$FSDPC" config check --help
expect 0 "$FSDPC" --help
grep -q "^  config " "$tmp/out" || fail "fsdpc --help does not list config"
expect 2 "$FSDPC" no-such-command
[ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "unknown command 'no-such-command'" "$tmp/err" || fail "unknown command: $(cat "$tmp/err")"
expect 2 "$FSDPC"

# The reference page is generated from the schema; it must be up to date.
expect 0 "$FSDPC" config schema --markdown
diff -u "$FSDPC_SOURCE_DIR/docs/config.md" "$tmp/out" >"$tmp/diff" ||
  fail "docs/config.md is stale: run 'fsdpc config schema --markdown > docs/config.md'"
expect 0 "$FSDPC" config schema
grep -q '^fsdp.sharding_strategy ' "$tmp/out" || fail "schema text"

if [ "$fails" -ne 0 ]; then
  echo "$fails check(s) failed"
  exit 1
fi
echo "all config CLI checks passed"
