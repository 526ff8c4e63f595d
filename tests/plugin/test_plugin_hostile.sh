#!/usr/bin/env bash
# Plugin files that must not take fsdpc down (issue 19, finding 4): a
# truncated copy (8000 bytes: SIGBUS in dlopen) of a real plugin, an entry that calls exit(0), an entry
# that crashes, and a descriptor full of terminal escapes, all in the search
# path next to the real plugins.
#   plugins list  exits 0, lists the real plugins, names each bad file in one
#                 line, prints no raw escape
#   train         with adamw selected, trains every step (the bad files are
#                 never loaded: they are not selected)
#   build folder  searched only by a binary inside the build tree
set -u
: "${FSDPC:?}" "${FSDPC_TEST_HOSTILE_DIR:?}" "${FSDPC_PLUGIN_PATH:?}"
tmp=$(mktemp -d /tmp/fsdpc-hostile-plugins-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
mkdir "$tmp/p"
cp "$FSDPC_TEST_HOSTILE_DIR"/libfsdpc-optim-*.so "$tmp/p/"
real="$FSDPC_PLUGIN_PATH/libfsdpc-optim-adamw.so"
head -c 8000 "$real" >"$tmp/p/libfsdpc-optim-trunc.so"

timeout 60 "$FSDPC" plugins list --path "$tmp/p" >"$tmp/list.out" 2>"$tmp/list.err"
rc=$?
[ $rc -eq 0 ] || fail "plugins list exited $rc"
grep -q "^optim .* adamw " "$tmp/list.out" || fail "adamw is not listed"
grep -q "^attention .* naive " "$tmp/list.out" || fail "naive attention is not listed"
grep -q "libfsdpc-optim-exit.so: its entry point ended the process (exit code 0)" "$tmp/list.out" ||
  fail "the exit(0) plugin is not named"
grep -q "libfsdpc-optim-crash.so: crashed .*SIGSEGV" "$tmp/list.out" || fail "the crashing plugin is not named"
grep -q "libfsdpc-optim-trunc.so: " "$tmp/list.out" || fail "the truncated plugin is not named"
grep -q $'\e' "$tmp/list.out" && fail "plugins list printed a raw ESC byte"
grep -q 'esc .*1.0\\x1b\[2J' "$tmp/list.out" || fail "the escape plugin's version is not printed escaped"

timeout 60 "$FSDPC" plugins info optim/esc --path "$tmp/p" >"$tmp/info.out" 2>&1
grep -q 'description:  evil\\n\\x1b\[31mred' "$tmp/info.out" || fail "the description is not escaped: $(cat "$tmp/info.out")"
grep -q $'\e' "$tmp/info.out" && fail "plugins info printed a raw ESC byte"

"$FSDPC" data synth --task qa --n 300 --out "$tmp/qa.tok" >/dev/null || fail "data synth"
cat >"$tmp/cfg.yaml" <<YAML
model: {vocab_size: 259, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1,
        num_attention_heads: 2, max_position_embeddings: 32}
data: {train: $tmp/qa.tok, seq_len: 32}
optim: {name: adamw}
train: {max_steps: 4, micro_batch_size: 4, log_every: 1, threads: 1}
plugins: {paths: [$tmp/p]}
log: {dir: $tmp/run}
YAML
timeout 60 "$FSDPC" train "$tmp/cfg.yaml" >"$tmp/train.log" 2>&1
rc=$?
[ $rc -eq 0 ] || fail "train exited $rc: $(tail -3 "$tmp/train.log")"
n=$(grep -c '"step"' "$tmp/run/metrics.jsonl" 2>/dev/null)
[ "${n:-0}" -eq 4 ] || fail "train logged ${n:-0} of 4 steps (a plugin's exit(0) ended it?)"

# The build folder compiled into fsdpc is searched only by a binary that
# runs from that build tree: a copy elsewhere (as an installed fsdpc is)
# never loads a file planted there.
env -u FSDPC_PLUGIN_PATH "$FSDPC" plugins list >"$tmp/in.out" 2>&1
grep "^searched:" "$tmp/in.out" | grep -q "$FSDPC_PLUGIN_PATH" ||
  fail "the fsdpc of the build tree does not search its build folder"
cp "$FSDPC" "$tmp/fsdpc-elsewhere"
env -u FSDPC_PLUGIN_PATH "$tmp/fsdpc-elsewhere" plugins list >"$tmp/out.out" 2>&1
grep "^searched:" "$tmp/out.out" | grep -q "$FSDPC_PLUGIN_PATH" &&
  fail "an fsdpc outside the build tree searched the build folder: $(grep searched "$tmp/out.out")"

[ "$fails" -eq 0 ] || exit 1
echo "PASS"
