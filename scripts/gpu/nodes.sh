#!/bin/bash
# Issue 22 in one device call: fsdpc's multi-node path as two "nodes" on one
# host, each a launcher (or a set of ranks) with G GPUs of its own.
#   bash .carry/X/nodes.sh [G] [PARTS]          (GPU host: 2*G GPUs; G=2 on an x4)
#   DEVICE=cpu bash scripts/gpu/nodes.sh 2      (here: Gloo, tiny model, 2 x 2 CPU ranks)
# PARTS (comma list; default hybrid,slurm,torchrun,kill,sameport; fail on its own):
#   hybrid    one node of 2G ranks vs two launchers (--nnodes 2 --node-rank 0|1, each
#             CUDA_VISIBLE_DEVICES of its G GPUs), HYBRID_SHARD with a shard group per
#             node; on GPUs twice: NCCL's default transports and NCCL forced onto
#             sockets (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket,
#             NCCL_SOCKET_IFNAME=lo); losses vs one node (rtol 2e-2 on GPUs, 1e-5 on
#             the CPU), tokens/s per GPU of each
#   slurm     the same 2G ranks started by hand with SLURM's variables (SLURM_PROCID,
#             SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID, SLURM_NNODES, ...), no launcher
#   torchrun  two torchrun agents with a c10d rendezvous endpoint (--no-python fsdpc);
#             without torchrun (this CPU machine) the torchrun environment by hand
#   kill      kill -9 one node's launcher mid-training, each way round: the other
#             node's job must exit within 30 s naming the lost node, leaving no process
#   fail      issue 33: a failing job ends (a small model; on GPUs 2G ranks over NCCL):
#             out of memory on every rank (GPUs: the Llama 2 70B shape; CPU: FSDPC_FAULT=alloc=3)
#             and on rank 1 (FSDPC_FAULT=rank=1,alloc=3), kill -9 and SIGSTOP of rank 1
#             (collectives.timeout_s 10 on GPUs, 3 on the CPU), kill -9 of node 1's launcher
#             and of node 0's (two launchers of G): the launcher(s) end within the bound of
#             docs/dist.md (10 s; the timeout + 5 s; 30 s for a node) with the documented
#             exit code, the last line names the first failure, no pid of the job is
#             left, no process holds a GPU. Under 2 minutes on 4 GPUs.
#   sameport  while a two-node job runs, a second job on its port (one node, and a
#             second "node 1" with another job token) is refused in one line and the
#             first keeps training
# Prints "PASS part: ..." / "FAIL part: ..." lines; exits 1 when any check fails.
# Environment: OUT (default /tmp/out), DEVICE (cuda|cpu), FSDPC (cpu mode; default
# build/bin/fsdpc), STEPS (default 20), MODEL_CFG (GPU timing model; default the 1B
# bench config at micro-batch 2; the tiny model on the CPU).
# shellcheck disable=SC2086,SC2046 # $F is a command, the option strings word lists
# shellcheck disable=SC2154 # p0, p1, tp0, tp1, vp, op and pid_*_N are set through eval
set -u
C=$(cd "$(dirname "$0")" && pwd)
G=${1:-2}
PARTS=${2:-hybrid,slurm,torchrun,kill,sameport}
OUT=${OUT:-/tmp/out}
DEVICE=${DEVICE:-cuda}
STEPS=${STEPS:-20}
mkdir -p "$OUT"
W=$(mktemp -d /tmp/fsdpc-two-nodes.XXXXXX)
# every process of this run carries $W in its command line (log.dir=$W/...)
trap 'pkill -KILL -f "log.dir=$W" 2>/dev/null; rm -rf "$W"' EXIT
if [ "$DEVICE" = cuda ]; then
  . "$C/carry_env.sh" # B, F; LD_LIBRARY_PATH
  export FSDPC_PLUGIN_PATH=$B/plugins
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  nvidia-smi --query-gpu=name,memory.total --format=csv | tee "$OUT/gpu.txt"
  RTOL=2e-2
else
  F=$(realpath "${FSDPC:-build/bin/fsdpc}")
  RTOL=1e-5
