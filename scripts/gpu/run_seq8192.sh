#!/bin/bash
# On one GPU: a full training step of the Llama-3.2-1B shape at seq 8192,
# micro-batch 1, with `flash` and with `naive` attention (issue 7: flash keeps
# O(T) per layer; naive keeps B*NH*T*T probabilities per layer).
#   bash .carry/train/run_seq8192.sh
. "$(dirname "$0")/carry_env.sh" # C, OUT, B, F; LD_LIBRARY_PATH
export FSDPC_PLUGIN_PATH=$B/plugins
W=$(mktemp -d)
nvidia-smi --query-gpu=name,memory.total --format=csv | tee "$OUT/gpu.txt"
$F data synth --task copy --n 100000 --out "$W/copy.tok" >/dev/null
for attn in flash naive; do
  echo "== $attn"
  timeout 200 $F train configs/bench/llama3-1b-base.yaml data.train="$W/copy.tok" \
    data.seq_len=8192 model.max_position_embeddings=8192 train.micro_batch_size=1 \
    train.max_steps=3 train.log_every=1 attention.impl=$attn collectives.impl=auto \
    log.dir="$W/$attn" >"$OUT/seq8192-$attn.log" 2>&1
  echo "exit $?"
  grep -E "step [0-9]+/|error|memory \(end\)" "$OUT/seq8192-$attn.log" | tail -4
done
