#!/bin/bash
# Issue 20 in one device call: fsdpc beside PyTorch FSDP2 at world N (4 on an
# nvidia-h200-x4), where the exposed communication goes, and world-N vs
# world-1 agreement.
#   bash .carry/X/world.sh [N] [PARTS]          (on the GPU host, from the repo root)
#   DEVICE=cpu bash scripts/gpu/world.sh 2      (check the script here: tiny shapes, Gloo)
# PARTS (comma list, default 1b,timeline,agree,8b; about 4 + 1 + 1.5 + 5 min at N=4):
#   1b        Llama-3.2-1B shape, seq 2048, micro-batch 4, 10 steps (median of steps 5-10):
#             fsdpc and bench/torch_fsdp2_baseline.py under FULL_SHARD, SHARD_GRAD_OP,
#             NO_SHARD and HYBRID_SHARD (2 replicas x N/2: the PyTorch script's mesh)
#   8b        Llama-3.1-8B shape, seq 2048, FULL_SHARD: no activation checkpointing at
#             micro-batch 1 and 2, and checkpointing at micro-batch 2; both frameworks
#   8bib      the 8b part's fsdpc rows with optim.in_backward=true (train.max_grad_norm=0:
#             no persistent grad shards, docs/fsdp.md), as configured (one root unit) and
#             with separate embedding and head units (names 8b-ib-*, 8b-ibsep-*; run with
#             8b for PyTorch's rows beside them, or alone: fsdpc rows only)
#   timeline  4 steps of the 1B FULL_SHARD run under CUPTI (libfsdpc_cupti_trace.so):
#             kernel timeline of both streams, exposed communication over the last 2
#             steps (bench/timeline_summary.py; Chrome trace in timeline.json.xz)
#   fp8       issue 41 item 5 (GPU only): `fsdpc bench configs/bench/llama3-8b-fp8-4gpu.yaml`
#             (8B FULL_SHARD, linear bf16 vs fp8 at seq 2048 micro-batch 2 and seq 8192
#             micro-batch 2 with checkpointing); its table in $OUT/fp8-bench.log and .csv
#   agree     a small model, 20 steps, world N vs world 1 under every strategy, with
#             LoRA (peft.method) and adamw8bit when this build has them (otherwise a
#             "skipped: not on main" line), rtol 2e-2 on the loss
# Every fsdpc row also runs `fsdpc plan` with the same overrides: summary.md
# (lib/world_rows.py) puts the planner's peak beside the measured one.
# Environment: OUT (default /tmp/out),
# SKIP_TORCH=1, STRATS (default "full grad_op no_shard hybrid"), STEPS (default 10),
# TORCH_COMPILE (eager = default, compiled = each layer under torch.compile, both),
# V8B (the 8B rows as "ckpt,mb" pairs; default "0,1 0,2 1,2"), TL_SHAPES (the
# timeline's shapes; default "1b", "1b 8b" adds the 8B with checkpointing at
# micro-batch 2), FSDPC (the executable in DEVICE=cpu mode; default build/bin/fsdpc),
# HOLD_FREE_GIB (issue 32 / 41: a helper process on each card holds all but that
# many GiB with a torch tensor (lib/hold_free.py) during every fsdpc and PyTorch
# row, e.g. 80 for the memory of an H100; ignored with DEVICE=cpu).
# On GPUs $OUT ends with summary.md, rows.txt and world-logs.tar.xz (the rest).
# Besides summary.md it prints one ROW line per run (lib/world_rows.py --rows):
# peak and reserved, the planner's, reserved against the plan (PASS within 2%),
# and for fsdpc the PyTorch row of the same shape, checkpointing and micro-batch.
# E.g. issue 41 item 2 on an nvidia-h200-x4, one call:
#   HOLD_FREE_GIB=80 STEPS=8 OUT=$OUT bash .carry/X/world.sh 4 8b
# Two calls when one would pass the 10-minute limit: PARTS=1b,timeline,agree then 8b.
# shellcheck disable=SC2086,SC2046 # $F is a command, the option strings word lists
set -u
C=$(cd "$(dirname "$0")" && pwd)
N=${1:-4}
PARTS=${2:-1b,timeline,agree,8b}
OUT=${OUT:-/tmp/out}
DEVICE=${DEVICE:-cuda}
STEPS=${STEPS:-10}
STRATS=${STRATS:-full grad_op no_shard hybrid}
TORCH_COMPILE=${TORCH_COMPILE:-eager}
V8B=${V8B:-0,1 0,2 1,2}
TL_SHAPES=${TL_SHAPES:-1b}
HOLD_FREE_GIB=${HOLD_FREE_GIB:-}
mkdir -p "$OUT"
W=$(mktemp -d)
HOLDS=""
trap 'hold_off; rm -rf "$W"' EXIT
if [ "$DEVICE" = cuda ]; then
  . "$C/carry_env.sh" # B, F; LD_LIBRARY_PATH
  export FSDPC_PLUGIN_PATH=$B/plugins
  # NVLink multicast stays off on these hosts (KINDS.md)
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
  TRACER=$B/lib/libfsdpc_cupti_trace.so
