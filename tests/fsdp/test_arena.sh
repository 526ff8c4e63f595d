#!/bin/bash
# Issue 32's CPU acceptance: one planned arena per rank, and the planner's
# numbers are the run's. At world 1, 2 and 4, under every strategy, plain
# and with LoRA + activation checkpointing + fsdp.offload.optimizer, and
# with fsdp.cpu_offload + fsdp.keep_params (the host worker's schedule on the
# CPU), and the LoRA runs again with quantization.method nf4 (QLoRA's 4-bit
# base), each rank's run reserves one arena (rankN.json arena_bytes):
#   - the largest rank's equals the arena `fsdpc plan --json` gives for the
#     same config (the same code lays it out: byte for byte);
#   - it is within 1% of the planner's peak (the sum of what is live at
#     once: the layout shares bytes between buffers that never live together);
#   - the run's tracked peak equals the planner's.
# The losses stay what the numerics contract says: every plain run within
# 1e-5 of world 1, the offload runs bit for bit equal to the plain run of
# their world and strategy.
source "$(dirname "$0")/../train/common.sh"
CMP="python3 $FSDPC_SOURCE_DIR/tests/train/compare_runs.py"
LORA=(peft.method=lora peft.r=4 peft.alpha=8 "peft.target_modules=[q_proj, v_proj, down_proj]"
  fsdp.activation_checkpointing=true fsdp.offload.optimizer=true fsdp.offload.buffer_mib=0.05)
OFF=(fsdp.cpu_offload=true fsdp.keep_params=first)

# case NAME WORLD overrides...: trains 2 steps, then checks its arena and peak
# against the planner's for the same config and world
case_() {
  local name=$1 world=$2
  shift 2
  run "$name" train.max_steps=2 train.eval_every=0 schedule.warmup_steps=1 "$@" -- --nproc-per-node "$world" ||
    fail "$name: training failed"
  "$FSDPC" plan "$CFG" train.max_steps=2 train.eval_every=0 schedule.warmup_steps=1 "$@" --world "$world" --json \
    >"$TMP/$name.plan.json" 2>"$TMP/$name.plan.log" || fail "$name: fsdpc plan failed"
  python3 - "$TMP/$name" "$TMP/$name.plan.json" "$world" <<'PY' || fail "$name: arena against the plan"
import json, sys
d, plan, world = sys.argv[1], json.load(open(sys.argv[2])), int(sys.argv[3])
row = [r for r in plan if r["config"]]
assert len(row) == 1, "no single config row in the plan"
row = row[0]
ranks = [json.load(open(f"{d}/rank{r}.json")) for r in range(world)]
arena = max(r["arena_bytes"] for r in ranks)
peak = max(r["peak_bytes"]["total"] for r in ranks)
want, want_peak = row["arena_bytes"], row["peak_bytes"]["total"]
assert arena == want, f"arena {arena} != planned {want}"
assert abs(arena - want_peak) <= 0.01 * want_peak, f"arena {arena} vs planned peak {want_peak}"
assert peak == want_peak, f"tracked peak {peak} != planned {want_peak}"
print(f"{d.split('/')[-1]}: arena {arena} = plan, peak {want_peak} ({arena / want_peak - 1:+.3%})")
PY
}

plain=()
for world in 1 2 4; do
  for st in FULL_SHARD SHARD_GRAD_OP NO_SHARD HYBRID_SHARD; do
    hy=()
    [ "$st" = HYBRID_SHARD ] && hy=(fsdp.hybrid_shard_size=$((world > 1 ? 2 : 1)))
    # at world 1 every strategy is one shard group of one: one run stands for them
    [ "$world" = 1 ] && [ "$st" != FULL_SHARD ] && continue
    # at world 2 HYBRID_SHARD's groups of 2 are FULL_SHARD
    [ "$world" = 2 ] && [ "$st" = HYBRID_SHARD ] && continue
    case_ "$st-$world" "$world" fsdp.sharding_strategy=$st "${hy[@]}"
    plain+=("$TMP/$st-$world")
    case_ "$st-$world-lora" "$world" fsdp.sharding_strategy=$st "${hy[@]}" "${LORA[@]}"
    # QLoRA (issue 37): the NF4 base's shards and gathered image, at shard
    # groups of 1, 2 and 4 and with replicas (the others add no NF4 layout)
    case $st in FULL_SHARD | HYBRID_SHARD)
      case_ "$st-$world-nf4" "$world" fsdp.sharding_strategy=$st "${hy[@]}" "${LORA[@]}" quantization.method=nf4
      ;;
    esac
  done
  case_ "off-$world" "$world" "${OFF[@]}"
  $CMP "$TMP/FULL_SHARD-$world" "$TMP/off-$world" --rtol 0 --keys loss,grad_norm ||
    fail "cpu_offload at world $world differs from the plain run"
done
$CMP "$TMP/FULL_SHARD-1" "${plain[@]}" --keys loss,grad_norm ||
  fail "a strategy or world left the numerics contract"
echo "PASS"
