#!/bin/bash
# Training on the GPU host against a reference (the CPU fp32 path, world 1,
# fp32 AdamW, Hugging Face PEFT), from a carry made by carry.sh. Logs and
# metrics go to $OUT (or /tmp/out).
#   bash .carry/X/agree.sh train single|multi|ckpt|multi4
#     single: world 1 on GPU 0 vs the CPU (naive attention, head dim 32; flash,
#             head dim 64), 20 steps each, losses within bf16 tolerance; the HF
#             fixtures on the GPU; transformers loads fsdpc's full checkpoint
#     multi:  world 2 over NCCL, FULL_SHARD / SHARD_GRAD_OP / NO_SHARD vs world 1,
#             and kill -9 of rank 1 mid-training
#     ckpt:   GPU training saves, resumes, and its full output loads in transformers
#     multi4: world 4: FULL_SHARD / SHARD_GRAD_OP / NO_SHARD / HYBRID_SHARD 2x2 (and
#             bf16 reduce, CPU offload) vs world 1
#   bash .carry/X/agree.sh offload     fsdp.mixed_precision.reduce_dtype bf16 and
#     fsdp.cpu_offload against the default CUDA path at world 1 and (2+ GPUs)
#     world 2, 20 steps of a small model each:
#       base    the default (fp32 reduce, shards on the device)
#       base2   the default again: the run-to-run noise floor (embedding grads use
#               fp32 atomics, so two default runs need not be bit-identical)
#       bf16    reduce_dtype bf16                       vs base: loss within 1e-2
#       off     cpu_offload                             vs base: loss within
#               max(1e-5, 3 x noise) relative (the same fp32 AdamW, on the CPU)
#       offck   cpu_offload, sharded checkpoint every 10 steps + a full fp32 model;
#               offres resumes it at step 10 (offload), baseres resumes base's
#               checkpoint with offload: steps 11..20 vs the straight run within
#               the same tolerance; offfull saves the full (weights-only) format,
#               fullres starts from it with offload, fullbase without: the two
#               agree within the same tolerance
#       offbf   cpu_offload + reduce_dtype bf16         vs base: within 1e-2
#     and the device peak (max of peak_bytes over steps): offload must be lower
#     than base by at least half the shard bytes the engine logs (the planner's
#     prediction is printed beside it). Exits 1 if any check fails.
#   bash .carry/X/agree.sh adamw8bit   (one H200)
#     1. test_cuda_adamw8bit: the CUDA path against the CPU path (bit for bit),
#        and the plugin's maps written out, then compared with torch's fp32
#        construction of bitsandbytes' dynamic maps (check_q8_maps.py);
#     2. a small model on CUDA, min_8bit_size 0: a straight 20-step run saving
#        a sharded checkpoint at step 10, the run repeated (the noise floor: GPU
#        runs are not bit-reproducible) and a resume from step 10 (the device
#        state goes through the fp32 checkpoint views and back), and the run
#        with fsdp.cpu_offload (the plugin's CPU path on pinned host state);
#     3. the Llama-3.2-1B shape on one GPU, 300 steps, adamw then adamw8bit
#        (micro-batch 4 x 2048, 2 micro-batches per step, lr 3e-4 cosine,
#        warmup 30): per-step loss gap, optimizer bytes, peak, step time.
#     Q8_SKIP_1B=1 runs 1 and 2 only.
#   bash .carry/X/agree.sh offload8    adamw8bit with fsdp.offload.optimizer (one
#     80 GB H100):
#     1. the CUDA optimizer tests: test_cuda_adamw8bit (the CUDA kernel against
#        the CPU path, bit for bit) and test_cuda_optim;
#     2. a small model on CUDA, adamw8bit, min_8bit_size 0, 20 steps: the state
#        in place twice (s1, s2: the noise floor; GPU runs are not bit-
#        reproducible), offloaded with the default buffers (o1: whole units) and
#        with 16 KiB buffers (o2: pieces cut inside parameters), and an
#        offloaded resume of s1's step-10 checkpoint (r1): max relative loss gap
#        of each against s1, beside the noise floor;
#     3. the 8B rows of memory.sh offload 8b8 (STEPS steps each, default 6;
#        ROWS: which, default all).
#     Env: STEPS, ROWS, SKIP_SMALL=1.
#   bash .carry/X/agree.sh q8-natural TOKENS   (one H200) adamw vs adamw8bit on
#     natural text, Llama-3.2-1B shape, 300 steps (micro-batch 4 x 2048, 2
#     micro-batches a step, lr 3e-4 cosine, warmup 30, clip 1.0), the same init
#     and batches; a third run, adamw with eps x 1.0001, measures how far two
#     fp32 runs drift apart anyway (TOKENS: a token file, e.g. made by
#     `fsdpc data tokenize` from real text)
#   bash .carry/X/agree.sh fp8-natural TOKENS   (one H100/H200, issue 39) the
#     FP8 linear against bf16 on natural text: Llama-3.2-1B shape, STEPS steps
#     (default 1000; micro-batch 4 x 2048, one micro-batch a step, lr 3e-4
#     cosine, warmup 30, clip 1.0), the same init and batches, rows `bf16`,
#     `fp8-tensorwise` (and `fp8-rowwise` with ROWWISE=1: this cuBLASLt has no
#     outer-vector-scaled GEMM) and `bf16-eps` (optim.eps x 1.0001: how far two
#     bf16 runs drift apart anyway); prints each run's exit and seconds, then
#     loss_gap.py's 50-step window gaps of each against bf16. Metrics and logs
#     in $OUT (metrics as .jsonl.xz).
#   bash .carry/X/agree.sh lora        fsdpc LoRA against Hugging Face PEFT:
#     1. A tiny random fp32 Llama (transformers) and a token file whose 4 windows
#        are every step's batch.
#     2. fsdpc (CPU, fp32) trains LoRA r 4 on all seven projections for 20 steps
#        from it (the adapters after a 1-step run at lr 0 are the initial ones);
#        PyTorch + PEFT trains from the same base, initial adapters and batch with
#        AdamW and clipping: losses and grad norms within 1e-4, final adapters too.
#     3. PeftModel.from_pretrained loads fsdpc's adapter folder (final/) onto the
#        base: logits vs fsdpc's (fp32 on the CPU within 1e-5; bf16 on the GPU);
#        transformers loads the merged folder (final-merged/): same logits.
#     4. The CUDA path: the same LoRA run on the GPU (bf16) vs the CPU run (bf16
#        tolerance), and with dropout + activation checkpointing.
#   bash .carry/X/agree.sh families    the decoder families (issue 35), in one
#     call of at most 5 minutes (about 2 typically):
#     1. tests/gpu/make_hf_families.py makes the thirteen family fixtures from
#        transformers (float64 references); they come back as
#        $OUT/hf_families.tar.gz (commit its contents as tests/fixtures/hf_families);
#     2. test_hf_fixture --families: fsdpc's CPU fp32 logits within 1e-5 of
#        transformers' float64, gradients within 1e-4, 20 AdamW steps (losses and
#        final weights) within 1e-4 of torch.optim.AdamW;
#     3. test_cuda_hf_fixture --families: the CUDA path (bf16) against the same
#        references within bf16 tolerance (logits 3e-2, losses 1e-2);
#     4. test_flash_gpu --window: flash's sliding-window cases against the naive
#        plugin;
#     5. check_families.py: a fine-tune's export loads in transformers with the
#        source's tensor names and config and fsdpc's logits (1e-5), and PEFT
#        loads fsdpc's LoRA adapters (family module names) with the same logits.
#     Prints PASS/FAIL per family and check, then "families: N passed, M failed";
#     the logs are $OUT/families-logs.tar.gz.
#   bash .carry/X/agree.sh dpo         issue 38: tests/gpu/check_dpo.py, 20 steps of
#     dpo (LoRA; full with objective.reference precompute) and simpo against
#     PyTorch + transformers (+ PEFT) from TRL's definitions (fp32 on the CPU,
#     about two minutes): fsdpc on the CPU within 1e-4 on loss, grad_norm,
#     rewards/* and logps/*; fsdpc on CUDA (bf16) within 3e-2 (accuracies
#     0.25); a PASS/FAIL line per run, the work folder in $OUT/dpo-logs.tar.gz.
#   bash .carry/X/agree.sh gemma       issue 36: a small gemma2 (head dims 256
#     and 128, attention soft-caps 50 and 5, a window of 32 in 128 tokens)
#     trained 10 steps on CUDA with naive and with flash (head dim 256 and
#     soft-capping: its mma.sync kernels), and at cap 5 on the CPU (fp32); a
#     PASS/FAIL line per head dim and cap for flash vs naive (losses within
#     2e-2) and, at cap 5, for the GPU vs the CPU (3e-2), then "gemma: N
#     passed, M failed" (about a minute); the logs in $OUT/gemma-logs.tar.gz.
# shellcheck disable=SC2317 # the mode functions run through "$MODE"
usage() {
  echo "usage: agree.sh train single|multi|ckpt|multi4 | offload | adamw8bit | offload8 |" \
    "q8-natural TOKENS | fp8-natural TOKENS | lora | families | dpo | gemma" >&2
  exit 2
}
MODE=${1:-}
shift
case $MODE in
train | offload | adamw8bit | offload8 | lora | families | dpo | gemma) ;;
q8-natural | fp8-natural) [ $# -ge 1 ] || usage ;;
*) usage ;;
esac
. "$(dirname "$0")/carry_env.sh" # C, OUT, B, F; LD_LIBRARY_PATH

