#!/bin/bash
# (run with a temporary build whose matmul.cu read FSDPC_EXP_LT_WS as the heuristic's workspace limit; that code was reverted)
# experiment: cuBLASLt heuristic workspace 32 MiB (default) vs 0 (FSDPC_EXP_LT_WS)
C=$(cd "$(dirname "$0")" && pwd)
mkdir -p /tmp/rt; tar xf "$C/runtime.tar.xz" -C /tmp/rt; tar xf "$C/build.tar.xz" -C /
B=$(cat "$C/build_dir"); W=$(mktemp -d)
export LD_LIBRARY_PATH=/tmp/rt:$B/lib FSDPC_PLUGIN_PATH=$B/plugins
$B/bin/fsdpc data synth --task copy --n 300000 --out $W/copy.tok >/dev/null
CFG1="configs/bench/llama3-1b-base.yaml data.train=$W/copy.tok train.micro_batch_size=4 train.log_every=1 fsdp.param_copy=true"
for r in 1 2 3; do
  for ws in default 0; do
    if [ $ws = default ]; then unset FSDPC_EXP_LT_WS; else export FSDPC_EXP_LT_WS=$ws; fi
    timeout 120 $B/bin/fsdpc train $CFG1 train.max_steps=30 log.dir=$W/r$r-$ws > $OUT/r$r-$ws.log 2>&1
    python3 - $W/r$r-$ws/metrics.jsonl $r-$ws <<'PY'
import json, statistics, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if "step" in r]
med = statistics.median(r["step_s"] for r in rows if r["step"] > 4)
print(f"RESULT ws {sys.argv[2]} step_s {med:.4f} tok_s {rows[-1]['tokens']/med:.0f} loss_last {rows[-1]['loss']:.4f}")
PY
  done
done
