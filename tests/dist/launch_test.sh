#!/usr/bin/env bash
# Multi-process tests of the launcher, the store and the gloo plugin, all on
# 127.0.0.1. Usage: launch_test.sh PROBE CASE   (CASE: ok, crash, kill9, hang, multinode,
# launcher-killed, sigterm, sigstop). Each case bounds itself with `timeout`.
set -u
PROBE=$1
CASE=$2
MARK="fsdpc-dist-test-$CASE-$$-$RANDOM"
TMP=$(mktemp -d)
trap 'pkill -KILL -f "$MARK" 2>/dev/null; rm -rf "$TMP"' EXIT

fail() { echo "FAIL ($CASE): $*"; echo "--- output:"; cat "$TMP"/*.log 2>/dev/null; exit 1; }

# No process carrying this run's marker may survive the launcher.
no_orphans() {
  sleep 0.3
  if pgrep -f "$MARK" >/dev/null; then
    pgrep -af "$MARK"
    fail "processes left behind"
  fi
}

case $CASE in
ok)
  timeout 60 "$PROBE" launch --nproc-per-node 4 -- "$PROBE" ok "$MARK" >"$TMP/out.log" 2>&1
  rc=$?
  [ $rc -eq 0 ] || fail "launcher exited $rc"
  n=$(grep -c "probe ok: world 4 (fsdpc, node 0/1" "$TMP/out.log")
  [ "$n" -eq 4 ] || fail "expected 4 ranks ok, got $n"
  no_orphans
  ;;
crash)
  start=$(date +%s.%N)
  timeout 30 "$PROBE" launch --nproc-per-node 4 -- "$PROBE" crash-rank 2 "$MARK" >"$TMP/out.log" 2>&1
  rc=$?
  dt=$(echo "$(date +%s.%N) - $start" | bc)
  [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "launcher exited $rc"
  grep -q "launcher: error: rank 2 (pid [0-9]*) died: killed by signal 9 (SIGKILL)" "$TMP/out.log" ||
    fail "no line naming rank 2 and SIGKILL"
  [ "$(echo "$dt < 10" | bc)" -eq 1 ] || fail "took $dt s (limit 10 s)"
  no_orphans
  ;;
kill9)
  # An outside kill -9 of a rank that is busy in collectives.
  timeout 60 "$PROBE" launch --nproc-per-node 4 -- "$PROBE" loop "$TMP" "$MARK" >"$TMP/out.log" 2>&1 &
  lpid=$!
  for _ in $(seq 100); do [ -s "$TMP/rank3.pid" ] && break; sleep 0.1; done
  [ -s "$TMP/rank3.pid" ] || fail "ranks did not start"
  sleep 0.5
  victim=$(cat "$TMP/rank1.pid")
  start=$(date +%s.%N)
  kill -9 "$victim"
  wait $lpid
  rc=$?
  dt=$(echo "$(date +%s.%N) - $start" | bc)
  [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "launcher exited $rc"
  grep -q "rank 1 (pid $victim) died: killed by signal 9 (SIGKILL)" "$TMP/out.log" ||
    fail "no line naming rank 1 (pid $victim)"
  [ "$(echo "$dt < 10" | bc)" -eq 1 ] || fail "took $dt s (limit 10 s)"
  no_orphans
  ;;
hang)
  start=$(date +%s.%N)
  timeout 40 "$PROBE" launch --nproc-per-node 4 -- "$PROBE" --timeout-s 3 hang-rank 3 "$MARK" >"$TMP/out.log" 2>&1
  rc=$?
  dt=$(echo "$(date +%s.%N) - $start" | bc)
  [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "launcher exited $rc"
  grep -q "gloo: all_gather (unit layers.3, seq 57) timed out after 3 s: a rank never reached it or died" "$TMP/out.log" ||
    fail "no timeout message naming the op"
  grep -q "launcher: error: rank [012] (pid [0-9]*) died: exited with code 1" "$TMP/out.log" ||
    fail "launcher did not name a failed rank"
  [ "$(echo "$dt < 20" | bc)" -eq 1 ] || fail "took $dt s"
  no_orphans
  ;;
multinode)
  port=$("$PROBE" free-port)
  for node in 0 1; do
    timeout 60 "$PROBE" launch --nnodes 2 --node-rank $node --nproc-per-node 2 \
      --master-addr 127.0.0.1 --master-port "$port" -- "$PROBE" ok "$MARK" >"$TMP/node$node.log" 2>&1 &
    eval "pid$node=\$!"
  done
  wait "$pid0"; rc0=$?
  wait "$pid1"; rc1=$?
  [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] || fail "launchers exited $rc0 / $rc1"
  for r in 0 1; do grep -q "\[rank $r\] probe ok: world 4 (fsdpc, node 0/2" "$TMP/node0.log" || fail "rank $r missing on node 0"; done
  for r in 2 3; do grep -q "\[rank $r\] probe ok: world 4 (fsdpc, node 1/2" "$TMP/node1.log" || fail "rank $r missing on node 1"; done
  no_orphans
  ;;
launcher-killed)
  # kill -9 of the launcher itself: PR_SET_PDEATHSIG takes the ranks down.
  timeout 60 "$PROBE" launch --nproc-per-node 3 -- "$PROBE" loop "$TMP" "$MARK" >"$TMP/out.log" 2>&1 &
  for _ in $(seq 100); do [ -s "$TMP/rank2.pid" ] && break; sleep 0.1; done
  [ -s "$TMP/rank2.pid" ] || fail "ranks did not start"
  lpid=$(pgrep -f "^$PROBE launch --nproc-per-node 3 -- $PROBE loop $TMP $MARK" | head -1)
  [ -n "$lpid" ] || fail "launcher not found"
  kill -9 "$lpid"
  sleep 1
  no_orphans
  ;;
sigterm)
  # SIGTERM to the launcher is forwarded; the job stops with 128+15.
  timeout 60 "$PROBE" launch --nproc-per-node 2 -- "$PROBE" loop "$TMP" "$MARK" >"$TMP/out.log" 2>&1 &
  for _ in $(seq 100); do [ -s "$TMP/rank1.pid" ] && break; sleep 0.1; done
  [ -s "$TMP/rank1.pid" ] || fail "ranks did not start"
  lpid=$(pgrep -f "^$PROBE launch --nproc-per-node 2 -- $PROBE loop $TMP $MARK" | head -1)
  kill -TERM "$lpid"
  for _ in $(seq 100); do kill -0 "$lpid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$lpid" 2>/dev/null && fail "launcher still running 10 s after SIGTERM"
  grep -q "launcher: error: launcher: stopped by signal 15 (SIGTERM)" "$TMP/out.log" ||
    fail "no line saying the job was stopped by SIGTERM"
  no_orphans
  ;;
sigstop)
  # A rank stopped with SIGSTOP: the launcher names it when it stops and in
  # its final line, instead of blaming a rank whose collective timed out.
  timeout 60 "$PROBE" launch --nproc-per-node 3 -- "$PROBE" --timeout-s 3 loop "$TMP" "$MARK" >"$TMP/out.log" 2>&1 &
  lpid=$!
  for _ in $(seq 100); do [ -s "$TMP/rank2.pid" ] && break; sleep 0.1; done
  [ -s "$TMP/rank2.pid" ] || fail "ranks did not start"
  sleep 0.5
  victim=$(cat "$TMP/rank1.pid")
  kill -STOP "$victim"
  wait $lpid
  rc=$?
  [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "launcher exited $rc"
  grep -q "launcher: rank 1 (pid $victim) was stopped by signal 19 (SIGSTOP)" "$TMP/out.log" ||
    fail "the stop of rank 1 was not reported"
  grep -q "launcher: error: rank 1 (pid $victim) is stopped (SIGSTOP) and never answered; rank [02]" "$TMP/out.log" ||
    fail "the final line does not name the stopped rank"
  no_orphans
  ;;
*)
  fail "unknown case"
  ;;
esac
echo "PASS ($CASE)"
