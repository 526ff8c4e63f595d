#!/usr/bin/env bash
# Compares the CPU loss trajectory (metrics.jsonl, every step) of two fsdpc
# builds over strategies x worlds x accumulation; exact equality of the text.
set -u
A=$1; B=$2; out=${OUT:-/tmp/runplan-loss/run}; rm -rf $out; mkdir -p $out
src=$(cd "$(dirname "$0")/../.." && pwd)
$A data synth --task qa --out $out/qa.tok >/dev/null 2>&1
fails=0
for w in 1 2 4; do for s in FULL_SHARD SHARD_GRAD_OP NO_SHARD HYBRID_SHARD; do for acc in 1 2; do
  gb=$((16*w*acc))
  args="data.train=$out/qa.tok train.max_steps=6 train.log_every=1 train.eval_every=3 train.generate_prompts=[] fsdp.sharding_strategy=$s train.global_batch_size=$gb train.micro_batch_size=16 log.progress=off train.threads=1 schedule.warmup_steps=2"
  [ $s = HYBRID_SHARD ] && [ $w -gt 1 ] && args="$args fsdp.hybrid_shard_size=2"
  for v in A B; do
    exe=${!v}
    $exe train $src/configs/tiny-cpu.yaml $args log.dir=$out/$v-$w-$s-$acc --nproc-per-node $w --master-port 0 >$out/$v-$w-$s-$acc.log 2>&1 || echo "run $v $w $s $acc failed"
    python3 -c "
import json,sys
for l in open('$out/$v-$w-$s-$acc/metrics.jsonl'):
  d=json.loads(l); print(d.get('step'), repr(d.get('loss')), repr(d.get('grad_norm')), repr(d.get('eval_loss')))
" > $out/$v-$w-$s-$acc.loss
  done
  if cmp -s $out/A-$w-$s-$acc.loss $out/B-$w-$s-$acc.loss && [ -s $out/A-$w-$s-$acc.loss ]; then echo "same  world $w $s accum $acc: $(tail -1 $out/A-$w-$s-$acc.loss)"; else echo "DIFF  world $w $s accum $acc"; fails=$((fails+1)); fi
done; done; done
echo "differences: $fails"
