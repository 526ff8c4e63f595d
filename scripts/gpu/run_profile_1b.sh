#!/bin/bash
# On a one-GPU host: where a 1B step's time goes, fsdpc against PyTorch.
#   bash .carry/train/run_profile_1b.sh [MB]
# 1. step time of PyTorch (bench/torch_fsdp2_baseline.py, world 1) and fsdpc
#    (flash), Llama-3.2-1B shape, seq 2048, micro-batch MB (default 4);
# 2. every kernel's duration for 2 steps of each under Nsight Compute
#    (--clock-control none, one metric: gpu__time_duration.sum), as CSV.
# Writes $OUT/torch.log, fsdpc.log, ncu_fsdpc.csv.xz, ncu_torch.csv.xz and a
# per-kernel summary (SKIP_TORCH=1: fsdpc only) (bench/profile_summary.py) to stdout.
set -u
C=$(cd "$(dirname "$0")" && pwd)
MB=${1:-4}
OUT=${OUT:-/tmp/out}
mkdir -p /tmp/rt "$OUT"
tar xf "$C/runtime.tar.xz" -C /tmp/rt
tar xf "$C/build.tar.xz" -C /
B=$(cat "$C/build_dir")
F=$B/bin/fsdpc
W=$(mktemp -d)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
export PYTHONUNBUFFERED=1
SKIP_TORCH=${SKIP_TORCH:-0}  # 1: fsdpc only
[ "$SKIP_TORCH" = 1 ] || { echo "== torch, world 1"
timeout 200 torchrun --standalone --nproc_per_node=1 bench/torch_fsdp2_baseline.py \
  --model 1b --strategy full --ac 0 --bs $MB --seq 2048 --steps 10 --warmup 4 >"$OUT/torch.log" 2>&1
echo "torch exit $?"; grep RESULT "$OUT/torch.log"; }
export LD_LIBRARY_PATH=/tmp/rt:$B/lib:${LD_LIBRARY_PATH:-}
export FSDPC_PLUGIN_PATH=$B/plugins
$F data synth --task copy --n 100000 --out "$W/copy.tok" >/dev/null
echo "== fsdpc flash, world 1"
timeout 200 $F train configs/bench/llama3-1b-base.yaml data.train="$W/copy.tok" train.micro_batch_size=$MB \
  train.max_steps=10 train.log_every=1 log.dir="$W/f" >"$OUT/fsdpc.log" 2>&1; frc=$?; echo "fsdpc exit $frc"
grep -E "step (5|10)/|memory \(end\)|error" "$OUT/fsdpc.log" | tail -4
NCU="ncu --clock-control none --metrics gpu__time_duration.sum --csv --target-processes all"
echo "== ncu fsdpc (2 steps)"
timeout 240 $NCU --log-file "$W/ncu_fsdpc.csv" $F train configs/bench/llama3-1b-base.yaml \
  data.train="$W/copy.tok" train.micro_batch_size=$MB train.max_steps=2 log.dir="$W/n" \
  >"$OUT/ncu_fsdpc.log" 2>&1; nrc=$?; echo "ncu fsdpc exit $nrc"
[ "$SKIP_TORCH" = 1 ] || { echo "== ncu torch (2 steps)"
timeout 240 $NCU --log-file "$W/ncu_torch.csv" python3 -m torch.distributed.run --standalone \
  --nproc_per_node=1 bench/torch_fsdp2_baseline.py --model 1b --strategy full --ac 0 --bs $MB \
  --seq 2048 --steps 2 --warmup 0 >"$OUT/ncu_torch.log" 2>&1; echo "ncu torch exit $?"; }
for f in ncu_fsdpc ncu_torch; do
  [ -f "$W/$f.csv" ] && python3 "$C/profile_summary.py" "$W/$f.csv" | head -45
  [ -f "$W/$f.csv" ] && xz -c "$W/$f.csv" >"$OUT/$f.csv.xz"
done
# the fsdpc runs decide the exit status (the PyTorch ones are optional)
[ "$frc" = 0 ] && [ "$nrc" = 0 ]