fi
CMP=$C/compare_runs.py
[ -f "$CMP" ] || CMP=$(cd "$C/../.." && pwd)/tests/train/compare_runs.py
NP=$((2 * G))
FAILS=0
pass() { echo "PASS $*" | tee -a "$OUT/checks.txt"; }
fail() { echo "FAIL $*" | tee -a "$OUT/checks.txt"; FAILS=$((FAILS + 1)); }
has() { case ",$PARTS," in *",$1,"*) return 0 ;; esac; return 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# free_port2: a port P with P + 1 free too (torchrun's workers: the agent
# serves P, fsdpc's store takes P + 1; a busy P + 1 failed rank 0 and left the
# other ranks waiting for its store)
free_port2() {
  python3 - <<'PY'
import socket
for _ in range(100):
    a = socket.socket(); a.bind(("127.0.0.1", 0)); p = a.getsockname()[1]
    b = socket.socket()
    try:
        b.bind(("127.0.0.1", p + 1))
    except OSError:
        continue
    print(p)
    break
PY
}
gpus_of() { # node -> "a,b" (its G GPUs)
  seq -s, $(($1 * G)) $(($1 * G + G - 1))
}
echo "nodes.sh: 2 nodes x $G, parts $PARTS, device $DEVICE, $(date -u +%FT%TZ)" | tee "$OUT/run.txt"

$F data synth --task qa --n 20000 --seed 5 --out "$W/qa.tok" >/dev/null || { echo "data synth failed"; exit 1; }
if [ "$DEVICE" = cuda ]; then
  $F data synth --task copy --n 200000 --out "$W/copy.tok" >/dev/null
  CFG=${MODEL_CFG:-configs/bench/llama3-1b-base.yaml}
  MODEL=(data.train="$W/copy.tok" train.micro_batch_size=2)
else
  cat >"$W/tiny.yaml" <<YAML
model: {vocab_size: 259, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2,
        num_attention_heads: 2, num_key_value_heads: 1, max_position_embeddings: 32}
data: {train: $W/qa.tok, seq_len: 32}
attention: {impl: naive}
optim: {name: adamw, lr: 1.0e-3}
train: {micro_batch_size: 2, threads: 1, eval_every: 0}
YAML
  CFG=$W/tiny.yaml
  # a rank left waiting for a store that never comes gives up in 60 s, inside
  # ctest's 120 s, so that a failure prints its logs instead of a timeout
  MODEL=(collectives.timeout_s=60)
fi
COMMON=("train.max_steps=$STEPS" train.log_every=1 "train.global_batch_size=$((NP * 2))"
  fsdp.sharding_strategy=HYBRID_SHARD "fsdp.hybrid_shard_size=$G")

# by_hand NAME VARS: the 2G ranks started without a launcher, each with the
# environment `VARS NODE LOCAL` prints (NAME=VALUE words), logs NAME-rankR.log,
# log.dir W/NAME; waits for them all: 0 when every rank exits 0
by_hand() {
  local name=$1 vars=$2 n l p pids=() r=0
  for n in 0 1; do
    for l in $(seq 0 $((G - 1))); do
      env $($vars "$n" "$l") timeout 300 $F train "$CFG" "${MODEL[@]}" "${COMMON[@]}" \
        log.dir="$W/$name" >"$OUT/$name-rank$((n * G + l)).log" 2>&1 &
      pids+=($!)
    done
  done
  for p in "${pids[@]}"; do wait "$p" || r=1; done
  return $r
}

