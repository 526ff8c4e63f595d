#!/bin/bash
# On one H200: the figures of bench/results/2026-11-24-gaps.md (where the GPU
# idles in a steady step, and the step after removing those gaps).
#   bash .carry/gaps/run_gaps.sh PART...   (in this order; from the repo root)
#     trace    6 steps of the 1B shape (micro-batch 4, param_copy) under CUPTI
#              (libfsdpc_cupti_trace.so), for base and new (and new with SIDE_NEW_ARGS
#              if set): idle gaps of the last 3 steps (bench/gap_summary.py) and
#              bench/timeline_summary.py
#     trace8   the same for 8B with activation checkpointing, micro-batch 1 (5 steps)
#     track    20 steps, 1B: base vs new (losses, step times), GPU clocks sampled
#     tests    the CUDA test binaries of this build
#     profile  per-kernel profile of 2 steps of new (ncu, bench/profile_summary.py);
#              PROF_ARGS: overrides added to its command line
#     ab1b     1B (micro-batch 4): the builds of AB_VARIANTS (default "new base"; an entry
#              build:key=value,key=value adds overrides) in turn, AB_ROUNDS (3) times each,
#              30 steps a run (an A/B of step time within one call, no PyTorch)
#     rounds1b 1B: compiled PyTorch, fsdpc new and (with SIDE_NEW_ARGS) new again, in turn,
#              ROUNDS (2) times; then each one's median tokens/s and the ratios
#     side8    8B with checkpointing, micro-batch 1: fsdpc new, new with
#              fsdp.activation_checkpointing_policy=save_mlp, base; twice (no PyTorch)
#     side     1B (micro-batch 4) and 8B (checkpointing, micro-batch 1) at world 1:
#              PyTorch FSDP2 eager, --compile, fsdpc (new, then base, then new with
#              SIDE_NEW_ARGS if set; 8B also new with
#              fsdp.activation_checkpointing_policy=save_mlp); GPU clocks sampled
# The carry folder holds build.tar.xz (this branch: "new"), base.tar.xz (the build
# before the change: bin/fsdpc, lib/, plugins/ under base_dir), runtime.tar.xz,
# build_dir, base_dir and the bench scripts. Logs and summaries go to $OUT.
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
T_END=${T_END:-540} # seconds after the start by which the side part stops starting runs
TRACER=$B/lib/libfsdpc_cupti_trace.so
fsdpc_of() {
  local d=$B
  [ "$1" = base ] && d=$BB
  echo "env LD_LIBRARY_PATH=/tmp/rt:$d/lib FSDPC_PLUGIN_PATH=$d/plugins $d/bin/fsdpc"
}
$(fsdpc_of new) data synth --task copy --n 300000 --out "$W/copy.tok" >/dev/null
CFG1="configs/bench/llama3-1b-base.yaml data.train=$W/copy.tok train.micro_batch_size=4 train.log_every=1 fsdp.param_copy=true"
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
  grep -E "error" "$OUT/fsdpc-$name.log" | head -3
  cp "$W/$name/rank0.json" "$OUT/fsdpc-$name.rank0.json" 2>/dev/null # run report (reserved_bytes)
  cp "$W/$name/metrics.jsonl" "$OUT/fsdpc-$name.metrics.jsonl" 2>/dev/null &&
    summary "$W/$name/metrics.jsonl" "$name" | tee -a "$OUT/results.txt"
}
traced() { # name which steps args...: a run under the CUPTI tracer, then its gaps
  local name=$1 which=$2 steps=$3
  shift 3
  rm -rf "$W/tr-$name" && mkdir -p "$W/tr-$name"
  FSDPC_TRACE_DIR="$W/tr-$name" CUDA_INJECTION64_PATH="$TRACER" timeout 200 $(fsdpc_of "$which") train \
    "$@" train.max_steps=$steps log.dir="$W/tl-$name" >"$OUT/trace-$name.log" 2>&1
  echo "traced $name exit $?"
  grep -E "error|cupti" "$OUT/trace-$name.log" | head -3
  cp "$W/tl-$name/metrics.jsonl" "$OUT/trace-$name.metrics.jsonl" 2>/dev/null &&
    summary "$W/tl-$name/metrics.jsonl" "traced-$name" | tee -a "$OUT/results.txt"
  ls -la "$W/tr-$name" | head -5
  python3 "$C/gap_summary.py" "$W/tr-$name" --steps 3 --top 25 | tee "$OUT/gaps-$name.txt"
  python3 "$C/timeline_summary.py" "$W/tr-$name" --steps 3 | tee "$OUT/timeline-$name.txt"
  (cd "$W/tr-$name" && tar cJf "$OUT/trace-$name.tar.xz" trace.*.tsv)
}
torch_run() { # name limit_s args...
  local name=$1 lim=$2
  shift 2
  timeout $lim torchrun --standalone --nproc_per_node=1 bench/torch_fsdp2_baseline.py "$@" \
    >"$OUT/torch-$name.log" 2>&1
  echo "torch $name exit $?"
  grep RESULT "$OUT/torch-$name.log" | sed "s/^/$name /" | tee -a "$OUT/results.txt"
}
clocks_on() { # samples SM clock, power and throttle reasons every 200 ms
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,utilization.gpu,clocks_throttle_reasons.active \
    --format=csv,noheader -lms 200 >"$OUT/clocks-$1.csv" 2>/dev/null &
  CLK=$!
}
clocks_off() {
  kill "$CLK" 2>/dev/null
  wait "$CLK" 2>/dev/null
  python3 - "$OUT/clocks-$1.csv" "$1" <<'PY' | tee -a "$OUT/results.txt"
import sys, statistics
rows = [l.split(", ") for l in open(sys.argv[1]) if l.count(",") >= 5]
busy = [r for r in rows if r[4].strip().rstrip(" %").isdigit() and int(r[4].strip().rstrip(" %")) > 50]
if busy:
    clk = [float(r[1].split()[0]) for r in busy]
    pw = [float(r[2].split()[0]) for r in busy]
    print(f"CLOCKS {sys.argv[2]}: {len(busy)} busy samples, SM clock median {statistics.median(clk):.0f} MHz "
          f"(min {min(clk):.0f}), power median {statistics.median(pw):.0f} W (max {max(pw):.0f}), "
          f"throttle reasons seen {sorted(set(r[5].strip() for r in busy))}")
PY
}