else
  F=$(realpath "${FSDPC:-build/bin/fsdpc}")
  B=$(dirname "$(dirname "$F")")
  SKIP_TORCH=1
  TRACER=""
fi
PY=$C/lib/world_rows.py
TL=$C/timeline_summary.py
[ -f "$TL" ] || TL=bench/timeline_summary.py
CMP=$C/compare_runs.py
[ -f "$CMP" ] || CMP=tests/train/compare_runs.py
# hold_on / hold_off: every card of the run held down to HOLD_FREE_GIB free
hold_on() {
  [ -n "$HOLD_FREE_GIB" ] && [ "$DEVICE" = cuda ] || return 0
  local d
  rm -f "$W"/hold-*.out
  for d in $(seq 0 $((N - 1))); do
    python3 -u "$C/lib/hold_free.py" $((HOLD_FREE_GIB << 30)) "$d" >"$W/hold-$d.out" 2>&1 &
    HOLDS="$HOLDS $!"
  done
  for _ in $(seq 1 120); do # until each has held its card (or given up)
    [ "$(cat "$W"/hold-*.out 2>/dev/null | grep -c '^HOLD device')" -ge "$N" ] && break
    sleep 1
  done
  grep -h '^HOLD' "$W"/hold-*.out | sed 's/^/   /' | tee -a "$OUT/holds.txt"
}
hold_off() {
  local p
  for p in $HOLDS; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  [ -z "$HOLDS" ] || sleep 2 # the cards' memory back before the next run
  HOLDS=""
}
has() { case ",$PARTS," in *",$1,"*) return 0 ;; esac; return 1; }
echo "world.sh: world $N, parts $PARTS, device $DEVICE, $(date -u +%FT%TZ)" | tee "$OUT/run.txt"

# The shapes: the bench files on GPUs; on the CPU the same runs at a tiny
# shape (naive attention, Gloo) so that every step of the script is exercised.
cat >"$W/tiny.yaml" <<YAML
model: {vocab_size: 259, hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2,
        num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 64,
        tie_word_embeddings: false}
data: {train: data/copy.tok, seq_len: 64}
attention: {impl: naive}
optim: {name: adamw, lr: 1.0e-3}
train: {max_steps: 10, micro_batch_size: 2, threads: 1, eval_every: 0}
YAML
if [ "$DEVICE" = cuda ]; then
  CFG1B=configs/bench/llama3-1b-base.yaml CFG8B=configs/bench/llama3-8b-base.yaml
  TOKN=300000
else
  CFG1B=$W/tiny.yaml CFG8B=$W/tiny.yaml
  TOKN=20000
fi
$F data synth --task copy --n $TOKN --out "$W/copy.tok" >/dev/null || { echo "data synth failed"; exit 1; }

