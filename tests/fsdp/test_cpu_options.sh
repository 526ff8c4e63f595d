#!/bin/bash
# fsdp.cpu_offload and fsdp.mixed_precision.reduce_dtype on the CPU device:
# cpu_offload is accepted, logs one line and leaves training bit-identical
# (world 1 and world 2 over Gloo); reduce_dtype bf16 is refused with one
# line naming the key and train.device: cuda.
source "$(dirname "$0")/../train/common.sh"
CMP="python3 $FSDPC_SOURCE_DIR/tests/train/compare_runs.py"
run() { # name overrides...
  local n=$1
  shift
  "$FSDPC" train "$CFG" train.max_steps=4 train.eval_every=2 log.dir="$TMP/$n" "$@" \
    >"$TMP/$n.log" 2>&1
}
run base || fail "default run"
run off fsdp.cpu_offload=true || fail "cpu_offload run"
grep -q "cpu_offload: the shards already live in host memory on the CPU device" "$TMP/off.log" ||
  fail "no cpu_offload no-op line"
[ "$(grep -c "cpu_offload" "$TMP/off.log")" -eq 1 ] || fail "cpu_offload logged more than once"
$CMP "$TMP/base" "$TMP/off" --rtol 0 --keys loss,eval_loss,grad_norm || fail "offload changed CPU results"

if [ -e "$FSDPC_PLUGIN_PATH/libfsdpc-collectives-gloo.so" ]; then
  run base2 --nproc-per-node 2 || fail "world 2 default"
  run off2 fsdp.cpu_offload=true --nproc-per-node 2 || fail "world 2 cpu_offload"
  [ "$(grep -c "nothing to offload" "$TMP/off2.log")" -eq 1 ] || fail "world 2: not one line"
  $CMP "$TMP/base2" "$TMP/off2" --rtol 0 --keys loss,eval_loss,grad_norm ||
    fail "offload changed world-2 CPU results"
fi

run bf16 fsdp.mixed_precision.reduce_dtype=bf16 && fail "reduce_dtype bf16 accepted on the CPU"
grep -q "fsdp.mixed_precision.reduce_dtype=bf16 needs train.device: cuda" "$TMP/bf16.log" ||
  fail "unclear refusal: $(tail -3 "$TMP/bf16.log")"
grep -q "Segmentation\|Aborted\|core dumped" "$TMP/bf16.log" && fail "crash on refusal"
echo "fsdp cpu options: all checks passed"
