#!/bin/bash
# On a 4-GPU host: PyTorch FSDP2 (bench/torch_fsdp2_baseline.py) and fsdpc on
# the Llama-3.2-1B shape, seq 2048, micro-batch 4, FULL_SHARD, in one call.
#   bash .carry/train/run_1b_side_by_side.sh [NPROC]
# Writes torch.jsonl, the fsdpc metrics and rank summaries, and a summary to $OUT.
set -u
C=$(cd "$(dirname "$0")" && pwd)
N=${1:-4}
OUT=${OUT:-/tmp/out}
mkdir -p /tmp/rt "$OUT"
tar xf "$C/runtime.tar.xz" -C /tmp/rt
tar xf "$C/build.tar.xz" -C /
B=$(cat "$C/build_dir")
F=$B/bin/fsdpc
W=$(mktemp -d)
nvidia-smi --query-gpu=name,memory.total --format=csv | tee "$OUT/gpu.txt"
echo "== torch FSDP2"
PYTHONUNBUFFERED=1 timeout 240 torchrun --standalone --nproc_per_node=$N bench/torch_fsdp2_baseline.py \
  --model 1b --strategy full --ac 0 --bs 4 --seq 2048 --steps 12 --warmup 4 --out "$OUT/torch.jsonl" \
  >"$OUT/torch.log" 2>&1
echo "torch exit $?"; grep RESULT "$OUT/torch.log"
export LD_LIBRARY_PATH=/tmp/rt:$B/lib:${LD_LIBRARY_PATH:-}
export FSDPC_PLUGIN_PATH=$B/plugins
$F data synth --task copy --n 300000 --out "$W/copy.tok" >/dev/null
for attn in flash naive; do
  echo "== fsdpc $attn"
  timeout 240 $F train configs/bench/llama3-1b-base.yaml data.train="$W/copy.tok" \
    train.micro_batch_size=4 train.max_steps=12 train.log_every=1 attention.impl=$attn \
    log.dir="$W/$attn" --nproc-per-node $N >"$OUT/fsdpc-$attn.log" 2>&1
  echo "fsdpc $attn exit $?"
  grep -E "step (1|12)/|error|memory \(end\)" "$OUT/fsdpc-$attn.log" | grep -E "rank 0|error" | tail -4
  cp "$W/$attn/metrics.jsonl" "$OUT/fsdpc-$attn.metrics.jsonl" 2>/dev/null
  cp "$W/$attn/rank0.json" "$OUT/fsdpc-$attn.rank0.json" 2>/dev/null
  python3 - "$W/$attn" "$N" <<'PY'
import json, sys, statistics
d, n = sys.argv[1], int(sys.argv[2])
try:
    rows = [r for r in map(json.loads, open(f"{d}/metrics.jsonl")) if "step" in r]
    r0 = json.load(open(f"{d}/rank0.json"))
except Exception as e:
    print("no metrics:", e); sys.exit(0)
steady = [r["step_s"] for r in rows if r["step"] > 4]
med = statistics.median(steady)
tok = rows[-1]["tokens"] if "tokens" in rows[-1] else 4 * 2048 * n
print(f"RESULT fsdpc step_s {med:.4f} tok_s_gpu {tok / med / n:.0f} peak_alloc_gib "
      f"{r0['peak_bytes']['total'] / 2**30:.2f} reserved_gib "
      f"{(r0.get('reserved_bytes') or 0) / 2**30:.2f} loss {rows[-1]['loss']:.4f}")
PY
done
