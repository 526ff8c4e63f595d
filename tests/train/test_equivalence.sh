#!/usr/bin/env bash
# Issue 4 numerics contract: the same seed and global batch give the same
# loss trajectory (and eval loss and grad norm) at world 1 and at world N
# under every strategy and wrap policy, within fp32 reduction-order rounding
# (1e-5 relative), over 10 steps; and the final fp32 weights (each run's
# checkpoint.final_format full output) match world 1's tensor by tensor.
# GROUP selects a slice so ctest can run the slices in parallel: strategies | wraps.
source "$(dirname "$0")/common.sh"
GROUP=${1:-strategies}
CMP="python3 $(dirname "$0")/compare_runs.py"

run ref || fail "world 1 reference run failed"
runs=()
case $GROUP in
strategies)
  for st in FULL_SHARD SHARD_GRAD_OP NO_SHARD; do
    for n in 2 4; do
      run "$st-$n" fsdp.sharding_strategy=$st -- --nproc-per-node $n || fail "$st at world $n failed"
      runs+=("$TMP/$st-$n")
    done
  done
  run HYBRID-2x2 fsdp.sharding_strategy=HYBRID_SHARD fsdp.hybrid_shard_size=2 -- --nproc-per-node 4 ||
    fail "HYBRID_SHARD 2x2 failed"
  runs+=("$TMP/HYBRID-2x2")
  ;;
wraps)
  # size policy at two thresholds (one unit per ~2 layers; one per module),
  # and both policies with the embedding and lm_head as units of their own.
  for n in 2 4; do
    run "size-big-$n" fsdp.wrap.policy=size fsdp.wrap.options.min_num_params=60000 -- --nproc-per-node $n || fail "size 60000 at $n"
    run "size-small-$n" fsdp.wrap.policy=size fsdp.wrap.options.min_num_params=1000 -- --nproc-per-node $n || fail "size 1000 at $n"
    run "tr-sep-$n" fsdp.wrap.options.separate_embedding=true fsdp.wrap.options.separate_lm_head=true \
      -- --nproc-per-node $n || fail "transformer separate at $n"
    runs+=("$TMP/size-big-$n" "$TMP/size-small-$n" "$TMP/tr-sep-$n")
  done
  run "size-sep-4" fsdp.wrap.policy=size fsdp.wrap.options.min_num_params=60000 \
    fsdp.wrap.options.separate_embedding=true fsdp.wrap.options.separate_lm_head=true fsdp.no_sync=true \
    fsdp.activation_checkpointing=true train.micro_batch_size=1 -- --nproc-per-node 4 || fail "size separate at 4"
  runs+=("$TMP/size-sep-4")
  ;;
*) fail "unknown group $GROUP" ;;
esac
$CMP "$TMP/ref" "${runs[@]}" --weights || fail "a run diverged from world 1"
# The runs really differ in layout: check the engine's own account of it.
units() { sed -n 's/.*fsdp: \([A-Z_]*\), shard group \([0-9]*\) x replicas \([0-9]*\), \([0-9]*\) units.*/\1 \2x\3 \4/p' "$TMP/$1.log"; }
expect() { [ "$(units "$1")" = "$2" ] || fail "$1: layout '$(units "$1")', expected '$2'"; }
case $GROUP in
strategies)
  expect ref "FULL_SHARD 1x1 4"
  expect FULL_SHARD-4 "FULL_SHARD 4x1 4"
  expect SHARD_GRAD_OP-2 "SHARD_GRAD_OP 2x1 4"
  expect NO_SHARD-4 "NO_SHARD 1x4 4"
  expect HYBRID-2x2 "HYBRID_SHARD 2x2 4"
  ;;
wraps)
  expect size-big-2 "FULL_SHARD 2x1 2"
  expect size-small-2 "FULL_SHARD 2x1 5"
  expect tr-sep-4 "FULL_SHARD 4x1 6"
  expect size-sep-4 "FULL_SHARD 4x1 4"
  ;;
esac
echo "PASS: equivalence ($GROUP): ${#runs[@]} runs match world 1 within 1e-5"
