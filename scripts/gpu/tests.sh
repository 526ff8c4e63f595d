#!/bin/bash
# The CUDA test binaries on the GPU host, from a carry made by carry.sh
# (builds nothing there). Logs go to $OUT (or /tmp/out).
#   bash .carry/X/tests.sh cuda [PART...]   PARTS: ops xent optim attention (the default)
#        flash (test_flash_gpu, every configuration) gemma (issue 36: test_cuda_attention
#        and test_flash_gpu --gemma, soft-capping and head dim 256)
#        sanitize (compute-sanitizer memcheck of ops and attention) nccl nccl-cold
#        (tests/cuda/test_nccl.sh on 2 GPUs) bench bench-ew (fsdpc_bench_cuda,
#        fsdpc_bench_ew); a "=== NAME: exit X (ms)" line each, exit 1 if one fails
#   bash .carry/X/tests.sh all       every test_cuda_* binary and test_flash_gpu:
#        "NAME exit X" lines (also in $OUT/results.txt)
#   bash .carry/X/tests.sh merge     the merge check: the test binaries (a "TEST
#        NAME exit X" line each), then 8 steps of the 1B shape for each feature
#        that meets in the engine (adamw8bit, the offload modes, LoRA, the
#        optimizer's bf16 copy) beside the plain run: one line a run,
#        "RUN NAME exit X losses L1 .. L8 tok_s T peak P" (one GPU)
# shellcheck disable=SC2317 # the mode functions run through "$MODE"
set -u
MODE=${1:-}
shift
case $MODE in cuda | all | merge) ;; *)
  echo "usage: tests.sh cuda [PART...] | all | merge" >&2
  exit 2
  ;;
esac
CARRY_LIBS=0 . "$(dirname "$0")/carry_env.sh" # C, OUT, B, F

cuda() { # PART...
  export LD_LIBRARY_PATH=/tmp/rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv |
    tee "$OUT/gpu.txt"
  local rc=0 what w
  run() { # name, command...
    local name=$1
    shift
    echo "=== $name"
    local t0
    t0=$(date +%s%N)
    timeout 300 "$@" >"$OUT/$name.log" 2>&1
    local r=$?
    cat "$OUT/$name.log"
    echo "=== $name: exit $r ($((($(date +%s%N) - t0) / 1000000)) ms)"
    [ $r -eq 0 ] || rc=1
  }
  for what in "${@:-ops xent optim attention}"; do
    for w in $what; do
      case $w in
      ops) run ops "$B/bin/test_cuda_ops" ;;
      xent) run xent "$B/bin/test_cuda_xent" ;;
      optim) run optim "$B/bin/test_cuda_optim" ;;
      attention) run attention "$B/bin/test_cuda_attention" ;;
      flash) run flash "$B/bin/test_flash_gpu" ;;
      gemma)
        run attention "$B/bin/test_cuda_attention"
        run flash-gemma "$B/bin/test_flash_gpu" --gemma
        ;;
      sanitize)
        run sanitize-ops compute-sanitizer --tool memcheck --report-api-errors no "$B/bin/test_cuda_ops"
        run sanitize-attn compute-sanitizer --tool memcheck "$B/bin/test_cuda_attention"
        ;;
      nccl) run nccl bash "$C/test_nccl.sh" "$B/bin/fsdpc_nccl_probe" ;;
      nccl-cold) HANG_VARIANT=cold run nccl-cold bash "$C/test_nccl.sh" "$B/bin/fsdpc_nccl_probe" ;;
      bench) run bench "$B/bin/fsdpc_bench_cuda" ;;
      bench-ew) run bench-ew "$B/bin/fsdpc_bench_ew" ;;
      esac
    done
  done
  return $rc
}

# every test binary of the build, with the carry's fixtures (FSDPC_SOURCE_DIR)
all() {
  local t
  for t in $(cd "$B/bin" && ls test_cuda_* test_flash_gpu 2>/dev/null); do
    LD_LIBRARY_PATH=/tmp/rt:$B/lib FSDPC_PLUGIN_PATH=$B/plugins FSDPC_SOURCE_DIR=$C/src \
      timeout 120 "$B/bin/$t" >"$OUT/$t.log" 2>&1
    echo "$t exit $?" | tee -a "$OUT/results.txt"
    grep -E "Checks|Failures|Errors|FAIL" "$OUT/$t.log" | tail -3
  done
}

merge() {
  export LD_LIBRARY_PATH=/tmp/rt:$B/lib:${LD_LIBRARY_PATH:-} FSDPC_PLUGIN_PATH=$B/plugins
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
  local t x r name ov rc losses toks peak
  for t in ops fused optim adamw8bit attention init_world infer_decode flash_gpu; do
    x=$B/bin/test_cuda_$t
    [ "$t" = flash_gpu ] && x=$B/bin/test_flash_gpu
    [ -x "$x" ] || {
      echo "TEST $t missing"
      continue
    }
    timeout 300 "$x" >"$OUT/test_$t.log" 2>&1
    echo "TEST $t exit $? $(grep -E '^[0-9]+%: Checks|configurations passed' "$OUT/test_$t.log" | tail -1)"
  done
  local W
  W=$(mktemp -d)
  $F data synth --task copy --n 100000 --out "$W/copy.tok" >/dev/null
  local cfg=$C/llama3-1b-base.yaml
  local runs=(
    "plain|"
    "param_copy|fsdp.param_copy=true"
    "adamw8bit|optim.name=adamw8bit"
    "adamw8bit_cpu_offload|optim.name=adamw8bit fsdp.cpu_offload=true"
    "offload_optimizer|fsdp.offload.optimizer=true"
    "adamw8bit_offload_optimizer|optim.name=adamw8bit fsdp.offload.optimizer=true"
    "cpu_offload|fsdp.cpu_offload=true"
    "lora|peft.method=lora peft.r=16 peft.alpha=32 peft.dropout=0"
    "lora_cpu_offload|peft.method=lora peft.r=16 peft.alpha=32 peft.dropout=0 fsdp.cpu_offload=true"
  )
  for r in "${runs[@]}"; do
    name=${r%%|*}
    read -r -a ov <<<"${r#*|}"
    timeout 240 "$F" train "$cfg" data.train="$W/copy.tok" train.max_steps=8 train.log_every=1 \
      train.micro_batch_size=4 train.global_batch_size=4 \
      train.generate_prompts=[] train.eval_every=0 log.dir="$W/$name" checkpoint.dir="$W/ck-$name" \
      "${ov[@]}" >"$OUT/train-$name.log" 2>&1
    rc=$?
    losses=$(grep -oE '^step +[0-9]+/[0-9]+ loss [0-9.]+' "$OUT/train-$name.log" | awk '{print $4}' | tr '\n' ' ')
    toks=$(grep -oE 'tok/s [0-9]+' "$OUT/train-$name.log" | tail -1 | awk '{print $2}')
    peak=$(grep -oE 'peak [0-9.]+ [GM]iB' "$OUT/train-$name.log" | tail -1)
    echo "RUN $name exit $rc losses $losses tok_s ${toks:-?} $peak"
    [ $rc -eq 0 ] || tail -3 "$OUT/train-$name.log"
  done
}

"$MODE" "$@"
