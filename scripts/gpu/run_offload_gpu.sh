#!/bin/bash
# On the GPU host: fsdp.mixed_precision.reduce_dtype bf16 and fsdp.cpu_offload
# against the default CUDA path, at world 1 and (with 2+ GPUs) world 2.
#   bash .carry/train/run_offload_gpu.sh
# Per world, 20 steps of a small model each:
#   base    the default (fp32 reduce, shards on the device)
#   base2   the default again: the run-to-run noise floor (embedding grads use
#           fp32 atomics, so two default runs need not be bit-identical)
#   bf16    reduce_dtype bf16                       vs base: loss within 1e-2
#   off     cpu_offload                             vs base: loss within
#           max(1e-5, 3 x noise) relative (the same fp32 AdamW, on the CPU)
#   offck   cpu_offload, sharded checkpoint every 10 steps + a full fp32 model;
#           offres resumes it at step 10 (offload), baseres resumes base's
#           checkpoint with offload: steps 11..20 vs the straight run within
#           the same tolerance; offfull saves the full (weights-only) format,
#           fullres starts from it with offload, fullbase without: the two
#           agree within the same tolerance
#   offbf   cpu_offload + reduce_dtype bf16         vs base: within 1e-2
# and the device peak (max of peak_bytes over steps): offload must be lower
# than base by at least half the shard bytes the engine logs (the planner's
# prediction is printed beside it). Exits 1 if any check fails. Logs in $OUT.
. "$(dirname "$0")/carry_env.sh" # C, OUT, B, F; LD_LIBRARY_PATH
export FSDPC_PLUGIN_PATH=$B/plugins
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
NGPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
W=$(mktemp -d)
$F data synth --task qa --n 20000 --out "$W/qa.tok" >/dev/null
cat >"$W/small.yaml" <<YAML
model: {vocab_size: 259, hidden_size: 256, intermediate_size: 640, num_hidden_layers: 4,
        num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 128,
        tie_word_embeddings: false}
data: {train: $W/qa.tok, seq_len: 64}
optim: {name: adamw, lr: 2.0e-3, weight_decay: 0.01}
schedule: {name: cosine, warmup_steps: 5}
train: {device: cuda, max_steps: 20, micro_batch_size: 8, global_batch_size: 16, log_every: 1,
        max_grad_norm: 1.0, eval_every: 0}
YAML
FAILS=0
bad() { echo "CHECK FAILED: $*"; FAILS=$((FAILS + 1)); }
run() { # name world overrides...
  local n=$1 w=$2
  shift 2
  local np=()
  [ "$w" -gt 1 ] && np=(--nproc-per-node "$w")
  $F train "$W/small.yaml" log.dir="$W/$n" "$@" "${np[@]}" >"$OUT/$n.log" 2>&1
  local rc=$?
  echo "== $n: exit $rc"
  grep -E "step 20/|error|cpu_offload|reduced in bf16|resumed from" "$OUT/$n.log" | tail -4
  [ -f "$W/$n/metrics.jsonl" ] && cp "$W/$n/metrics.jsonl" "$OUT/$n.metrics.jsonl"
  [ $rc -eq 0 ] || bad "$n exited $rc"
}
# worst relative difference of key between two runs over their common steps
worst() { # dirA dirB key
  python3 - "$1/metrics.jsonl" "$2/metrics.jsonl" "$3" <<'PY'
import json, sys
a = {r["step"]: r for r in map(json.loads, open(sys.argv[1])) if "step" in r}
b = {r["step"]: r for r in map(json.loads, open(sys.argv[2])) if "step" in r}
k = sys.argv[3]
common = sorted(s for s in set(a) & set(b) if k in a[s] and k in b[s])
if not common:
    print("nan"); sys.exit()
print(max(abs(a[s][k] - b[s][k]) / max(abs(a[s][k]), 1e-30) for s in common))
PY
}
within() { python3 -c "import sys; sys.exit(0 if float('$1') <= float('$2') else 1)"; }
peak() { python3 -c "import json; print(int(max(json.loads(l).get('peak_bytes', 0) for l in open('$1/metrics.jsonl'))))"; }
shard_bytes() { # from the engine's start-up line
  sed -n 's/.*per-rank shard bytes: params=\([0-9]*\) grads=\([0-9]*\) optim=\([0-9]*\).*/\1 \2 \3/p' "$1" |
    head -1 | awk '{print $1 + $2 + $3}'
}

