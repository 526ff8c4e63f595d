# A rank killed in the middle of a save (test hook: SIGKILL after its first
# file) leaves the previous checkpoint complete; resume=auto continues from
# it and ends with the straight run's weights.
. "$(dirname "$0")/common.sh"

run S 2 || fail "straight run"
FSDPC_TEST_KILL_IN_SAVE=6:1 run K 2 checkpoint.save_steps=3 && fail "the killed run exited 0"
grep -q "killed by signal 9" K.log || fail "no SIGKILL: $(tail -2 K.log)"
[ -d K/ck/step-000003 ] || fail "step-3 checkpoint missing"
[ ! -d K/ck/step-000006 ] || fail "a half-written step-6 looks complete"
[ -d K/ck/.tmp-step-000006 ] || fail "expected the partial save in .tmp-step-000006"
mv K/metrics.jsonl K/metrics.before
run K 2 checkpoint.save_steps=3 checkpoint.resume=auto || fail "resume after kill: $(tail -1 K.log)"
grep -q "resumed from K/ck/step-000003 at step 3" K.log || fail "did not resume from step 3"
[ ! -d K/ck/.tmp-step-000006 ] || fail "the stale partial save was not cleaned up"
same_losses S K
cmp S/ck/final/model.safetensors K/ck/final/model.safetensors || fail "weights after kill + resume"
# keep=1 deletes older intermediate checkpoints.
run Keep 1 checkpoint.save_steps=2 checkpoint.keep=1 || fail "keep run"
[ "$(ls -d Keep/ck/step-* | wc -l)" = 1 ] && [ -d Keep/ck/step-000006 ] || fail "keep=1: $(ls Keep/ck)"
echo PASS