# model_yaml FILE TOKENS HIDDEN FFN KV_HEADS POSITIONS TIED SEQ OPTIM TRAIN: the
# config of a 4-layer model with 4 heads on a byte vocabulary, cosine schedule
model_yaml() {
  cat >"$1" <<YAML
model: {vocab_size: 259, hidden_size: $3, intermediate_size: $4, num_hidden_layers: 4,
        num_attention_heads: 4, num_key_value_heads: $5, max_position_embeddings: $6,
        tie_word_embeddings: $7}
data: {train: $2, seq_len: $8}
optim: $9
schedule: {name: cosine, warmup_steps: 5}
train: ${10}
YAML
}

# small_model W OPTIM: a token file W/qa.tok and W/small.yaml, a 4-layer
# untied model on CUDA (hidden 256, GQA 2) with the optimizer OPTIM
small_model() {
  $F data synth --task qa --n 20000 --out "$1/qa.tok" >/dev/null
  model_yaml "$1/small.yaml" "$1/qa.tok" 256 640 2 128 false 64 "$2" \
    "{device: cuda, max_steps: 20, micro_batch_size: 8, global_batch_size: 16, log_every: 1,
        max_grad_norm: 1.0, eval_every: 0}"
}

# small_run LIMIT NAME OVERRIDES...: trains W/small.yaml as NAME (log, metrics
# and checkpoints under W/NAME) within LIMIT seconds; its log in $OUT
small_run() {
  local lim=$1 n=$2
  shift 2
  timeout "$lim" "$F" train "$W/small.yaml" log.dir="$W/$n" checkpoint.dir="$W/$n/ck" "$@" >"$OUT/small-$n.log" 2>&1
  echo "small $n exit $?"
  grep -E "error|resumed from|offload.optimizer:" "$OUT/small-$n.log" | head -2
  cp "$W/$n/metrics.jsonl" "$OUT/small-$n.metrics.jsonl" 2>/dev/null
}