# two_nodes NAME ENV... : two launchers on a free port, waited for.
two_nodes() {
  local name=$1
  shift
  local port
  port=$(free_port)
  for n in 0 1; do
    local cvd=()
    [ "$DEVICE" = cuda ] && cvd=(CUDA_VISIBLE_DEVICES="$(gpus_of $n)")
    env "${cvd[@]}" "$@" FSDPC_JOB_TOKEN="$name-$$" timeout 300 $F train "$CFG" "${MODEL[@]}" "${COMMON[@]}" \
      log.dir="$W/$name-n$n" --nnodes 2 --node-rank $n --nproc-per-node "$G" --master-addr 127.0.0.1 \
      --master-port "$port" >"$OUT/$name-node$n.log" 2>&1 &
    eval "local p$n=\$!"
  done
  wait "$p0"
  local r0=$?
  wait "$p1"
  local r1=$?
  mkdir -p "$W/$name"
  cp "$W/$name-n0/metrics.jsonl" "$W/$name/metrics.jsonl" 2>/dev/null
  cp "$W/$name-n0/metrics.jsonl" "$OUT/$name.metrics.jsonl" 2>/dev/null
  [ $r0 = 0 ] && [ $r1 = 0 ]
}
# tokps DIR: median tokens/s per rank over steps after the 4th
tokps() {
  python3 - "$1/metrics.jsonl" "$NP" <<'PY'
import json, statistics, sys
try:
    rows = [r for r in map(json.loads, open(sys.argv[1])) if "step" in r]
    s = [r["tokens"] / r["step_s"] for r in rows if r["step"] > 4] or [0]
    print(f"{statistics.median(s) / int(sys.argv[2]):,.0f}")
except Exception as e:
    print(f"n/a ({e})")
PY
}
agree() { # NAME: losses of NAME vs the one-node run
  local out
  if out=$(python3 "$CMP" "$W/one" "$W/$1" --rtol "$RTOL" --keys loss 2>&1); then
    pass "$2: $(echo "$out" | tail -1 | sed "s|$W/||"); tokens/s per rank $(tokps "$W/$1") (one node: $(tokps "$W/one"))"
  else
    fail "$2: $(echo "$out" | tail -2 | tr '\n' ' ' | sed "s|$W/||g")"
  fi
}

if has hybrid || has slurm || has torchrun; then
  cvd=()
  [ "$DEVICE" = cuda ] && cvd=(CUDA_VISIBLE_DEVICES="$(seq -s, 0 $((NP - 1)))")
  env "${cvd[@]}" timeout 300 $F train "$CFG" "${MODEL[@]}" "${COMMON[@]}" log.dir="$W/one" \
    --nproc-per-node "$NP" >"$OUT/one-node.log" 2>&1 || fail "one node: exit $? (see one-node.log)"
  cp "$W/one/metrics.jsonl" "$OUT/one-node.metrics.jsonl" 2>/dev/null
  grep -m1 "fsdp: HYBRID" "$OUT/one-node.log"
fi

if has hybrid; then
  if two_nodes two; then agree two "hybrid (two launchers, default transport)"; else fail "hybrid: launchers failed (two-node*.log)"; fi
  grep -m1 "fsdp: HYBRID" "$OUT/two-node0.log"
  if [ "$DEVICE" = cuda ]; then
    # shellcheck disable=SC2054 # INIT,NET is one value
    sock=(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo
      NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET)
    if two_nodes sock "${sock[@]}"; then agree sock "hybrid (two launchers, NCCL socket transport)"; else
      fail "hybrid socket: launchers failed (sock-node*.log)"
    fi
    # what NCCL says it used (the socket run must name NET/Socket, not P2P/SHM)
    grep -h -m3 -E "NET/Socket|Using network|via P2P|via SHM" "$OUT/sock-node0.log" | sed 's/^/   nccl: /'
  fi
fi

if has slurm; then
  port=$(free_port)
  slurm_vars() { # NODE LOCAL
    [ "$DEVICE" = cuda ] && echo "CUDA_VISIBLE_DEVICES=$(gpus_of "$1")"
    echo "SLURM_JOB_ID=4242$$ SLURM_PROCID=$(($1 * G + $2)) SLURM_NTASKS=$NP SLURM_LOCALID=$2" \
      "SLURM_NTASKS_PER_NODE=$G SLURM_NODEID=$1 SLURM_NNODES=2 SLURM_JOB_NODELIST=localhost" \
      "MASTER_ADDR=127.0.0.1 MASTER_PORT=$port"
  }
  by_hand slurm slurm_vars
  rc=$?
  if [ $rc = 0 ]; then agree slurm "slurm (SLURM_* by hand, no launcher)"; else fail "slurm: a rank failed (slurm-rank*.log)"; fi
  cp "$W/slurm/metrics.jsonl" "$OUT/slurm.metrics.jsonl" 2>/dev/null
