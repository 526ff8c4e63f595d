#!/bin/bash
# On the GPU host (one H200): fsdp.cpu_offload at world 1 on the 1B shape
# against the same run without offload, fp32 AdamW and adamw8bit; tokens/s,
# device peak (allocated, rank0.json), host peak (VmHWM) and pinned bytes,
# and the planner's figures for each row (bench/results/2026-11-24-cpuoffload.md,
# 2026-11-24-cpuoffload2.md: -ka / -kn = fsdp.keep_params all / none; the
# other cpu_offload rows run its default, first).
#   bash scripts/gpu/pack_train_carry.sh /work/main/.carry/cpuoff && \
#     cp configs/bench/llama3-1b-base.yaml /work/main/.carry/cpuoff/     (here)
#   STEPS=20 ROWS="base-a16 full-a16-ns" bash .carry/cpuoff/run_cpuoff_bench.sh   (device)
# One line per row:
#   ROW <name> tok_s T step_s S dev_gib D plan_dev_gib P host_gib H plan_host_gib Q
#       pinned_gib N plan_pinned_gib M [exit X]
# tok_s and step_s are medians over steps 5..STEPS (all steps when fewer);
# LOSS lines list each row's per-step losses. Logs, plans, metrics and
# rank0.json of every row: $OUT/cpuoff-logs.tgz. Env: STEPS (default 20),
# ROWS (names to run, default all; they run in the order of the list below), CHECK=1 first runs run_offload_gpu.sh
# (the CUDA offload checks) into $OUT/offload-check; TRACE_ROWS: see the end;
# BUDGET (seconds): rows
# that would start later are skipped.
. "$(dirname "$0")/carry_env.sh" # C, OUT, B, F; LD_LIBRARY_PATH
STEPS=${STEPS:-20}
export FSDPC_PLUGIN_PATH=$B/plugins
if [ "${CHECK:-0}" = 1 ]; then
  mkdir -p "$OUT/offload-check"
  OUT=$OUT/offload-check timeout 200 bash "$C/run_offload_gpu.sh" >"$OUT/offload-check/run.log" 2>&1
  echo "CHECK run_offload_gpu.sh exit $?"
  grep -E "CHECK FAILED|failed checks|^---" "$OUT/offload-check/run.log" | tail -24
  tar czf "$OUT/offload-check.tgz" -C "$OUT" offload-check && rm -rf "$OUT/offload-check"
fi
W=$(mktemp -d)
L=$W/logs
mkdir -p "$L"
trap 'tar czf "$OUT/cpuoff-logs.tgz" -C "$W" logs' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$L/gpu.txt"
echo "cpus $(nproc), $(grep MemTotal /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo), $(grep -o -m1 'avx512f' /proc/cpuinfo)" | tee -a "$L/gpu.txt"
$F data synth --task copy --n 200000 --out "$W/copy.tok" >/dev/null
cfg=$C/llama3-1b-base.yaml
mb="train.micro_batch_size=4"
q8="optim.name=adamw8bit"
sep="fsdp.wrap.options.separate_embedding=true fsdp.wrap.options.separate_lm_head=true"
rows=(
  "base-a8|$mb train.global_batch_size=32"
  "full-a8-ns|$mb train.global_batch_size=32 fsdp.cpu_offload=true fsdp.no_sync=true"
  "full-a8-ns-ka|$mb train.global_batch_size=32 fsdp.cpu_offload=true fsdp.no_sync=true fsdp.keep_params=all"
  "full-a8-ns-kn|$mb train.global_batch_size=32 fsdp.cpu_offload=true fsdp.no_sync=true fsdp.keep_params=none"
  "full-a8-ns-sep|$mb train.global_batch_size=32 fsdp.cpu_offload=true fsdp.no_sync=true $sep"
  "base-a16|$mb train.global_batch_size=64"
  "full-a16-ns|$mb train.global_batch_size=64 fsdp.cpu_offload=true fsdp.no_sync=true"
  "full-a16-ns-ka|$mb train.global_batch_size=64 fsdp.cpu_offload=true fsdp.no_sync=true fsdp.keep_params=all"
  "full-a16-ns-kn|$mb train.global_batch_size=64 fsdp.cpu_offload=true fsdp.no_sync=true fsdp.keep_params=none"
  "q8-full-a16-ns|$mb train.global_batch_size=64 fsdp.cpu_offload=true fsdp.no_sync=true $q8"
  "full-a16-ns-sep|$mb train.global_batch_size=64 fsdp.cpu_offload=true fsdp.no_sync=true $sep"
  "q8-full-a1|$mb train.global_batch_size=4 fsdp.cpu_offload=true $q8"
  "full-a1|$mb train.global_batch_size=4 fsdp.cpu_offload=true"
  "base-a1|$mb train.global_batch_size=4"
  "q8-base-a16|$mb train.global_batch_size=64 $q8"
  "full-a8|$mb train.global_batch_size=32 fsdp.cpu_offload=true"
  "q8-base-a1|$mb train.global_batch_size=4 $q8"
  "full-a16-ns-z2|$mb train.global_batch_size=64 fsdp.cpu_offload=true fsdp.no_sync=true fsdp.sharding_strategy=SHARD_GRAD_OP"
)
for r in "${rows[@]}"; do
  name=${r%%|*}
  [ -n "${ROWS:-}" ] && ! [[ " $ROWS " == *" $name "* ]] && continue
  if [ "$SECONDS" -gt "${BUDGET:-100000}" ]; then echo "SKIP $name (past BUDGET=$BUDGET s)"; continue; fi
  read -r -a ov <<<"${r#*|}"
  common=(data.train="$W/copy.tok" train.max_steps="$STEPS" train.log_every=1
          train.generate_prompts=[] train.eval_every=0 "${ov[@]}")
  $F plan "$cfg" "${common[@]}" --json >"$L/plan-$name.json" 2>"$L/plan-$name.err"
  timeout 300 $F train "$cfg" "${common[@]}" log.dir="$W/$name" >"$L/train-$name.log" 2>&1
  trc=$?
  cp "$W/$name/metrics.jsonl" "$L/metrics-$name.jsonl" 2>/dev/null
  cp "$W/$name/rank0.json" "$L/rank0-$name.json" 2>/dev/null
  python3 - "$L/plan-$name.json" "$W/$name" "$name" "$trc" <<'PY'
