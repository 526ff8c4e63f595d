#!/usr/bin/env bash
# `fsdpc config check` reports what `fsdpc train` would refuse, before any
# weight is read: plugins and their options, batch geometry at the given
# ranks, HYBRID_SHARD groups, the files the config names. One line, exit 1.
set -u
: "${FSDPC:?}" "${FSDPC_SOURCE_DIR:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
cfg=$FSDPC_SOURCE_DIR/configs/tiny-cpu.yaml
"$FSDPC" data synth --task qa --out "$tmp/qa.tok" >/dev/null 2>&1 || { echo "FAIL: synth"; exit 1; }
# refused: want (rc, a piece of the one-line message) for the arguments
refused() {
  local want=$1
  shift
  "$FSDPC" config check "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" -eq 1 ] || fail "'$*' exited $rc, want 1"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "'$*': not one line: $(cat "$tmp/err")"
  grep -q -- "$want" "$tmp/err" || fail "'$*': '$(cat "$tmp/err")' lacks '$want'"
  [ -s "$tmp/out" ] && fail "'$*': stdout not empty on error"
}
ok=(data.train="$tmp/qa.tok")
"$FSDPC" config check "$cfg" "${ok[@]}" >/dev/null 2>"$tmp/err" || fail "good config refused: $(cat "$tmp/err")"
"$FSDPC" config check "$cfg" "${ok[@]}" --nproc-per-node 4 >/dev/null 2>&1 || fail "4 ranks refused"
refused "must be a multiple of" "$cfg" "${ok[@]}" train.global_batch_size=24 --nproc-per-node 4
refused "must divide the world size" "$cfg" "${ok[@]}" fsdp.sharding_strategy=HYBRID_SHARD \
  fsdp.hybrid_shard_size=3 --nproc-per-node 4
refused "no-such-plugin" "$cfg" "${ok[@]}" optim.name=no-such-plugin
refused "min_num_paramz" "$cfg" "${ok[@]}" fsdp.wrap.policy=size fsdp.wrap.options.min_num_paramz=5
refused "$tmp/missing.tok" "$cfg" data.train="$tmp/missing.tok"
refused "larger than model.vocab_size" "$cfg" "${ok[@]}" model.vocab_size=200
refused "param_dtype=bf16" "$cfg" "${ok[@]}" fsdp.mixed_precision.param_dtype=bf16
refused "reduce_dtype=bf16 needs" "$cfg" "${ok[@]}" fsdp.mixed_precision.reduce_dtype=bf16
refused "checkpoint.resume" "$cfg" "${ok[@]}" checkpoint.resume="$tmp/none-here"
refused "eval_every" "$cfg" "${ok[@]}" data.eval_fraction=0 train.eval_every=5
[ "$fails" -eq 0 ] && echo "config check (run): all checks passed"
exit "$fails"
