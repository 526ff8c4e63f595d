# A straight run == the same run stopped (at a saved checkpoint, by a
# SIGTERM reaching one rank, by a real SIGTERM to the launcher) and resumed:
# losses and final weights bit-identical.
. "$(dirname "$0")/common.sh"

run S1 1 checkpoint.save_steps=3 checkpoint.keep=0 || fail "straight run (world 1)"
[ -d S1/ck/step-000003 ] && [ -d S1/ck/step-000006 ] || fail "no step-3/step-6 checkpoints"
[ -f S1/ck/final/model.safetensors ] && [ -f S1/ck/final/config.json ] || fail "no final checkpoint"
for k in 3 6; do
  run R$k 1 checkpoint.resume=S1/ck/step-00000$k || fail "resume from step $k: $(tail -1 R$k.log)"
  grep -q "resumed from S1/ck/step-00000$k at step $k" R$k.log || fail "resume $k not logged"
  [ "$(losses R$k | head -1 | grep -o '"step":[0-9]*')" = "\"step\":$((k + 1))" ] ||
    fail "resume $k did not continue at step $((k + 1))"
  same_losses S1 R$k
  cmp S1/ck/final/model.safetensors R$k/ck/final/model.safetensors || fail "weights after resume $k"
done

# World 2: SIGTERM to rank 0 only after step 5 (test hook); all ranks agree,
# save step-5 and exit 0; resume=auto finishes the run.
run S2 2 || fail "straight run (world 2)"
FSDPC_TEST_SIGNAL_AT_STEP=5 run G2 2 || fail "signal run exit: $(tail -2 G2.log)"
[ -d G2/ck/step-000005 ] || fail "no checkpoint at the signal"
[ ! -d G2/ck/final ] || fail "a stopped run wrote its final checkpoint"
[ "$(losses G2 | tail -1 | grep -o '"step":[0-9]*')" = '"step":5' ] || fail "did not stop after step 5"
mv G2/metrics.jsonl G2/metrics.before
run G2 2 checkpoint.resume=auto || fail "resume=auto: $(tail -1 G2.log)"
grep -q "resumed from G2/ck/step-000005 at step 5" G2.log || fail "auto did not pick step 5"
same_losses S2 G2
cmp S2/ck/final/model.safetensors G2/ck/final/model.safetensors || fail "weights after SIGTERM resume"

# A real SIGTERM to the launcher while training (longer run, so that it
# lands mid-run); whatever step it stops at, resume=auto gives the same end.
run L0 2 train.max_steps=60 || fail "straight 60-step run"
"$FSDPC" train tiny.yaml log.dir=L1 checkpoint.dir=L1/ck train.max_steps=60 \
  --nproc-per-node 2 --master-port 0 >L1.log 2>&1 &
pid=$!
for _ in $(seq 1 400); do
  [ -s L1/metrics.jsonl ] && break
  sleep 0.02
done
kill -TERM $pid
wait $pid
if [ -d L1/ck/final ]; then
  echo "note: the run finished before the signal; skipping the launcher-signal check"
else
  ls -d L1/ck/step-* >/dev/null 2>&1 || fail "launcher SIGTERM left no checkpoint: $(tail -3 L1.log)"
  run L1 2 train.max_steps=60 checkpoint.resume=auto || fail "resume after launcher SIGTERM"
  cmp L0/ck/final/model.safetensors L1/ck/final/model.safetensors ||
    fail "weights after launcher SIGTERM resume"
fi
echo PASS
