#!/bin/bash
# Speed on the GPU host: fsdpc beside PyTorch (FSDP2 eager and compiled, PEFT)
# and beside an older build, from a carry made by carry.sh (the older build:
# carry.sh with BASE=DIR). Run from the repository root there (the bench
# configs and bench/*.py are read from it). Logs go to $OUT (or /tmp/out).
#
#   bash .carry/X/speed.sh one PART...   one GPU, world 1, in this order:
#     trace    6 steps of the 1B shape (micro-batch 4, param_copy) under CUPTI
#              (libfsdpc_cupti_trace.so), for base and new (and new with SIDE_NEW_ARGS
#              if set): idle gaps of the last 3 steps (bench/gap_summary.py) and
#              bench/timeline_summary.py
#     trace8   the same for 8B with activation checkpointing, micro-batch 1 (5 steps)
#     track    20 steps, 1B: base vs new (losses, step times), GPU clocks sampled
#     fusion-track  20 steps, 1B without fsdp.param_copy: base vs new, then new
#              with it (the largest relative loss difference of each against base)
#     tests    every CUDA test binary of this build (tests.sh all)
#     profile  per-kernel profile of 2 steps of new (ncu, bench/profile_summary.py);
#              PROF_ARGS: overrides added to its command line
#     flash    the flash acceptance table of this build: bench/flash/bench_flash.py
#              check, then bench (fsdpc's kernels beside SDPA's flash and cuDNN)
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
#              fsdp.activation_checkpointing_policy=save_mlp); GPU clocks sampled;
#              T_END (default 540): seconds after the start by which it stops
#              starting runs
#     sideqwen the Qwen2.5-7B and Qwen3-8B shapes (configs/bench/qwen*-base.yaml),
#              checkpointing, micro-batch 1, seq 2048: fsdpc new, PyTorch FSDP2 +
#              transformers eager and --compile (issue 35); T_END as side
#     RESULT / TRACK / CLOCKS / ROUNDS lines in $OUT/results.txt; logs, traces and
#     clock samples in $OUT/logs.tar.xz.
#   bash .carry/X/speed.sh gpus [N]   N GPUs (default 4): PyTorch FSDP2
#     (bench/torch_fsdp2_baseline.py) and fsdpc (flash, then naive) on the
#     Llama-3.2-1B shape, seq 2048, micro-batch 4, FULL_SHARD, 12 steps; RESULT
#     lines (lib/rows.py result), torch.jsonl and the fsdpc metrics in $OUT
#   bash .carry/X/speed.sh variants N "name|override override..." ...   N GPUs:
#     fsdpc on the 1B shape (seq 2048, micro-batch 4, flash) under several engine
#     settings, one RESULT line each; a token env:NAME=VALUE sets an environment
#     variable for that variant only, e.g.
#       speed.sh variants 4 "default|" "sep|fsdp.wrap.options.separate_embedding=true"
#   bash .carry/X/speed.sh bench [1b|8b] [N]   bench/torch_side_by_side.sh MODEL N
#     (PyTorch FSDP2 rows under every strategy, then `fsdpc bench
#     configs/bench/llama3-MODEL-4gpu.yaml --baseline ...`, 2 repeats), PyTorch
#     with the host's libraries, fsdpc through a wrapper that adds the carried
#     ones; results in $OUT/bench.tar.gz
#   bash scripts/gpu/speed.sh torch8b   (no carry; one 80 GB GPU) what PyTorch FSDP2
#     reaches with the 8B shape (seq 2048, micro-batch 1, activation checkpointing):
#       pure-bf16  bf16 params, grads and AdamW state, no fp32 master (8 bytes a
#                  parameter), 8 and 1 micro-batches a step
#       default    fp32 params + bf16 compute + fp32 AdamW (16 bytes a parameter):
#                  expected not to fit (the row says how it ends)
#   bash .carry/X/speed.sh seq8192   one GPU: a full training step of the 1B shape
#     at seq 8192, micro-batch 1, with flash and with naive attention (issue 7:
#     flash keeps O(T) per layer; naive keeps B*NH*T*T probabilities per layer)
#   bash .carry/X/speed.sh lora   one GPU: fsdpc LoRA (configs/llama3-8b-lora.yaml:
#     8B shape, r 16 on q,k,v,o,gate,up,down, seq 2048, micro-batch 2, bf16,
#     activation checkpointing) and the PyTorch + PEFT baseline of the same shape
#     (bench/torch_peft_lora_baseline.py), then one table of tokens/s and peak
#     memory (issue 14). Without a packed build the fsdpc part is skipped with a
#     note. Env: RUNS (PyTorch variants, default "plain fsdp2 plain+compile": a
#     mode, plain or fsdp2, then any of +compile, +wrap (checkpoint_wrapper instead
#     of transformers' gradient checkpointing), +autocast (bf16 adapter GEMMs)),
#     STEPS (default 12, the first 4 are warm-up), TORCH_TIMEOUT (s per PyTorch
#     run, default 240), FSDPC_TIMEOUT (default 400), SKIP_FSDPC=1. Writes
#     gpu.txt, fsdpc.log, fsdpc.metrics.jsonl, fsdpc.rank0.json, torch-<variant, +
#     as _>.log, torch.jsonl, table.txt.
#   bash .carry/X/speed.sh dpo   one GPU (issue 38): fsdpc DPO with LoRA
#     (configs/bench/llama3-8b-dpo-lora.yaml: 8B shape, r 16 on the seven
#     projections, one pair of 2048-token sequences a step, checkpointing, the
#     reference with the adapters off) and bench/torch_peft_dpo_baseline.py
#     (PyTorch + PEFT, TRL 0.16's DPO step in plain torch, the same shapes),
#     then one table of tokens/s (both sequences' tokens) and peak memory.
#     Env: STEPS (default 12, the first 4 warm-up), TORCH_COMPILE=1 (also the
#     compiled PyTorch row), FSDPC_ARGS (overrides), TORCH_TIMEOUT (default
#     300), FSDPC_TIMEOUT (default 400). Writes dpo-fsdpc.log,
#     dpo-fsdpc.metrics.jsonl, dpo-torch*.log, dpo-torch.jsonl, dpo-table.txt.
#   bash .carry/X/speed.sh startup [1b|8b|all] [hf|random|all]   launch to first
#     step on one GPU:
#     1. test_cuda_init_world: the device init equals the CPU init bit for bit,
#        and the device HF load pipeline loads what the file holds;
#     2. `fsdpc train` of the 1B and 8B bench shapes (8B with activation
#        checkpointing) from random init and from a random-weight BF16 HF folder
#        (written first to local disk, so its reads come from the page cache), 2
#        steps each. Each log line is stamped with the wall clock as it arrives,
#        so "launch to the step-1 line" is also measured from outside; the
#        "startup:" line has the phases. With an older build in the carry
#        (before.tar.xz, or carry.sh's base.tar.xz) each run is made with it too.
# shellcheck disable=SC2317 # the mode functions run through "$MODE"
# shellcheck disable=SC2086,SC2046 # CFG*, *_ARGS, NCU, fsdpc_of's command: word lists
usage() {
  echo "usage: speed.sh one PART... | gpus [N] | variants N SPEC... | bench [1b|8b] [N] |" \
    "torch8b | seq8192 | lora | dpo | startup [MODELS] [INITS]" >&2
  exit 2
}
MODE=${1:-}
shift
case $MODE in
one | gpus | bench | startup | dpo) CARRY_LIBS=0 . "$(dirname "$0")/carry_env.sh" ;; # C, OUT, B, F
variants | seq8192) . "$(dirname "$0")/carry_env.sh" ;;                         # and LD_LIBRARY_PATH
torch8b | lora) ;;                                                              # no carry needed
*) usage ;;
esac

