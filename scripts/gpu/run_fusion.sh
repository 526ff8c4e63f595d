#!/bin/bash
# On one H200: the figures of bench/results/2026-11-24-fusion.md.
#   bash .carry/fuse/run_fusion.sh PART...   (in this order, default: tests)
#     tests    CUDA tests of the fused ops (test_cuda_fused, _optim, _ops)
#     track    20 steps, 1B: base vs fused, fused + fsdp.param_copy (losses, step times)
#     profile  per-kernel profile of 2 fused steps (ncu, bench/profile_summary.py)
#     side     1B (micro-batch 4) and 8B (checkpointing, micro-batch 1) side by side
#              at world 1: PyTorch FSDP2 eager, --compile, fsdpc
# The carry folder holds build.tar.xz (this branch), base.tar.xz (the previous
# kernels: main's fsdpc, libfsdpc and plugins), runtime.tar.xz, build_dir,
# base_dir and bench/profile_summary.py. Logs and summaries go to $OUT.
set -u
C=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
mkdir -p /tmp/rt "$OUT"
tar xf "$C/runtime.tar.xz" -C /tmp/rt
tar xf "$C/build.tar.xz" -C /
[ -f "$C/base.tar.xz" ] && tar xf "$C/base.tar.xz" -C /
B=$(cat "$C/build_dir")
BB=$(cat "$C/base_dir" 2>/dev/null || echo "$B")
W=$(mktemp -d)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv | tee "$OUT/gpu.txt"
export PYTHONUNBUFFERED=1
T_END=${T_END:-420} # seconds after the start by which the side part stops starting runs
# the fsdpc of this branch (new) or of the previous kernels (base)
fsdpc_of() { local d=$B; [ "$1" = base ] && d=$BB; echo "env LD_LIBRARY_PATH=/tmp/rt:$d/lib FSDPC_PLUGIN_PATH=$d/plugins $d/bin/fsdpc"; }
$(fsdpc_of new) data synth --task copy --n 300000 --out "$W/copy.tok" >/dev/null
CFG1="configs/bench/llama3-1b-base.yaml data.train=$W/copy.tok train.micro_batch_size=4 train.log_every=1"
CFG8="configs/bench/llama3-8b-base.yaml data.train=$W/copy.tok train.micro_batch_size=1 train.log_every=1 fsdp.activation_checkpointing=true"

# median step time of steps > 4 and the losses, from a metrics.jsonl
summary() {
  python3 - "$1" "$2" <<'PY'
import json, statistics, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if "step" in r]
steady = [r["step_s"] for r in rows if r["step"] > 4]
med = statistics.median(steady)
print(f"RESULT {sys.argv[2]} steps {len(rows)} step_s {med:.4f} tok_s {rows[-1]['tokens'] / med:.0f} "
      f"peak_gib {max(r['peak_bytes'] for r in rows) / 2**30:.2f} loss1 {rows[0]['loss']:.4f} "
      f"loss_last {rows[-1]['loss']:.4f}")
PY
}
run_fsdpc() { # name which steps args...
  local name=$1 which=$2 steps=$3
  shift 3
  timeout 200 $(fsdpc_of "$which") train "$@" train.max_steps=$steps log.dir="$W/$name" >"$OUT/fsdpc-$name.log" 2>&1
  echo "fsdpc $name exit $?"
  grep -E "param_copy|error" "$OUT/fsdpc-$name.log" | head -3
  cp "$W/$name/metrics.jsonl" "$OUT/fsdpc-$name.metrics.jsonl" 2>/dev/null &&
    summary "$W/$name/metrics.jsonl" "$name" | tee -a "$OUT/results.txt"
}
torch_run() { # name limit_s args...
  local name=$1 lim=$2
  shift 2
  timeout $lim torchrun --standalone --nproc_per_node=1 bench/torch_fsdp2_baseline.py "$@" \
    >"$OUT/torch-$name.log" 2>&1
  echo "torch $name exit $?"
  grep RESULT "$OUT/torch-$name.log" | sed "s/^/$name /" | tee -a "$OUT/results.txt"
}

