#!/usr/bin/env bash
# Issue 42 item 7 (clusters), the data and plan parts: two "nodes" that share
# no file system (two ranks started by hand with torchrun's environment,
# each in a folder of its own holding its own copy of the dataset) both train
# on a JSONL dataset, neither waiting for a file the other writes: each
# node's local rank 0 prepares into its own data.cache_dir. Before the fix
# rank 1 waited for rank 0's cache file next to its own copy of the data
# until the collectives timeout and failed. And `fsdpc plan` no longer
# judges host memory against the planning machine's RAM unless asked.
. "$(dirname "$0")/../common/cli_expect.sh" data-cluster # dir, fail, expect
: "${FSDPC_SOURCE_DIR:?}"
cd "$dir" || exit 1
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$FSDPC" data synth --task chat --n 200 --out chat.jsonl >/dev/null || fail "synth"
cat >cfg.yaml <<EOF
model: {vocab_size: 259, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1,
        num_attention_heads: 2, max_position_embeddings: 256}
data: {train: data/chat.jsonl, format: chat, chat_template: $FSDPC_SOURCE_DIR/configs/templates/chatml.jinja,
       seq_len: 256}
attention: {impl: naive}
collectives: {impl: gloo, timeout_s: 30}
optim: {name: adamw, lr: 1.0e-3}
train: {max_steps: 2, micro_batch_size: 1, threads: 1}
log: {dir: out, progress: off}
EOF
pids=()
for n in 0 1; do
  mkdir -p node$n/data
  cp chat.jsonl node$n/data/ # each node's own copy, on its own "file system"
  (cd node$n && env RANK=$n WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 GROUP_RANK=$n \
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port FSDPC_JOB_TOKEN=cluster-test-$$ \
    timeout 120 "$FSDPC" train "$dir/cfg.yaml" >train.log 2>&1) &
  pids+=($!)
done
for n in 0 1; do
  wait "${pids[$n]}" || fail "node $n: exit $?: $(tail -3 node$n/train.log)"
done
for n in 0 1; do
  grep -q "data: prepared data/chat.jsonl (chat): 200 examples" node$n/train.log ||
    fail "node $n did not prepare its own copy: $(grep -m3 'data' node$n/train.log)"
  find node$n/out/data-cache -name 'chat.jsonl.*.tok' | grep -q . || fail "node $n: no cache file"
  [ "$(ls -A node$n/data)" = chat.jsonl ] || fail "node $n: files next to the data: $(ls -A node$n/data)"
done
grep -q "step 2/2" node0/train.log || fail "no training step: $(tail -3 node0/train.log)"

# plan: host memory is judged only against --host-mem, and says so
tiny=$FSDPC_SOURCE_DIR/configs/tiny-cpu.yaml
expect 0 "host memory per machine not given, so the host column is not judged" "$FSDPC" plan "$tiny"
printf '%s\n' "$out" | grep -q "MemTotal" && fail "plan still judges against this machine's MemTotal"
expect 0 "host memory 64.0 GiB per machine (--host-mem)" "$FSDPC" plan "$tiny" --host-mem 64
"$FSDPC" plan "$tiny" --json | python3 -c '
import json, sys
rows = json.load(sys.stdin)
assert all(r["host_limit_bytes"] == 0 and r["host_limit_source"] == "none" for r in rows), rows[0]
' || fail "plan --json: no host_limit_source none"

[ "$fails" -eq 0 ] && echo "PASS" || exit 1