one() { # PART...
  [ -f "$C/base.tar.xz" ] && tar xf "$C/base.tar.xz" -C /
  BB=$(cat "$C/base_dir" 2>/dev/null || echo "$B")
  W=$(mktemp -d)
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit,driver_version --format=csv | tee "$OUT/gpu.txt"
  export PYTHONUNBUFFERED=1
  T_END=${T_END:-540} # seconds after the start by which the side part stops starting runs
  TRACER=$B/lib/libfsdpc_cupti_trace.so
  fsdpc_of() {
    local d=$B
    [ "$1" = base ] && d=$BB
    echo "env LD_LIBRARY_PATH=/tmp/rt:$d/lib FSDPC_PLUGIN_PATH=$d/plugins $d/bin/fsdpc"
  }
  $(fsdpc_of new) data synth --task copy --n 300000 --out "$W/copy.tok" >/dev/null
  CFG1F="configs/bench/llama3-1b-base.yaml data.train=$W/copy.tok train.micro_batch_size=4 train.log_every=1"
  CFG1="$CFG1F fsdp.param_copy=true"
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
    # shellcheck disable=SC2012 # for the reader
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
    flash) # the flash acceptance table (bench/flash/bench_flash.py) of this build
      env LD_LIBRARY_PATH=/tmp/rt:$B/lib timeout 240 python3 bench/flash/bench_flash.py check "$B/plugins" \
        >"$OUT/flash_check.log" 2>&1
      echo "flash check exit $?: $(tail -1 "$OUT/flash_check.log")"
      env LD_LIBRARY_PATH=/tmp/rt:$B/lib timeout 200 python3 bench/flash/bench_flash.py bench "$B/plugins" 2>&1 |
        tee "$OUT/flash_bench.log"
      echo "== flash done ($SECONDS s)"
      ;;
    sideqwen) # the Qwen shapes beside PyTorch FSDP2 + transformers, eager and compiled
      for q in qwen2.5-7b qwen3-8b; do
        run_fsdpc "side-$q" new 10 "configs/bench/$q-base.yaml" data.train="$W/copy.tok" \
          train.micro_batch_size=1 train.log_every=1 fsdp.activation_checkpointing=true \
          fsdp.param_copy=true fsdp.param_copy_max_mib=9216
        torch_run "eager-$q" 110 --model "$q" --strategy full --ac 1 --bs 1 --seq 2048 --steps 8 --warmup 3
        left=$((T_END - SECONDS))
        if [ $left -gt 45 ]; then
          torch_run "compile-$q" $((left < 150 ? left : 150)) --model "$q" --strategy full --ac 1 --bs 1 \
            --seq 2048 --steps 8 --warmup 3 --compile
        else
          echo "compile-$q skipped: ${left} s left" | tee -a "$OUT/results.txt"
        fi
      done
      ;;
    fusion-track) # 20 steps, 1B: base vs new without fsdp.param_copy, then new with it
      run_fsdpc fbase1b base 20 $CFG1F
      run_fsdpc fused1b new 20 $CFG1F
      run_fsdpc fused1b-copy new 20 $CFG1F fsdp.param_copy=true
      python3 - "$W" <<'PY' | tee -a "$OUT/results.txt"