fi

if has torchrun; then
  port=$(free_port2)
  if command -v torchrun >/dev/null; then
    for n in 0 1; do
      cvd=()
      [ "$DEVICE" = cuda ] && cvd=(CUDA_VISIBLE_DEVICES="$(gpus_of $n)")
      env "${cvd[@]}" timeout 300 torchrun --nnodes 2 --nproc-per-node "$G" --rdzv-backend c10d \
        --rdzv-endpoint 127.0.0.1:$port --rdzv-id fsdpc-$$ --no-python $F train "$CFG" "${MODEL[@]}" \
        "${COMMON[@]}" log.dir="$W/torchrun" >"$OUT/torchrun-node$n.log" 2>&1 &
      eval "tp$n=\$!"
    done
    rc=0
    wait "$tp0" || rc=1
    wait "$tp1" || rc=1
    what="torchrun (two agents, c10d rendezvous at 127.0.0.1:$port)"
  else
    # torchrun's worker environment, set by hand: the agent serves MASTER_PORT
    # (TORCHELASTIC_USE_AGENT_STORE), so fsdpc's store takes MASTER_PORT + 1.
    torchrun_vars() { # NODE LOCAL
      echo "RANK=$(($1 * G + $2)) WORLD_SIZE=$NP LOCAL_RANK=$2 LOCAL_WORLD_SIZE=$G GROUP_RANK=$1" \
        "MASTER_ADDR=127.0.0.1 MASTER_PORT=$port TORCHELASTIC_USE_AGENT_STORE=True" \
        "TORCHELASTIC_RUN_ID=fsdpc-$$"
    }
    by_hand torchrun torchrun_vars
    rc=$?
    what="torchrun's environment by hand (no torchrun on this machine)"
  fi
  if [ $rc = 0 ]; then agree torchrun "$what"; else fail "$what: failed (torchrun-*.log)"; fi
  cp "$W/torchrun/metrics.jsonl" "$OUT/torchrun.metrics.jsonl" 2>/dev/null
fi

# start_forever NAME PORT TOKEN NODE...: launchers of a job that trains until stopped
start_forever() {
  local name=$1 port=$2 token=$3
  shift 3
  for n in "$@"; do
    local cvd=()
    [ "$DEVICE" = cuda ] && cvd=(CUDA_VISIBLE_DEVICES="$(gpus_of $n)")
    env "${cvd[@]}" FSDPC_JOB_TOKEN="$token" $F train "$CFG" "${MODEL[@]}" "${COMMON[@]}" \
      train.max_steps=100000000 log.dir="$W/$name-n$n" --nnodes 2 --node-rank "$n" \
      --nproc-per-node "$G" --master-addr 127.0.0.1 --master-port "$port" >"$OUT/$name-node$n.log" 2>&1 &
    eval "pid_${name}_$n=\$!"
  done
}
# shellcheck disable=SC2002 # a missing file counts 0 steps
steps_of() { cat "$W/$1-n0/metrics.jsonl" 2>/dev/null | grep -c '"step"'; }
wait_steps() { # NAME N
  for _ in $(seq 1200); do [ "$(steps_of "$1")" -ge "$2" ] && return 0; sleep 0.1; done
  return 1
}