train() {
  local mode=${1:-single}
  export FSDPC_PLUGIN_PATH=$B/plugins
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
  W=$(mktemp -d)
  $F data synth --task qa --n 20000 --out "$W/qa.tok" >/dev/null
  model_yaml "$W/small.yaml" "$W/qa.tok" 128 384 2 128 true 64 "{name: adamw, lr: 3.0e-3, weight_decay: 0.01}" \
    "{max_steps: 20, micro_batch_size: 16, log_every: 1, max_grad_norm: 1.0}"
  # head dim 64 so that flash serves it
  model_yaml "$W/hd64.yaml" "$W/qa.tok" 256 640 1 256 false 128 "{name: adamw, lr: 2.0e-3, weight_decay: 0.01}" \
    "{max_steps: 20, micro_batch_size: 8, log_every: 1, max_grad_norm: 1.0}"
  CMP="python3 $C/compare_runs.py"
  run() { # name cfg overrides...
    local n=$1 cfg=$2; shift 2
    $F train "$W/$cfg" log.dir="$W/$n" "$@" >"$OUT/$n.log" 2>&1
    echo "== $n: exit $?"; grep -E "step 20/|error|generate" "$OUT/$n.log" | tail -3
    [ -f "$W/$n/metrics.jsonl" ] && cp "$W/$n/metrics.jsonl" "$OUT/$n.metrics.jsonl"
  }
  # strategies N MB: w1, then wN_S for each S of FULL_SHARD, SHARD_GRAD_OP and
  # NO_SHARD at N GPUs (micro-batch MB, global batch 16)
  strategies() {
    run w1 small.yaml train.device=cuda train.global_batch_size=16 train.micro_batch_size="$2"
    for st in FULL_SHARD SHARD_GRAD_OP NO_SHARD; do
      run "w$1_$st" small.yaml train.device=cuda train.global_batch_size=16 train.micro_batch_size="$2" \
        fsdp.sharding_strategy=$st --nproc-per-node "$1"
    done
  }
  case $mode in
  single)
    run cpu small.yaml
    run gpu_naive small.yaml train.device=cuda attention.impl=naive
    run gpu_auto small.yaml train.device=cuda
    run cpu64 hd64.yaml
    run gpu64_flash hd64.yaml train.device=cuda attention.impl=flash
    run gpu64_naive hd64.yaml train.device=cuda attention.impl=naive
    run gpu64_ckpt hd64.yaml train.device=cuda attention.impl=flash fsdp.activation_checkpointing=true
    echo "--- bf16 GPU vs fp32 CPU (rtol 3e-2 on loss)"
    $CMP "$W/cpu" "$W/gpu_naive" "$W/gpu_auto" --rtol 3e-2 --keys loss
    $CMP "$W/cpu64" "$W/gpu64_flash" "$W/gpu64_naive" "$W/gpu64_ckpt" --rtol 3e-2 --keys loss
    echo "--- flash vs naive on GPU"
    $CMP "$W/gpu64_naive" "$W/gpu64_flash" --rtol 2e-2 --keys loss
    echo "--- the whole model on the GPU vs the HF fixtures (bf16 tolerance)"
    FSDPC_SOURCE_DIR=$C/src "$B/bin/test_cuda_hf_fixture" 2>&1 | tail -12
    echo "--- transformers loads fsdpc's full (HF) checkpoint; logits vs fsdpc's (fp32)"
    $F train "$W/small.yaml" train.max_steps=10 checkpoint.dir="$W/ck" checkpoint.final_dtype=fp32 \
      log.dir="$W/ckrun" >"$OUT/ckpt_train.log" 2>&1; echo "train for checkpoint: exit $?"
    "$B/bin/fsdpc_dump_logits" "$W/ck/final" "$W/fsdpc_logits.safetensors" 32 >"$OUT/dump.log" 2>&1
    echo "dump logits: exit $?"
    python3 "$C/check_hf_load.py" "$W/ck/final" "$W/fsdpc_logits.safetensors" 2>&1 | tail -5
    ;;
  ckpt)
    # GPU training with checkpoints: save every 10 steps + a full fp32 model at
    # the end; resume from step 10 and compare; transformers reads the output.
    run straight small.yaml train.device=cuda checkpoint.dir="$W/ckA" checkpoint.save_steps=10 \
      checkpoint.final_dtype=fp32
    ls "$W/ckA"
    run resumed small.yaml train.device=cuda checkpoint.dir="$W/ckB" \
      checkpoint.resume="$W/ckA/step-000010"
    grep -h "resumed from" "$OUT/resumed.log" | head -1
    python3 - "$W/straight/metrics.jsonl" "$W/resumed/metrics.jsonl" <<'PY'
