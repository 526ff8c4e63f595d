# Initial weights from an HF folder (model.init.from): each rank reads only
# its own ranges and logs its peak host memory during the load, which must
# stay under its own shard bytes + 10% + 256 MiB; the loaded weights are the
# saved ones (a 0-lr step leaves them unchanged).
. "$(dirname "$0")/common.sh"

run A 1 || fail "run"
for n in 1 2 4; do
  run L$n $n model.init.from=A/ck/final optim.lr=0 optim.weight_decay=0 train.max_steps=1 schedule.warmup_steps=0 train.micro_batch_size=1 \
    checkpoint.options.max_shard_size=30000 || fail "load at world $n: $(tail -1 L$n.log)"
  c=$(grep -c "peak host memory of the load .*: within bound" L$n.log)
  [ "$c" = "$n" ] || fail "world $n: $c of $n ranks logged a load peak within bound"
  cmp <(grep -v '"step":' A/ck/final/config.json) <(grep -v '"step":' L$n/ck/final/config.json) ||
    fail "config.json differs"
  "$FSDPC" convert L$n/ck/final L$n/merged --to hf --dtype fp32 checkpoint.options.max_shard_size=5000000000 >/dev/null 2>&1 || fail "merge"
  cmp A/ck/final/model.safetensors L$n/merged/model.safetensors || fail "world $n: weights changed"
done
echo PASS