fsdp_args() { # strategy name -> fsdpc overrides
  case $1 in
    full) echo "fsdp.sharding_strategy=FULL_SHARD" ;;
    grad_op) echo "fsdp.sharding_strategy=SHARD_GRAD_OP" ;;
    no_shard) echo "fsdp.sharding_strategy=NO_SHARD" ;;
    hybrid) echo "fsdp.sharding_strategy=HYBRID_SHARD fsdp.hybrid_shard_size=$((N / 2))" ;;
  esac
}
hybrid_ok() { [ "$N" -ge 2 ] && [ $((N % 2)) -eq 0 ]; }

# fsdpc_row NAME CFG OVERRIDES...: one training run + the planner for it.
fsdpc_row() {
  local name=$1 cfg=$2
  shift 2
  echo "-- fsdpc $name: $*"
  hold_on
  timeout 300 $F train "$cfg" data.train="$W/copy.tok" train.max_steps=$STEPS train.log_every=1 \
    log.dir="$W/$name" "$@" --nproc-per-node "$N" >"$OUT/fsdpc-$name.log" 2>&1
  local rc=$?
  hold_off
  echo "   exit $rc"
  [ $rc = 0 ] || grep -m2 -E "error|out of memory|does not fit" "$OUT/fsdpc-$name.log" | sed 's/^/   /'
  cp "$W/$name/metrics.jsonl" "$OUT/fsdpc-$name.metrics.jsonl" 2>/dev/null
  cp "$W/$name/rank0.json" "$OUT/fsdpc-$name.rank0.json" 2>/dev/null
  $F plan "$cfg" "$@" --world "$N" --nproc-per-node "$N" --json >"$OUT/fsdpc-$name.plan.json" \
    2>"$OUT/fsdpc-$name.plan.err" || echo "   plan failed: $(head -1 "$OUT/fsdpc-$name.plan.err")"
  $F plan "$cfg" "$@" --world "$N" --nproc-per-node "$N" 2>/dev/null | head -1 >"$OUT/fsdpc-$name.plan.txt"
  echo "$name|$cfg|$rc|$*" >>"$OUT/fsdpc-rows.txt"
}
# torch_row MODEL STRATEGY AC BS: eager, compiled or both (TORCH_COMPILE)
torch_row() {
  [ "${SKIP_TORCH:-0}" = 1 ] && return 0
  local modes=eager
  case $TORCH_COMPILE in compiled) modes=compiled ;; both) modes="eager compiled" ;; esac
  for m in $modes; do
    local flag="" tag=""
    [ "$m" = compiled ] && flag=--compile tag=-compiled
    echo "-- torch $1 $2 ac $3 bs $4 $m"
    hold_on
    # shellcheck disable=SC2086
    PYTHONUNBUFFERED=1 timeout 400 torchrun --standalone --nproc_per_node="$N" bench/torch_fsdp2_baseline.py \
      --model "$1" --strategy "$2" --ac "$3" --bs "$4" --seq 2048 --steps "$STEPS" --warmup 4 $flag \
      --out "$OUT/torch.jsonl" >"$OUT/torch-$1-$2-ac$3-bs$4$tag.log" 2>&1
    local rc=$?
    hold_off
    echo "   exit $rc"
    [ $rc = 0 ] || grep -m1 -E "OutOfMemory|Error" "$OUT/torch-$1-$2-ac$3-bs$4$tag.log" | sed 's/^/   /'
  done
}

if has 1b; then
  echo "== 1B shape, micro-batch 4"
  for s in $STRATS; do
    [ "$s" = hybrid ] && ! hybrid_ok && { echo "-- hybrid: skipped at world $N (needs an even world >= 2)"; continue; }
    torch_row 1b "$s" 0 4
    # shellcheck disable=SC2046
    fsdpc_row "1b-$s" "$CFG1B" train.micro_batch_size=4 $(fsdp_args "$s")
  done
fi

