#!/bin/bash
# Where a step's GPU time goes, kernel by kernel (Nsight Compute, one GPU),
# from a carry made by carry.sh. Logs go to $OUT (or /tmp/out). (The CUPTI
# timelines of a step are `speed.sh one trace|trace8` and `world.sh N
# timeline`; ncu of one 1B step of a new build also `speed.sh one profile`.)
#   bash .carry/X/profile.sh 1b [MB]   fsdpc against PyTorch:
#     1. step time of PyTorch (bench/torch_fsdp2_baseline.py, world 1) and fsdpc
#        (flash), Llama-3.2-1B shape, seq 2048, micro-batch MB (default 4);
#     2. every kernel's duration for 2 steps of each under Nsight Compute
#        (--clock-control none, one metric: gpu__time_duration.sum), as CSV.
#     Writes $OUT/torch.log, fsdpc.log, ncu_fsdpc.csv.xz, ncu_torch.csv.xz and a
#     per-kernel summary (bench/profile_summary.py) to stdout; SKIP_TORCH=1:
#     fsdpc only; FSDPC_EXTRA: overrides for the fsdpc runs (a word list, e.g.
#     "fsdp.mixed_precision.linear=fp8"). The fsdpc runs decide the exit status.
#   bash .carry/X/profile.sh lora      where a LoRA step's time goes (issue 14):
#     fsdpc trains configs/llama3-8b-lora.yaml cut to LAYERS decoder layers
#     (default 4; every layer costs the same) for 2 steps under Nsight Compute,
#     and bench/profile_summary.py sums each kernel's time, with the LoRA
#     kernels (the rank-r GEMMs, scale, dropout) apart.
# shellcheck disable=SC2317 # the mode functions run through "$MODE"
# shellcheck disable=SC2086,SC2046 # NCU and $F are word lists / commands
MODE=${1:-}
shift
case $MODE in 1b) CARRY_LIBS=0 ;; lora) ;; *)
  echo "usage: profile.sh 1b [MB] | lora" >&2
  exit 2
  ;;
esac
. "$(dirname "$0")/carry_env.sh" # C, OUT, B, F

kernels1b() { # [MB]
  MB=${1:-4}
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
    train.max_steps=10 train.log_every=1 log.dir="$W/f" ${FSDPC_EXTRA:-} >"$OUT/fsdpc.log" 2>&1; frc=$?; echo "fsdpc exit $frc"
  grep -E "step (5|10)/|memory \(end\)|error" "$OUT/fsdpc.log" | tail -4
  NCU="ncu --clock-control none --metrics gpu__time_duration.sum --csv --target-processes all"
  echo "== ncu fsdpc (2 steps)"
  timeout 240 $NCU --log-file "$W/ncu_fsdpc.csv" $F train configs/bench/llama3-1b-base.yaml \
    data.train="$W/copy.tok" train.micro_batch_size=$MB train.max_steps=2 log.dir="$W/n" \
    ${FSDPC_EXTRA:-} >"$OUT/ncu_fsdpc.log" 2>&1; nrc=$?; echo "ncu fsdpc exit $nrc"
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
}

lora() {
  LAYERS=${LAYERS:-4}
  W=$(mktemp -d)
  export FSDPC_PLUGIN_PATH=$B/plugins
  $F data synth --task copy --n 50000 --out "$W/copy.tok" >/dev/null
  NCU="ncu --clock-control none --metrics gpu__time_duration.sum --csv --target-processes all"
  timeout ${NCU_TIMEOUT:-200} $NCU --log-file "$W/ncu_lora.csv" $F train "$C/llama3-8b-lora.yaml" \
    data.train="$W/copy.tok" model.num_hidden_layers=$LAYERS train.global_batch_size=2 \
    train.max_steps=2 train.eval_every=0 checkpoint.dir="''" log.dir="$W/n" >"$OUT/ncu_lora.log" 2>&1
  echo "ncu fsdpc LoRA ($LAYERS layers, 2 steps): exit $?"
  [ -f "$W/ncu_lora.csv" ] && python3 "$C/profile_summary.py" "$W/ncu_lora.csv" | head -30
  [ -f "$W/ncu_lora.csv" ] && python3 "$C/profile_summary.py" "$W/ncu_lora.csv" --grid | head -40
  [ -f "$W/ncu_lora.csv" ] && xz -c "$W/ncu_lora.csv" >"$OUT/ncu_lora.csv.xz"
}

case $MODE in
1b) kernels1b "$@" ;;
lora) lora ;;
esac
