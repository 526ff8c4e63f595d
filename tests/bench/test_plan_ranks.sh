#!/usr/bin/env bash
# The planner against measured memory on the CPU at 1, 2 and 4 ranks under
# every strategy (and FULL_SHARD with gradient accumulation, with and
# without no_sync, with fsdp.offload.optimizer (fp32 AdamW and adamw8bit)
# and fsdp.cpu_offload): the
# predicted per-rank host memory (on the CPU: the tracked peak) and the
# per-rank total peak is within 5% of the measured one (max over ranks), and
# the shard bytes and collective bytes per step agree exactly. Both come from
# the same step program (core/src/fsdp/program.h): the engine executes it,
# the planner costs it.
set -u
: "${FSDPC:?FSDPC must point at the fsdpc executable}"
src=${FSDPC_SOURCE_DIR:?}
dir=$(mktemp -d "${FSDPC_BINARY_DIR:-/tmp}/planranks-XXXXXX")
trap 'rm -rf "$dir"' EXIT
fails=0
"$FSDPC" data synth --task qa --out "$dir/qa.tok" >/dev/null 2>&1 || { echo "FAIL: data synth"; exit 1; }
for n in 1 2 4; do
  cat >"$dir/spec$n.yaml" <<YAML
base: $src/configs/tiny-cpu.yaml
set: {train.threads: 1, train.eval_every: 0, data.eval_fraction: 0, schedule.warmup_steps: 1,
      data.train: $dir/qa.tok, data.seq_len: 32, train.micro_batch_size: 4}
matrix:
  fsdp.sharding_strategy:
    - FULL_SHARD
    - SHARD_GRAD_OP
    - NO_SHARD
    - {name: HYBRID_SHARD, fsdp.sharding_strategy: HYBRID_SHARD, fsdp.hybrid_shard_size: $(( n > 1 ? 2 : 1 ))}
    - {name: FULL_SHARD/accum2, fsdp.sharding_strategy: FULL_SHARD, train.grad_accum_steps: 2}
    - {name: FULL_SHARD/no_sync, fsdp.sharding_strategy: FULL_SHARD, train.grad_accum_steps: 2, fsdp.no_sync: true}
    - {name: FULL_SHARD/offload-optim, fsdp.sharding_strategy: FULL_SHARD, train.grad_accum_steps: 2, fsdp.offload.optimizer: true, fsdp.offload.buffer_mib: 0.05}
    - {name: FULL_SHARD/cpu_offload, fsdp.sharding_strategy: FULL_SHARD, train.grad_accum_steps: 2, fsdp.cpu_offload: true}
    - {name: FULL_SHARD/offload-optim-8bit, fsdp.sharding_strategy: FULL_SHARD, train.grad_accum_steps: 2, fsdp.offload.optimizer: true, fsdp.offload.buffer_mib: 0.015625, optim.name: adamw8bit}
nproc_per_node: $n
warmup_steps: 1
steps: 1
repeats: 1
timeout_s: 120
YAML
  "$FSDPC" bench "$dir/spec$n.yaml" --out "$dir/out$n" >"$dir/table$n.txt" 2>"$dir/err$n.txt" ||
    { echo "FAIL: bench at $n ranks: $(tail -3 "$dir/err$n.txt")"; fails=$((fails + 1)); continue; }
  python3 "$src/tests/bench/check_bench_plan.py" "$dir/out$n/bench.json" "$n" 9 --host ||
    fails=$((fails + 1))
done
[ "$fails" -eq 0 ] && echo "planner vs measured at 1, 2, 4 ranks: all within 5%"
exit "$fails"
