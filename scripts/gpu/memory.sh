#!/bin/bash
# Memory on the GPU host: the planner against the measured peaks, and the
# offload modes' rows (tokens/s, device, host and pinned bytes beside the
# planner's), from a carry made by carry.sh. Logs go to $OUT (or /tmp/out).
#   bash .carry/X/memory.sh plan [1b] [8b]   (one GPU) the planner's prediction
#     against the measured peak for the Llama-3.2-1B and Llama-3.1-8B shapes, with
#     forward/backward prefetch, activation checkpointing and CPU offload on and
#     off. One line per row:
#       ROW <shape> <variant> planned_gib P measured_gib M err_pct E [exit X]
#     where planned is `fsdpc plan --json`'s total peak for the run's own row and
#     measured is rank0.json's peak_bytes.total (the CUDA pools' allocated peak
#     over the run). Acceptance (issue 17): |err| <= 5% on every row that runs.
#     On one GPU every unit is whole (S = 1): nothing is gathered over a comm
#     stream, so the no-prefetch rows must equal their prefetch twins, in the
#     plan and in the measurement. NPROC=N runs the same rows over N GPUs
#     (--nproc-per-node N, planned with --world N), where prefetch matters.
#     Env: STEPS (default 4), L8 (decoder layers of the 8B shape, default 32:
#     the full 8B does not fit one GPU without offload, and with offload needs
#     about 150 GB of pinned host memory; set e.g. L8=8 to keep the 8B widths
#     on a smaller depth), MB1 / MB8 (micro-batch, default 4 / 1). Runs from
#     the repository too (no carry: B, default build/).
#   bash .carry/X/memory.sh offload 1b|8b|8b8   (one GPU) the offload modes
#     against the plain CUDA path:
#       1b   issue 15 (a): one H200
#       8b   issue 15 (b): one 80 GB H100
#       8b8  8b with adamw8bit: offloaded a1 and a8, a8 without offload (run only
#            if the planner says it fits), fp32 AdamW offloaded a8 again as this
#            call's reference; and a8 with buffer_mib 128 and 2048, and a16: not
#            run yet, pick them with ROWS
#     One line per row (lib/rows.py offload):
#       ROW <shape> <name> tok_s T step_s S dev_gib D plan_dev_gib P host_gib H
#           plan_host_gib Q pinned_gib N plan_pinned_gib M loss0 L [exit X]
#     tok_s and step_s are medians over the steps after the second; LOSS lines
#     list each row's per-step losses. Logs, plans, metrics and rank0.json of
#     every row: $OUT/offload-logs.tgz. Env: STEPS (default 8), ROWS (names to
#     run, default all of the shape's), ROW_TIMEOUT (seconds per run, default 900).
#   bash .carry/X/memory.sh cpuoff   (one H200) fsdp.cpu_offload at world 1 on the
#     1B shape against the same run without offload, fp32 AdamW and adamw8bit;
#     row names: aN = N micro-batches a step, full = cpu_offload, -ns = no_sync,
#     q8 = adamw8bit, -ka / -kn = fsdp.keep_params all / none (the other
#     cpu_offload rows run its default, first), -sep = separate embedding and
#     head units, -z2 = SHARD_GRAD_OP. One line per row:
#       ROW <name> tok_s T step_s S dev_gib D plan_dev_gib P host_gib H plan_host_gib Q
#           pinned_gib N plan_pinned_gib M [exit X]
#     tok_s and step_s are medians over steps 5..STEPS (all steps when fewer);
#     LOSS lines list each row's per-step losses. Logs, plans, metrics and
#     rank0.json of every row: $OUT/cpuoff-logs.tgz. Env: STEPS (default 20),
#     ROWS (names to run, default all; they run in the order of the list below),
#     CHECK=1 first runs `agree.sh offload` (the CUDA offload checks) into
#     $OUT/offload-check; TRACE_ROWS (names of rows): each again for 5 steps
#     under the CUPTI tracer, then bench/offload_gaps.py of its last complete
#     step into gaps-<name>.txt; BUDGET (seconds): rows that would start later
#     are skipped.
# shellcheck disable=SC2317 # the mode functions run through "$MODE"
MODE=${1:-}
shift
case $MODE in
plan) ;;
offload | cpuoff) . "$(dirname "$0")/carry_env.sh" ;; # C, OUT, B, F; LD_LIBRARY_PATH
*)
  echo "usage: memory.sh plan [1b] [8b] | offload 1b|8b|8b8 | cpuoff" >&2
  exit 2
  ;;
