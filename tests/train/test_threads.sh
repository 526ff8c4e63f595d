#!/usr/bin/env bash
# Reproducible CPU numerics: the losses do not depend on the OpenMP /
# OpenBLAS thread count or on who started the ranks. World 1 at
# OMP_NUM_THREADS 1, 2 and 4 gives the same bits; world 2 started by hand
# with torchrun's variables under OMP_NUM_THREADS=1 (what torchrun sets)
# gives the same bits as the fsdpc launcher at 2 and at 4 threads.
source "$(dirname "$0")/common.sh"
CMP="python3 $(dirname "$0")/compare_runs.py"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# The demo's shape (hidden 128, 4 layers, seq 64): GEMMs with several output
# tiles, so that threads really split them. train.threads=0 leaves OpenMP at
# OMP_NUM_THREADS, as a user's run would.
demo() { # NAME THREADS [launch options]; LOG=file overrides $TMP/NAME.log
  local name=$1 t=$2 log=${LOG:-$TMP/$1.log}
  shift 2
  OMP_NUM_THREADS=$t timeout 120 "$FSDPC" train "$FSDPC_SOURCE_DIR/configs/tiny-cpu.yaml" \
    data.train="$TMP/qa.tok" train.max_steps=8 schedule.warmup_steps=2 train.log_every=1 \
    train.eval_every=4 train.global_batch_size=16 train.micro_batch_size=8 train.generate_prompts=[] train.threads=0 log.progress=off \
    log.dir="$TMP/$name" "checkpoint.dir=''" "$@" >"$log" 2>&1
}
for t in 1 2 4; do demo w1_t$t $t || fail "world 1 at $t threads"; done
$CMP "$TMP/w1_t1" "$TMP/w1_t2" "$TMP/w1_t4" --rtol 0 || fail "world 1: losses depend on the thread count"
# train.generate_tokens=0 turns the samples off (it once failed the run after
# training with "a prompt of N tokens leaves no room").
demo gen0 1 'train.generate_prompts=["Q: capital of France?\nA: "]' train.generate_tokens=0 ||
  fail "train.generate_tokens=0 with prompts: $(tail -1 "$TMP/gen0.log")"
! grep -q '^generate:' "$TMP/gen0.log" || fail "train.generate_tokens=0 still generated"

port=$(free_port)
pids=()
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    LOG="$TMP/tr_t1.rank$r.log" demo tr_t1 1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a torchrun-style rank failed"; done
grep -q "world 2 (torchrun)" "$TMP/tr_t1.rank0.log" || fail "the ranks did not read torchrun's variables"
for t in 2 4; do demo fl_t$t $t --nproc-per-node 2 --master-port 0 || fail "launcher at $t threads"; done
$CMP "$TMP/tr_t1" "$TMP/fl_t2" "$TMP/fl_t4" --rtol 0 ||
  fail "world 2: torchrun at 1 thread and the launcher at 2 and 4 threads differ"
echo "PASS: the same losses at every thread count and launcher"