import json, sys
a = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[1])) if "step" in r}
b = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[2])) if "step" in r}
common = sorted(set(a) & set(b))
worst = max(abs(a[s] - b[s]) / a[s] for s in common)
print(f"resumed steps {common[0]}..{common[-1]}: worst relative loss difference vs straight {worst:.2e}")
PY
    "$B/bin/fsdpc_dump_logits" "$W/ckA/final" "$W/gpu_logits.safetensors" 32 >"$OUT/dump.log" 2>&1
    python3 "$C/check_hf_load.py" "$W/ckA/final" "$W/gpu_logits.safetensors" 2>&1 | tail -2
    ;;
  multi)
    strategies 2 8
    $CMP "$W/w1" "$W/w2_FULL_SHARD" "$W/w2_SHARD_GRAD_OP" "$W/w2_NO_SHARD" --rtol 2e-2 --keys loss
    echo "--- kill -9 of rank 1 mid-training on GPUs"
    $F train "$W/small.yaml" train.device=cuda train.max_steps=100000 train.log_every=1 \
      log.dir="$W/k9" --nproc-per-node 2 >"$OUT/kill9.log" 2>&1 &
    L=$!
    for _ in $(seq 300); do grep -q "step 20/" "$OUT/kill9.log" && break; sleep 0.1; done
    V=""
    for p in $(pgrep -f "$W/k9"); do
      [ "$p" = "$L" ] && continue
      tr '\0' '\n' </proc/"$p"/environ 2>/dev/null | grep -qx RANK=1 && V=$p
    done
    t0=$(date +%s.%N); kill -9 "$V"; wait "$L"; rc=$?; t1=$(date +%s.%N)
    echo "launcher exit $rc after $(python3 -c "print(round($t1-$t0,2))") s (victim pid $V)"
    grep -E "died|error" "$OUT/kill9.log" | tail -3
    sleep 1; pgrep -af "$W/k9" && echo "LEFTOVER PROCESSES" || echo "no processes left"
    ;;
  multi4)
    strategies 4 4
    run w4_HYBRID_2x2 small.yaml train.device=cuda train.global_batch_size=16 train.micro_batch_size=4 \
      fsdp.sharding_strategy=HYBRID_SHARD fsdp.hybrid_shard_size=2 --nproc-per-node 4
    run w4_FULL_bf16reduce small.yaml train.device=cuda train.global_batch_size=16 \
      train.micro_batch_size=4 fsdp.mixed_precision.reduce_dtype=bf16 --nproc-per-node 4
    run w4_HYBRID_bf16reduce small.yaml train.device=cuda train.global_batch_size=16 \
      train.micro_batch_size=4 fsdp.sharding_strategy=HYBRID_SHARD fsdp.hybrid_shard_size=2 \
      fsdp.mixed_precision.reduce_dtype=bf16 --nproc-per-node 4
    run w4_FULL_offload small.yaml train.device=cuda train.global_batch_size=16 \
      train.micro_batch_size=4 fsdp.cpu_offload=true --nproc-per-node 4
    grep -h "fsdp: HYBRID" "$OUT/w4_HYBRID_2x2.log" | head -1
    $CMP "$W/w1" "$W/w4_FULL_SHARD" "$W/w4_SHARD_GRAD_OP" "$W/w4_NO_SHARD" "$W/w4_HYBRID_2x2" \
      "$W/w4_FULL_bf16reduce" "$W/w4_HYBRID_bf16reduce" "$W/w4_FULL_offload" --rtol 2e-2 --keys loss
    echo "--- offload vs the same run with shards on the device (world 4)"
    $CMP "$W/w4_FULL_SHARD" "$W/w4_FULL_offload" --rtol 1e-4 --keys loss,grad_norm
    ;;
  esac
}

offload() {
  export FSDPC_PLUGIN_PATH=$B/plugins
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
  NGPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
  W=$(mktemp -d)
  small_model "$W" "{name: adamw, lr: 2.0e-3, weight_decay: 0.01}"
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
    run "${p}_base" "$w"
    run "${p}_base2" "$w"
    run "${p}_bf16" "$w" fsdp.mixed_precision.reduce_dtype=bf16
    run "${p}_off" "$w" fsdp.cpu_offload=true
    run "${p}_offbf" "$w" fsdp.cpu_offload=true fsdp.mixed_precision.reduce_dtype=bf16
    run "${p}_ckbase" "$w" checkpoint.dir="$W/${p}_ckA" checkpoint.save_steps=10
    run "${p}_offck" "$w" fsdp.cpu_offload=true checkpoint.dir="$W/${p}_ckB" checkpoint.save_steps=10 \
      checkpoint.final_dtype=fp32
    run "${p}_offres" "$w" fsdp.cpu_offload=true checkpoint.dir="$W/${p}_ckC" \
      checkpoint.resume="$W/${p}_ckB/step-000010"
    run "${p}_baseres" "$w" fsdp.cpu_offload=true checkpoint.dir="$W/${p}_ckD" \
      checkpoint.resume="$W/${p}_ckA/step-000010"
    run "${p}_offfull" "$w" fsdp.cpu_offload=true checkpoint.dir="$W/${p}_ckE" checkpoint.save_steps=10 \
      checkpoint.intermediate_format=full
    run "${p}_fullres" "$w" fsdp.cpu_offload=true checkpoint.dir="$W/${p}_ckF" \
      checkpoint.resume="$W/${p}_ckE/step-000010"
    # a full checkpoint holds weights only: training restarts at step 0 from
    # them, so the check is the same start without offload
    run "${p}_fullbase" "$w" checkpoint.dir="$W/${p}_ckG" checkpoint.resume="$W/${p}_ckE/step-000010"
    # shellcheck disable=SC2012 # for the reader
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
      # shellcheck disable=SC2086 # two words
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
    echo "--- device peak (allocated, MiB): base $((pb >> 20)).$(( (pb & 1048575) * 10 >> 20 )) bf16 $((pbf >> 20)) offload $((po >> 20)).$(( (po & 1048575) * 10 >> 20 )); shard bytes $sb; drop $((pb - po))"
    echo "    planner (FULL_SHARD, no checkpointing): $pred"
    # shellcheck disable=SC2015 # either test failing is the failure
    [ -n "$sb" ] && [ $((pb - po)) -ge $((sb / 2)) ] ||
      bad "world $w: offload peak $po not below base $pb by half the shard bytes ($sb)"
    echo "world $w peaks: base=$pb bf16=$pbf offload=$po shard_bytes=$sb" >>"$OUT/peaks.txt"
  done
  echo "######## $FAILS failed checks"
  [ "$FAILS" -eq 0 ]
}