esac

plan() {
  C=$(cd "$(dirname "$0")" && pwd)
  OUT=${OUT:-/tmp/out}
  STEPS=${STEPS:-4}
  L8=${L8:-32}
  mkdir -p /tmp/rt "$OUT"
  if [ -f "$C/runtime.tar.xz" ]; then
    tar xf "$C/runtime.tar.xz" -C /tmp/rt
    tar xf "$C/build.tar.xz" -C /
    B=$(cat "$C/build_dir")
  else
    B=${B:-$(cd "$C/../.." && pwd)/build}
  fi
  F=$B/bin/fsdpc
  W=$(mktemp -d)
  export LD_LIBRARY_PATH=/tmp/rt:$B/lib:${LD_LIBRARY_PATH:-}
  export FSDPC_PLUGIN_PATH=$B/plugins
  $F data synth --task copy --n 200000 --out "$W/copy.tok" >/dev/null

  shapes=("$@")
  [ ${#shapes[@]} -eq 0 ] && shapes=(1b 8b)
  variants=(
    "default|"
    "no-prefetch|fsdp.forward_prefetch=false fsdp.backward_prefetch=false"
    "ckpt|fsdp.activation_checkpointing=true"
    "ckpt-no-prefetch|fsdp.activation_checkpointing=true fsdp.forward_prefetch=false fsdp.backward_prefetch=false"
    "offload|fsdp.cpu_offload=true"
    "offload-ckpt|fsdp.cpu_offload=true fsdp.activation_checkpointing=true"
  )
  for shape in "${shapes[@]}"; do
    case $shape in
      1b) cfg=configs/bench/llama3-1b-base.yaml base=("train.micro_batch_size=${MB1:-4}") ;;
      8b) cfg=configs/bench/llama3-8b-base.yaml
          base=("train.micro_batch_size=${MB8:-1}" "model.num_hidden_layers=$L8") ;;
      *) echo "unknown shape $shape (1b, 8b)"; continue ;;
    esac
    for v in "${variants[@]}"; do
      name=${v%%|*}
      read -r -a ov <<<"${v#*|}"
      common=(data.train="$W/copy.tok" train.max_steps="$STEPS" train.log_every=1
              train.generate_prompts=[] train.eval_every=0 "${base[@]}" "${ov[@]}")
      $F plan "$cfg" "${common[@]}" --world "${NPROC:-1}" --json >"$OUT/plan-$shape-$name.json" 2>"$OUT/plan-$shape-$name.err"
      prc=$?
      timeout 600 "$F" train "$cfg" "${common[@]}" log.dir="$W/$shape-$name" \
        --nproc-per-node "${NPROC:-1}" >"$OUT/train-$shape-$name.log" 2>&1
      trc=$?
      python3 - "$OUT/plan-$shape-$name.json" "$W/$shape-$name/rank0.json" "$shape" "$name" \
        "$prc" "$trc" <<'PY'
import json, sys
plan_path, rank_path, shape, name, prc, trc = sys.argv[1:7]
try:
    rows = json.load(open(plan_path))
    mine = [r for r in rows if r["config"]][0]
    planned = mine["peak_bytes"]["total"]
except Exception as e:
    planned = None
try:
    measured = json.load(open(rank_path))["peak_bytes"]["total"]
except Exception:
    measured = None