for part in "$@"; do
  echo "== $part ($SECONDS s)"
  case "$part" in
  trace)
    traced base1b base 6 $CFG1
    traced new1b new 6 $CFG1
    [ -n "${SIDE_NEW_ARGS:-}" ] && traced new1b-x new 6 $CFG1 $SIDE_NEW_ARGS
    ;;
  trace8)
    traced new8b new 5 $CFG8 fsdp.param_copy=true fsdp.param_copy_max_mib=9216
    ;;
  track)
    clocks_on base1b
    run_fsdpc base1b base 20 $CFG1
    clocks_off base1b
    clocks_on new1b
    run_fsdpc new1b new 20 $CFG1
    clocks_off new1b
    # two micro-batches a step: the first writes the gradients, the second adds
    run_fsdpc base1b-acc2 base 10 $CFG1 train.global_batch_size=8
    run_fsdpc new1b-acc2 new 10 $CFG1 train.global_batch_size=8
    python3 - "$W" <<'PY' | tee -a "$OUT/results.txt"
import json, sys
w = sys.argv[1]
load = lambda n, k="loss": [r[k] for r in map(json.loads, open(f"{w}/{n}/metrics.jsonl")) if "step" in r]
for b, f in (("base1b", "new1b"), ("base1b-acc2", "new1b-acc2")):
    lb, lf = load(b), load(f)
    gb, gf = load(b, "grad_norm"), load(f, "grad_norm")
    d = max(abs(x - y) / abs(y) for x, y in zip(lf, lb))
    dg = max(abs(x - y) / abs(y) for x, y in zip(gf, gb))
    print(f"TRACK {f} vs {b}: {len(lf)} steps, largest relative loss difference {d:.3e}, "
          f"grad norm {dg:.3e}, last {lf[-1]:.4f} vs {lb[-1]:.4f}")
PY
    ;;
  tests)
    for t in $(cd "$B/bin" && ls test_cuda_* test_flash_gpu 2>/dev/null); do
      LD_LIBRARY_PATH=/tmp/rt:$B/lib FSDPC_PLUGIN_PATH=$B/plugins timeout 120 "$B/bin/$t" >"$OUT/$t.log" 2>&1
      echo "$t exit $?" | tee -a "$OUT/results.txt"
      grep -E "Checks|Failures|Errors|FAIL" "$OUT/$t.log" | tail -3
    done
    ;;
  profile)
    NCU="ncu --clock-control none --metrics gpu__time_duration.sum --csv --target-processes all"
    LD_LIBRARY_PATH=/tmp/rt:$B/lib FSDPC_PLUGIN_PATH=$B/plugins timeout 200 $NCU \
      --log-file "$W/ncu_new.csv" "$B/bin/fsdpc" train $CFG1 ${PROF_ARGS:-} train.max_steps=2 \
      log.dir="$W/ncu" >"$OUT/ncu_new.log" 2>&1
    echo "ncu exit $?"
    [ -f "$W/ncu_new.csv" ] && python3 "$C/profile_summary.py" "$W/ncu_new.csv" | tee "$OUT/profile.txt" | head -50
    [ -f "$W/ncu_new.csv" ] && xz -c "$W/ncu_new.csv" >"$OUT/ncu_new.csv.xz"
    ;;
  ab1b)
    for r in $(seq 1 "${AB_ROUNDS:-3}"); do
      v=0
      for spec in ${AB_VARIANTS:-new base}; do
        v=$((v + 1))
        which=${spec%%:*} extra=""
        [ "$spec" != "$which" ] && extra=$(echo "${spec#*:}" | tr , ' ')
        clocks_on ab$v-$which-$r
        run_fsdpc ab$v-$which-$r "$which" 30 $CFG1 $extra
        clocks_off ab$v-$which-$r
      done
    done
    ;;
  rounds1b)
    for r in $(seq 1 "${ROUNDS:-2}"); do
      torch_run r$r-compile1b 130 --model 1b --strategy full --ac 0 --bs 4 --seq 2048 --steps 10 --warmup 3 --compile
      run_fsdpc r$r-side1b new 20 $CFG1
      [ -n "${SIDE_NEW_ARGS:-}" ] && run_fsdpc r$r-side1b-x new 20 $CFG1 $SIDE_NEW_ARGS
    done
    python3 - "$OUT/results.txt" <<'PY' | tee -a "$OUT/results.txt"