if has kill; then
  for victim in 1 0; do
    other=$((1 - victim))
    name=kill$victim
    start_forever $name "$(free_port)" "$name-$$" 0 1
    if ! wait_steps $name 3; then
      fail "kill node $victim: the job did not reach 3 steps"
      continue
    fi
    eval "vp=\$pid_${name}_$victim; op=\$pid_${name}_$other"
    t0=$(date +%s.%N)
    kill -9 "$vp"
    wait "$vp" 2>/dev/null
    for _ in $(seq 400); do kill -0 "$op" 2>/dev/null || break; sleep 0.1; done
    dt=$(python3 -c "import time; print(f'{time.time() - $t0:.1f}')")
    if kill -0 "$op" 2>/dev/null; then
      fail "kill node $victim: node $other's launcher still runs 40 s later"
      kill -TERM "$op"
    else
      wait "$op"
      rc=$?
      line=$(grep -h -E "node $victim (of 2|is lost)|node $victim of 2" "$OUT/$name-node$other.log" | tail -1)
      if [ $rc != 0 ] && [ -n "$line" ] && python3 -c "import sys; sys.exit(0 if $dt < 30 else 1)"; then
        pass "kill node $victim: node $other's job exited $rc after $dt s naming node $victim: $(echo "$line" | grep -o "[^;]*node ${victim}[^;]*" | tail -1 | cut -c1-160)"
      else
        fail "kill node $victim: node $other exited $rc after $dt s; naming line: '${line:0:200}'"
      fi
    fi
    sleep 0.5
    if pgrep -f "log.dir=$W/$name-" >/dev/null; then
      fail "kill node $victim: processes left behind: $(pgrep -f "log.dir=$W/$name-" | tr '\n' ' ')"
      pkill -KILL -f "log.dir=$W/$name-"
    fi
  done
fi

if has sameport; then
  port=$(free_port)
  start_forever same "$port" "same-a-$$" 0 1
  if wait_steps same 3; then
    # a one-node job on the same port: refused before any rank starts
    $F train "$CFG" "${MODEL[@]}" train.max_steps=3 log.dir="$W/same-b" --nproc-per-node "$G" \
      --master-port "$port" >"$OUT/same-b.log" 2>&1
    rc=$?
    if [ $rc != 0 ] && grep -q "port $port on this host is in use" "$OUT/same-b.log"; then
      pass "sameport: a second job on port $port is refused: $(grep -m1 "in use" "$OUT/same-b.log" | cut -c1-160)"
    else
      fail "sameport: the second job exited $rc: $(tail -1 "$OUT/same-b.log")"
    fi
    # another job's node 1 (its own token) reaching the first job's store: refused
    cvd=()
    [ "$DEVICE" = cuda ] && cvd=(CUDA_VISIBLE_DEVICES="$(gpus_of 1)")
    env "${cvd[@]}" FSDPC_JOB_TOKEN="same-c-$$" timeout 60 $F train "$CFG" "${MODEL[@]}" "${COMMON[@]}" train.max_steps=3 \
      log.dir="$W/same-c" --nnodes 2 --node-rank 1 --nproc-per-node "$G" --master-addr 127.0.0.1 \
      --master-port "$port" >"$OUT/same-c.log" 2>&1
    rc=$?
    if [ $rc != 0 ] && [ $rc != 124 ]; then
      pass "sameport: another job's node 1 on port $port exits $rc: $(grep -m1 -iE "token|refused|error" "$OUT/same-c.log" | cut -c1-160)"
    else
      fail "sameport: another job's node 1 exited $rc: $(tail -1 "$OUT/same-c.log")"
    fi
    a=$(steps_of same)
    sleep 3
    # shellcheck disable=SC2015 # any of them failing is the failure
    wait_steps same $((a + 2)) && ! grep -q "aborted" "$OUT/same-node0.log" "$OUT/same-node1.log" &&
      pass "sameport: the first job keeps training ($a -> $(steps_of same) steps)" ||
      fail "sameport: the first job stopped or was aborted ($a -> $(steps_of same) steps)"
  else
    fail "sameport: the first job did not reach 3 steps"
  fi
  kill -TERM "$pid_same_0" "$pid_same_1" 2>/dev/null
  wait "$pid_same_0" "$pid_same_1" 2>/dev/null
fi

