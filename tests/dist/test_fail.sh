#!/usr/bin/env bash
# The failure protocol end to end (issue 33; issue 43 item 8): `fsdpc train`
# (Gloo, a tiny model) at world 4 on one node, or as 2 "nodes" of 2 ranks on
# this machine, with one fault each:
#   alloc1     FSDPC_FAULT=rank=2,alloc=3: rank 2 runs out of memory
#   allocall   FSDPC_FAULT=alloc=3: every rank runs out of memory
#   hang       FSDPC_FAULT=rank=1,hang=40: rank 1 never reaches collective 40
#   sigstop    SIGSTOP of rank 1
#   kill9      kill -9 of rank 2
#   node1      kill -9 of node 1's launcher (node0: of node 0's, the store's)
#   silent1    node 1 freezes: SIGSTOP of its launcher and ranks, no FIN/RST
#              (silent0: node 0, the store's); collectives.timeout_s=120, so
#              only the heartbeats can name it
# Each checks that every process ends within the bound (10 s for errors and
# deaths; collectives.timeout_s + 5 s for a stuck or stopped peer, with a
# timeout of 3 s; 30 s for a lost node), that every rank's last line and the
# launcher's name the first failure, the exit codes of docs/dist.md (1: the
# rank whose failure it is, 3: the others; the launcher: its culprit's), and
# that no process is left, by pid.
# Usage: test_fail.sh CASE   (FSDPC = the fsdpc executable)
set -u
: "${FSDPC:?FSDPC must point at the fsdpc executable}"
CASE=$1
TMP=$(mktemp -d /tmp/fsdpc-fail.XXXXXX)
PIDS=() # every launcher and rank of the case
cleanup() {
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$TMP"
}
trap cleanup EXIT
fail() {
  echo "FAIL ($CASE): $*"
  for f in "$TMP"/*.log; do [ -e "$f" ] && { echo "--- $f"; tail -20 "$f" | cut -c1-400; }; done
  exit 1
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }

. "$(dirname "$0")/../common/tiny_job.sh"
tiny_job "$TMP" "optim: {name: adamw, lr: 1.0e-3}" || fail "data synth"

# launch NAME ARGS...: a launcher in the background; L_<NAME> = its pid.
launch() {
  local name=$1
  shift
  "$FSDPC" train "$TMP/tiny.yaml" "log.dir=$TMP/$name" "$@" >"$TMP/$name.log" 2>&1 &
  eval "L_$name=\$!"
  PIDS+=($!)
}
# ranks_of PID N VAR: waits until launcher PID has N ranks; VAR gets their
# pids (and PIDS too).
ranks_of() {
  local kids=""
  for _ in $(seq 200); do
    kids=$(pgrep -P "$1" | tr '\n' ' ')
    [ "$(echo $kids | wc -w)" -ge "$2" ] && break
    sleep 0.05
  done
  [ "$(echo $kids | wc -w)" -ge "$2" ] || fail "launcher $1 did not start $2 ranks"
  PIDS+=($kids)
  eval "$3=(\$kids)"
}
wait_steps() { # NAME N
  local n
  for _ in $(seq 600); do
    n=$(grep -c '"step"' "$TMP/$1/metrics.jsonl" 2>/dev/null)
    [ "${n:-0}" -ge "$2" ] && return 0
    sleep 0.1
  done
  fail "$1 did not reach $2 steps"
}
wait_line() { # FILE PATTERN: until the line is there
  for _ in $(seq 600); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
  fail "no line '$2' in $1"
}
# ends_within PID T0 BOUND_S: launcher PID exits within BOUND_S seconds of T0
# (ms); sets RC and DT (s, one decimal).
ends_within() {
  local deadline=$(($2 + $3 * 1000 + 2000))
  while kill -0 "$1" 2>/dev/null && [ "$(now_ms)" -lt "$deadline" ]; do sleep 0.05; done
  local t=$(now_ms)
  kill -0 "$1" 2>/dev/null && fail "launcher $1 still runs $(($3 + 2)) s after the fault"
  wait "$1"
  RC=$?
  DT=$(awk -v d=$((t - $2)) 'BEGIN { printf "%.1f", d / 1000 }')
  awk -v d="$DT" -v b="$3" 'BEGIN { exit !(d <= b) }' || fail "ended after $DT s (bound $3 s)"
}
# no_pids_left PID...: none of them runs
no_pids_left() {
  sleep 0.3
  for p in "$@"; do
    # a zombie (dead, its parent gone, not yet reaped by init) is no process
    ps -o stat= -p "$p" 2>/dev/null | grep -qv Z && fail "process $p is left ($(tr '\0' ' ' <"/proc/$p/cmdline" | cut -c1-120))"
  done
  return 0
}
# last_lines LOG PATTERN RANK...: each rank's last line matches PATTERN
last_lines() {
  local log=$1 pat=$2
  shift 2
  for r in "$@"; do
    local l
    l=$(grep "^\[rank $r\] " "$log" | tail -1)
    echo "$l" | grep -q -- "$pat" || fail "rank $r's last line does not name the first failure: ${l:0:300}"
  done
}
# code_of LOG RANK: the exit code the launcher logged for RANK
code_of() { sed -n "s/^launcher: rank $2 (pid [0-9]*) exited with code \([0-9]*\)$/\1/p" "$1" | tail -1; }
codes() { # LOG EXPECT RANK... : each rank exited with EXPECT
  local log=$1 want=$2
  shift 2
  for r in "$@"; do
    [ "$(code_of "$log" "$r")" = "$want" ] || fail "rank $r exited with '$(code_of "$log" "$r")', want $want"
  done
}
launcher_line() { # LOG PATTERN
  grep -q -- "^fsdpc train: .*$2" "$1" || fail "the launcher's last line does not name the first failure ($2)"
}

case $CASE in
alloc1 | allocall)
  [ "$CASE" = alloc1 ] && spec=rank=2,alloc=3 || spec=alloc=3
  FSDPC_FAULT=$spec launch a --nproc-per-node 4
  ranks_of "$L_a" 4 ranks
  wait_line "$TMP/a.log" "fault injection: device allocation 3 on rank . fails"
  t0=$(now_ms)
  ends_within "$L_a" "$t0" 10
  [ $RC = 1 ] || fail "launcher exited $RC, want 1"
  first=$(grep -m1 -o "rank [0-3]: out of host memory" "$TMP/a.log" | head -1)
  [ -n "$first" ] || fail "no rank says it ran out of memory"
  culprit=${first:5:1}
  [ "$CASE" = allocall ] || [ "$culprit" = 2 ] || fail "the first failure is rank $culprit's, want rank 2's"
  last_lines "$TMP/a.log" "$first" 0 1 2 3
  launcher_line "$TMP/a.log" "first failure: $first"
  codes "$TMP/a.log" 1 "$culprit"
  codes "$TMP/a.log" 3 $(echo 0 1 2 3 | tr ' ' '\n' | grep -vx "$culprit")
  no_pids_left "$L_a" "${ranks[@]}"
  echo "PASS ($CASE): $first ... every process ended in $DT s, launcher exit $RC"
  ;;
hang)
  FSDPC_FAULT=rank=1,hang=40 launch a --nproc-per-node 4 collectives.timeout_s=3
  ranks_of "$L_a" 4 ranks
  wait_line "$TMP/a.log" "fault injection: rank 1 stalls before collective seq 40"
  t0=$(now_ms)
  ends_within "$L_a" "$t0" 8
  [ $RC = 1 ] || fail "launcher exited $RC, want 1 (rank 1's)"
  pat="rank 1 never reached collective seq 40"
  last_lines "$TMP/a.log" "$pat" 0 1 2 3
  launcher_line "$TMP/a.log" "$pat"
  codes "$TMP/a.log" 1 1
  codes "$TMP/a.log" 3 0 2 3
  no_pids_left "$L_a" "${ranks[@]}"
  echo "PASS ($CASE): every process ended $DT s after rank 1 stalled, naming it"
  ;;
sigstop | kill9)
  extra=()
  [ "$CASE" = sigstop ] && extra=(collectives.timeout_s=3)
  launch a --nproc-per-node 4 "${extra[@]}"
  ranks_of "$L_a" 4 ranks
  wait_steps a 3
  if [ "$CASE" = sigstop ]; then
    victim=1 sig=STOP bound=8 want=3 pat="rank 1 stopped answering"
  else
    victim=2 sig=KILL bound=10 want=137 pat="rank 2 (pid ${ranks[2]}) died: killed by signal 9"
  fi
  t0=$(now_ms)
  kill -$sig "${ranks[$victim]}"
  ends_within "$L_a" "$t0" $bound
  [ $RC = $want ] || fail "launcher exited $RC, want $want"
  others=$(echo 0 1 2 3 | tr ' ' '\n' | grep -vx $victim)
  last_lines "$TMP/a.log" "$pat" $others
  launcher_line "$TMP/a.log" "$pat"
  codes "$TMP/a.log" 3 $others
  no_pids_left "$L_a" "${ranks[@]}"
  echo "PASS ($CASE): every process ended $DT s after the SIG$sig of rank $victim, naming it"
  ;;
node0 | node1 | silent0 | silent1)
  victim=${CASE: -1}
  other=$((1 - victim))
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  extra=()
  [ "${CASE:0:6}" = silent ] && extra=(collectives.timeout_s=120 dist.heartbeat_timeout_s=4)
  for n in 0 1; do
    FSDPC_JOB_TOKEN=fail-test-$$ launch n$n --nnodes 2 --node-rank $n --nproc-per-node 2 \
      --master-addr 127.0.0.1 --master-port "$port" "${extra[@]}"
  done
  ranks_of "$L_n0" 2 r0
  ranks_of "$L_n1" 2 r1
  wait_steps n0 3
  eval "vl=\$L_n$victim ol=\$L_n$other vr=(\${r$victim[@]}) or=(\${r$other[@]})"
  t0=$(now_ms)
  if [ "${CASE:0:4}" = node ]; then
    kill -KILL "$vl"
  else
    kill -STOP "$vl" "${vr[@]}" # frozen: its sockets stay open, nothing is sent
  fi
  ends_within "$ol" "$t0" 30
  [ $RC = 3 ] || fail "node $other's launcher exited $RC, want 3"
  if [ "$victim" = 1 ]; then pat="ranks 2, 3 (node 1 of 2) stopped answering"; else
    pat="(rank 0, node 0 of 2) does not answer"
  fi
  ors=$((2 * other))
  last_lines "$TMP/n$other.log" "$pat" $ors $((ors + 1))
  launcher_line "$TMP/n$other.log" "$pat"
  codes "$TMP/n$other.log" 3 $ors $((ors + 1))
  no_pids_left "$ol" "${or[@]}"
  [ "${CASE:0:4}" = node ] && no_pids_left "${vr[@]}" # the killed launcher's ranks die with it
  echo "PASS ($CASE): node $other's job ended $DT s after node $victim was lost, naming it"
  ;;
*)
  fail "unknown case"
  ;;
esac
