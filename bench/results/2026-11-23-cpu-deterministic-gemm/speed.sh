#!/usr/bin/env bash
# usage: obs-speed.sh TAG BIN LIBDIR THREADS  -> prints median step time over steps 6..60
tag=$1 bin=$2 lib=$3 th=$4
d=/tmp/obs-speed/$tag
rm -rf $d
envs=(LD_LIBRARY_PATH=$lib)
[ "$th" != default ] && envs+=(OMP_NUM_THREADS=$th)
env "${envs[@]}" $bin train /work/wt/observe/configs/tiny-cpu.yaml data.train=/tmp/obs-t/qa.tok \
  train.max_steps=60 train.log_every=1 train.eval_every=0 data.eval_fraction=0 \
  train.generate_prompts=[] "checkpoint.dir=''" log.tensorboard=false log.dir=$d log.progress=off >$d.log 2>&1 || { echo "$tag failed"; exit 1; }
python3 -c "
import json,statistics
r=[o for o in map(json.loads, open('$d/metrics.jsonl')) if 'step' in o]
st=[o['step_s'] for o in r if o['step']>5]
print('%-10s threads=%-7s median step %.4f s  tok/s %.0f  loss@60 %.6f' % ('$tag','$th',statistics.median(st), r[0]['tokens']/statistics.median(st), r[-1]['loss']))"