import json, sys
w = sys.argv[1]
load = lambda n: [r["loss"] for r in map(json.loads, open(f"{w}/{n}/metrics.jsonl")) if "step" in r]
b = load("fbase1b")
for n in ("fused1b", "fused1b-copy"):
    f = load(n)
    d = max(abs(x - y) / abs(y) for x, y in zip(f, b))
    print(f"TRACK {n} vs fbase1b: {len(f)} steps, largest relative loss difference {d:.3e}, "
          f"last {f[-1]:.4f} vs {b[-1]:.4f}")
PY
      ;;
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
    tests) bash "$C/tests.sh" all ;;
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
  (cd "$OUT" && tar cJf logs.tar.xz --remove-files -- *.log *.metrics.jsonl *.rank0.json clocks-*.csv timeline-*.txt \
    trace-*.tar.xz gpu.txt 2>/dev/null)
  cat "$OUT/results.txt" 2>/dev/null
}

gpus() { # [N]
  N=${1:-4}
  W=$(mktemp -d)
  nvidia-smi --query-gpu=name,memory.total --format=csv | tee "$OUT/gpu.txt"
  echo "== torch FSDP2"
  PYTHONUNBUFFERED=1 timeout 240 torchrun --standalone --nproc_per_node=$N bench/torch_fsdp2_baseline.py \
    --model 1b --strategy full --ac 0 --bs 4 --seq 2048 --steps 12 --warmup 4 --out "$OUT/torch.jsonl" \
    >"$OUT/torch.log" 2>&1
  echo "torch exit $?"; grep RESULT "$OUT/torch.log"
  export LD_LIBRARY_PATH=/tmp/rt:$B/lib:${LD_LIBRARY_PATH:-}
  export FSDPC_PLUGIN_PATH=$B/plugins
  $F data synth --task copy --n 300000 --out "$W/copy.tok" >/dev/null
  for attn in flash naive; do
    echo "== fsdpc $attn"
    timeout 240 $F train configs/bench/llama3-1b-base.yaml data.train="$W/copy.tok" \
      train.micro_batch_size=4 train.max_steps=12 train.log_every=1 attention.impl=$attn \
      log.dir="$W/$attn" --nproc-per-node $N >"$OUT/fsdpc-$attn.log" 2>&1
    echo "fsdpc $attn exit $?"
    grep -E "step (1|12)/|error|memory \(end\)" "$OUT/fsdpc-$attn.log" | grep -E "rank 0|error" | tail -4
    cp "$W/$attn/metrics.jsonl" "$OUT/fsdpc-$attn.metrics.jsonl" 2>/dev/null
    cp "$W/$attn/rank0.json" "$OUT/fsdpc-$attn.rank0.json" 2>/dev/null
    python3 "$C/lib/rows.py" result "$W/$attn" "$N" fsdpc
  done
}