adamw8bit() {
  export FSDPC_PLUGIN_PATH=$B/plugins
  W=$(mktemp -d)
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
  t0=$(date +%s)

  echo "== 1. CUDA vs CPU path, maps vs torch"
  FSDPC_Q8_MAPS=$OUT/q8maps.txt timeout 120 "$B/bin/test_cuda_adamw8bit" >"$OUT/cuda_test.log" 2>&1
  echo "test_cuda_adamw8bit exit $?"
  grep -E "differing|%|Checks|FAIL|Error" "$OUT/cuda_test.log" | head -6
  python3 "$C/check_q8_maps.py" "$OUT/q8maps.txt" 2>&1 | tee "$OUT/maps.log"

  echo "== 2. small model: checkpoint and resume on CUDA ($(($(date +%s) - t0)) s)"
  small_model "$W" "{name: adamw8bit, lr: 2.0e-3, weight_decay: 0.01, options: {min_8bit_size: 0}}"
  small() { small_run 90 "$@"; }
  small s1 checkpoint.save_steps=10
  small s2
  small r1 checkpoint.resume="$W/s1/ck/step-000010"
  small o1 fsdp.cpu_offload=true
  python3 - "$W" <<'PY'
import json, sys
w = sys.argv[1]
def losses(n):
    return {r["step"]: r["loss"] for r in map(json.loads, open(f"{w}/{n}/metrics.jsonl")) if "loss" in r}
a, b, r, o = losses("s1"), losses("s2"), losses("r1"), losses("o1")
gap = lambda x, y, ks: max(abs(x[k] - y[k]) / abs(x[k]) for k in ks)
ks = [k for k in range(11, 21) if k in a and k in r and k in b]
if not ks:
    sys.exit(print("small: no common steps 11..20"))
print(f"small: steps 11..20 of the resume vs the straight run: max rel gap {gap(a, r, ks):.2e} "
      f"over {len(ks)} steps; noise floor (straight run twice) {gap(a, b, ks):.2e}")
ko = [k for k in range(1, 21) if k in a and k in o and k in b]
if ko:
    print(f"small: cpu_offload (CPU path of the plugin) vs on-device, steps 1..20: max rel gap "
          f"{gap(a, o, ko):.2e}; noise floor {gap(a, b, ko):.2e}")
PY

  if [ "${Q8_SKIP_1B:-0}" = 1 ]; then # a quick re-check of 1 and 2
    echo "total $(($(date +%s) - t0)) s"
    exit 0
  fi
  echo "== 3. 1B shape, 300 steps ($(($(date +%s) - t0)) s)"
  $F data synth --task copy --n 300000 --out "$W/copy.tok" >/dev/null
  for o in adamw adamw8bit; do
    timeout 170 "$F" train configs/bench/llama3-1b-base.yaml data.train="$W/copy.tok" optim.name="$o" \
      optim.lr=3e-4 schedule.name=cosine schedule.warmup_steps=30 train.micro_batch_size=4 \
      train.global_batch_size=8 train.max_steps=300 train.log_every=1 log.dir="$W/1b-$o" \
      >"$OUT/1b-$o.log" 2>&1
    echo "1b $o exit $? ($(($(date +%s) - t0)) s)"
    grep -E "error|per-rank shard bytes|step 300/" "$OUT/1b-$o.log" | head -3
    cp "$W/1b-$o/metrics.jsonl" "$OUT/1b-$o.metrics.jsonl" 2>/dev/null
    cp "$W/1b-$o/rank0.json" "$OUT/1b-$o.rank0.json" 2>/dev/null
  done
  python3 - "$W" <<'PY'
import json, sys, statistics
w = sys.argv[1]
def rows(o):
    return [r for r in map(json.loads, open(f"{w}/1b-{o}/metrics.jsonl")) if "loss" in r and "step" in r]
try:
    a, q = rows("adamw"), rows("adamw8bit")
except Exception as e:
    print("no metrics:", e); sys.exit(0)
la, lq = {r["step"]: r["loss"] for r in a}, {r["step"]: r["loss"] for r in q}
ks = sorted(set(la) & set(lq))
g = [(abs(la[k] - lq[k]) / abs(la[k]), k) for k in ks]
worst = max(g)
print(f"1b: {len(ks)} common steps; max per-step rel loss gap {worst[0]:.4f} at step {worst[1]} "
      f"({la[worst[1]]:.4f} vs {lq[worst[1]]:.4f}); mean gap {statistics.mean(x for x, _ in g):.4f}")
for lo in range(1, 301, 50):
    ww = [k for k in ks if lo <= k < lo + 50]
    if ww:
        ma, mq = statistics.mean(la[k] for k in ww), statistics.mean(lq[k] for k in ww)
        print(f"  steps {lo}-{lo + 49}: mean loss adamw {ma:.4f} adamw8bit {mq:.4f} (rel {abs(ma - mq) / ma:.4f})")
print(f"  final loss adamw {la[ks[-1]]:.4f} adamw8bit {lq[ks[-1]]:.4f}")
for o, r in (("adamw", a), ("adamw8bit", q)):
    med = statistics.median(x["step_s"] for x in r if x["step"] > 10)
    try:
        r0 = json.load(open(f"{w}/1b-{o}/rank0.json"))
        peak, opt = r0["peak_bytes"]["total"] / 2**30, r0["shard_bytes"]["optim"]
    except Exception:
        peak, opt = float("nan"), 0
    print(f"  {o}: median step {med:.4f} s, {r[-1]['tokens'] / med:.0f} tok/s, peak {peak:.2f} GiB, "
          f"optimizer state {opt} bytes ({opt / (r0['shard_bytes']['params'] / 4):.4f} per parameter)")
PY
  echo "total $(($(date +%s) - t0)) s"
}

