#!/bin/bash
# On a one-GPU host: where a LoRA step's time goes (issue 14). fsdpc trains
# configs/llama3-8b-lora.yaml cut to LAYERS decoder layers (default 4; every
# layer costs the same) for 2 steps under Nsight Compute (--clock-control
# none, gpu__time_duration.sum), and bench/profile_summary.py sums each
# kernel's time, with the LoRA kernels (the rank-r GEMMs, scale, dropout) apart.
#   bash .carry/lora/run_lora_profile.sh
. "$(dirname "$0")/carry_env.sh" # C, OUT, B, F; LD_LIBRARY_PATH
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