worlds="1"
[ "$NGPU" -ge 2 ] && worlds="1 2"
for w in $worlds; do
  echo "######## world $w"
  p=w$w
  run ${p}_base $w
  run ${p}_base2 $w
  run ${p}_bf16 $w fsdp.mixed_precision.reduce_dtype=bf16
  run ${p}_off $w fsdp.cpu_offload=true
  run ${p}_offbf $w fsdp.cpu_offload=true fsdp.mixed_precision.reduce_dtype=bf16
  run ${p}_ckbase $w checkpoint.dir="$W/${p}_ckA" checkpoint.save_steps=10
  run ${p}_offck $w fsdp.cpu_offload=true checkpoint.dir="$W/${p}_ckB" checkpoint.save_steps=10 \
    checkpoint.final_dtype=fp32
  run ${p}_offres $w fsdp.cpu_offload=true checkpoint.dir="$W/${p}_ckC" \
    checkpoint.resume="$W/${p}_ckB/step-000010"
  run ${p}_baseres $w fsdp.cpu_offload=true checkpoint.dir="$W/${p}_ckD" \
    checkpoint.resume="$W/${p}_ckA/step-000010"
  run ${p}_offfull $w fsdp.cpu_offload=true checkpoint.dir="$W/${p}_ckE" checkpoint.save_steps=10 \
    checkpoint.intermediate_format=full
  run ${p}_fullres $w fsdp.cpu_offload=true checkpoint.dir="$W/${p}_ckF" \
    checkpoint.resume="$W/${p}_ckE/step-000010"
  # a full checkpoint holds weights only: training restarts at step 0 from
  # them, so the check is the same start without offload
  run ${p}_fullbase $w checkpoint.dir="$W/${p}_ckG" checkpoint.resume="$W/${p}_ckE/step-000010"
  ls "$W/${p}_ckB" "$W/${p}_ckE" 2>&1 | tr '\n' ' '; echo

  noise=$(worst "$W/${p}_base" "$W/${p}_base2" loss)
  tol=$(python3 -c "print(max(1e-5, 3 * float('$noise')))")
  echo "--- noise floor (base vs base2, loss): $noise -> offload tolerance $tol"
  echo "--- bf16 reduce vs base (rtol 1e-2 on loss)"
  python3 "$C/compare_runs.py" "$W/${p}_base" "$W/${p}_bf16" "$W/${p}_offbf" --rtol 1e-2 --keys loss ||
    bad "world $w: bf16 reduce loss off by more than 1e-2"
  echo "--- offload vs base (rtol $tol on loss, grad_norm)"
  python3 "$C/compare_runs.py" "$W/${p}_base" "$W/${p}_off" --rtol "$tol" --keys loss,grad_norm ||
    bad "world $w: offload differs from base"
  for pair in "offck offres" "offck baseres" "fullbase fullres" "ckbase offck"; do
    set -- $pair
    d=$(worst "$W/${p}_$1" "$W/${p}_$2" loss)
    echo "--- $2 vs $1 (common steps), worst relative loss difference $d"
    within "$d" "$tol" || bad "world $w: $2 vs $1: $d > $tol"
  done
  grep -q "resumed from" "$OUT/${p}_offres.log" || bad "world $w: offres did not resume"
  grep -q "loaded .*step-000010 (full)" "$OUT/${p}_fullres.log" ||
    bad "world $w: fullres did not load the full checkpoint"
  [ -f "$W/${p}_ckB/final/model.safetensors" ] || bad "world $w: no final model with offload"

  sb=$(shard_bytes "$OUT/${p}_base.log")
  pb=$(peak "$W/${p}_base"); po=$(peak "$W/${p}_off"); pbf=$(peak "$W/${p}_bf16")
  $F plan "$W/small.yaml" --json --world "$w" --nproc-per-node "$w" >"$OUT/${p}_plan.json" 2>"$OUT/${p}_plan.err"
  pred=$(python3 - "$OUT/${p}_plan.json" <<'PY'
import json, sys
try:
    rows = [r for r in json.load(open(sys.argv[1])) if r["strategy"] == "FULL_SHARD" and not r["activation_checkpointing"]]
    on = [r for r in rows if r["cpu_offload"]][0]; off = [r for r in rows if not r["cpu_offload"]][0]
    print(f'{off["peak_bytes"]["total"] / 2**20:.1f} -> {on["peak_bytes"]["total"] / 2**20:.1f} MiB, host {on["host_bytes"] / 2**20:.1f} MiB')
except Exception as e:
    print(f"(no plan: {e})")
PY
)
  echo "--- device peak (allocated, MiB): base $((pb >> 20)).$(( (pb & 1048575) * 10 >> 20 )) bf16 $((pbf >> 20)) offload $((po >> 20)).$(( (po & 1048575) * 10 >> 20 )); shard bytes $sb; drop $(( (pb - po) ))"
  echo "    planner (FULL_SHARD, no checkpointing): $pred"
  [ -n "$sb" ] && [ $((pb - po)) -ge $((sb / 2)) ] ||
    bad "world $w: offload peak $po not below base $pb by half the shard bytes ($sb)"
  echo "world $w peaks: base=$pb bf16=$pbf offload=$po shard_bytes=$sb" >>"$OUT/peaks.txt"
done
echo "######## $FAILS failed checks"
[ "$FAILS" -eq 0 ]