variants() { # N SPEC...
  N=$1
  shift
  W=$(mktemp -d)
  export FSDPC_PLUGIN_PATH=$B/plugins
  $F data synth --task copy --n 300000 --out "$W/copy.tok" >/dev/null
  for v in "$@"; do
    name=${v%%|*}
    read -r -a toks <<<"${v#*|}"
    ov=() envs=()
    for t in "${toks[@]}"; do
      case $t in env:*) envs+=("${t#env:}") ;; *) ov+=("$t") ;; esac
    done
    timeout 180 env "${envs[@]}" $F train configs/bench/llama3-1b-base.yaml data.train="$W/copy.tok" \
      train.micro_batch_size=4 train.max_steps=12 train.log_every=1 log.dir="$W/$name" \
      "${ov[@]}" --nproc-per-node "$N" >"$OUT/variant-$name.log" 2>&1
    echo "variant $name exit $?"
    grep -E "error" "$OUT/variant-$name.log" | head -3
    python3 "$C/lib/rows.py" result "$W/$name" "$N" "$name"
  done
}

bench() { # [MODEL] [N]
  local model=${1:-1b} n=${2:-4}
  cat >/tmp/fsdpc-wrap <<WRAP
#!/bin/bash
export LD_LIBRARY_PATH=/tmp/rt:$B/lib:\${LD_LIBRARY_PATH:-}
export FSDPC_PLUGIN_PATH=$B/plugins
exec $B/bin/fsdpc "\$@"
WRAP
  chmod +x /tmp/fsdpc-wrap
  R=/tmp/bench-$model
  FSDPC=/tmp/fsdpc-wrap OUT=$R BENCH_ARGS="--repeats 2" bash bench/torch_side_by_side.sh "$model" "$n" 2>&1 | tail -40
  tar czf "$OUT/bench.tar.gz" -C /tmp "bench-$model"
}

