#!/bin/bash
# On the GPU host (one 80 GB H100): adamw8bit with fsdp.offload.optimizer.
#   scripts/gpu/pack_train_carry.sh /work/main/.carry/off8   (+ configs/bench/llama3-8b-base.yaml)
#   bash .carry/off8/run_offload8_gpu.sh
# 1. the CUDA optimizer tests: test_cuda_adamw8bit (the CUDA kernel against
#    the CPU path, bit for bit) and test_cuda_optim;
# 2. a small model on CUDA, adamw8bit, min_8bit_size 0, 20 steps: the state
#    in place twice (s1, s2: the noise floor; GPU runs are not bit-
#    reproducible), offloaded with the default buffers (o1: whole units) and
#    with 16 KiB buffers (o2: pieces cut inside parameters), and an
#    offloaded resume of s1's step-10 checkpoint (r1): max relative loss gap
#    of each against s1, beside the noise floor;
# 3. the 8B rows of run_offload_bench.sh 8b8 (STEPS steps each, default 6;
#    ROWS: which, default all).
# Logs under $OUT. Env: STEPS, ROWS, SKIP_SMALL=1.
. "$(dirname "$0")/carry_env.sh" # C, OUT, B, F; LD_LIBRARY_PATH
export FSDPC_PLUGIN_PATH=$B/plugins
W=$(mktemp -d)
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"

echo "== 1. CUDA optimizer tests"
for t in test_cuda_adamw8bit test_cuda_optim; do
  timeout 120 "$B/bin/$t" >"$OUT/$t.log" 2>&1
  echo "$t exit $? ($(($(date +%s) - t0)) s)"
  grep -E "differing|Checks|FAIL|Error" "$OUT/$t.log" | head -4
done

if [ "${SKIP_SMALL:-0}" != 1 ]; then
  echo "== 2. small model: offloaded adamw8bit state on CUDA ($(($(date +%s) - t0)) s)"
  $F data synth --task qa --n 20000 --out "$W/qa.tok" >/dev/null
  cat >"$W/small.yaml" <<YAML
model: {vocab_size: 259, hidden_size: 256, intermediate_size: 640, num_hidden_layers: 4,
        num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 128,
        tie_word_embeddings: false}
data: {train: $W/qa.tok, seq_len: 64}
optim: {name: adamw8bit, lr: 2.0e-3, weight_decay: 0.01, options: {min_8bit_size: 0}}
schedule: {name: cosine, warmup_steps: 5}
train: {device: cuda, max_steps: 20, micro_batch_size: 8, global_batch_size: 16, log_every: 1,
        max_grad_norm: 1.0, eval_every: 0}
YAML
  small() {
    local n=$1
    shift
    timeout 60 $F train "$W/small.yaml" log.dir="$W/$n" checkpoint.dir="$W/$n/ck" "$@" >"$OUT/small-$n.log" 2>&1
    echo "small $n exit $?"
    grep -E "error|resumed from|offload.optimizer:" "$OUT/small-$n.log" | head -2
    cp "$W/$n/metrics.jsonl" "$OUT/small-$n.metrics.jsonl" 2>/dev/null
  }
  small s1 checkpoint.save_steps=10
  small s2
  small o1 fsdp.offload.optimizer=true
  small o2 fsdp.offload.optimizer=true fsdp.offload.buffer_mib=0.015625
  small r1 fsdp.offload.optimizer=true checkpoint.resume="$W/s1/ck/step-000010"
  python3 - "$W" <<'PY'
import json, sys
w = sys.argv[1]
def losses(n):
    try:
        return {r["step"]: r["loss"] for r in map(json.loads, open(f"{w}/{n}/metrics.jsonl")) if "loss" in r}
    except OSError:
        return {}
s1, s2 = losses("s1"), losses("s2")
def gap(x, y):
    ks = [k for k in x if k in y]
    return (max(abs(x[k] - y[k]) / abs(x[k]) for k in ks), len(ks)) if ks else (float("nan"), 0)
print("small: noise floor (s2 vs s1): max rel gap %.2e over %d steps" % gap(s1, s2))
for n, what in (("o1", "offloaded, whole units"), ("o2", "offloaded, 16 KiB pieces"),
                ("r1", "offloaded resume of s1 at step 10")):
    g, k = gap(s1, losses(n))
    print("small: %s vs s1 (%s): max rel gap %.2e over %d steps" % (n, what, g, k))
PY
fi

echo "== 3. 8B on one GPU, adamw8bit ($(($(date +%s) - t0)) s)"
STEPS=${STEPS:-6} ROW_TIMEOUT=${ROW_TIMEOUT:-150} bash "$C/run_offload_bench.sh" 8b8
echo "total $(($(date +%s) - t0)) s"
