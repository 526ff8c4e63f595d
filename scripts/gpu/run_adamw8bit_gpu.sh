#!/bin/bash
# On the GPU host (one H200), adamw8bit:
#   1. test_cuda_adamw8bit: the CUDA path against the CPU path (bit for bit),
#      and the plugin's maps written out, then compared with torch's fp32
#      construction of bitsandbytes' dynamic maps (check_q8_maps.py);
#   2. a small model on CUDA, min_8bit_size 0: a straight 20-step run saving
#      a sharded checkpoint at step 10, the run repeated (the noise floor: GPU
#      runs are not bit-reproducible) and a resume from step 10 (the device
#      state goes through the fp32 checkpoint views and back), and the run
#      with fsdp.cpu_offload (the plugin's CPU path on pinned host state);
#   3. the Llama-3.2-1B shape on one GPU, 300 steps, adamw then adamw8bit
#      (micro-batch 4 x 2048, 2 micro-batches per step, lr 3e-4 cosine,
#      warmup 30): per-step loss gap, optimizer bytes, peak, step time.
#   bash .carry/optim8/run_adamw8bit_gpu.sh   (logs and metrics in $OUT;
#   Q8_SKIP_1B=1 runs 1 and 2 only)
. "$(dirname "$0")/carry_env.sh" # C, OUT, B, F; LD_LIBRARY_PATH
export FSDPC_PLUGIN_PATH=$B/plugins
W=$(mktemp -d)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
t0=$(date +%s)

echo "== 1. CUDA vs CPU path, maps vs torch"
FSDPC_Q8_MAPS=$OUT/q8maps.txt timeout 120 "$B/bin/test_cuda_adamw8bit" >"$OUT/cuda_test.log" 2>&1
echo "test_cuda_adamw8bit exit $?"
grep -E "differing|%|Checks|FAIL|Error" "$OUT/cuda_test.log" | head -6
python3 "$C/check_q8_maps.py" "$OUT/q8maps.txt" 2>&1 | tee "$OUT/maps.log"

echo "== 2. small model: checkpoint and resume on CUDA ($(($(date +%s) - t0)) s)"
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
  timeout 90 $F train "$W/small.yaml" log.dir="$W/$n" checkpoint.dir="$W/$n/ck" "$@" >"$OUT/small-$n.log" 2>&1
  echo "small $n exit $?"
  grep -E "error|resumed from" "$OUT/small-$n.log" | head -2
}
small s1 checkpoint.save_steps=10
small s2
small r1 checkpoint.resume="$W/s1/ck/step-000010"
small o1 fsdp.cpu_offload=true
python3 - "$W" <<'PY'
import json, sys
w = sys.argv[1]
def losses(n):
    return {r["step"]: r["loss"] for r in map(json.loads, open(f"{w}/{n}/metrics.jsonl")) if "loss" in r}
a, b, r, o = losses("s1"), losses("s2"), losses("r1"), losses("o1")
gap = lambda x, y, ks: max(abs(x[k] - y[k]) / abs(x[k]) for k in ks)
ks = [k for k in range(11, 21) if k in a and k in r and k in b]
if not ks:
    sys.exit(print("small: no common steps 11..20"))
print(f"small: steps 11..20 of the resume vs the straight run: max rel gap {gap(a, r, ks):.2e} "
      f"over {len(ks)} steps; noise floor (straight run twice) {gap(a, b, ks):.2e}")
ko = [k for k in range(1, 21) if k in a and k in o and k in b]
if ko:
    print(f"small: cpu_offload (CPU path of the plugin) vs on-device, steps 1..20: max rel gap "
          f"{gap(a, o, ko):.2e}; noise floor {gap(a, b, ko):.2e}")
PY

if [ "${Q8_SKIP_1B:-0}" = 1 ]; then # a quick re-check of 1 and 2
  echo "total $(($(date +%s) - t0)) s"
  exit 0
fi
echo "== 3. 1B shape, 300 steps ($(($(date +%s) - t0)) s)"
$F data synth --task copy --n 300000 --out "$W/copy.tok" >/dev/null
for o in adamw adamw8bit; do
  timeout 170 $F train configs/bench/llama3-1b-base.yaml data.train="$W/copy.tok" optim.name=$o \
    optim.lr=3e-4 schedule.name=cosine schedule.warmup_steps=30 train.micro_batch_size=4 \
    train.global_batch_size=8 train.max_steps=300 train.log_every=1 log.dir="$W/1b-$o" \
    >"$OUT/1b-$o.log" 2>&1
  echo "1b $o exit $? ($(($(date +%s) - t0)) s)"
  grep -E "error|per-rank shard bytes|step 300/" "$OUT/1b-$o.log" | head -3
  cp "$W/1b-$o/metrics.jsonl" "$OUT/1b-$o.metrics.jsonl" 2>/dev/null
  cp "$W/1b-$o/rank0.json" "$OUT/1b-$o.rank0.json" 2>/dev/null
done
python3 - "$W" <<'PY'
import json, sys, statistics
w = sys.argv[1]
def rows(o):
    return [r for r in map(json.loads, open(f"{w}/1b-{o}/metrics.jsonl")) if "loss" in r and "step" in r]
try:
    a, q = rows("adamw"), rows("adamw8bit")
except Exception as e:
    print("no metrics:", e); sys.exit(0)
la, lq = {r["step"]: r["loss"] for r in a}, {r["step"]: r["loss"] for r in q}
ks = sorted(set(la) & set(lq))
g = [(abs(la[k] - lq[k]) / abs(la[k]), k) for k in ks]
worst = max(g)
print(f"1b: {len(ks)} common steps; max per-step rel loss gap {worst[0]:.4f} at step {worst[1]} "
      f"({la[worst[1]]:.4f} vs {lq[worst[1]]:.4f}); mean gap {statistics.mean(x for x, _ in g):.4f}")
for lo in range(1, 301, 50):
    ww = [k for k in ks if lo <= k < lo + 50]
    if ww:
        ma, mq = statistics.mean(la[k] for k in ww), statistics.mean(lq[k] for k in ww)
        print(f"  steps {lo}-{lo + 49}: mean loss adamw {ma:.4f} adamw8bit {mq:.4f} (rel {abs(ma - mq) / ma:.4f})")
print(f"  final loss adamw {la[ks[-1]]:.4f} adamw8bit {lq[ks[-1]]:.4f}")
for o, r in (("adamw", a), ("adamw8bit", q)):
    med = statistics.median(x["step_s"] for x in r if x["step"] > 10)
    try:
        r0 = json.load(open(f"{w}/1b-{o}/rank0.json"))
        peak, opt = r0["peak_bytes"]["total"] / 2**30, r0["shard_bytes"]["optim"]
    except Exception:
        peak, opt = float("nan"), 0
    print(f"  {o}: median step {med:.4f} s, {r[-1]['tokens'] / med:.0f} tok/s, peak {peak:.2f} GiB, "
          f"optimizer state {opt} bytes ({opt / (r0['shard_bytes']['params'] / 4):.4f} per parameter)")
PY
echo "total $(($(date +%s) - t0)) s"
