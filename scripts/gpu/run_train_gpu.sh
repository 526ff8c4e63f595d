#!/bin/bash
# On the GPU host: the CUDA training path against the CPU reference.
#   bash .carry/train/run_train_gpu.sh [single|multi]
# single: world 1 on GPU 0 vs the CPU (naive attention, head dim 32; flash,
#         head dim 64), 20 steps each, losses compared within bf16 tolerance
# multi:  world 2 over NCCL, FULL_SHARD / SHARD_GRAD_OP / NO_SHARD vs world 1, kill -9
# ckpt:   GPU training saves, resumes, and its full output loads in transformers
# multi4: world 4: FULL_SHARD / SHARD_GRAD_OP / NO_SHARD / HYBRID_SHARD 2x2 (and bf16
#         reduce, CPU offload) vs world 1
# Logs go to $OUT.
. "$(dirname "$0")/carry_env.sh" # C, OUT, B, F; LD_LIBRARY_PATH
MODE=${1:-single}
export FSDPC_PLUGIN_PATH=$B/plugins
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
W=$(mktemp -d)
$F data synth --task qa --n 20000 --out "$W/qa.tok" >/dev/null
cat >"$W/small.yaml" <<YAML
model: {vocab_size: 259, hidden_size: 128, intermediate_size: 384, num_hidden_layers: 4,
        num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 128,
        tie_word_embeddings: true}
data: {train: $W/qa.tok, seq_len: 64}
optim: {name: adamw, lr: 3.0e-3, weight_decay: 0.01}
schedule: {name: cosine, warmup_steps: 5}
train: {max_steps: 20, micro_batch_size: 16, log_every: 1, max_grad_norm: 1.0}
YAML
# head dim 64 so that flash serves it
cat >"$W/hd64.yaml" <<YAML
model: {vocab_size: 259, hidden_size: 256, intermediate_size: 640, num_hidden_layers: 4,
        num_attention_heads: 4, num_key_value_heads: 1, max_position_embeddings: 256,
        tie_word_embeddings: false}
data: {train: $W/qa.tok, seq_len: 128}
optim: {name: adamw, lr: 2.0e-3, weight_decay: 0.01}
schedule: {name: cosine, warmup_steps: 5}
train: {max_steps: 20, micro_batch_size: 8, log_every: 1, max_grad_norm: 1.0}
YAML
CMP="python3 $C/compare_runs.py"
run() { # name cfg overrides...
  local n=$1 cfg=$2; shift 2
  $F train "$W/$cfg" log.dir="$W/$n" "$@" >"$OUT/$n.log" 2>&1
  echo "== $n: exit $?"; grep -E "step 20/|error|generate" "$OUT/$n.log" | tail -3
  [ -f "$W/$n/metrics.jsonl" ] && cp "$W/$n/metrics.jsonl" "$OUT/$n.metrics.jsonl"
}
case $MODE in
single)
  run cpu small.yaml
  run gpu_naive small.yaml train.device=cuda attention.impl=naive
  run gpu_auto small.yaml train.device=cuda
  run cpu64 hd64.yaml
  run gpu64_flash hd64.yaml train.device=cuda attention.impl=flash
  run gpu64_naive hd64.yaml train.device=cuda attention.impl=naive
  run gpu64_ckpt hd64.yaml train.device=cuda attention.impl=flash fsdp.activation_checkpointing=true
  echo "--- bf16 GPU vs fp32 CPU (rtol 3e-2 on loss)"
  $CMP "$W/cpu" "$W/gpu_naive" "$W/gpu_auto" --rtol 3e-2 --keys loss
  $CMP "$W/cpu64" "$W/gpu64_flash" "$W/gpu64_naive" "$W/gpu64_ckpt" --rtol 3e-2 --keys loss
  echo "--- flash vs naive on GPU"
  $CMP "$W/gpu64_naive" "$W/gpu64_flash" --rtol 2e-2 --keys loss
  echo "--- the whole model on the GPU vs the HF fixtures (bf16 tolerance)"
  FSDPC_SOURCE_DIR=$C/src $B/bin/test_cuda_hf_fixture 2>&1 | tail -12
  echo "--- transformers loads fsdpc's full (HF) checkpoint; logits vs fsdpc's (fp32)"
  $F train "$W/small.yaml" train.max_steps=10 checkpoint.dir="$W/ck" checkpoint.final_dtype=fp32 \
    log.dir="$W/ckrun" >"$OUT/ckpt_train.log" 2>&1; echo "train for checkpoint: exit $?"
  $B/bin/fsdpc_dump_logits "$W/ck/final" "$W/fsdpc_logits.safetensors" 32 >"$OUT/dump.log" 2>&1
  echo "dump logits: exit $?"
  python3 "$C/check_hf_load.py" "$W/ck/final" "$W/fsdpc_logits.safetensors" 2>&1 | tail -5
  ;;