import json, statistics, sys
plan_path, d, name, trc = sys.argv[1:5]
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
    late = [r for r in m if r["step"] >= 5] or m
    tok = statistics.median(r["tok_s"] for r in late)
    sts = statistics.median(r["step_s"] for r in late)
except Exception:
    tok = sts = None
print("ROW %-15s tok_s %s step_s %s dev_gib %s plan_dev_gib %s host_gib %s plan_host_gib %s pinned_gib %s plan_pinned_gib %s%s" % (
    name, "%.0f" % tok if tok else "-", "%.3f" % sts if sts else "-",
    f(rk.get("peak_bytes", {}).get("total")), f(mine.get("peak_bytes", {}).get("total")),
    f(rk.get("host_rss_peak_bytes")), f(mine.get("host_total_bytes")),
    f(rk.get("host_pinned_bytes")), f(mine.get("host_pinned_bytes")),
    "" if trc == "0" else " exit " + trc), flush=True)
try:
    print("LOSS %-15s %s" % (name, " ".join("%.6f" % r["loss"] for r in m)))
except Exception:
    pass
PY
  [ "$trc" -eq 0 ] || grep -m3 -E "error|fail" "$L/train-$name.log"
done
# TRACE_ROWS (names of rows above): each again for 5 steps under the CUPTI
# tracer (libfsdpc_cupti_trace.so, kernels and copies only), then
# bench/offload_gaps.py of its last complete step into $L/gaps-<name>.txt.
for name in ${TRACE_ROWS:-}; do
  if [ "$SECONDS" -gt "${BUDGET:-100000}" ]; then echo "SKIP trace $name (past BUDGET=$BUDGET s)"; continue; fi
  for r in "${rows[@]}"; do
    [ "${r%%|*}" = "$name" ] || continue
    read -r -a ov <<<"${r#*|}"
    mkdir -p "$W/tr-$name"
    FSDPC_TRACE_DIR="$W/tr-$name" FSDPC_TRACE_API=0 CUDA_INJECTION64_PATH="$B/lib/libfsdpc_cupti_trace.so" \
      timeout 200 $F train "$cfg" data.train="$W/copy.tok" train.max_steps=5 train.log_every=1 \
      train.generate_prompts=[] train.eval_every=0 "${ov[@]}" log.dir="$W/trace-$name" \
      >"$L/trace-$name.log" 2>&1
    echo "TRACE $name exit $?"
    python3 "$C/offload_gaps.py" "$W/tr-$name" --top 25 | tee "$L/gaps-$name.txt"
  done
done