# ---- fail: issue 33 (issue 41 item 1) ------------------------------------------------
# gpus_busy: processes holding a GPU now (0 on the CPU), polled up to 5 s for
# the driver to release a dead process's context
gpus_busy() {
  [ "$DEVICE" = cuda ] || { echo 0; return; }
  local n
  for _ in $(seq 50); do
    n=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c .)
    [ "$n" = 0 ] && break
    sleep 0.1
  done
  echo "$n"
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# alive PID: it runs (a zombie, dead but not yet reaped by init, does not)
alive() { ps -o stat= -p "$1" 2>/dev/null | grep -qv Z; }
kids_of() { # LAUNCHER N: its N ranks' pids (waits up to 60 s for them)
  local k=""
  for _ in $(seq 600); do
    k=$(pgrep -P "$1" | tr '\n' ' ')
    [ "$(echo $k | wc -w)" -ge "$2" ] && break
    sleep 0.1
  done
  echo $k
}
wait_log() { # FILE PATTERN: 0 once the line is there (up to 120 s)
  for _ in $(seq 1200); do grep -qE -- "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}
# judged NAME LAUNCHER LOG T0 BOUND WANT PATTERN PID...: LAUNCHER ends within
# BOUND s of T0 (ms) with exit WANT, its last line (`fsdpc train: ...`) names
# the first failure (PATTERN, an ERE), none of PID... is left and no process
# holds a GPU. One PASS or FAIL line; whatever is left is killed.
judged() {
  local name=$1 l=$2 log=$3 t0=$4 bound=$5 want=$6 pat=$7
  shift 7
  while kill -0 "$l" 2>/dev/null && [ $(($(now_ms) - t0)) -lt $((bound * 1000 + 15000)) ]; do sleep 0.05; done
  local t1 rc dt left="" busy line
  t1=$(now_ms)
  if kill -0 "$l" 2>/dev/null; then
    fail "fail $name: the launcher still runs $(((t1 - t0) / 1000)) s after the fault (bound $bound s)"
    kill -KILL "$l" "$@" 2>/dev/null
    wait "$l" 2>/dev/null
    return
  fi
  wait "$l"
  rc=$?
  dt=$(awk -v d=$((t1 - t0)) 'BEGIN { printf "%.1f", d / 1000 }')
  for _ in $(seq 20); do # up to 2 s for the ranks of a killed launcher (PDEATHSIG)
    left=""
    for p in "$@"; do alive "$p" && left="$left $p"; done
    [ -z "$left" ] && break
    sleep 0.1
  done
  [ -n "$left" ] && ps -o pid,ppid,stat,etimes,args -p "${left# }" | cut -c1-200 >>"$OUT/left.txt"
  [ -n "$left" ] && kill -KILL $left 2>/dev/null
  busy=$(gpus_busy)
  line=$(grep "^fsdpc train: " "$log" | tail -1)
  if [ "$rc" = "$want" ] && [ -z "$left" ] && [ "$busy" = 0 ] && echo "$line" | grep -qE -- "$pat" &&
    awk -v d="$dt" -v b="$bound" 'BEGIN { exit !(d <= b) }'; then
    pass "fail $name: every process ended $dt s after the fault (bound $bound s), exit $rc, GPUs free: $(echo "$line" | grep -oE -- "$pat.{0,60}" | head -1 | cut -c1-160)"
  else
    fail "fail $name: exit $rc (want $want) after $dt s (bound $bound s), left:${left:- none}, processes on the GPUs: $busy, last line: '${line:0:260}' (want /$pat/)"
  fi
}
# one_job NAME ENV... -- ARGS...: one launcher of NP ranks (FL, FR its pids)
one_job() {
  local name=$1
  shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env "${cvd_all[@]}" "${envs[@]}" $F train "${FMODEL[@]}" log.dir="$W/$name" --nproc-per-node "$NP" \
    --master-port "$(free_port)" "$@" >"$OUT/$name.log" 2>&1 &
  FL=$!
  FR=$(kids_of $FL $NP)
}

if has fail; then
  cvd_all=()
  [ "$DEVICE" = cuda ] && cvd_all=(CUDA_VISIBLE_DEVICES="$(seq -s, 0 $((NP - 1)))")
  if [ "$DEVICE" = cuda ]; then
    # a small model (starts in seconds), and the Llama 2 70B shape, which
    # does not fit 4 H200s: a real out of memory on every rank
    . "$C/lib/fail_yaml.sh"
    fail_yaml "$W"
    FMODEL=("$W/fail.yaml" train.max_steps=100000000)
    OOM_ALL=("$W/70b.yaml")
    STOP_TIMEOUT=10
  else
    FMODEL=("$CFG" train.max_steps=100000000 train.log_every=1 log.progress=off)
    OOM_ALL=("$CFG" train.max_steps=100000000)
    STOP_TIMEOUT=3
  fi
  # out of memory on every rank: the 70B shape on GPUs, the injected
  # allocation failure on the CPU; the first rank to publish is the culprit
  # (exit 1), its line in the launcher's
  oom_env=(FSDPC_FAULT=alloc=3)
  [ "$DEVICE" = cuda ] && oom_env=()
  env "${cvd_all[@]}" "${oom_env[@]}" $F train "${OOM_ALL[@]}" log.dir="$W/oomall" --nproc-per-node "$NP" \
    --master-port "$(free_port)" >"$OUT/fail-oomall.log" 2>&1 &
  FL=$!
  FR=$(kids_of $FL $NP)
  if wait_log "$OUT/fail-oomall.log" "out of (device |host )?memory"; then
    judged oomall $FL "$OUT/fail-oomall.log" "$(now_ms)" 10 1 "first failure: rank [0-9]+: .*out of (device |host )?memory" $FL $FR
  else
    fail "fail oomall: no rank ran out of memory (fail-oomall.log: $(tail -1 "$OUT/fail-oomall.log" | cut -c1-200))"
    kill -KILL $FL $FR 2>/dev/null
  fi
  # out of memory on rank 1 alone (the injected allocation failure)
  one_job oom1 FSDPC_FAULT=rank=1,alloc=3 --
  if wait_log "$OUT/oom1.log" "fault injection: device allocation 3 on rank 1 fails"; then
    judged oom1 $FL "$OUT/oom1.log" "$(now_ms)" 10 1 "first failure: rank 1: .*out of (device |host )?memory" $FL $FR
  else
    fail "fail oom1: the fault did not fire (oom1.log)"
    kill -KILL $FL $FR 2>/dev/null
  fi
  # kill -9 and SIGSTOP of rank 1 once the job trains
  for sig in KILL STOP; do
    name=sig${sig,,}
    extra=()
    [ $sig = STOP ] && extra=("collectives.timeout_s=$STOP_TIMEOUT")
    one_job "$name" -- "${extra[@]}"
    if ! wait_log "$W/$name/metrics.jsonl" '"step"'; then
      fail "fail $name: the job did not train ($name.log)"
      kill -KILL $FL $FR 2>/dev/null
      continue
    fi
    victim=$(echo $FR | cut -d' ' -f2)
    t0=$(now_ms)
    kill -$sig "$victim"
    if [ $sig = KILL ]; then
      judged "$name" $FL "$OUT/$name.log" "$t0" 10 137 "rank 1 \(pid $victim\) died: killed by signal 9" $FL $FR
    else
      judged "$name" $FL "$OUT/$name.log" "$t0" $((STOP_TIMEOUT + 5)) 3 "rank 1 (stopped answering|never reached)" $FL $FR
    fi
  done
  # kill -9 of one node's launcher (its ranks die with it), each way round
  CFG=${FMODEL[0]}
  MODEL=("${FMODEL[@]:1}")
  for victim in 1 0; do
    other=$((1 - victim))
    name=lost$victim
    start_forever $name "$(free_port)" "$name-$$" 0 1
    eval "vp=\$pid_${name}_$victim; op=\$pid_${name}_$other"
    vr=$(kids_of "$vp" "$G")
    orr=$(kids_of "$op" "$G")
    if ! wait_steps $name 3; then
      fail "fail $name: the job did not reach 3 steps"
      kill -KILL "$vp" "$op" $vr $orr 2>/dev/null
      continue
    fi
    if [ $victim = 1 ]; then pat="\(node 1 of 2\) stopped answering"; else pat="\(rank 0, node 0 of 2\) does not answer"; fi
    t0=$(now_ms)
    kill -9 "$vp"
    wait "$vp" 2>/dev/null
    judged "$name (kill -9 of node $victim's launcher)" "$op" "$OUT/$name-node$other.log" "$t0" 30 3 "$pat" "$op" $orr $vr
  done
fi

echo "nodes.sh: $FAILS failed check(s)" | tee -a "$OUT/checks.txt"
[ $FAILS = 0 ]
