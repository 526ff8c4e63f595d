#!/usr/bin/env bash
# The out-of-tree example: install fsdpc to a temporary prefix, build
# examples/out_of_tree_plugin against the INSTALLED header through
# pkg-config (no access to the source tree's headers), check its numerics,
# and check that the installed fsdpc lists and describes it.
set -eu
: "${FSDPC_SOURCE_DIR:?}" "${FSDPC_BINARY_DIR:?}"
tmp=$(mktemp -d /tmp/fsdpc-example-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$FSDPC_BINARY_DIR" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; fail "cmake --install"; }
pc=$(find "$tmp/prefix" -name fsdpc.pc | head -n 1)
[ -n "$pc" ] || fail "fsdpc.pc was not installed"
export PKG_CONFIG_PATH=$(dirname "$pc")
cflags=$(pkg-config --cflags fsdpc | xargs)
[ "$(realpath "${cflags#-I}")" = "$(realpath "$tmp/prefix/include")" ] ||
  fail "pkg-config --cflags fsdpc gives '$cflags', not the temporary prefix"
[ -f "$tmp/prefix/include/fsdpc/plugin.h" ] || fail "plugin.h not installed"

# A copy, as a third party would have it: nothing of the fsdpc tree around.
cp -r "$FSDPC_SOURCE_DIR/examples/out_of_tree_plugin" "$tmp/lion"
make -C "$tmp/lion" >"$tmp/make.log" 2>&1 || { cat "$tmp/make.log"; fail "make"; }
grep -q "core/include" "$tmp/make.log" && fail "the example used the source tree's headers"
so=$tmp/lion/libfsdpc-optim-lion.so
[ -f "$so" ] || fail "no $so"
exported=$(nm -D --defined-only "$so" | awk '$2 == "T" {print $3}')
[ "$exported" = "fsdpc_plugin_entry_v1" ] || fail "exports '$exported', want only the entry point"

cc $cflags -o "$tmp/lion_check" "$FSDPC_SOURCE_DIR/tests/plugin/lion_check.c" -ldl -lm
"$tmp/lion_check" "$so"

bin=$tmp/prefix/bin/fsdpc
out=$(FSDPC_PLUGIN_PATH= "$bin" plugins list --path "$tmp/lion" 2>&1) || fail "plugins list: $out"
grep -qE "^optim +lion +0\.1\.0 +1\.3 +5 +$so " <<<"$out" || { echo "$out"; fail "lion not listed"; }
# The moved installation searches its own plugin folder.
grep -q "searched:.* $(realpath "$tmp/prefix")/lib.*/fsdpc/plugins" <<<"$(
  cd / && FSDPC_PLUGIN_PATH= "$bin" plugins list)" || fail "installed plugin folder not searched"
out=$("$bin" plugins info optim/lion --path "$tmp/lion" 2>&1) || fail "plugins info: $out"
grep -q "description:  Lion" <<<"$out" || { echo "$out"; fail "info lacks the description"; }
grep -qE "beta2 +float +0\.99 +\[0, 1\]" <<<"$out" || { echo "$out"; fail "info lacks beta2"; }
# `make install` puts it where the installed fsdpc finds it without --path.
make -C "$tmp/lion" install >/dev/null
out=$(FSDPC_PLUGIN_PATH= "$bin" plugins info lion 2>&1) || fail "installed lion not found: $out"
# Used, not just listed: the installed fsdpc trains with optim.name=lion
# (pinned, found through plugins.paths in the config) and the loss falls.
"$bin" data synth --task qa --n 500 --out "$tmp/qa.tok" >/dev/null || fail "data synth"
cat >"$tmp/lion.yaml" <<YAML
model: {vocab_size: 259, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1,
        num_attention_heads: 2, max_position_embeddings: 32}
data: {train: $tmp/qa.tok, seq_len: 16}
optim: {name: lion, lr: 1.0e-3, options: {beta1: 0.9, beta2: 0.99}}
schedule: {name: constant}
train: {max_steps: 20, micro_batch_size: 4, log_every: 1}
plugins: {paths: [$tmp/lion]}
log: {dir: $tmp/run}
YAML
(cd / && FSDPC_PLUGIN_PATH= "$bin" train "$tmp/lion.yaml" >"$tmp/train.log" 2>&1) ||
  { cat "$tmp/train.log"; fail "training with lion failed"; }
python3 - "$tmp/run/metrics.jsonl" <<'PY' || fail "lion did not lower the loss"
import json, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if "step" in r]
print(f"lion: loss {rows[0]['loss']:.3f} at step 1 -> {rows[-1]['loss']:.3f} at step {rows[-1]['step']}")
sys.exit(0 if rows[-1]["loss"] < rows[0]["loss"] - 0.5 else 1)
PY

# The example objective (tokensum.c beside lion.c), built by the same
# make: listed, and used by the installed fsdpc.
so=$tmp/lion/libfsdpc-objective-tokensum.so
exported=$(nm -D --defined-only "$so" | awk '$2 == "T" {print $3}')
[ "$exported" = "fsdpc_plugin_entry_v1" ] || fail "tokensum exports '$exported'"
out=$(FSDPC_PLUGIN_PATH= "$bin" plugins list --path "$tmp/lion" 2>&1) || fail "plugins list: $out"
grep -qE "^objective +tokensum +0\.1\.0 +1\.3 +5 +$so " <<<"$out" || { echo "$out"; fail "tokensum not listed"; }
# Step 1's loss is the summed cross-entropy over the divisor: halving the
# divisor doubles it exactly (the same initial weights); its metric
# token_ce, in the log line and metrics.jsonl, is the default objective's
# loss bit for bit.
for d in 1 2 sft; do
  obj="objective: {name: tokensum, options: {divisor: $d}}"
  [ $d = sft ] && obj="objective: {name: sft}"
  sed -e "s|^optim:.*|$obj|" \
    -e "s|^log:.*|log: {dir: $tmp/run-d$d}|" -e "s|max_steps: 20|max_steps: 3|" "$tmp/lion.yaml" >"$tmp/d$d.yaml"
  (cd / && FSDPC_PLUGIN_PATH= "$bin" train "$tmp/d$d.yaml" >"$tmp/d$d.log" 2>&1) ||
    { cat "$tmp/d$d.log"; fail "training with objective tokensum failed"; }
done
grep -qE "^step 1/3 loss [0-9.]+ token_ce [0-9.]+ lr " "$tmp/d1.log" ||
  { cat "$tmp/d1.log"; fail "no token_ce in the log line"; }
python3 - "$tmp"/run-d{1,2,sft}/metrics.jsonl <<'PY' || fail "tokensum's loss or metric"
import json, sys
r1, r2, rs = ([r for r in map(json.loads, open(p)) if "step" in r] for p in sys.argv[1:])
l1, l2, ce, sft = r1[0]["loss"], r2[0]["loss"], r1[0]["token_ce"], rs[0]["loss"]
print(f"tokensum: step-1 loss {l1:.4f} (divisor 1), {l2:.4f} (divisor 2); token_ce {ce!r}, sft {sft!r}")
sys.exit(0 if l1 == 2 * l2 and l1 > 10 and ce == sft and "token_ce" not in rs[0] else 1)
PY
echo "example plugin: ok"