torch8b() {
  OUT=${OUT:-/tmp/out}
  mkdir -p "$OUT"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" | tee -a "$OUT/gpu.txt"
  row() { # NAME args...
    local n=$1 t0
    t0=$(date +%s)
    shift
    PYTHONUNBUFFERED=1 timeout 200 torchrun --standalone --nproc_per_node=1 bench/torch_fsdp2_baseline.py \
      --model 8b --ac 1 --bs 1 --seq 2048 --steps 6 --warmup 2 "$@" >"$OUT/$n.log" 2>&1
    echo "$n exit $? ($(($(date +%s) - t0)) s): $(grep -h '^RESULT' "$OUT/$n.log" || grep -h -m1 -E 'OutOfMemory|Error' "$OUT/$n.log" | cut -c1-300)"
  }
  row bf16-a8 --pure-bf16 --accum 8
  row bf16-a1 --pure-bf16 --accum 1
  row fp32master-a8 --accum 8
}

seq8192() {
  export FSDPC_PLUGIN_PATH=$B/plugins
  W=$(mktemp -d)
  nvidia-smi --query-gpu=name,memory.total --format=csv | tee "$OUT/gpu.txt"
  $F data synth --task copy --n 100000 --out "$W/copy.tok" >/dev/null
  for attn in flash naive; do
    echo "== $attn"
    timeout 200 $F train configs/bench/llama3-1b-base.yaml data.train="$W/copy.tok" \
      data.seq_len=8192 model.max_position_embeddings=8192 train.micro_batch_size=1 \
      train.max_steps=3 train.log_every=1 attention.impl=$attn collectives.impl=auto \
      log.dir="$W/$attn" >"$OUT/seq8192-$attn.log" 2>&1
    echo "exit $?"
    grep -E "step [0-9]+/|error|memory \(end\)" "$OUT/seq8192-$attn.log" | tail -4
  done
}

