#!/bin/bash
# optim.in_backward (docs/fsdp.md): each unit's optimizer update runs in the
# backward once its gradients are reduced, and its grad shard is a transient
# of the step. With no clipping and one micro-batch a step it must train
# exactly as the plain step does:
#   - losses, eval losses, grad norms and the final weights (not under
#     LoRA, which saves the adapters only) bit for bit equal to the plain run
#     at world 1, 2 and 4 under FULL_SHARD, SHARD_GRAD_OP, NO_SHARD and
#     HYBRID_SHARD, with activation checkpointing, LoRA and adamw8bit;
#   - each of those runs keeps no grad shard (rank0.json), reserves the arena
#     `fsdpc plan --json` gives (byte for byte), tracks the planner's peak,
#     and that peak is below the plain run's plan;
#   - a checkpoint saved at step 2 and resumed gives steps 3 and 4 bit for bit;
#   - what it cannot honour (clipping, accumulation, cpu_offload,
#     offload.optimizer) is refused in one line naming optim.in_backward,
#     with a non-zero exit, by `fsdpc train` and `fsdpc plan` alike.
source "$(dirname "$0")/../train/common.sh"
CMP="python3 $FSDPC_SOURCE_DIR/tests/train/compare_runs.py"
ONE=(train.max_grad_norm=0 train.global_batch_size=0 train.grad_accum_steps=1 train.max_steps=4
  train.eval_every=2 schedule.warmup_steps=1)
IB=(optim.in_backward=true)
LORA=(peft.method=lora peft.r=4 peft.alpha=8 "peft.target_modules=[q_proj, v_proj, down_proj]"
  fsdp.activation_checkpointing=true)

# plan NAME WORLD overrides...: the planner's JSON row of the config
plan() {
  local name=$1 world=$2
  shift 2
  "$FSDPC" plan "$CFG" "$@" --world "$world" --json >"$TMP/$name.plan.json" 2>"$TMP/$name.plan.log" ||
    fail "$name: fsdpc plan failed"
}

# case_ NAME WORLD overrides...: the plain and the in_backward run, compared
case_() {
  local name=$1 world=$2
  shift 2
  run "$name" "${ONE[@]}" "$@" -- --nproc-per-node "$world" || fail "$name: plain run failed"
  run "$name-ib" "${ONE[@]}" "${IB[@]}" "$@" -- --nproc-per-node "$world" ||
    fail "$name: in_backward run failed"
  grep -q "optim.in_backward: each unit's optimizer update runs in the backward" "$TMP/$name-ib.log" ||
    fail "$name: no in_backward line"
  local weights=--weights # a LoRA run saves its adapters only
  [[ "$*" == *peft.method=lora* ]] && weights=""
  $CMP "$TMP/$name" "$TMP/$name-ib" --rtol 0 --keys loss,eval_loss,grad_norm $weights ||
    fail "$name: in_backward differs from the plain step"
  plan "$name" "$world" "${ONE[@]}" "$@"
  plan "$name-ib" "$world" "${ONE[@]}" "${IB[@]}" "$@"
  python3 - "$TMP/$name-ib" "$TMP/$name.plan.json" "$TMP/$name-ib.plan.json" "$world" <<'PY' ||
import json, sys
d, world = sys.argv[1], int(sys.argv[4])
def row(path):
    rows = [r for r in json.load(open(path)) if r["config"]]
    assert len(rows) == 1, f"{path}: no single config row"
    return rows[0]
plain, ib = row(sys.argv[2]), row(sys.argv[3])
ranks = [json.load(open(f"{d}/rank{r}.json")) for r in range(world)]
assert all(r["shard_bytes"]["grads"] == 0 for r in ranks), "a rank keeps grad shards"
arena = max(r["arena_bytes"] for r in ranks)
peak = max(r["peak_bytes"]["total"] for r in ranks)
assert arena == ib["arena_bytes"], f"arena {arena} != planned {ib['arena_bytes']}"
assert peak == ib["peak_bytes"]["total"], f"tracked peak {peak} != planned {ib['peak_bytes']['total']}"
assert abs(arena - peak) <= 0.01 * peak, f"arena {arena} vs peak {peak}"
pp, pi = plain["peak_bytes"]["total"], ib["peak_bytes"]["total"]
assert pi < pp, f"in_backward's planned peak {pi} is not below the plain step's {pp}"
print(f"{d.split('/')[-1]}: bit for bit; arena {arena} = plan; peak {pi} < plain {pp} ({pi / pp - 1:+.1%})")
PY
    fail "$name: memory against the plan"
}

case_ full-1 1
case_ full-2 2 fsdp.sharding_strategy=FULL_SHARD checkpoint.save_steps=2
case_ full-4 4 fsdp.sharding_strategy=FULL_SHARD fsdp.activation_checkpointing=true
case_ gradop-4 4 fsdp.sharding_strategy=SHARD_GRAD_OP
case_ noshard-2 2 fsdp.sharding_strategy=NO_SHARD optim.name=adamw8bit \
  "optim.options={min_8bit_size: 64}"
case_ hybrid-4 4 fsdp.sharding_strategy=HYBRID_SHARD fsdp.hybrid_shard_size=2
case_ lora-2 2 "${LORA[@]}"

# full-2-ib's checkpoint at step 2, resumed to step 4: its steps 3 and 4
run res "${ONE[@]}" "${IB[@]}" checkpoint.resume="$TMP/full-2-ib/ck/step-000002" \
  -- --nproc-per-node 2 || fail "resumed run"
grep -q "resumed from" "$TMP/res.log" || fail "res did not resume"
mkdir -p "$TMP/straight" # the straight run's steps 3 and 4
grep -E '"step":(3|4),' "$TMP/full-2-ib/metrics.jsonl" >"$TMP/straight/metrics.jsonl"
$CMP "$TMP/straight" "$TMP/res" --rtol 0 --keys loss,eval_loss,grad_norm || fail "resume differs"

# refuse NAME WHAT overrides...: train and plan exit non-zero with one line
refuse() {
  local name=$1 what=$2
  shift 2
  run "no-$name" "${IB[@]}" "$@" && fail "$name: in_backward was not refused"
  grep -q "optim.in_backward cannot be honoured: $what" "$TMP/no-$name.log" ||
    fail "$name: no refusal line naming '$what'"
  [ "$(grep -c "optim.in_backward" "$TMP/no-$name.log")" = 1 ] || fail "$name: not one line"
  [ -e "$TMP/no-$name/metrics.jsonl" ] && grep -q '"step"' "$TMP/no-$name/metrics.jsonl" &&
    fail "$name: trained a step before refusing"
  "$FSDPC" plan "$CFG" "${IB[@]}" "$@" --world 2 >"$TMP/no-$name.plan.log" 2>&1 &&
    fail "$name: plan did not refuse"
  grep -q "optim.in_backward cannot be honoured: $what" "$TMP/no-$name.plan.log" ||
    fail "$name: plan's refusal line"
  echo "refused $name: $(grep -m1 "cannot be honoured" "$TMP/no-$name.log")"
}
refuse clip "clipping" train.global_batch_size=0 # tiny.yaml clips at 1.0
refuse accum "gradient accumulation (2 micro-batches a step)" train.max_grad_norm=0 \
  train.global_batch_size=0 train.grad_accum_steps=2
refuse offload "fsdp.cpu_offload" train.max_grad_norm=0 train.global_batch_size=0 \
  fsdp.cpu_offload=true
refuse optim-offload "fsdp.offload.optimizer" train.max_grad_norm=0 train.global_batch_size=0 \
  fsdp.offload.optimizer=true
echo "PASS"