offload8() {
  export FSDPC_PLUGIN_PATH=$B/plugins
  W=$(mktemp -d)
  t0=$(date +%s)
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"

  echo "== 1. CUDA optimizer tests"
  for t in test_cuda_adamw8bit test_cuda_optim; do
    timeout 120 "$B/bin/$t" >"$OUT/$t.log" 2>&1
    echo "$t exit $? ($(($(date +%s) - t0)) s)"
    grep -E "differing|Checks|FAIL|Error" "$OUT/$t.log" | head -4
  done

  if [ "${SKIP_SMALL:-0}" != 1 ]; then
    echo "== 2. small model: offloaded adamw8bit state on CUDA ($(($(date +%s) - t0)) s)"
    small_model "$W" "{name: adamw8bit, lr: 2.0e-3, weight_decay: 0.01, options: {min_8bit_size: 0}}"
    small() { small_run 60 "$@"; }
    small s1 checkpoint.save_steps=10
    small s2
    small o1 fsdp.offload.optimizer=true
    small o2 fsdp.offload.optimizer=true fsdp.offload.buffer_mib=0.015625
    small r1 fsdp.offload.optimizer=true checkpoint.resume="$W/s1/ck/step-000010"
    python3 - "$W" <<'PY'
import json, sys
w = sys.argv[1]
def losses(n):
    try:
        return {r["step"]: r["loss"] for r in map(json.loads, open(f"{w}/{n}/metrics.jsonl")) if "loss" in r}
    except OSError:
        return {}
s1, s2 = losses("s1"), losses("s2")
def gap(x, y):
    ks = [k for k in x if k in y]
    return (max(abs(x[k] - y[k]) / abs(x[k]) for k in ks), len(ks)) if ks else (float("nan"), 0)
print("small: noise floor (s2 vs s1): max rel gap %.2e over %d steps" % gap(s1, s2))
for n, what in (("o1", "offloaded, whole units"), ("o2", "offloaded, 16 KiB pieces"),
                ("r1", "offloaded resume of s1 at step 10")):
    g, k = gap(s1, losses(n))
    print("small: %s vs s1 (%s): max rel gap %.2e over %d steps" % (n, what, g, k))
PY
  fi

  echo "== 3. 8B on one GPU, adamw8bit ($(($(date +%s) - t0)) s)"
  STEPS=${STEPS:-6} ROW_TIMEOUT=${ROW_TIMEOUT:-150} bash "$C/memory.sh" offload 8b8
  echo "total $(($(date +%s) - t0)) s"
}

# The natural-text runs' start: TOK (the token file, absolute), W (a work
# folder), the GPU and the data described in $OUT.
natural_setup() {
  TOK=$(realpath "$1")
  export FSDPC_PLUGIN_PATH=$B/plugins
  W=$(mktemp -d)
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
  $F data info "$TOK" | head -8 | tee "$OUT/data.txt"
}

q8_natural() {
  natural_setup "$1"
  run() { # NAME overrides...
    local n=$1 t0
    t0=$(date +%s)
    shift
    timeout 240 "$F" train configs/bench/llama3-1b-base.yaml data.train="$TOK" \
      optim.lr=3e-4 schedule.name=cosine schedule.warmup_steps=30 train.micro_batch_size=4 \
      train.global_batch_size=8 train.max_steps=300 train.log_every=1 log.tensorboard=false \
      log.dir="$W/$n" "$@" >"$OUT/$n.log" 2>&1
    echo "$n exit $? ($(($(date +%s) - t0)) s)"
    cp "$W/$n/metrics.jsonl" "$OUT/$n.metrics.jsonl"
  }
  run adamw optim.name=adamw
  run adamw8bit optim.name=adamw8bit
  run adamw-eps optim.name=adamw optim.eps=1.0001e-8
  python3 "$C/loss_gap.py" "$OUT/adamw.metrics.jsonl" "$OUT/adamw8bit.metrics.jsonl" \
    "$OUT/adamw-eps.metrics.jsonl" | tee "$OUT/gap.txt"
  grep -h "optim\|peak" "$OUT"/adamw.log "$OUT"/adamw8bit.log | grep -i "shard bytes\|memory (end)" | head -4
}

