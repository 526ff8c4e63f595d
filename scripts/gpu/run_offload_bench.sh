#!/bin/bash
# On the GPU host (one GPU): the offload modes against the plain CUDA path,
# tokens/s, device peak (allocated, rank0.json), host peak (VmHWM) and pinned
# bytes, and the planner's device and host figures for each row.
#   bash .carry/offload/run_offload_bench.sh 1b     (issue 15 (a): one H200)
#   bash .carry/offload/run_offload_bench.sh 8b     (issue 15 (b): one 80 GB H100)
#   bash .carry/off8/run_offload_bench.sh 8b8       (8b with adamw8bit: offloaded
#        a1 and a8, a8 without offload (run only if the planner says it fits),
#        fp32 AdamW offloaded a8 again as this call's reference; and a8 with
#        buffer_mib 128 and 2048, and a16: not run yet, pick them with ROWS)
# One line per row:
#   ROW <shape> <name> tok_s T step_s S dev_gib D plan_dev_gib P host_gib H plan_host_gib Q
#       pinned_gib N plan_pinned_gib M loss0 L [exit X]
# tok_s and step_s are medians over the steps after the second; LOSS lines
# list each row's per-step losses. Logs, plans, metrics and rank0.json of
# every row: $OUT/offload-logs.tgz. Env: STEPS (default 8), ROWS (names to
# run, default all of the shape's), ROW_TIMEOUT (seconds per run, default 900).
. "$(dirname "$0")/carry_env.sh" # C, OUT, B, F; LD_LIBRARY_PATH
STEPS=${STEPS:-8}
export FSDPC_PLUGIN_PATH=$B/plugins
W=$(mktemp -d)
L=$W/logs
mkdir -p "$L"
trap 'tar czf "$OUT/offload-logs.tgz" -C "$W" logs' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$L/gpu.txt"
echo "cpus $(nproc), $(grep MemTotal /proc/meminfo)" | tee -a "$L/gpu.txt"
$F data synth --task copy --n 200000 --out "$W/copy.tok" >/dev/null
shape=${1:-1b}
case $shape in
  1b) cfg=$C/llama3-1b-base.yaml
      rows=(
        "base-a1|train.micro_batch_size=4 train.global_batch_size=4"
        "full-a1|train.micro_batch_size=4 train.global_batch_size=4 fsdp.cpu_offload=true"
        "base-a8|train.micro_batch_size=4 train.global_batch_size=32"
        "full-a8|train.micro_batch_size=4 train.global_batch_size=32 fsdp.cpu_offload=true"
        "optim-a8|train.micro_batch_size=4 train.global_batch_size=32 fsdp.offload.optimizer=true"
        "full-a8-ns|train.micro_batch_size=4 train.global_batch_size=32 fsdp.cpu_offload=true fsdp.no_sync=true"
        "base-a16|train.micro_batch_size=4 train.global_batch_size=64"
        "full-a16-ns|train.micro_batch_size=4 train.global_batch_size=64 fsdp.cpu_offload=true fsdp.no_sync=true"
      ) ;;
  8b) cfg=$C/llama3-8b-base.yaml
      rows=(
        "optim-a1|train.micro_batch_size=1 train.global_batch_size=1 fsdp.activation_checkpointing=true fsdp.offload.optimizer=true"
        "optim-a8|train.micro_batch_size=1 train.global_batch_size=8 fsdp.activation_checkpointing=true fsdp.offload.optimizer=true"
      ) ;;
  8b8) cfg=$C/llama3-8b-base.yaml
      rows=(
        "q8-optim-a1|train.micro_batch_size=1 train.global_batch_size=1 fsdp.activation_checkpointing=true fsdp.offload.optimizer=true optim.name=adamw8bit"
        "q8-optim-a8|train.micro_batch_size=1 train.global_batch_size=8 fsdp.activation_checkpointing=true fsdp.offload.optimizer=true optim.name=adamw8bit"
        "q8-plain-a8|train.micro_batch_size=1 train.global_batch_size=8 fsdp.activation_checkpointing=true optim.name=adamw8bit"
        "f32-optim-a8|train.micro_batch_size=1 train.global_batch_size=8 fsdp.activation_checkpointing=true fsdp.offload.optimizer=true"
        "q8-optim-a8-b128|train.micro_batch_size=1 train.global_batch_size=8 fsdp.activation_checkpointing=true fsdp.offload.optimizer=true optim.name=adamw8bit fsdp.offload.buffer_mib=128"
        "q8-optim-a8-b2048|train.micro_batch_size=1 train.global_batch_size=8 fsdp.activation_checkpointing=true fsdp.offload.optimizer=true optim.name=adamw8bit fsdp.offload.buffer_mib=2048"
        "q8-optim-a16|train.micro_batch_size=1 train.global_batch_size=16 fsdp.activation_checkpointing=true fsdp.offload.optimizer=true optim.name=adamw8bit"
      ) ;;