for part in "${@:-checks}"; do
case "$part" in
tests)
  for t in test_cuda_fused test_cuda_optim test_cuda_ops; do
    LD_LIBRARY_PATH=/tmp/rt:$B/lib timeout 120 "$B/bin/$t" >"$OUT/$t.log" 2>&1
    echo "$t exit $?"
    grep -E "rel err|differ|bit-identical|Checks|Failures|Errors" "$OUT/$t.log" | grep -vE "^\s*$" | tail -40
  done
  ;;
track)
  run_fsdpc base1b base 20 $CFG1
  run_fsdpc fused1b new 20 $CFG1
  run_fsdpc fused1b-copy new 20 $CFG1 fsdp.param_copy=true
  python3 - "$W" <<'PY' | tee -a "$OUT/results.txt"
import json, sys
w = sys.argv[1]
load = lambda n: [r["loss"] for r in map(json.loads, open(f"{w}/{n}/metrics.jsonl")) if "step" in r]
b = load("base1b")
for n in ("fused1b", "fused1b-copy"):
    f = load(n)
    d = max(abs(x - y) / abs(y) for x, y in zip(f, b))
    print(f"TRACK {n} vs base1b: {len(f)} steps, largest relative loss difference {d:.3e}, "
          f"last {f[-1]:.4f} vs {b[-1]:.4f}")
PY
  ;;
profile)
  NCU="ncu --clock-control none --metrics gpu__time_duration.sum --csv --target-processes all"
  LD_LIBRARY_PATH=/tmp/rt:$B/lib FSDPC_PLUGIN_PATH=$B/plugins timeout 200 $NCU \
    --log-file "$W/ncu_fused.csv" "$B/bin/fsdpc" train $CFG1 fsdp.param_copy=true train.max_steps=2 \
    log.dir="$W/ncu" >"$OUT/ncu_fused.log" 2>&1
  echo "ncu exit $?"
  [ -f "$W/ncu_fused.csv" ] && python3 "$C/profile_summary.py" "$W/ncu_fused.csv" | tee "$OUT/profile.txt" | head -50
  [ -f "$W/ncu_fused.csv" ] && xz -c "$W/ncu_fused.csv" >"$OUT/ncu_fused.csv.xz"
  ;;
side)
  # per-run limits keep the whole part under about 400 s (one device call)
  torch_run eager1b 100 --model 1b --strategy full --ac 0 --bs 4 --seq 2048 --steps 10 --warmup 3
  torch_run compile1b 130 --model 1b --strategy full --ac 0 --bs 4 --seq 2048 --steps 10 --warmup 3 --compile
  # the 1B fsdpc row: the track part's param_copy run when it ran in this call
  [ -f "$W/fused1b-copy/metrics.jsonl" ] || run_fsdpc side1b new 12 $CFG1 fsdp.param_copy=true
  # 8B at world 1 leaves room for copies of part of the units only (fsdpc plan)
  run_fsdpc side8b-copy new 10 $CFG8 fsdp.param_copy=true fsdp.param_copy_max_mib=9216
  run_fsdpc side8b new 10 $CFG8
  torch_run eager8b 110 --model 8b --strategy full --ac 1 --bs 1 --seq 2048 --steps 8 --warmup 3
  left=$((T_END - SECONDS))
  if [ $left -gt 45 ]; then
    torch_run compile8b $left --model 8b --strategy full --ac 1 --bs 1 --seq 2048 --steps 8 --warmup 3 --compile
  else
    echo "compile8b skipped: ${left} s left" | tee -a "$OUT/results.txt"
  fi
  ;;
esac
done
# at most 8 files come back: the logs travel as one archive
(cd "$OUT" && tar cJf logs.tar.xz --remove-files *.log *.metrics.jsonl 2>/dev/null)
cat "$OUT/results.txt" 2>/dev/null
