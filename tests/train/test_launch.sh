#!/usr/bin/env bash
# Issue 4 acceptance around processes and memory, through the fsdpc CLI:
#   memory     per-rank param + grad + optimizer bytes fall as 1/world under
#              FULL_SHARD and stay flat under NO_SHARD
#   multinode  two launchers (--nnodes 2 --node-rank 0/1) on loopback form one
#              4-rank job that trains like world 1
#   kill9      kill -9 of one rank mid-training: non-zero exit within 10 s
#              naming the rank, no process left behind
#   torchrun   ranks started by hand with torchrun's variables train like world 1
#   determinism  the same run twice gives bit-identical losses
source "$(dirname "$0")/common.sh"
CASE=$1
CMP="python3 $(dirname "$0")/compare_runs.py"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
shard_total() { sed -n 's/.*per-rank shard bytes: params=\([0-9]*\) grads=\([0-9]*\) optim=\([0-9]*\).*/\1 \2 \3/p' "$TMP/$1.log" | awk '{print $1+$2+$3}'; }

case $CASE in
memory)
  run fs1 train.max_steps=3 || fail "world 1"
  run fs2 train.max_steps=3 -- --nproc-per-node 2 || fail "FULL_SHARD world 2"
  run fs4 train.max_steps=3 -- --nproc-per-node 4 || fail "FULL_SHARD world 4"
  run ns4 train.max_steps=3 fsdp.sharding_strategy=NO_SHARD -- --nproc-per-node 4 || fail "NO_SHARD world 4"
  b1=$(shard_total fs1) b2=$(shard_total fs2) b4=$(shard_total fs4) n4=$(shard_total ns4)
  echo "per-rank shard bytes: FULL_SHARD w1 $b1, w2 $b2, w4 $b4; NO_SHARD w4 $n4"
  [ -n "$b1" ] && [ -n "$b4" ] && [ -n "$n4" ] || fail "no accounting line"
  # Padding to a multiple of world * align adds at most a few elements per unit.
  python3 - "$b1" "$b2" "$b4" "$n4" <<'PY' || fail "memory does not scale as expected"
import sys
b1, b2, b4, n4 = map(int, sys.argv[1:])
ok = abs(b2 * 2 / b1 - 1) < 0.01 and abs(b4 * 4 / b1 - 1) < 0.01 and n4 == b1
print(f"w2 x2 / w1 = {b2*2/b1:.4f}, w4 x4 / w1 = {b4*4/b1:.4f}, NO_SHARD w4 / w1 = {n4/b1:.4f}")
sys.exit(0 if ok else 1)
PY
  ;;
multinode)
  run ref || fail "world 1 reference"
  port=$(free_port)
  timeout 120 "$FSDPC" train "$CFG" log.dir="$TMP/mn" --nnodes 2 --node-rank 1 --nproc-per-node 2 \
    --master-addr 127.0.0.1 --master-port "$port" >"$TMP/node1.log" 2>&1 &
  n1=$!
  timeout 120 "$FSDPC" train "$CFG" log.dir="$TMP/mn" --nnodes 2 --node-rank 0 --nproc-per-node 2 \
    --master-addr 127.0.0.1 --master-port "$port" >"$TMP/node0.log" 2>&1 || fail "node 0 failed"
  wait $n1 || fail "node 1 failed"
  grep -q "world 4" "$TMP/node0.log" || fail "node 0 did not see a 4-rank world"
  $CMP "$TMP/ref" "$TMP/mn" || fail "2 nodes x 2 ranks diverged from world 1"
  ;;
kill9)
  timeout 120 "$FSDPC" train "$CFG" train.max_steps=100000 train.eval_every=0 log.dir="$TMP/k9" \
    --nproc-per-node 4 --master-port 0 >"$TMP/k9.log" 2>&1 &
  launcher=$!
  # Wait until training runs, then kill rank 2 (a child whose env says RANK=2).
  for _ in $(seq 100); do grep -q "step 3/" "$TMP/k9.log" 2>/dev/null && break; sleep 0.2; done
  victim=""
  for p in $(pgrep -f "$TMP/k9"); do
    [ "$p" = "$launcher" ] && continue
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "RANK=2" && victim=$p
  done
  [ -n "$victim" ] || fail "could not find rank 2"
  start=$(date +%s.%N)
  kill -9 "$victim"
  wait $launcher
  rc=$?
  dt=$(echo "$(date +%s.%N) - $start" | bc)
  echo "launcher exited $rc after $dt s"
  [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "launcher exit code $rc"
  [ "$(echo "$dt < 10" | bc)" -eq 1 ] || fail "took $dt s (limit 10 s)"
  grep -q "rank 2 (pid $victim) died: killed by signal 9" "$TMP/k9.log" || fail "no line naming rank 2"
  sleep 0.3
  if pgrep -f "$TMP/k9" >/dev/null; then pgrep -af "$TMP/k9"; fail "processes left behind"; fi
  ;;
torchrun)
  run ref || fail "world 1 reference"
  port=$(free_port)
  pids=()
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout 120 "$FSDPC" train "$CFG" log.dir="$TMP/tr" >"$TMP/tr$r.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || fail "a torchrun-style rank failed"; done
  grep -q "world 2 (torchrun)" "$TMP/tr0.log" || fail "rank 0 did not detect torchrun's variables"
  $CMP "$TMP/ref" "$TMP/tr" || fail "torchrun-style world 2 diverged from world 1"
  ;;
determinism)
  # Same config twice: bit-identical losses (rtol 0), in one process and in
  # a 2-rank job, with different OpenMP thread counts.
  run a1 train.threads=1 || fail "run a1"
  run a2 train.threads=2 || fail "run a2"
  run b1 -- --nproc-per-node 2 || fail "run b1"
  run b2 -- --nproc-per-node 2 || fail "run b2"
  $CMP "$TMP/a1" "$TMP/a2" --rtol 0 || fail "two world-1 runs differ"
  $CMP "$TMP/b1" "$TMP/b2" --rtol 0 || fail "two world-2 runs differ"
  ;;
*) fail "unknown case $CASE" ;;
esac
echo "PASS: $CASE"