fp8_natural() {
  natural_setup "$1"
  run() { # NAME overrides...
    local n=$1 t0
    t0=$(date +%s)
    shift
    timeout "${RUN_TIMEOUT:-200}" "$F" train configs/bench/llama3-1b-base.yaml data.train="$TOK" \
      optim.lr=3e-4 schedule.name=cosine schedule.warmup_steps=30 train.micro_batch_size=4 \
      train.global_batch_size=4 train.max_steps="${STEPS:-1000}" train.log_every=1 \
      train.eval_every=0 log.tensorboard=false checkpoint.dir="''" log.dir="$W/$n" "$@" \
      >"$W/$n.log" 2>&1
    echo "$n exit $? ($(($(date +%s) - t0)) s)" | tee -a "$OUT/gap.txt"
    grep -m2 "error" "$W/$n.log"
  }
  run bf16
  run fp8-tensorwise fsdp.mixed_precision.linear=fp8
  [ "${ROWWISE:-0}" = 1 ] && run fp8-rowwise fsdp.mixed_precision.linear=fp8 \
    fsdp.mixed_precision.fp8_recipe=rowwise
  run bf16-eps optim.eps=1.0001e-8
  local runs=()
  for n in fp8-tensorwise fp8-rowwise bf16-eps; do
    [ -s "$W/$n/metrics.jsonl" ] && runs+=("$W/$n")
  done
  python3 "$C/loss_gap.py" "$W/bf16" "${runs[@]}" --window 50 | tee -a "$OUT/gap.txt"
  for n in bf16 fp8-tensorwise fp8-rowwise bf16-eps; do
    [ -f "$W/$n/metrics.jsonl" ] && xz -c "$W/$n/metrics.jsonl" >"$OUT/$n.metrics.jsonl.xz"
    [ -f "$W/$n.log" ] && tail -5 "$W/$n.log" >"$OUT/$n.log.tail"
  done
  return 0
}

lora() {
  export FSDPC_PLUGIN_PATH=$B/plugins
  P="python3 $C/check_lora_peft.py"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
  python3 -c 'import torch, transformers, peft; print("torch", torch.__version__, "transformers",
    transformers.__version__, "peft", peft.__version__)' | tee -a "$OUT/gpu.txt"
  W=$(mktemp -d)
  T=32 G=4
  $P base "$W/base" || exit 1
  $P data "$W/data.tok" 259 $T $G || exit 1
  cat >"$W/lora.yaml" <<YAML
model: {config: $W/base, init: {from: $W/base}}
data: {train: $W/data.tok, seq_len: $T, shuffle: false, eval_fraction: 0.0}
attention: {impl: naive}
optim: {name: adamw, lr: 1.0e-2, weight_decay: 0.0}
schedule: {name: constant, warmup_steps: 0}
peft: {method: lora, r: 4, alpha: 8, dropout: 0.0, target_modules: [all-linear], merge_on_save: true}
train: {max_steps: 20, micro_batch_size: $G, global_batch_size: $G, max_grad_norm: 1.0,
        log_every: 1, eval_every: 0, seed: 7}
checkpoint: {final_dtype: fp32}
YAML
  run() { # name overrides...
    local n=$1; shift
    $F train "$W/lora.yaml" log.dir="$W/$n" checkpoint.dir="$W/$n/ck" "$@" >"$OUT/$n.log" 2>&1
    echo "== fsdpc $n: exit $?"; grep -E "step 20/|error" "$OUT/$n.log" | tail -2
    cp "$W/$n/metrics.jsonl" "$OUT/$n.metrics.jsonl" 2>/dev/null
  }
  run init optim.lr=0.0 train.max_steps=1 peft.merge_on_save=false
  run cpu
  echo "--- 2. 20 steps: fsdpc (CPU fp32) vs PyTorch + PEFT (CPU fp32)"
  $P track "$W/base" "$W/init/ck/final" "$W/cpu" "$W/data.tok" $T $G --lr 1e-2 --steps 20 \
    2>&1 | tee "$OUT/track.txt" | tail -4
  echo "--- 3. PEFT loads fsdpc's adapter folder; transformers loads the merged folder"
  cp "$W/cpu/ck/final/adapter_config.json" "$OUT/adapter_config.json"
  "$B/bin/fsdpc_dump_logits" "$W/cpu/ck/final-merged" "$W/fsdpc_logits.safetensors" 32 >"$OUT/dump.log" 2>&1
  echo "dump logits (fsdpc, merged): exit $?"
  $P logits "$W/base" "$W/cpu/ck/final" "$W/fsdpc_logits.safetensors" 2>&1 | tail -2
  $P logits "$W/base" "$W/cpu/ck/final" "$W/fsdpc_logits.safetensors" --device cuda --dtype fp32 2>&1 | tail -1
  $P logits "$W/base" "$W/cpu/ck/final" "$W/fsdpc_logits.safetensors" --device cuda --dtype bf16 \
    --tol 3e-2 2>&1 | tail -1
  python3 "$C/check_hf_load.py" "$W/cpu/ck/final-merged" "$W/fsdpc_logits.safetensors" 2>&1 | tail -2
  echo "--- 4. the CUDA path (bf16) vs the CPU reference"
  run gpu train.device=cuda
  run gpu_ckpt_drop train.device=cuda fsdp.activation_checkpointing=true peft.dropout=0.1
  run cpu_ckpt_drop fsdp.activation_checkpointing=true peft.dropout=0.1
  python3 "$C/compare_runs.py" "$W/cpu" "$W/gpu" --rtol 3e-2 --keys loss 2>&1 | tail -2
  python3 "$C/compare_runs.py" "$W/cpu_ckpt_drop" "$W/gpu_ckpt_drop" --rtol 3e-2 --keys loss 2>&1 | tail -2
  # the GPU run's merged folder holds the bf16 base (the frozen base lives in the
  # compute dtype): bf16 tolerance against PEFT over the fp32 base
  "$B/bin/fsdpc_dump_logits" "$W/gpu/ck/final-merged" "$W/gpu_logits.safetensors" 32 >/dev/null 2>&1
  $P logits "$W/base" "$W/gpu/ck/final" "$W/gpu_logits.safetensors" --tol 3e-2 2>&1 | tail -1
  echo "done"
}

