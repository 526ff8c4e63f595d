#!/bin/bash
# Issue 33 on one GPU in one device call: a GPU job that fails ends, names
# the cause and frees the GPU. (Four GPUs, two nodes: nodes.sh 2 fail.)
#   bash scripts/gpu/carry.sh /work/main/.carry/NAME       (here, CUDA build)
#   OUT=$OUT bash .carry/NAME/fail.sh                     (GPU host, carry .carry/NAME)
# One GPU (two ranks cannot share it: NCCL refuses a communicator with two
# ranks on one device, so the NCCL cases need two GPUs):
#   refused  the Llama 2 70B shape at world 1 (does not fit one GPU): the
#            memory plan's one-line refusal, exit 1 within 10 s
#   oom      the same with fsdp.fit_check=false: a real out of memory
#            reserving the arena; the rank's error line, exit 1 within 10 s
#            of the first "out of memory" line
#   oom_fault FSDPC_FAULT=alloc=3 (a small model): out of memory for a
#            step's buffer at step 3, exit 1 within 10 s
#   kernel   FSDPC_FAULT=kernel=3: a kernel that traps at step 3 (a sticky
#            device fault): an error line, and exit 1 within 10 s of the fault
# With 2 GPUs or more also world 2 over NCCL (non-blocking communicators, the
# watchdog's abort), each bounded the same way and naming the cause:
#   nccl_oom   FSDPC_FAULT=rank=1,alloc=3: rank 1 out of memory
#   nccl_kill  kill -9 of rank 1 mid-training
#   nccl_hang  FSDPC_FAULT=rank=1,hang=60: rank 1 never reaches collective 60
#              (collectives.timeout_s=5: end within 10 s of the stall)
# After each case nvidia-smi must list no fsdpc process. Prints PASS/FAIL
# lines and "fail.sh: N failed check(s)"; exits 1 when any failed. Under a
# minute on one H200.
. "$(dirname "$0")/carry_env.sh" # C, OUT, B, F; LD_LIBRARY_PATH
export FSDPC_PLUGIN_PATH=$B/plugins
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
NGPU=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
W=$(mktemp -d)
$F data synth --task copy --n 20000 --out "$W/copy.tok" >/dev/null || { echo "FAIL data synth"; exit 1; }
. "$C/lib/fail_yaml.sh"
fail_yaml "$W"
FAILS=0
pass() { echo "PASS $*" | tee -a "$OUT/checks.txt"; }
fail() { echo "FAIL $*" | tee -a "$OUT/checks.txt"; FAILS=$((FAILS + 1)); }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# start NAME ENV... -- ARGS...: fsdpc train in the background (PID in P)
start() {
  local name=$1
  shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" "$F" train "$@" log.dir="$W/$name" >"$OUT/$name.log" 2>&1 &
  P=$!
}
# ended NAME PATTERN BOUND_S WANT_RC: waits for PATTERN in the log (the
# fault), then for the process; checks the bound after it, the exit code,
# an error line, and that the GPU holds no fsdpc process afterwards.
ended() {
  local name=$1 pat=$2 bound=$3 want=$4 t0="" t1
  [ -z "$pat" ] && t0=$(now_ms) # the fault is now
  for _ in $(seq 6000); do
    [ -n "$t0" ] && break
    grep -q -- "$pat" "$OUT/$name.log" && { t0=$(now_ms); break; }
    kill -0 $P 2>/dev/null || break
    sleep 0.1
  done
  [ -z "$t0" ] && grep -q -- "$pat" "$OUT/$name.log" && t0=$(now_ms)
  if [ -z "$t0" ]; then
    kill -KILL $P 2>/dev/null
    fail "$name: no '$pat' in the log (see $name.log)"
    return
  fi
  while kill -0 $P 2>/dev/null && [ $(($(now_ms) - t0)) -lt $((bound * 1000 + 20000)) ]; do sleep 0.1; done
  t1=$(now_ms)
  if kill -0 $P 2>/dev/null; then
    fail "$name: still running $(((t1 - t0) / 1000)) s after '$pat'"
    kill -KILL $P
    wait $P 2>/dev/null
    return
  fi
  wait $P
  local rc=$? dt
  dt=$(awk -v d=$((t1 - t0)) 'BEGIN { printf "%.1f", d / 1000 }')
  local line
  line=$(grep -E "error: " "$OUT/$name.log" | tail -1 | cut -c1-220)
  sleep 1
  local left
  left=$(nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader | grep -c fsdpc)
  if [ "$rc" = "$want" ] && [ -n "$line" ] && [ "$left" = 0 ] &&
    awk -v d="$dt" -v b="$bound" 'BEGIN { exit !(d <= b) }'; then
    pass "$name: exit $rc $dt s after the fault; no fsdpc process on the GPUs; last line: $line"
  else
    fail "$name: exit $rc (want $want) $dt s after the fault (bound $bound s), $left fsdpc process(es) left on the GPUs; last line: '$line'"
  fi
}