esac
GPU_GIB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1 | awk '{printf "%.2f", $1 / 1024}')
for r in "${rows[@]}"; do
  name=${r%%|*}
  [ -n "${ROWS:-}" ] && ! [[ " $ROWS " == *" $name "* ]] && continue
  read -r -a ov <<<"${r#*|}"
  common=(data.train="$W/copy.tok" train.max_steps="$STEPS" train.log_every=1
          train.generate_prompts=[] train.eval_every=0 "${ov[@]}")
  $F plan "$cfg" "${common[@]}" --json >"$L/plan-$shape-$name.json" 2>"$L/plan-$shape-$name.err"
  if [[ $name == *-plain-* ]]; then # only where the planner says it fits this GPU
    $F plan "$cfg" "${common[@]}" --gpu-mem "$GPU_GIB" >"$L/plan-$shape-$name.txt" 2>&1
    fit=$(grep '^\*' "$L/plan-$shape-$name.txt" | awk '{print $NF}' | head -1)
    echo "PLAN $shape $name on $GPU_GIB GiB: $(grep '^\*' "$L/plan-$shape-$name.txt" | head -1)"
    if [ "$fit" != yes ]; then
      echo "ROW $shape $name not run: the planner says it does not fit ($fit)"
      continue
    fi
  fi
  timeout "${ROW_TIMEOUT:-900}" $F train "$cfg" "${common[@]}" log.dir="$W/$shape-$name" >"$L/train-$shape-$name.log" 2>&1
  trc=$?
  cp "$W/$shape-$name/metrics.jsonl" "$L/metrics-$shape-$name.jsonl" 2>/dev/null
  cp "$W/$shape-$name/rank0.json" "$L/rank0-$shape-$name.json" 2>/dev/null
  python3 - "$L/plan-$shape-$name.json" "$W/$shape-$name" "$shape" "$name" "$trc" <<'PY'
import json, statistics, sys
plan_path, d, shape, name, trc = sys.argv[1:6]
G = 2**30
def f(x): return "%.3f" % (x / G) if x is not None else "-"
try:
    mine = [r for r in json.load(open(plan_path)) if r["config"]][0]
except Exception:
    mine = {}
try:
    rk = json.load(open(d + "/rank0.json"))
except Exception:
    rk = {}
try:
    m = [json.loads(l) for l in open(d + "/metrics.jsonl")]
    m = [r for r in m if "step" in r]
    late = [r for r in m if r["step"] > 2] or m
    tok = statistics.median(r["tok_s"] for r in late)
    sts = statistics.median(r["step_s"] for r in late)
    loss0 = m[0]["loss"]
except Exception:
    tok = sts = loss0 = None
print("ROW %s %-9s tok_s %s step_s %s dev_gib %s plan_dev_gib %s host_gib %s plan_host_gib %s pinned_gib %s plan_pinned_gib %s loss0 %s%s" % (
    shape, name, "%.0f" % tok if tok else "-", "%.3f" % sts if sts else "-",
    f(rk.get("peak_bytes", {}).get("total")), f(mine.get("peak_bytes", {}).get("total")),
    f(rk.get("host_rss_peak_bytes")), f(mine.get("host_total_bytes")),
    f(rk.get("host_pinned_bytes")), f(mine.get("host_pinned_bytes")),
    "%.5f" % loss0 if loss0 else "-", "" if trc == "0" else " exit " + trc), flush=True)
try:
    print("LOSS %s %-9s %s" % (shape, name, " ".join("%.6f" % r["loss"] for r in m)))
except Exception:
    pass
PY
  [ "$trc" -eq 0 ] || grep -m3 -E "error|fail" "$L/train-$shape-$name.log"
done