families() {
  export FSDPC_PLUGIN_PATH=$B/plugins
  W=$(mktemp -d)
  L=$W/logs
  mkdir -p "$L" "$W/src/tests/fixtures"
  python3 -c 'import torch, transformers, peft; print("torch", torch.__version__, "transformers",
    transformers.__version__, "peft", peft.__version__)' | tee "$L/versions.txt"
  # each step's timeout keeps the whole within 300 s (typical: about 2 minutes)
  timeout 60 python3 "$C/make_hf_families.py" "$W/hf_families" >"$L/make.log" 2>&1
  echo "make_hf_families: exit $?"
  grep RESULT "$L/make.log"
  tar czf "$OUT/hf_families.tar.gz" -C "$W" hf_families
  echo "fixtures: $(du -sk "$W/hf_families" | cut -f1) KB, $OUT/hf_families.tar.gz"
  ln -s "$W/hf_families" "$W/src/tests/fixtures/hf_families"
  FSDPC_SOURCE_DIR=$W/src timeout 30 "$B/bin/test_hf_fixture" --families >"$L/cpu.log" 2>&1
  FSDPC_SOURCE_DIR=$W/src timeout 55 "$B/bin/test_cuda_hf_fixture" --families >"$L/cuda.log" 2>&1
  timeout 30 "$B/bin/test_flash_gpu" --window >"$L/flash.log" 2>&1
  echo "test_flash_gpu --window: exit $?" >>"$L/flash.log"
  timeout 110 python3 "$C/check_families.py" "$W/hf_families" --fsdpc "$F" \
    --dump "$B/bin/fsdpc_dump_logits" --work "$W/hf" >"$L/hf.log" 2>&1
  # the binaries' PASS/FAIL lines and totals; a binary that died shows its last line
  for f in cpu cuda hf; do
    grep -hE "^(PASS|FAIL)|families passed" "$L/$f.log" || echo "FAIL $f: $(tail -1 "$L/$f.log")"
  done
  sed 's/^ok  /PASS flash /; s/^FAIL /FAIL flash /' "$L/flash.log" | grep -E "^(PASS|FAIL)|exit|passed"
  local pass fail
  pass=$(cat "$L"/cpu.log "$L"/cuda.log "$L"/hf.log | grep -c "^PASS [a-z]")
  fail=$(cat "$L"/cpu.log "$L"/cuda.log "$L"/hf.log | grep -c "^FAIL [a-z]")
  pass=$((pass + $(grep -c "^ok  " "$L/flash.log")))
  fail=$((fail + $(grep -c "^FAIL" "$L/flash.log")))
  grep -q "families passed" "$L/cpu.log" || fail=$((fail + 1))
  grep -q "families passed" "$L/cuda.log" || fail=$((fail + 1))
  tar czf "$OUT/families-logs.tar.gz" -C "$W" logs
  echo "families: $pass passed, $fail failed"
  [ "$fail" = 0 ]
}

gemma() {
  export FSDPC_PLUGIN_PATH=$B/plugins
  W=$(mktemp -d)
  mkdir -p "$W/logs"
  $F data synth --task qa --n 20000 --out "$W/qa.tok" >/dev/null
  model_yaml "$W/g.yaml" "$W/qa.tok" 256 640 2 128 true 128 "{name: adamw, lr: 2.0e-3, weight_decay: 0.01}" \
    "{max_steps: 10, micro_batch_size: 4, log_every: 1, max_grad_norm: 1.0}"
  local CMP="python3 $C/compare_runs.py" hd cap impl n pass=0 fail=0
  check() { # what, compare_runs arguments...
    local what=$1
    shift
    if $CMP "$@"; then
      echo "PASS gemma $what"
      pass=$((pass + 1))
    else
      echo "FAIL gemma $what"
      fail=$((fail + 1))
    fi
  }
  for hd in 256 128; do
    for cap in 50 5; do
      for impl in cpu naive flash; do
        [ $impl = cpu ] && [ $cap != 5 ] && continue
        n=hd${hd}_cap${cap}_$impl
        local dev=()
        [ $impl = cpu ] || dev=(train.device=cuda "attention.impl=$impl")
        timeout 120 "$F" train "$W/g.yaml" model.model_type=gemma2 model.head_dim=$hd \
          model.query_pre_attn_scalar=$hd model.sliding_window=32 model.attn_logit_softcapping=$cap \
          log.dir="$W/$n" "${dev[@]}" >"$W/logs/$n.log" 2>&1
        echo "== $n: exit $?"
        grep -E "step 10/|error" "$W/logs/$n.log" | tail -2
      done
      n=$W/hd${hd}_cap${cap}
      check "hd $hd cap $cap: flash vs naive" "${n}_naive" "${n}_flash" --rtol 2e-2 --keys loss
      [ $cap = 5 ] &&
        check "hd $hd cap $cap: GPU vs CPU" "${n}_cpu" "${n}_naive" "${n}_flash" --rtol 3e-2 --keys loss
    done
  done
  echo "gemma: $pass passed, $fail failed"
  tar czf "$OUT/gemma-logs.tar.gz" -C "$W" logs
  [ "$fail" = 0 ]
}

dpo() {
  W=$(mktemp -d)
  timeout 500 python3 "$C/check_dpo.py" --fsdpc "$F" --plugins "$B/plugins" --keep "$W/dpo"
  local rc=$?
  tar czf "$OUT/dpo-logs.tar.gz" -C "$W" dpo
  return $rc
}

case $MODE in
train) train "$@" ;;
q8-natural) q8_natural "$@" ;;
fp8-natural) fp8_natural "$@" ;;
*) "$MODE" ;;
esac
