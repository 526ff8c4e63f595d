# Saved at world 4 x FULL_SHARD, resumed at world 2, world 1, 4 x NO_SHARD
# and 4 x HYBRID_SHARD(2): losses continue within 1e-5 relative of the
# straight run; at the same world and strategy they are bit-identical.
. "$(dirname "$0")/common.sh"

run W4 4 checkpoint.save_steps=4 || fail "straight world-4 run: $(tail -1 W4.log)"
[ -f W4/ck/step-000004/shard-00003-of-00004.safetensors ] || fail "no per-rank shard files"
grep -q '"world_size":[[:space:]]*4' W4/ck/step-000004/meta.json || fail "meta.json lacks the world size"
run Same 4 checkpoint.resume=W4/ck/step-000004 || fail "resume at world 4"
same_losses W4 Same
cmp W4/ck/final/model.safetensors Same/ck/final/model.safetensors || fail "weights at world 4"
run To2 2 checkpoint.resume=W4/ck/step-000004 || fail "resume at world 2: $(tail -1 To2.log)"
run To1 1 checkpoint.resume=W4/ck/step-000004 || fail "resume at world 1: $(tail -1 To1.log)"
run ToNo 4 checkpoint.resume=W4/ck/step-000004 fsdp.sharding_strategy=NO_SHARD ||
  fail "resume at 4 x NO_SHARD"
run ToHy 4 checkpoint.resume=W4/ck/step-000004 fsdp.sharding_strategy=HYBRID_SHARD \
  fsdp.hybrid_shard_size=2 || fail "resume at 4 x HYBRID_SHARD"
for r in To2 To1 ToNo ToHy; do
  grep -q "resumed from W4/ck/step-000004 at step 4 (saved at world 4 FULL_SHARD" $r.log ||
    fail "$r: resume not logged"
  [ "$(losses $r | wc -l)" = 4 ] || fail "$r: expected steps 5..8"
  close_losses W4 $r 1e-5
done
# Another global batch is refused with one line saying what to set.
run Bad 2 checkpoint.resume=W4/ck/step-000004 train.global_batch_size=16 && fail "G change accepted"
grep -q "set train.global_batch_size=8" Bad.log || fail "G change message: $(tail -1 Bad.log)"
echo PASS
