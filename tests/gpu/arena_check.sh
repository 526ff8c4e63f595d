#!/bin/bash
# Issue 32's GPU acceptance on one GPU (an H200), in one call: the plan is a
# promise. For three rows,
#   1b       configs/bench/llama3-1b-base.yaml, micro-batch 4
#   8b-lora  configs/llama3-8b-lora.yaml (r 16, checkpointing), micro-batch 2
#   8b-off   configs/bench/llama3-8b-base.yaml, checkpointing, micro-batch 1,
#            adamw8bit with fsdp.offload.optimizer (the 8B offload row)
# it asks `fsdpc plan --json` for the row's device memory (reserved_bytes:
# the arena + the CUDA runtime outside it), has a helper process hold the rest
# of the card with a torch tensor so that the free memory is
#   plan + 2%  -> the run must train STEPS steps, and the arena it reserves
#                 (rank0.json reserved_bytes) must be within 2% of the plan's;
#   plan - 5%  -> the run must be refused before step 1, in one line that
#                 says "does not fit" with the planner's figures;
# and prints each run's tokens/s (median over the steps after the second).
# With BASE (a second carry, e.g. of main's build) the same rows also run
# with that build, on the whole card, for the speed comparison (within 2%).
#
#   here:   BUILD=$PWD/build-cuda bash scripts/gpu/pack_train_carry.sh .carry/arena
#   device: bash tests/gpu/arena_check.sh .carry/arena [BASE=.carry/base] (repo root)
# Env: ROWS (default "1b 8b-lora 8b-off"), STEPS (default 8), BASE.
# Prints "CHECK <row> <what>: PASS|FAIL ..." lines and "RESULT" lines; exits 1
# on any failure. Logs, plans and metrics in $OUT.
set -u
CARRY=$(cd "${1:?usage: arena_check.sh CARRY_DIR}" && pwd)
. "$CARRY/carry_env.sh" # C, OUT, B, F; LD_LIBRARY_PATH
export FSDPC_PLUGIN_PATH=$B/plugins PYTHONUNBUFFERED=1
ROWS=${ROWS:-1b 8b-lora 8b-off}
STEPS=${STEPS:-8}
W=$(mktemp -d)
HOLD=""
trap '[ -n "$HOLD" ] && kill $HOLD 2>/dev/null; rm -rf "$W"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
$F data synth --task copy --n 100000 --out "$W/copy.tok" >/dev/null
FAILS=0
check() { # row what ok detail
  if [ "$3" = 1 ]; then echo "CHECK $1 $2: PASS $4"; else echo "CHECK $1 $2: FAIL $4"; FAILS=$((FAILS + 1)); fi
}

row_args() { # the config and overrides of a row
  local common="data.train=$W/copy.tok train.log_every=1 train.eval_every=0 train.max_steps=$STEPS"
  case $1 in
  1b) echo "configs/bench/llama3-1b-base.yaml $common train.micro_batch_size=4 train.global_batch_size=4" ;;
  8b-lora) echo "configs/llama3-8b-lora.yaml $common train.micro_batch_size=2 train.global_batch_size=2 train.generate_prompts=[]" ;;
  8b-off) echo "configs/bench/llama3-8b-base.yaml $common train.micro_batch_size=1 train.global_batch_size=1 fsdp.activation_checkpointing=true fsdp.offload.optimizer=true optim.name=adamw8bit" ;;
  esac
}

# holds the card's memory until `free` bytes are left (a torch tensor in a
# process of its own, as another job would); prints the free bytes reached
hold() {
  python3 -u - "$1" <<'PY' &
import sys, time, torch
target = int(sys.argv[1])
torch.cuda.init()
held = []
for _ in range(4):  # the context itself takes some: measure, hold, measure again
    free, total = torch.cuda.mem_get_info()
    if free <= target + (16 << 20):
        break
    held.append(torch.empty(free - target, dtype=torch.uint8, device="cuda"))
free, total = torch.cuda.mem_get_info()
print(f"HOLD free {free} target {target} ({free / target - 1:+.3%})", flush=True)
while True:
    time.sleep(3600)
PY
  HOLD=$!
  for _ in $(seq 1 120); do # until it reports
    sleep 1
    grep -q "^HOLD" "$W/hold.out" 2>/dev/null && break
  done
}
unhold() {
  [ -n "$HOLD" ] && kill $HOLD 2>/dev/null && wait $HOLD 2>/dev/null
  HOLD=""
  sleep 2
}