lora() {
  C=$(cd "$(dirname "$0")" && pwd)
  OUT=${OUT:-/tmp/out}
  STEPS=${STEPS:-12}
  WARMUP=4
  [ "$STEPS" -gt 5 ] || WARMUP=1
  RUNS=${RUNS:-plain fsdp2 plain+compile}
  CFG=configs/llama3-8b-lora.yaml
  mkdir -p "$OUT"
  : >"$OUT/torch.jsonl"
  : >"$OUT/fsdpc.result"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"

  # ---- fsdpc ----
  fsdpc_note=""
  if [ "${SKIP_FSDPC:-0}" = 1 ]; then
    fsdpc_note="skipped (SKIP_FSDPC=1)"
  elif [ ! -f "$CFG" ]; then
    fsdpc_note="skipped: $CFG is not in this tree (issue 14's LoRA work is not merged yet)"
  elif ! grep -q '^peft:' "$CFG"; then
    fsdpc_note="skipped: $CFG has no peft: section (issue 14's LoRA keys are not merged yet)"
  elif [ ! -f "$C/build.tar.xz" ]; then
    fsdpc_note="skipped: no packed build in $C (run scripts/gpu/carry.sh $C first)"
  else
    mkdir -p /tmp/rt
    tar xf "$C/runtime.tar.xz" -C /tmp/rt
    tar xf "$C/build.tar.xz" -C /
    B=$(cat "$C/build_dir")
    W=$(mktemp -d)
    export LD_LIBRARY_PATH=/tmp/rt:$B/lib:${LD_LIBRARY_PATH:-}
    export FSDPC_PLUGIN_PATH=$B/plugins
    echo "== fsdpc train $CFG"
    "$B/bin/fsdpc" data synth --task copy --n 200000 --out "$W/copy.tok" >/dev/null
    # One micro-batch per step (global batch = micro-batch at world 1), as the
    # PyTorch runs take one.
    timeout "${FSDPC_TIMEOUT:-400}" "$B/bin/fsdpc" train "$CFG" data.train="$W/copy.tok" \
      train.micro_batch_size=2 train.global_batch_size=2 train.max_steps="$STEPS" \
      train.log_every=1 train.eval_every=0 train.generate_prompts=[] log.dir="$W/run" \
      --nproc-per-node 1 >"$OUT/fsdpc.log" 2>&1
    rc=$?
    echo "fsdpc exit $rc"
    if [ $rc -ne 0 ]; then
      fsdpc_note="failed (exit $rc): $(grep -m1 -iE 'error|unknown|invalid' "$OUT/fsdpc.log" || tail -1 "$OUT/fsdpc.log")"
    fi
    cp "$W/run/metrics.jsonl" "$OUT/fsdpc.metrics.jsonl" 2>/dev/null
    cp "$W/run/rank0.json" "$OUT/fsdpc.rank0.json" 2>/dev/null
    python3 - "$OUT" "$WARMUP" >"$OUT/fsdpc.result" <<'PY'
import json, statistics, sys
out, warm = sys.argv[1], int(sys.argv[2])
try:
    rows = [r for r in map(json.loads, open(f"{out}/fsdpc.metrics.jsonl")) if "step" in r]
    r0 = json.load(open(f"{out}/fsdpc.rank0.json"))
    med = statistics.median(r["step_s"] for r in rows if r["step"] > warm)
except Exception as e:  # no metrics: the note above says why
    sys.exit(0)
print(json.dumps(dict(name="fsdpc LoRA", step_s=med, tok_s=rows[-1]["tokens"] / med,
                      peak_gib=r0["peak_bytes"]["total"] / 2**30,
                      reserved_gib=(r0.get("reserved_bytes") or 0) / 2**30, loss=rows[-1]["loss"])))
PY
  fi
  [ -n "$fsdpc_note" ] && echo "fsdpc: $fsdpc_note"

  # ---- PyTorch + PEFT ----
  PY=bench/torch_peft_lora_baseline.py
  [ -f "$PY" ] || PY=$C/torch_peft_lora_baseline.py
  python3 -c 'import torch, transformers, peft; print("torch", torch.__version__, "transformers",
    transformers.__version__, "peft", peft.__version__)' | tee -a "$OUT/gpu.txt"
  for v in $RUNS; do
    args=(--mode "${v%%+*}")
    case "+$v+" in *+compile+*) args+=(--compile) ;; esac
    case "+$v+" in *+wrap+*) args+=(--ac wrap) ;; esac
    case "+$v+" in *+autocast+*) args+=(--autocast) ;; esac
    echo "== torch $v: ${args[*]}"
    PYTHONUNBUFFERED=1 timeout "${TORCH_TIMEOUT:-240}" python3 "$PY" "${args[@]}" --model 8b \
      --micro-batch 2 --seq 2048 --steps "$STEPS" --warmup "$WARMUP" --out "$OUT/torch.jsonl" \
      >"$OUT/torch-${v//+/_}.log" 2>&1
    rc=$?
    echo "torch $v exit $rc"
    [ $rc -eq 0 ] || grep -m1 -E 'OutOfMemory|Error' "$OUT/torch-${v//+/_}.log" || tail -2 "$OUT/torch-${v//+/_}.log"
  done

  # ---- table ----
  python3 - "$OUT" "$fsdpc_note" <<'PY' | tee "$OUT/table.txt"
import json, sys
out, note = sys.argv[1], sys.argv[2]
rows = []
for line in open(f"{out}/fsdpc.result"):
    rows.append(json.loads(line))
for line in open(f"{out}/torch.jsonl"):
    r = json.loads(line)
    name = f"torch+PEFT {r['mode']}" + (" compile" if r["compile"] else "") + \
        ("" if r["ac_impl"] == "hf" else f" ac={r['ac_impl']}") + (" autocast" if r["autocast"] else "")
    rows.append(dict(name=name, step_s=r["step_s"], tok_s=r["tok_s_gpu"],
                     peak_gib=r["peak_alloc_gib"], reserved_gib=r["peak_reserved_gib"],
                     loss=r["loss"]))
print(f"{'run':44} {'step s':>8} {'tokens/s':>9} {'peak GiB':>9} {'reserved GiB':>13} {'loss':>8}")
for r in rows:
    print(f"{r['name']:44} {r['step_s']:8.3f} {r['tok_s']:9.0f} {r['peak_gib']:9.2f} "
          f"{r['reserved_gib']:13.2f} {r['loss']:8.4f}")
if note:
    print(f"fsdpc: {note}")