ckpt)
  # GPU training with checkpoints: save every 10 steps + a full fp32 model at
  # the end; resume from step 10 and compare; transformers reads the output.
  run straight small.yaml train.device=cuda checkpoint.dir="$W/ckA" checkpoint.save_steps=10 \
    checkpoint.final_dtype=fp32
  ls "$W/ckA"
  run resumed small.yaml train.device=cuda checkpoint.dir="$W/ckB" \
    checkpoint.resume="$W/ckA/step-000010"
  grep -h "resumed from" "$OUT/resumed.log" | head -1
  python3 - "$W/straight/metrics.jsonl" "$W/resumed/metrics.jsonl" <<'PY'
import json, sys
a = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[1])) if "step" in r}
b = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[2])) if "step" in r}
common = sorted(set(a) & set(b))
worst = max(abs(a[s] - b[s]) / a[s] for s in common)
print(f"resumed steps {common[0]}..{common[-1]}: worst relative loss difference vs straight {worst:.2e}")
PY
  $B/bin/fsdpc_dump_logits "$W/ckA/final" "$W/gpu_logits.safetensors" 32 >"$OUT/dump.log" 2>&1
  python3 "$C/check_hf_load.py" "$W/ckA/final" "$W/gpu_logits.safetensors" 2>&1 | tail -2
  ;;
multi)
  run w1 small.yaml train.device=cuda train.global_batch_size=16 train.micro_batch_size=8
  for st in FULL_SHARD SHARD_GRAD_OP NO_SHARD; do
    run "w2_$st" small.yaml train.device=cuda train.global_batch_size=16 train.micro_batch_size=8 \
      fsdp.sharding_strategy=$st --nproc-per-node 2
  done
  $CMP "$W/w1" "$W/w2_FULL_SHARD" "$W/w2_SHARD_GRAD_OP" "$W/w2_NO_SHARD" --rtol 2e-2 --keys loss
  echo "--- kill -9 of rank 1 mid-training on GPUs"
  $F train "$W/small.yaml" train.device=cuda train.max_steps=100000 train.log_every=1 \
    log.dir="$W/k9" --nproc-per-node 2 >"$OUT/kill9.log" 2>&1 &
  L=$!
  for _ in $(seq 300); do grep -q "step 20/" "$OUT/kill9.log" && break; sleep 0.1; done
  V=""
  for p in $(pgrep -f "$W/k9"); do
    [ "$p" = "$L" ] && continue
    tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -qx RANK=1 && V=$p
  done
  t0=$(date +%s.%N); kill -9 $V; wait $L; rc=$?; t1=$(date +%s.%N)
  echo "launcher exit $rc after $(python3 -c "print(round($t1-$t0,2))") s (victim pid $V)"
  grep -E "died|error" "$OUT/kill9.log" | tail -3
  sleep 1; pgrep -af "$W/k9" && echo "LEFTOVER PROCESSES" || echo "no processes left"
  ;;
multi4)
  run w1 small.yaml train.device=cuda train.global_batch_size=16 train.micro_batch_size=4
  for st in FULL_SHARD SHARD_GRAD_OP NO_SHARD; do
    run "w4_$st" small.yaml train.device=cuda train.global_batch_size=16 train.micro_batch_size=4 \
      fsdp.sharding_strategy=$st --nproc-per-node 4
  done
  run w4_HYBRID_2x2 small.yaml train.device=cuda train.global_batch_size=16 train.micro_batch_size=4 \
    fsdp.sharding_strategy=HYBRID_SHARD fsdp.hybrid_shard_size=2 --nproc-per-node 4
  run w4_FULL_bf16reduce small.yaml train.device=cuda train.global_batch_size=16 \
    train.micro_batch_size=4 fsdp.mixed_precision.reduce_dtype=bf16 --nproc-per-node 4
  run w4_HYBRID_bf16reduce small.yaml train.device=cuda train.global_batch_size=16 \
    train.micro_batch_size=4 fsdp.sharding_strategy=HYBRID_SHARD fsdp.hybrid_shard_size=2 \
    fsdp.mixed_precision.reduce_dtype=bf16 --nproc-per-node 4
  run w4_FULL_offload small.yaml train.device=cuda train.global_batch_size=16 \
    train.micro_batch_size=4 fsdp.cpu_offload=true --nproc-per-node 4
  grep -h "fsdp: HYBRID" "$OUT/w4_HYBRID_2x2.log" | head -1
  $CMP "$W/w1" "$W/w4_FULL_SHARD" "$W/w4_SHARD_GRAD_OP" "$W/w4_NO_SHARD" "$W/w4_HYBRID_2x2" \
    "$W/w4_FULL_bf16reduce" "$W/w4_HYBRID_bf16reduce" "$W/w4_FULL_offload" --rtol 2e-2 --keys loss
  echo "--- offload vs the same run with shards on the device (world 4)"
  $CMP "$W/w4_FULL_SHARD" "$W/w4_FULL_offload" --rtol 1e-4 --keys loss,grad_norm
  ;;
esac