# the largest device memory an fsdpc process used while the sampler ran (MiB)
sampler_on() {
  (while :; do
    nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader,nounits |
      grep -i fsdpc | awk -F, '{print $3 + 0}'
    sleep 1
  done) >"$W/used.txt" 2>/dev/null &
  SAMPLER=$!
}
sampler_off() {
  kill "$SAMPLER" 2>/dev/null
  wait "$SAMPLER" 2>/dev/null
  USED_MIB=$(sort -n "$W/used.txt" | tail -1)
  USED_MIB=${USED_MIB:-0}
}

tok_s() { # metrics.jsonl -> median tokens/s over steps > 2
  python3 - "$1" <<'PY'
import json, statistics, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if "step" in r]
st = [r["step_s"] for r in rows if r["step"] > 2] or [r["step_s"] for r in rows]
print(f"{rows[-1]['tokens'] / statistics.median(st):.0f}")
PY
}

for row in $ROWS; do
  echo "== $row ($SECONDS s)"
  args=$(row_args "$row")
  # shellcheck disable=SC2086
  $F plan $args --json >"$OUT/$row.plan.json" 2>"$OUT/$row.plan.log"
  read -r PLAN ARENA < <(python3 -c "
import json, sys
r = [x for x in json.load(open('$OUT/$row.plan.json')) if x['config']][0]
print(int(r['reserved_bytes']), int(r['arena_bytes']))") || { check "$row" plan 0 "(no plan: $(tail -1 "$OUT/$row.plan.log"))"; continue; }
  echo "plan: device $((PLAN >> 20)) MiB, arena $((ARENA >> 20)) MiB"

  # plan + 2%: trains, and reserves what the plan says
  hold $((PLAN + PLAN / 50)) >"$W/hold.out"
  cat "$W/hold.out"
  sampler_on
  # shellcheck disable=SC2086
  timeout 300 $F train $args log.dir="$W/$row" >"$OUT/$row.log" 2>&1
  rc=$?
  sampler_off
  unhold
  grep -E "memory plan|error|does not fit" "$OUT/$row.log" | head -3
  check "$row" "fits at plan+2%" $([ $rc = 0 ] && echo 1 || echo 0) "(exit $rc)"
  if [ $rc = 0 ]; then
    cp "$W/$row/metrics.jsonl" "$OUT/$row.metrics.jsonl"
    cp "$W/$row/rank0.json" "$OUT/$row.rank0.json"
    RES=$(python3 -c "import json; print(int(json.load(open('$W/$row/rank0.json'))['reserved_bytes']))")
    ok=$(python3 -c "print(1 if abs($RES - $ARENA) <= 0.02 * $ARENA else 0)")
    check "$row" "reserved within 2% of the plan" "$ok" \
      "(reserved $((RES >> 20)) MiB, planned arena $((ARENA >> 20)) MiB)"
    # the process's device memory (nvidia-smi) less the arena: what lies
    # outside the plan, against the plan's estimate of it (plan - arena)
    echo "RESULT $row new tok_s $(tok_s "$W/$row/metrics.jsonl") reserved_mib $((RES >> 20))" \
      "plan_mib $((PLAN >> 20)) arena_mib $((ARENA >> 20)) process_mib $USED_MIB" \
      "outside_mib $((USED_MIB - (ARENA >> 20))) planned_outside_mib $(((PLAN - ARENA) >> 20))"
  fi

  # plan - 5%: refused before step 1, in one line
  hold $((PLAN - PLAN / 20)) >"$W/hold.out"
  cat "$W/hold.out"
  # shellcheck disable=SC2086
  timeout 120 $F train $args log.dir="$W/$row-refused" >"$OUT/$row-refused.log" 2>&1
  rc=$?
  unhold
  msg=$(grep "does not fit" "$OUT/$row-refused.log" | head -1)
  echo "$msg"
  stepped=$(grep -c "^step 1/" "$OUT/$row-refused.log")
  check "$row" "refused at plan-5%" $([ $rc != 0 ] && [ -n "$msg" ] && [ "$stepped" = 0 ] && echo 1 || echo 0) \
    "(exit $rc, steps run: $stepped)"

  # the build before the change, on the whole card, for the speed figure
  if [ -n "${BASE:-}" ]; then
    tar xf "$BASE/build.tar.xz" -C /
    BB=$(cat "$BASE/build_dir")
    # shellcheck disable=SC2086
    timeout 300 env LD_LIBRARY_PATH=/tmp/rt:$BB/lib FSDPC_PLUGIN_PATH=$BB/plugins $BB/bin/fsdpc \
      train $args log.dir="$W/$row-base" >"$OUT/$row-base.log" 2>&1
    rc=$?
    ts=""
    [ -f "$W/$row-base/metrics.jsonl" ] && ts=$(tok_s "$W/$row-base/metrics.jsonl")
    echo "RESULT $row base tok_s $ts exit $rc"
  fi
done
echo "arena_check: $FAILS failed check(s) ($SECONDS s)"
[ $FAILS = 0 ]