if has 8b; then
  echo "== 8B shape, FULL_SHARD"
  for v in $V8B; do
    set -- ${v/,/ }
    torch_row 8b full "$1" "$2"
    ac=false
    [ "$1" = 1 ] && ac=true
    fsdpc_row "8b-full-ac$1-mb$2" "$CFG8B" train.micro_batch_size="$2" fsdp.activation_checkpointing=$ac
  done
fi

if has 8bib; then
  echo "== 8B shape, FULL_SHARD, optim.in_backward (no clipping)"
  SEP="fsdp.wrap.options.separate_embedding=true fsdp.wrap.options.separate_lm_head=true"
  for v in $V8B; do
    set -- ${v/,/ }
    ac=false
    [ "$1" = 1 ] && ac=true
    for wrap in ib ibsep; do
      sep=""
      [ "$wrap" = ibsep ] && sep=$SEP
      fsdpc_row "8b-$wrap-ac$1-mb$2" "$CFG8B" train.micro_batch_size="$2" fsdp.activation_checkpointing=$ac \
        optim.in_backward=true train.max_grad_norm=0 $sep
    done
  done
fi

if has fp8 && [ "$DEVICE" = cuda ]; then
  echo "== 8B FULL_SHARD, linear bf16 vs fp8 (configs/bench/llama3-8b-fp8-4gpu.yaml)"
  timeout 480 $F bench configs/bench/llama3-8b-fp8-4gpu.yaml data.train="$W/copy.tok" \
    --nproc-per-node "$N" --out "$W/fp8" >"$OUT/fp8-bench.log" 2>&1
  echo "   bench exit $?"
  cat "$OUT/fp8-bench.log"
  cp "$W/fp8/bench.csv" "$OUT/fp8-bench.csv" 2>/dev/null
  tar -C "$W" -cJf "$OUT/fp8-runs.tar.xz" fp8 2>/dev/null
fi

if has timeline; then
  for shape in $TL_SHAPES; do
    echo "== timeline: $shape FULL_SHARD, 4 steps under CUPTI, the last 2 summarised"
    if [ -n "$TRACER" ] && [ -f "$TRACER" ]; then
      cfg=$CFG1B ov="train.micro_batch_size=4"
      [ "$shape" = 8b ] && cfg=$CFG8B ov="train.micro_batch_size=2 fsdp.activation_checkpointing=true"
      mkdir -p "$W/trace-$shape"
      # shellcheck disable=SC2086
      FSDPC_TRACE_DIR="$W/trace-$shape" CUDA_INJECTION64_PATH="$TRACER" timeout 300 $F train "$cfg" \
        data.train="$W/copy.tok" $ov train.max_steps=4 train.log_every=1 \
        log.dir="$W/tl-$shape" --nproc-per-node "$N" >"$OUT/timeline-$shape-train.log" 2>&1
      echo "   train exit $?"
      python3 "$TL" "$W/trace-$shape" --steps 2 --chrome "$W/timeline-$shape.json" |
        tee "$OUT/timeline-$shape.txt"
      xz -c "$W/timeline-$shape.json" >"$OUT/timeline-$shape.json.xz" 2>/dev/null
    else
      echo "   skipped: no CUPTI tracer in this build (${TRACER:-CPU device})"
    fi
  done
fi

if has agree; then
  echo "== agreement: world $N vs world 1, small model, 20 steps, rtol 2e-2 on the loss"
  $F data synth --task qa --n 20000 --out "$W/qa.tok" >/dev/null
  dev=""
  [ "$DEVICE" = cuda ] && dev="train.device=cuda"
  # the small model of agree.sh train on GPUs; smaller still on the CPU (CI)
  if [ "$DEVICE" = cuda ]; then dims="hidden_size: 128, intermediate_size: 384, num_hidden_layers: 4" sl=64
  else dims="hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2" sl=32; fi
  cat >"$W/small.yaml" <<YAML
model: {vocab_size: 259, $dims,
        num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 128,
        tie_word_embeddings: true}
