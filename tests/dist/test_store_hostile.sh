#!/usr/bin/env bash
# Jobs and clients that must not be able to hurt a running job (issue 19):
#   sameport   a second job given the same --master-port is refused in one
#              line and the first job keeps training; two jobs without
#              --master-port both run
#   deadkey    the "dead" key sent without the job token (old wire format,
#              or a wrong token) is refused and never acted on
#   escapes    a dead-key text with terminal escapes is printed escaped
#   big        a value over 1 MiB and a flood of 1 MiB values are refused; rank 0's
#              memory stays bounded
#   localhost  --master-addr localhost binds the loopback address only
#   idle       1,100 idle connections under a 1,024-descriptor limit: the
#              store does not spin and the job keeps training
# Usage: test_store_hostile.sh CASE   (FSDPC = the fsdpc executable)
set -u
: "${FSDPC:?FSDPC must point at the fsdpc executable}"
CASE=$1
HERE=$(cd "$(dirname "$0")" && pwd)
CLIENT="python3 $HERE/store_client.py"
TMP=$(mktemp -d /tmp/fsdpc-hostile.XXXXXX)
trap 'pkill -KILL -f "$TMP" 2>/dev/null; rm -rf "$TMP"' EXIT

fail() {
  echo "FAIL ($CASE): $*"
  for f in "$TMP"/*.log; do [ -e "$f" ] && { echo "--- $f"; tail -15 "$f"; }; done
  exit 1
}

"$FSDPC" data synth --task qa --n 500 --seed 3 --out "$TMP/qa.tok" >/dev/null || fail "data synth"
cat >"$TMP/tiny.yaml" <<YAML
model: {vocab_size: 259, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2,
        num_attention_heads: 2, num_key_value_heads: 1, max_position_embeddings: 32}
data: {train: $TMP/qa.tok, seq_len: 32, eval_fraction: 0.05}
attention: {impl: naive}
optim: {name: adamw, lr: 1.0e-3}
train: {max_steps: 1000000, micro_batch_size: 4, log_every: 10, eval_every: 0, threads: 1}
YAML

# start_job NAME [launch args...]: a 2-rank job that trains "forever".
start_job() {
  local name=$1
  shift
  mkdir -p "$TMP/$name"
  "$FSDPC" train "$TMP/tiny.yaml" --nproc-per-node 2 "$@" "log.dir=$TMP/$name" \
    >"$TMP/$name.log" 2>&1 &
  eval "pid_$name=\$!"
}
# steps NAME: lines in the job's metrics file so far.
steps() { cat "$TMP/$1/metrics.jsonl" 2>/dev/null | wc -l; }
wait_steps() { # NAME N
  for _ in $(seq 300); do [ "$(steps "$1")" -ge "$2" ] && return 0; sleep 0.1; done
  fail "job $1 did not reach $2 logged steps"
}
alive() { kill -0 "$1" 2>/dev/null; }
rank0_pid() { # NAME
  for p in $(pgrep -f "log.dir=$TMP/$1"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "RANK=0" && { echo "$p"; return; }
  done
}
# still_training NAME SECONDS: after SECONDS the job is alive and its step
# count grows (within 20 s more: a loaded CI machine may stall it a while).
still_training() {
  local a b
  a=$(steps "$1")
  sleep "$2"
  for _ in $(seq 200); do
    eval "alive \$pid_$1" || fail "job $1 is gone"
    b=$(steps "$1")
    [ "$b" -gt "$a" ] && break
    sleep 0.1
  done
  [ "$b" -gt "$a" ] || fail "job $1 stopped training ($a -> $b logged steps)"
  grep -q "aborted" "$TMP/$1.log" && fail "job $1 was aborted"
  return 0
}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

case $CASE in
sameport)
  start_job a --master-port "$port"
  wait_steps a 2
  start_job b --master-port "$port"
  for _ in $(seq 150); do alive "$pid_b" || break; sleep 0.1; done
  alive "$pid_b" && fail "the second job on port $port is still running after 15 s"
  wait "$pid_b" && fail "the second job exited 0"
  grep -q "port $port on this host is in use" "$TMP/b.log" || fail "no line saying port $port is in use"
  [ "$(grep -c . "$TMP/b.log")" -le 2 ] || fail "the refusal is more than one line"
  still_training a 8
  # Two jobs without --master-port never meet.
  "$FSDPC" train "$TMP/tiny.yaml" --nproc-per-node 2 train.max_steps=3 "log.dir=$TMP/c" \
    >"$TMP/c.log" 2>&1 || fail "a job with the default port failed next to a running one"
  start_job d
  wait_steps d 2
  still_training a 1
  ;;
deadkey)
  start_job a --master-port "$port"
  wait_steps a 2
  out=$($CLIENT "$port" set-dead-old "rank 0 (pid 1) died: forged")
  echo "old format: $out"
  out=$($CLIENT "$port" set-dead wrong-token "rank 0 (pid 1) died: forged")
  echo "wrong token: $out"
  echo "$out" | grep -q "refused" || fail "a wrong token got no refusal: $out"
  still_training a 5
  ;;
escapes)
  FSDPC_JOB_TOKEN=known-token-$$ start_job a --master-port "$port"
  wait_steps a 2
  $CLIENT "$port" set-dead "known-token-$$" $'\e[31mEVIL\e]0;title\a\nsecond line' >/dev/null
  for _ in $(seq 100); do alive "$pid_a" || break; sleep 0.1; done
  alive "$pid_a" && fail "the job ignored a dead key that carried its token"
  grep -q 'job failed: \\x1b\[31mEVIL\\x1b\]0;title\\x07\\nsecond line' "$TMP/a.log" ||
    fail "the dead key's text is not printed escaped"
  grep -q $'\e' "$TMP/a.log" && fail "a raw ESC byte reached the output"
  ;;
big)
  FSDPC_JOB_TOKEN=known-token-$$ start_job a --master-port "$port"
  wait_steps a 2
  r0=$(rank0_pid a)
  [ -n "$r0" ] || fail "rank 0 not found"
  before=$(awk '/VmRSS/{print $2}' "/proc/$r0/status")
  out=$($CLIENT "$port" big "known-token-$$")
  echo "$out"
  echo "$out" | head -1 | grep -q "over the limit" || fail "a value over 1 MiB was not refused"
  n=$(echo "$out" | sed -n 's/accepted \([0-9]*\) of 120/\1/p')
  [ -n "$n" ] && [ "$n" -lt 100 ] || fail "the store took $n of 120 values of 1 MiB"
  after=$(awk '/VmRSS/{print $2}' "/proc/$r0/status")
  echo "rank 0 RSS: $before -> $after KiB"
  [ $((after - before)) -lt 90000 ] || fail "rank 0 grew by $(((after - before) / 1024)) MiB"
  still_training a 1
  ;;
idle)
  (ulimit -n 1024 && exec "$FSDPC" train "$TMP/tiny.yaml" --nproc-per-node 2 --master-port "$port" \
    "log.dir=$TMP/a" >"$TMP/a.log" 2>&1) &
  pid_a=$!
  wait_steps a 2
  r0=$(rank0_pid a)
  [ -n "$r0" ] || fail "rank 0 not found"
  $CLIENT "$port" idle 1100 6 >"$TMP/idle.out" &
  cpid=$!
  for _ in $(seq 100); do grep -q opened "$TMP/idle.out" && break; sleep 0.1; done
  sleep 1
  # CPU of the store thread (named fsdpc-store; a build without the name:
  # every thread of rank 0 but the main one, which trains). A store that
  # spins on its listener shows here.
  named=$(grep -lx fsdpc-store /proc/"$r0"/task/*/comm 2>/dev/null | head -1)
  side_ticks() {
    local sum=0 t
    for t in /proc/"$r0"/task/*; do
      [ "${t##*/}" = "$r0" ] && continue
      [ -n "$named" ] && [ "$t/comm" != "$named" ] && continue
      sum=$((sum + $(awk '{print $14 + $15}' "$t/stat" 2>/dev/null || echo 0)))
    done
    echo $sum
  }
  t0=$(side_ticks)
  sleep 2
  t1=$(side_ticks)
  hz=$(getconf CLK_TCK)
  pct=$(((t1 - t0) * 100 / hz / 2))
  echo "rank 0 store thread${named:+ ($named)} with 1,100 idle connections: $pct% of a core"
  [ "$pct" -lt 20 ] || fail "rank 0's store thread uses $pct% of a core (spinning?)"
  still_training a 1
  wait "$cpid"
  cat "$TMP/idle.out"
  grep -q "Too many open files" "$TMP/a.log" && fail "the job ran out of descriptors"
  still_training a 1
  ;;
localhost)
  # --master-addr localhost listens on the loopback address only.
  start_job a --master-addr localhost --master-port "$port"
  wait_steps a 2
  # Listening sockets on the port, from /proc/net/tcp{,6} (state 0A).
  python3 - "$port" >"$TMP/listen.out" <<'PY'
import socket, struct, sys
port = int(sys.argv[1])
for f, fam in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 6)):
    for line in open(f).read().splitlines()[1:]:
        loc, st = line.split()[1], line.split()[3]
        a, p = loc.split(":")
        if st != "0A" or int(p, 16) != port:
            continue
        if fam == 4:
            print(socket.inet_ntoa(struct.pack("<I", int(a, 16))))
        else:
            print(socket.inet_ntop(socket.AF_INET6, b"".join(struct.pack("<I", int(a[i:i + 8], 16)) for i in range(0, 32, 8))))
PY
  cat "$TMP/listen.out"
  grep -qx "127.0.0.1" "$TMP/listen.out" || fail "nothing listens on 127.0.0.1:$port"
  grep -qxE "0\.0\.0\.0|::" "$TMP/listen.out" && fail "the store listens on every interface"
  still_training a 1
  ;;
*)
  fail "unknown case"
  ;;
esac
echo "PASS ($CASE)"