# ---- one GPU -----------------------------------------------------------------
# The Llama 2 70B shape (lib/fail_yaml.sh): about 1.1 TB of fp32 shards
# and optimizer state at world 1. As configured, the memory plan refuses it
# before any work; with fsdp.fit_check=false it runs past the planner and
# runs out of device memory for real, reserving its arena.
start refused CUDA_VISIBLE_DEVICES=0 -- "$W/70b.yaml"
ended refused "does not fit GPU 0" 10 1
start oom CUDA_VISIBLE_DEVICES=0 -- "$W/70b.yaml" fsdp.fit_check=false
ended oom "out of memory allocating .* for the planned arena" 10 1
# out of memory in the middle of a step: the allocation fault injection
start oom_fault CUDA_VISIBLE_DEVICES=0 FSDPC_FAULT=alloc=3 -- "$W/fail.yaml"
ended oom_fault "out of memory" 10 1

start kernel CUDA_VISIBLE_DEVICES=0 FSDPC_FAULT=kernel=3 -- "$W/fail.yaml"
ended kernel "fault injection: a trapping kernel at step 3" 10 1

# ---- two GPUs: NCCL ---------------------------------------------------------------
if [ "$NGPU" -ge 2 ]; then
  start nccl_oom CUDA_VISIBLE_DEVICES=0,1 FSDPC_FAULT=rank=1,alloc=3 -- "$W/fail.yaml" --nproc-per-node 2
  ended nccl_oom "fault injection: device allocation 3 on rank 1 fails" 10 1
  grep -q "first failure: rank 1: .*out of memory" "$OUT/nccl_oom.log" &&
    pass "nccl_oom: the launcher names rank 1's out of memory" || fail "nccl_oom: the launcher does not name rank 1's out of memory"

  start nccl_kill CUDA_VISIBLE_DEVICES=0,1 -- "$W/fail.yaml" --nproc-per-node 2
  for _ in $(seq 600); do grep -q "step 5/" "$OUT/nccl_kill.log" && break; sleep 0.1; done
  victim=$(pgrep -P $P | sed -n 2p)
  echo "   nccl_kill: kill -9 of rank 1 (pid $victim)"
  kill -9 "$victim"
  ended nccl_kill "" 10 137

  start nccl_hang CUDA_VISIBLE_DEVICES=0,1 FSDPC_FAULT=rank=1,hang=60 -- "$W/fail.yaml" \
    --nproc-per-node 2 collectives.timeout_s=5
  ended nccl_hang "rank 1 stalls before collective seq 60" 10 1
  grep -q "rank 1 never reached collective seq" "$OUT/nccl_hang.log" &&
    pass "nccl_hang: rank 1 is named as never reaching its collective" ||
    fail "nccl_hang: rank 1 is not named as never reaching its collective"
else
  echo "   (one GPU: the NCCL cases need two)"
fi

rm -rf "$W"
echo "fail.sh: $FAILS failed check(s)" | tee -a "$OUT/checks.txt"
[ $FAILS = 0 ]