data: {train: $W/qa.tok, seq_len: $sl}
optim: {name: adamw, lr: 3.0e-3, weight_decay: 0.01}
schedule: {name: cosine, warmup_steps: 5}
train: {max_steps: 20, micro_batch_size: 2, global_batch_size: 16, log_every: 1, max_grad_norm: 1.0,
        threads: 1, eval_every: 0}
YAML
  agree() { # NAME NPROC overrides...
    local name=$1 np=$2
    shift 2
    timeout 200 $F train "$W/small.yaml" $dev log.dir="$W/ag-$name" "$@" --nproc-per-node "$np" \
      >"$OUT/agree-$name.log" 2>&1
    local rc=$?
    [ $rc = 0 ] || echo "   $name: exit $rc: $(grep -m1 error "$OUT/agree-$name.log")"
    cp "$W/ag-$name/metrics.jsonl" "$OUT/agree-$name.metrics.jsonl" 2>/dev/null
  }
  # the variants: "name|overrides" (a variant's world-1 twin has the same overrides)
  variants=("full|fsdp.sharding_strategy=FULL_SHARD" "grad_op|fsdp.sharding_strategy=SHARD_GRAD_OP"
    "no_shard|fsdp.sharding_strategy=NO_SHARD")
  hybrid_ok && variants+=("hybrid|fsdp.sharding_strategy=HYBRID_SHARD fsdp.hybrid_shard_size=$((N / 2))")
  if $F config schema 2>/dev/null | grep -q "peft.method" &&
    $F config check "$W/small.yaml" peft.method=lora >/dev/null 2>&1; then
    variants+=("lora|peft.method=lora peft.r=8 peft.alpha=16")
  else
    echo "   lora: skipped: not on main (no peft.method=lora in this build)" | tee -a "$OUT/agree.txt"
  fi
  if $F plugins list 2>/dev/null | grep -qw adamw8bit; then
    variants+=("adamw8bit|optim.name=adamw8bit")
  else
    echo "   adamw8bit: skipped: not on main (no optim plugin adamw8bit in this build)" | tee -a "$OUT/agree.txt"
  fi
  agree w1 1
  for v in "${variants[@]}"; do
    name=${v%%|*}
    read -r -a ov <<<"${v#*|}"
    # LoRA and adamw8bit change the trajectory: compare with their own world-1 run
    case $name in lora | adamw8bit) agree "w1-$name" 1 "${ov[@]}" ;; esac
    agree "w$N-$name" "$N" "${ov[@]}"
    ref="$W/ag-w1"
    case $name in lora | adamw8bit) ref="$W/ag-w1-$name" ;; esac
    python3 "$CMP" "$ref" "$W/ag-w$N-$name" --rtol 2e-2 --keys loss 2>&1 | sed "s/^/   $name: /" |
      tee -a "$OUT/agree.txt"
  done
fi

python3 "$PY" "$OUT" "$N" | tee "$OUT/summary.md"
python3 "$PY" "$OUT" "$N" --rows | tee "$OUT/rows.txt"
# non-zero when a fsdpc row failed or a world-N run disagreed with world 1
bad=$(cut -d'|' -f3 "$OUT/fsdpc-rows.txt" 2>/dev/null | grep -cv '^0$')
bad=$((bad + $(grep -c '^ROW fsdpc .* FAIL' "$OUT/rows.txt")))
grep -q "reference\|has no\|Error\|No such file" "$OUT/agree.txt" 2>/dev/null && bad=$((bad + 1))
echo "world.sh: $bad failed row(s) or check(s)"
# the device tool brings back a few files: on GPUs everything but the two
# tables goes into one archive
if [ "$DEVICE" = cuda ]; then
  (cd "$OUT" && find . -maxdepth 1 -type f ! -name summary.md ! -name rows.txt ! -name world-logs.tar.xz \
    -printf '%P\n' | tar cJf world-logs.tar.xz --remove-files -T -)
fi
[ "$bad" = 0 ]