import json, re, statistics, sys
tok = {}
for line in open(sys.argv[1]):
    m = re.match(r"(r\d+)-compile1b RESULT (.*)", line)
    if m:
        tok.setdefault("compile1b", []).append(json.loads(m.group(2))["tok_s_gpu"])
    m = re.match(r"RESULT (r\d+)-(side1b(?:-x)?) .* tok_s (\d+)", line)
    if m:
        tok.setdefault(m.group(2), []).append(float(m.group(3)))
med = {k: statistics.median(v) for k, v in tok.items()}
for k, v in tok.items():
    print(f"ROUNDS {k}: {' '.join(f'{x:.0f}' for x in v)} (median {med[k]:.0f})")
for k in ("side1b", "side1b-x"):
    if k in med and "compile1b" in med:
        print(f"ROUNDS {k} / compile1b (medians): {med[k] / med['compile1b']:.3f}")
PY
    ;;
  side8)
    for r in 1 2; do
      run_fsdpc side8b-$r new 10 $CFG8 fsdp.param_copy=true fsdp.param_copy_max_mib=9216
      run_fsdpc side8b-mlp-$r new 10 $CFG8 fsdp.param_copy=true fsdp.param_copy_max_mib=9216 \
        fsdp.activation_checkpointing_policy=save_mlp
      run_fsdpc side8b-base-$r base 10 $CFG8 fsdp.param_copy=true fsdp.param_copy_max_mib=9216
    done
    ;;
  side)
    # every row with the GPU's clocks and power sampled (clocks-NAME.csv, CLOCKS lines)
    clocks_on eager1b
    torch_run eager1b 100 --model 1b --strategy full --ac 0 --bs 4 --seq 2048 --steps 10 --warmup 3
    clocks_off eager1b
    clocks_on compile1b
    torch_run compile1b 130 --model 1b --strategy full --ac 0 --bs 4 --seq 2048 --steps 10 --warmup 3 --compile
    clocks_off compile1b
    clocks_on side1b
    run_fsdpc side1b new 20 $CFG1
    clocks_off side1b
    run_fsdpc side1b-base base 20 $CFG1
    # SIDE_NEW_ARGS: overrides of a second row of new (e.g. fsdp.mixed_precision.logits_dtype=bf16)
    [ -n "${SIDE_NEW_ARGS:-}" ] && run_fsdpc side1b-x new 20 $CFG1 $SIDE_NEW_ARGS
    clocks_on side8b
    run_fsdpc side8b new 10 $CFG8 fsdp.param_copy=true fsdp.param_copy_max_mib=9216
    clocks_off side8b
    run_fsdpc side8b-base base 10 $CFG8 fsdp.param_copy=true fsdp.param_copy_max_mib=9216
    [ -n "${SIDE_NEW_ARGS:-}" ] &&
      run_fsdpc side8b-x new 10 $CFG8 fsdp.param_copy=true fsdp.param_copy_max_mib=9216 $SIDE_NEW_ARGS
    run_fsdpc side8b-mlp new 10 $CFG8 fsdp.param_copy=true fsdp.param_copy_max_mib=9216 \
      fsdp.activation_checkpointing_policy=save_mlp
    clocks_on eager8b
    torch_run eager8b 110 --model 8b --strategy full --ac 1 --bs 1 --seq 2048 --steps 8 --warmup 3
    clocks_off eager8b
    left=$((T_END - SECONDS))
    if [ $left -gt 45 ]; then
      clocks_on compile8b
      torch_run compile8b $left --model 8b --strategy full --ac 1 --bs 1 --seq 2048 --steps 8 --warmup 3 --compile
      clocks_off compile8b
    else
      echo "compile8b skipped: ${left} s left" | tee -a "$OUT/results.txt"
    fi
    ;;
  esac
done
echo "== done ($SECONDS s)"
# at most 8 files come back: logs, traces and timelines travel as one archive
(cd "$OUT" && tar cJf logs.tar.xz --remove-files *.log *.metrics.jsonl *.rank0.json clocks-*.csv timeline-*.txt \
  trace-*.tar.xz gpu.txt 2>/dev/null)
cat "$OUT/results.txt" 2>/dev/null
