#!/bin/bash
# On the GPU host (one GPU): the memory planner's prediction against the
# measured peak for the Llama-3.2-1B and Llama-3.1-8B shapes, with forward/
# backward prefetch, activation checkpointing and CPU offload on and off.
# One line per row:
#   ROW <shape> <variant> planned_gib P measured_gib M err_pct E [exit X]
# where planned is `fsdpc plan --json`'s total peak for the run's own row and
# measured is rank0.json's peak_bytes.total (the CUDA pools' allocated peak
# over the run). Acceptance (issue 17): |err| <= 5% on every row that runs.
#
# Build and pack here first:
#   scripts/gpu/pack_train_carry.sh /work/main/.carry/train
# then on the host (run tool, carry .carry/train):
#   bash .carry/train/run_plan_check.sh [1b] [8b]
# On one GPU every unit is whole (S = 1): nothing is gathered over a comm
# stream, so the no-prefetch rows must equal their prefetch twins, in the
# plan and in the measurement. NPROC=N runs the same rows over N GPUs
# (--nproc-per-node N, planned with --world N), where prefetch matters.
# Env: STEPS (default 4), L8 (decoder layers of the 8B shape, default 32:
# the full 8B does not fit one GPU without offload, and with offload needs
# about 150 GB of pinned host memory; set e.g. L8=8 to keep the 8B widths
# on a smaller depth), MB1 / MB8 (micro-batch, default 4 / 1).
set -u
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
    1b) cfg=configs/bench/llama3-1b-base.yaml base=(train.micro_batch_size=${MB1:-4}) ;;
    8b) cfg=configs/bench/llama3-8b-base.yaml
        base=(train.micro_batch_size=${MB8:-1} model.num_hidden_layers=$L8) ;;
    *) echo "unknown shape $shape (1b, 8b)"; continue ;;
  esac
  for v in "${variants[@]}"; do
    name=${v%%|*}
    read -r -a ov <<<"${v#*|}"
    common=(data.train="$W/copy.tok" train.max_steps="$STEPS" train.log_every=1
            train.generate_prompts=[] train.eval_every=0 "${base[@]}" "${ov[@]}")
    $F plan "$cfg" "${common[@]}" --world "${NPROC:-1}" --json >"$OUT/plan-$shape-$name.json" 2>"$OUT/plan-$shape-$name.err"
    prc=$?
    timeout 600 $F train "$cfg" "${common[@]}" log.dir="$W/$shape-$name" \
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