torch_rows = [r for r in rows if r["name"].startswith("torch")]
if rows and rows[0]["name"] == "fsdpc LoRA" and torch_rows:
    best = max(torch_rows, key=lambda r: r["tok_s"])
    f = rows[0]
    print(f"fsdpc vs the fastest PyTorch row ({best['name']}): {f['tok_s'] / best['tok_s']:.2f}x "
          f"tokens/s at {f['peak_gib'] / best['peak_gib']:.2f}x peak memory")
PY
}

dpo() {
  STEPS=${STEPS:-12}
  local W cfg py
  W=$(mktemp -d)
  cfg=configs/bench/llama3-8b-dpo-lora.yaml
  [ -f "$cfg" ] || cfg=$C/llama3-8b-dpo-lora.yaml
  py=bench/torch_peft_dpo_baseline.py
  [ -f "$py" ] || py=$C/torch_peft_dpo_baseline.py
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
  # 64 pairs of one 48-byte prompt and two 1999-byte completions: with the
  # byte tokenizer's EOS each sequence is 2048 tokens, the pair 4096
  python3 - "$W/pairs.jsonl" <<'PY'
import json, random, sys
g = random.Random(3)
text = lambda n: "".join(g.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(n))
with open(sys.argv[1], "w") as f:
    for _ in range(64):
        f.write(json.dumps({"prompt": text(48), "chosen": text(1999), "rejected": text(1999)}) + "\n")
PY
  local fs="env LD_LIBRARY_PATH=/tmp/rt:$B/lib FSDPC_PLUGIN_PATH=$B/plugins $F"
  $fs data prepare --in "$W/pairs.jsonl" --tokenizer byte --format preference \
    --out "$W/pairs.tok" >"$OUT/dpo-prepare.log" 2>&1 || tail -2 "$OUT/dpo-prepare.log"
  echo "== fsdpc train $cfg"
  # shellcheck disable=SC2086 # FSDPC_ARGS: a word list
  timeout "${FSDPC_TIMEOUT:-400}" $fs train "$cfg" data.train="$W/pairs.tok" \
    train.max_steps="$STEPS" log.dir="$W/run" ${FSDPC_ARGS:-} >"$OUT/dpo-fsdpc.log" 2>&1
  echo "fsdpc exit $?: $(grep -m1 -E 'error|pairs' "$OUT/dpo-fsdpc.log")"
  cp "$W/run/metrics.jsonl" "$OUT/dpo-fsdpc.metrics.jsonl" 2>/dev/null
  : >"$OUT/dpo-torch.jsonl"
  local v
  for v in plain ${TORCH_COMPILE:+compile}; do
    echo "== torch $v"
    PYTHONUNBUFFERED=1 timeout "${TORCH_TIMEOUT:-300}" python3 "$py" --steps "$STEPS" \
      $([ "$v" = compile ] && echo --compile) --out "$OUT/dpo-torch.jsonl" \
      >"$OUT/dpo-torch-$v.log" 2>&1
    echo "torch $v exit $?: $(grep -m1 -E 'Error|RESULT' "$OUT/dpo-torch-$v.log" | cut -c1-200)"
  done
  python3 - "$OUT" <<'PY' | tee "$OUT/dpo-table.txt"
import json, statistics, sys
out = sys.argv[1]
rows = []
try:
    m = [r for r in map(json.loads, open(f"{out}/dpo-fsdpc.metrics.jsonl")) if "step" in r]
    med = statistics.median(r["step_s"] for r in m if r["step"] > 4)
    rows.append(dict(name="fsdpc DPO LoRA", step_s=med, tok_s=4096 / med,
                     peak=max(r["peak_bytes"] for r in m) / 2**30, loss=m[-1]["loss"]))
except Exception as e:
    print(f"fsdpc: no metrics ({e})")
for r in map(json.loads, open(f"{out}/dpo-torch.jsonl")):
    rows.append(dict(name="torch+PEFT DPO" + (" compile" if r["compile"] else ""),
                     step_s=r["step_s"], tok_s=r["tok_s_gpu"], peak=r["peak_alloc_gib"],
                     loss=r["loss"]))
print(f"{'run':28} {'step s':>8} {'tokens/s':>9} {'peak GiB':>9} {'last loss':>9}")
for r in rows:
    print(f"{r['name']:28} {r['step_s']:8.3f} {r['tok_s']:9.0f} {r['peak']:9.2f} {r['loss']:9.4f}")
if rows and rows[0]["name"].startswith("fsdpc") and len(rows) > 1:
    best = max(rows[1:], key=lambda r: r["tok_s"])
    print(f"fsdpc vs {best['name']}: {rows[0]['tok_s'] / best['tok_s']:.2f}x tokens/s at "
          f"{rows[0]['peak'] / best['peak']:.2f}x peak memory")
PY
}