p = "%.3f" % (planned / 2**30) if planned else "-"
m = "%.3f" % (measured / 2**30) if measured else "-"
e = "%+.2f" % (100.0 * (planned - measured) / measured) if planned and measured else "-"
tail = "" if trc == "0" else " exit %s" % trc
print("ROW %s %-18s planned_gib %s measured_gib %s err_pct %s%s" % (shape, name, p, m, e, tail))
PY
      [ "$trc" -eq 0 ] || grep -m2 -E "error" "$OUT/train-$shape-$name.log"
    done
  done
}

# rows_work TGZ: W (a work folder) with the token file W/copy.tok, L (its logs
# folder, packed into $OUT/TGZ at the end) with gpu.txt: the GPU and host CPU
rows_work() {
  W=$(mktemp -d)
  L=$W/logs
  mkdir -p "$L"
  # shellcheck disable=SC2064 # OUT, W and the name are fixed from here on
  trap "tar czf \"$OUT/$1\" -C \"$W\" logs" EXIT
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$L/gpu.txt"
  echo "cpus $(nproc), $(grep MemTotal /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo), $(grep -o -m1 'avx512f' /proc/cpuinfo)" | tee -a "$L/gpu.txt"
  $F data synth --task copy --n 200000 --out "$W/copy.tok" >/dev/null
}

offload() {
  STEPS=${STEPS:-8}
  export FSDPC_PLUGIN_PATH=$B/plugins
  rows_work offload-logs.tgz
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
    timeout "${ROW_TIMEOUT:-900}" "$F" train "$cfg" "${common[@]}" log.dir="$W/$shape-$name" >"$L/train-$shape-$name.log" 2>&1
    trc=$?
    cp "$W/$shape-$name/metrics.jsonl" "$L/metrics-$shape-$name.jsonl" 2>/dev/null
    cp "$W/$shape-$name/rank0.json" "$L/rank0-$shape-$name.json" 2>/dev/null
    python3 "$C/lib/rows.py" offload "$L/plan-$shape-$name.json" "$W/$shape-$name" "$name" "$trc" \
      --shape "$shape" --first 3 --loss0
    [ "$trc" -eq 0 ] || grep -m3 -E "error|fail" "$L/train-$shape-$name.log"
  done
}

cpuoff() {
  STEPS=${STEPS:-20}
  export FSDPC_PLUGIN_PATH=$B/plugins
  if [ "${CHECK:-0}" = 1 ]; then
    mkdir -p "$OUT/offload-check"
    OUT=$OUT/offload-check timeout 200 bash "$C/agree.sh" offload >"$OUT/offload-check/run.log" 2>&1
    echo "CHECK agree.sh offload exit $?"
    grep -E "CHECK FAILED|failed checks|^---" "$OUT/offload-check/run.log" | tail -24
    tar czf "$OUT/offload-check.tgz" -C "$OUT" offload-check && rm -rf "$OUT/offload-check"
  fi
  rows_work cpuoff-logs.tgz
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
    timeout 300 "$F" train "$cfg" "${common[@]}" log.dir="$W/$name" >"$L/train-$name.log" 2>&1
    trc=$?
    cp "$W/$name/metrics.jsonl" "$L/metrics-$name.jsonl" 2>/dev/null
    cp "$W/$name/rank0.json" "$L/rank0-$name.json" 2>/dev/null
    python3 "$C/lib/rows.py" offload "$L/plan-$name.json" "$W/$name" "$name" "$trc"
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
        timeout 200 "$F" train "$cfg" data.train="$W/copy.tok" train.max_steps=5 train.log_every=1 \
        train.generate_prompts=[] train.eval_every=0 "${ov[@]}" log.dir="$W/trace-$name" \
        >"$L/trace-$name.log" 2>&1
      echo "TRACE $name exit $?"
      python3 "$C/offload_gaps.py" "$W/tr-$name" --top 25 | tee "$L/gaps-$name.txt"
    done
  done
}

"$MODE" "$@"
