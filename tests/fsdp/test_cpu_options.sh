#!/bin/bash
# The offload modes and fsdp.mixed_precision.reduce_dtype on the CPU device.
# There the shards already live in host memory, but the modes still run
# their schedules: fsdp.cpu_offload runs the optimizer step on the host
# worker thread (per-unit grad sums while backward goes on, updates handed
# over unit by unit, each pass waiting only for the unit it uses), and
# fsdp.offload.optimizer streams the state through two buffers in pieces
# (a tiny buffer_mib: many pieces per unit). Both must leave training
# bit-identical to the plain step (losses, eval losses, grad norms), with
# gradient accumulation, at world 1 and at world 2 (FULL_SHARD and NO_SHARD,
# whose replica all-reduce runs before the norm), and across a checkpoint
# and resume, and without clipping (the worker then updates each unit during
# the backward), and with fsdp.keep_params. reduce_dtype bf16 is refused
# with one line naming the key.
source "$(dirname "$0")/../train/common.sh"
CMP="python3 $FSDPC_SOURCE_DIR/tests/train/compare_runs.py"
run() { # name overrides...
  local n=$1
  shift
  "$FSDPC" train "$CFG" train.max_steps=4 train.eval_every=2 train.grad_accum_steps=2 \
    log.dir="$TMP/$n" "$@" >"$TMP/$n.log" 2>&1
}
same() { # reference run, other runs...
  local ref=$1
  shift
  for r in "$@"; do
    $CMP "$TMP/$ref" "$TMP/$r" --rtol 0 --keys loss,eval_loss,grad_norm || fail "$r differs from $ref"
  done
}
OPT=(fsdp.offload.optimizer=true fsdp.offload.buffer_mib=0.05)
run base || fail "default run"
run off fsdp.cpu_offload=true || fail "cpu_offload run"
run opt "${OPT[@]}" || fail "offload.optimizer run"
grep -q "cpu_offload: the optimizer step runs on a host worker thread" "$TMP/off.log" ||
  fail "no cpu_offload line"
grep -q "offload.optimizer: optimizer state in host memory .* streamed in [0-9]* pieces" \
  "$TMP/opt.log" || fail "no offload.optimizer line"
same base off opt

# checkpoint at step 2 and resume to step 4: the same losses as straight runs
run offck fsdp.cpu_offload=true checkpoint.dir="$TMP/ckA" checkpoint.save_steps=2 ||
  fail "cpu_offload with checkpoints"
run offres fsdp.cpu_offload=true checkpoint.dir="$TMP/ckB" \
  checkpoint.resume="$TMP/ckA/step-000002" || fail "cpu_offload resume"
run optck "${OPT[@]}" checkpoint.dir="$TMP/ckC" checkpoint.save_steps=2 ||
  fail "offload.optimizer with checkpoints"
run optres "${OPT[@]}" checkpoint.dir="$TMP/ckD" checkpoint.resume="$TMP/ckC/step-000002" ||
  fail "offload.optimizer resume"
grep -q "resumed from" "$TMP/offres.log" || fail "offres did not resume"
same base offck optck
# the resumed runs log steps 3 and 4 only: compare those, bit for bit
for r in offres optres; do
  python3 - "$TMP/base/metrics.jsonl" "$TMP/$r/metrics.jsonl" <<'PY' || fail "$r differs after resume"
import json, sys
a = {r["step"]: r for r in map(json.loads, open(sys.argv[1])) if "step" in r}
b = {r["step"]: r for r in map(json.loads, open(sys.argv[2])) if "step" in r}
assert sorted(b) == [3, 4], sorted(b)
for s in b:
    for k in ("loss", "grad_norm"):
        assert a[s][k] == b[s][k], (s, k, a[s][k], b[s][k])
PY
done

# no clipping: the worker updates each unit during the backward
run nc train.max_grad_norm=0 || fail "no clipping"
run ncoff train.max_grad_norm=0 fsdp.cpu_offload=true || fail "no clipping, cpu_offload"
grep -q "update starts on the host as soon as its gradients are there" "$TMP/ncoff.log" ||
  fail "no line for the updates in the backward"
same nc ncoff

if [ -e "$FSDPC_PLUGIN_PATH/libfsdpc-collectives-gloo.so" ]; then
  run base2 --nproc-per-node 2 || fail "world 2 default"
  run off2 fsdp.cpu_offload=true --nproc-per-node 2 || fail "world 2 cpu_offload"
  run opt2 "${OPT[@]}" --nproc-per-node 2 || fail "world 2 offload.optimizer"
  [ "$(grep -c "host worker thread" "$TMP/off2.log")" -eq 1 ] || fail "world 2: not one line"
  same base2 off2 opt2
  run nc2 train.max_grad_norm=0 --nproc-per-node 2 || fail "world 2 no clipping"
  run nc2off train.max_grad_norm=0 fsdp.cpu_offload=true --nproc-per-node 2 ||
    fail "world 2 no clipping, cpu_offload"
  same nc2 nc2off
  run ns2 fsdp.sharding_strategy=NO_SHARD --nproc-per-node 2 || fail "world 2 NO_SHARD"
  run ns2off fsdp.sharding_strategy=NO_SHARD fsdp.cpu_offload=true --nproc-per-node 2 ||
    fail "world 2 NO_SHARD cpu_offload"
  same ns2 ns2off
  # fsdp.keep_params: units kept gathered from one micro-batch to the next
  # of a step (first, middle and last micro-batches: 3 of them) change no
  # bit, with or without no_sync and the host worker
  A3=(train.grad_accum_steps=3 --nproc-per-node 2)
  run k3none fsdp.keep_params=none "${A3[@]}" || fail "world 2 keep none"
  run k3first fsdp.keep_params=first "${A3[@]}" || fail "world 2 keep first"
  run k3all fsdp.keep_params=all "${A3[@]}" || fail "world 2 keep all"
  same k3none k3first k3all
  # no_sync sums the micro-batches before the reduce-scatter: its own reference
  run k3ns fsdp.keep_params=none fsdp.no_sync=true "${A3[@]}" || fail "world 2 no_sync"
  run k3allns fsdp.keep_params=all fsdp.no_sync=true "${A3[@]}" || fail "world 2 keep all no_sync"
  run k3offns fsdp.keep_params=first fsdp.no_sync=true fsdp.cpu_offload=true "${A3[@]}" ||
    fail "world 2 keep first no_sync cpu_offload"
  same k3ns k3allns k3offns
fi

run bf16 fsdp.mixed_precision.reduce_dtype=bf16 && fail "reduce_dtype bf16 accepted on the CPU"
grep -q "fsdp.mixed_precision.reduce_dtype=bf16 needs train.device: cuda" "$TMP/bf16.log" ||
  fail "unclear refusal: $(tail -3 "$TMP/bf16.log")"
grep -q "Segmentation\|Aborted\|core dumped" "$TMP/bf16.log" && fail "crash on refusal"
echo "fsdp cpu options: all checks passed"