startup() { # [1b|8b|all] [hf|random|all]
  W=/tmp/startup
  MODELS=${1:-all}
  INITS=${2:-all}
  mkdir -p "$W"
  builds=("after:$B")
  if [ -f "$C/before.tar.xz" ]; then
    tar xf "$C/before.tar.xz" -C /
    builds=("before:$(cat "$C/before_dir")" "${builds[@]}")
  elif [ -f "$C/base.tar.xz" ]; then # carry.sh's BASE
    tar xf "$C/base.tar.xz" -C /
    builds=("before:$(cat "$C/base_dir")" "${builds[@]}")
  fi
  export LD_LIBRARY_PATH=/tmp/rt:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1
  { nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc; free -g | head -2; } | tee "$OUT/gpu.txt"
  t0=$SECONDS
  LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH timeout 120 "$B/bin/test_cuda_init_world" >"$OUT/test_cuda_init_world.log" 2>&1
  echo "test_cuda_init_world: exit $? ($((SECONDS - t0)) s): $(tail -1 "$OUT/test_cuda_init_world.log")"
  "$B/bin/fsdpc" data synth --task copy --n 20000 --out "$W/copy.tok" >/dev/null
  stamp() { while IFS= read -r l; do printf '%s %s\n' "$EPOCHREALTIME" "$l"; done; }
  train() { # name build-dir model [overrides]
    local name=$1 bd=$2 m=$3
    shift 3
    LD_LIBRARY_PATH=$bd/lib:$LD_LIBRARY_PATH "$bd/bin/fsdpc" --version >/dev/null # page cache
    local t=$EPOCHREALTIME
    LD_LIBRARY_PATH=$bd/lib:$LD_LIBRARY_PATH timeout 240 "$bd/bin/fsdpc" train \
      "$C/llama3-$m-base.yaml" data.train="$W/copy.tok" train.max_steps=2 log.dir="$W/$name" \
      log.progress=off "$@" 2>&1 | stamp >"$W/$name.log"
    local first
    first=$(awk '/ step 1\// {print $1; exit}' "$W/$name.log")
    echo "== $name: launch to the step-1 line (outside) $(python3 -c "print(f'{$first - $t:.2f}')" 2>/dev/null) s"
    grep -E " step [12]/|startup:|loaded|error" "$W/$name.log" | cut -d' ' -f2-
  }
  for m in 1b 8b; do
    [ "$MODELS" = all ] || [ "$MODELS" = "$m" ] || continue
    ac=()
    [ "$m" = 8b ] && ac=(fsdp.activation_checkpointing=true)
    if [ "$INITS" != hf ]; then
      for b in "${builds[@]}"; do train "$m-random-${b%%:*}" "${b#*:}" "$m" "${ac[@]}"; done
    fi
    if [ "$INITS" != random ]; then
      python3 "$C/make_hf_folder.py" --model "$m" --out "$W/hf$m" 2>&1 | tail -1
      for b in "${builds[@]}"; do
        train "$m-hf-${b%%:*}" "${b#*:}" "$m" model.init.from="$W/hf$m" "${ac[@]}"
      done
      rm -rf "$W/hf$m"
    fi
  done
  tar cJf "$OUT/logs.tar.xz" -C "$W" $(cd "$W" && ls -- *.log)
  echo "total $((SECONDS - t0)) s"
}

"$MODE" "$@"
