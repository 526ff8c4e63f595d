#!/bin/bash
# Issue 21: a Llama-3.1-70B fine-tune on one 8-GPU node, from an HF folder to
# an HF folder.
#   bash .carry/X/hf70b.sh [N] [PHASES]          (nvidia-h200-x8: N=8)
#   DEVICE=cpu bash scripts/gpu/hf70b.sh 2       (here: the tiny shape, Gloo)
# PHASES (comma list; default write,plan,train,check,preempt). A call may run 10 minutes
# and the machine stays warm 30 s after it, so on the x8 run them as three calls in a row:
#   write,plan   then   train,check   then   plan,preempt
# (state under /tmp/l70-work and the weights in $HF survive while the machine stays warm):
#   write    lib/make_hf_random.py: random bf16 weights of the shape, 5 GB
#            files + model.safetensors.index.json, into $HF (default /dev/shm/l70-hf when
#            it has room, else /tmp/l70-hf); time and GB/s
#   plan     `fsdpc plan` at world N, FULL_SHARD, checkpointing, seq 2048, micro-batch 1,
#            for adamw8bit and adamw + fsdp.offload.optimizer (when this build has them),
#            adamw, and adamw + fsdp.cpu_offload;
#            takes the first whose config row fits 141 GiB per GPU AND whose host bytes x N
#            fit HOST_MEM_GIB (default 560 on GPUs): $OUT/plan-*.txt, plan-choice.txt
#   train    fsdpc train from $HF at world N with that optimizer, STEPS steps (default 6),
#            then the final export (full, bf16, 5 GB files) into $CK/final: per-rank load
#            time and peak host memory (the loader's own line), tokens/s per GPU, MFU,
#            device peak vs the planner (lib/world_rows.py), the export's time
#   check    transformers reads $CK/final's config (AutoConfig) and its index covers every
#            tensor of the input's index with the same shapes and total size
#   preempt  SIGTERM to the launcher after step 2 of a run with checkpoint.dir: the
#            sharded checkpoint is written within dist.term_grace_s (GRACE, default 120 s:
#            fsdpc's 25 s is too short for the GBs per rank this writes), then the run
#            resumes from it (checkpoint.resume=auto) and trains 2 more steps. A sharded
#            70B checkpoint holds fp32 master shards + optimizer state (~6 B/param with
#            adamw8bit: ~420 GB), more than the x8's 235 GiB disk; when $CKP lacks the room
#            this phase uses the 70B width with CKPT_LAYERS decoder layers (default 8), from
#            a folder of that depth written by lib/make_hf_random.py, and says so.
# Environment: OUT (/tmp/out), DEVICE (cuda|cpu), HF, CK (/tmp/l70-ck), CKP (/tmp/l70-pre),
# STEPS, CKPT_LAYERS, CKPT_REDUCED=1 (the reduced preempt run even when the disk has room),
# HOST_MEM_GIB, FSDPC (cpu mode; default build/bin/fsdpc), PY (python3).
#
# The plan for the 70B shape, from `fsdpc plan` on the CPU (2026-11-24, this branch's
# build; bench/results/2026-11-24-multigpu-prep.md has the table): 70,553.71 M params;
# FULL_SHARD, checkpointing, world 8: adamw on the device 148,939 MiB/GPU (does not fit
# 141 GiB); adamw + cpu_offload 14,368 MiB/GPU but 158.7 GB pinned host memory per rank
# (1.27 TB for 8 ranks: does not fit the x8's 560 GiB); so the run needs adamw8bit on the
# device (2 B/param of state instead of 8: about 98.5 GiB/GPU by the same table) or an
# optimizer-only offload; the plan phase picks what fits from what the build has.
# shellcheck disable=SC2086,SC2046 # $F and $PY are commands, the option strings word lists
set -u
C=$(cd "$(dirname "$0")" && pwd)
N=${1:-8}
PHASES=${2:-write,plan,train,check,preempt}
OUT=${OUT:-/tmp/out}
DEVICE=${DEVICE:-cuda}
STEPS=${STEPS:-6}
CK=${CK:-/tmp/l70-ck}
CKP=${CKP:-/tmp/l70-pre}
PY=${PY:-python3}
mkdir -p "$OUT"
W=/tmp/l70-work # kept between calls on the same machine (the plan's choice, token file)
if [ "$DEVICE" = cuda ]; then
  mkdir -p /tmp/rt
  [ -e /tmp/rt/.done ] || { tar xf "$C/runtime.tar.xz" -C /tmp/rt && tar xf "$C/build.tar.xz" -C / && touch /tmp/rt/.done; }
  B=$(cat "$C/build_dir")
  F=$B/bin/fsdpc
  export LD_LIBRARY_PATH=/tmp/rt:$B/lib:${LD_LIBRARY_PATH:-}
  export FSDPC_PLUGIN_PATH=$B/plugins
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  SHAPE=llama3.1-70b GPU_MEM=141 HOST_MEM_GIB=${HOST_MEM_GIB:-560} DEV=cuda ATTN=flash COLL=nccl
  MAXSHARD=5000000000 SEQ=2048 CKPT_LAYERS=${CKPT_LAYERS:-8}
  nvidia-smi --query-gpu=name,memory.total --format=csv | tee "$OUT/gpu.txt"
  df -h /tmp /dev/shm | tee "$OUT/df.txt"
else
  F=$(realpath "${FSDPC:-build/bin/fsdpc}")
  SHAPE=tiny GPU_MEM=0 DEV=cpu ATTN=naive COLL=gloo MAXSHARD=100000 SEQ=64 CKPT_LAYERS=${CKPT_LAYERS:-2}
  HOST_MEM_GIB=${HOST_MEM_GIB:-$(awk '/MemTotal/{print int($2/1048576)}' /proc/meminfo)}
  W=$(mktemp -d)
  trap 'rm -rf "$W"' EXIT
  CK=$W/ck CKP=$W/pre
fi
mkdir -p "$W"
MK=$C/lib/make_hf_random.py
ROWS=$C/lib/world_rows.py
has() { case ",$PHASES," in *",$1,"*) return 0 ;; esac; return 1; }
# stamp: prefix each line with the wall time (s), for the phases' timings
stamp() { while IFS= read -r l; do printf '%s %s\n' "$EPOCHREALTIME" "$l"; done; }
bytes_free() { df -B1 --output=avail "$1" 2>/dev/null | tail -1; }
if [ -z "${HF:-}" ]; then
  HF=/tmp/l70-hf
  [ "$DEVICE" = cuda ] && [ "$(bytes_free /dev/shm)" -gt 150000000000 ] && HF=/dev/shm/l70-hf
  [ "$DEVICE" = cpu ] && HF=$W/hf
fi
echo "hf70b.sh: world $N, phases $PHASES, device $DEVICE, HF $HF, $(date -u +%FT%TZ)" | tee -a "$OUT/run.txt"

[ -s "$W/copy.tok" ] || $F data synth --task copy --n 200000 --out "$W/copy.tok" >/dev/null
cfg() { # the run's YAML
  cat <<YAML
model: {config: $HF, init: {from: $HF}}
data: {train: $W/copy.tok, seq_len: $SEQ}
fsdp:
  sharding_strategy: FULL_SHARD
  wrap: {policy: transformer, options: {separate_embedding: true, separate_lm_head: true}}
  activation_checkpointing: true
collectives: {impl: $COLL}
attention: {impl: $ATTN}
optim: {name: adamw, lr: 1.0e-5}
schedule: {name: constant, warmup_steps: 0}
checkpoint: {options: {max_shard_size: $MAXSHARD}}
train: {device: $DEV, micro_batch_size: 1, global_batch_size: $N, max_steps: $STEPS, log_every: 1,
        eval_every: 0, max_grad_norm: 1.0}
YAML
}

if has write; then
  echo "== write: $SHAPE into $HF"
  rm -rf "$HF"
  TIMEV=()
  [ -x /usr/bin/time ] && TIMEV=(/usr/bin/time -v)
  "${TIMEV[@]}" $PY "$MK" "$HF" --shape "$SHAPE" --max-shard-bytes $MAXSHARD --jobs 32 \
    >"$OUT/write.log" 2>&1 || { tail -3 "$OUT/write.log"; exit 1; }
  grep -E "make_hf_random|Maximum resident" "$OUT/write.log"
  du -sh "$HF"
fi
# the plan and a reduced preemption run need only the shape: config.json alone
# when the weights were not written in this machine's life (train then fails
# naming the missing files)
[ -s "$HF/config.json" ] || $PY "$MK" "$HF" --shape "$SHAPE" --config-only ||
  { echo "hf70b.sh: cannot write $HF/config.json"; exit 1; }
cfg >"$W/run.yaml"

if has plan; then
  echo "== plan: world $N, ${GPU_MEM} GiB per GPU, ${HOST_MEM_GIB} GiB host"
  : >"$W/choice.txt"
  cands=()
  $F plugins list 2>/dev/null | grep -qw adamw8bit && cands+=("adamw8bit|optim.name=adamw8bit")
  # optimizer-state offload (fsdp.offload.optimizer), when this build has it
  $F config schema 2>/dev/null | grep -q "fsdp.offload.optimizer" &&
    cands+=("adamw-optim-offload|optim.name=adamw fsdp.offload.optimizer=true")
  cands+=("adamw|optim.name=adamw" "adamw-offload|optim.name=adamw fsdp.cpu_offload=true")
  for c in "${cands[@]}"; do
    name=${c%%|*}
    read -r -a ov <<<"${c#*|}"
    gm=()
    [ "$GPU_MEM" != 0 ] && gm=(--gpu-mem "$GPU_MEM")
    $F plan "$W/run.yaml" "${ov[@]}" --world "$N" "${gm[@]}" >"$OUT/plan-$name.txt" 2>&1
    $F plan "$W/run.yaml" "${ov[@]}" --world "$N" "${gm[@]}" --json >"$W/plan-$name.json" 2>/dev/null
    verdict=$($PY - "$W/plan-$name.json" "$N" "$HOST_MEM_GIB" "$GPU_MEM" <<'PY'
import json, sys
try:
    rows = [r for r in json.load(open(sys.argv[1])) if r.get("config")]
except (OSError, ValueError):
    rows = []
if not rows:
    sys.exit(print("no: the planner has no row for this configuration (see plan-*.txt)"))
n, host_gib, gpu = int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
r = rows[0]
dev = r["peak_bytes"]["total"] / 2**30
host = r.get("host_bytes", 0) * n / 2**30
ok_dev = gpu == 0 or r.get("fits", True)
ok_host = host <= 0.8 * host_gib
print(f"{'fits' if ok_dev and ok_host else 'no'} device {dev:.1f} GiB/GPU (reserved "
      f"{r['reserved_bytes'] / 2**30:.1f}), host {host:.1f} GiB for {n} ranks "
      f"(limit 0.8 x {host_gib:.0f})")
PY
)
    echo "   $name: $verdict" | tee -a "$OUT/plan-choice.txt"
    if [ ! -s "$W/choice.txt" ] && [ "${verdict%% *}" = fits ]; then echo "$name|${c#*|}" >"$W/choice.txt"; fi
  done
  [ -s "$W/choice.txt" ] || { echo "hf70b.sh: no optimizer configuration fits" | tee -a "$OUT/plan-choice.txt"; exit 1; }
  echo "   chosen: $(cat "$W/choice.txt")" | tee -a "$OUT/plan-choice.txt"
fi
[ -s "$W/choice.txt" ] || { echo "hf70b.sh: run the plan phase first"; exit 1; }
read -r -a OPT <<<"$(cut -d'|' -f2 "$W/choice.txt")"

if has train; then
  echo "== train: world $N, ${OPT[*]}, $STEPS steps, then the final export into $CK/final"
  rm -rf "$CK" "$W/train"
  t0=$EPOCHREALTIME
  timeout "${TRAIN_TIMEOUT:-560}" $F train "$W/run.yaml" "${OPT[@]}" checkpoint.dir="$CK" log.dir="$W/train" \
    --nproc-per-node "$N" 2>&1 | stamp >"$OUT/train.log"
  rc=${PIPESTATUS[0]}
  t1=$EPOCHREALTIME
  echo "   exit $rc after $($PY -c "print(f'{$t1 - $t0:.1f}')") s"
  grep -E "loaded .* peak host memory" "$OUT/train.log" | sed -E 's/^[0-9.]+ /   /' | cut -c1-260
  grep -E "saved .*final" "$OUT/train.log" | sed -E 's/^[0-9.]+ /   /' | cut -c1-260
  grep -m3 -E "error|out of memory" "$OUT/train.log" | sed 's/^/   /'
  last=$(grep -E "step $STEPS/" "$OUT/train.log" | tail -1 | cut -d' ' -f1)
  [ -n "$last" ] && echo "   from the last step's line to the end (final export): $($PY -c "print(f'{$t1 - $last:.1f}')") s"
  # a row for world_rows.py: measured vs planned peak, tokens/s, MFU
  mkdir -p "$OUT/rows"
  cp "$W/train/metrics.jsonl" "$OUT/rows/fsdpc-70b.metrics.jsonl" 2>/dev/null
  cp "$W/train/rank0.json" "$OUT/rows/fsdpc-70b.rank0.json" 2>/dev/null
  $F plan "$W/run.yaml" "${OPT[@]}" --world "$N" --json >"$OUT/rows/fsdpc-70b.plan.json" 2>/dev/null
  $F plan "$W/run.yaml" "${OPT[@]}" --world "$N" 2>/dev/null | head -1 >"$OUT/rows/fsdpc-70b.plan.txt"
  # world_rows reads the shape from a YAML: the HF config's keys are the same names
  # shellcheck disable=SC2046 # three numbers
  printf 'vocab_size: %s\nhidden_size: %s\nnum_hidden_layers: %s\nseq_len: %s\n' \
    $($PY -c "import json; c=json.load(open('$HF/config.json')); print(c['vocab_size'], c['hidden_size'], c['num_hidden_layers'])") \
    $SEQ >"$W/shape.yaml"
  echo "70b|$W/shape.yaml|$rc|${OPT[*]}" >"$OUT/rows/fsdpc-rows.txt"
  $PY "$ROWS" "$OUT/rows" "$N" | tee "$OUT/train-summary.md"
fi

if has check; then
  echo "== check: $CK/final"
  $PY - "$HF" "$CK/final" <<'PY' 2>&1 | tee "$OUT/check.txt"
import json, os, sys
src, dst = sys.argv[1], sys.argv[2]
def index(d):
    p = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(p):
        return json.load(open(p))
    return None
def shapes(d, ix):
    import struct
    out = {}
    files = sorted(set(ix["weight_map"].values())) if ix else ["model.safetensors"]
    for f in files:
        with open(os.path.join(d, f), "rb") as fh:
            n = struct.unpack("<Q", fh.read(8))[0]
            h = json.loads(fh.read(n))
        out.update({k: (v["shape"], v["dtype"]) for k, v in h.items() if k != "__metadata__"})
    return out
a, b = index(src), index(dst)
sa, sb = shapes(src, a), shapes(dst, b)
print(f"output: {len(set(b['weight_map'].values())) if b else 1} files, {len(sb)} tensors, "
      f"index total_size {b['metadata']['total_size'] if b else 'n/a'} (input {a['metadata']['total_size']})")
bad = [k for k in sa if k not in sb or sa[k][0] != sb[k][0]]
print("tensors and shapes match the input" if not bad and len(sa) == len(sb) else f"MISMATCH: {bad[:5]}")
if b:
    miss = [k for k in sb if k not in b["weight_map"]]
    print("index covers every tensor" if not miss else f"index misses {miss[:5]}")
try:
    from transformers import AutoConfig
    c = AutoConfig.from_pretrained(dst)
    print(f"transformers AutoConfig: {type(c).__name__}, hidden {c.hidden_size}, layers "
          f"{c.num_hidden_layers}, heads {c.num_attention_heads}/{c.num_key_value_heads}, "
          f"vocab {c.vocab_size}, rope_scaling {getattr(c, 'rope_scaling', None)}")
    try:  # the index as from_pretrained reads it (the function moved between versions)
        from transformers.utils.hub import get_checkpoint_shard_files
    except ImportError:
        from transformers.modeling_utils import get_checkpoint_shard_files
    files, meta = get_checkpoint_shard_files(dst, os.path.join(dst, "model.safetensors.index.json"))
    keys = meta.get("all_checkpoint_keys", []) if isinstance(meta, dict) else []
    print(f"transformers get_checkpoint_shard_files: {len(files)} files, {len(keys)} keys")
except ImportError as e:
    print(f"transformers not importable here ({e}): config and index checked by hand only")
PY
fi

if has preempt; then
  need=0
  [ -s "$W/plan-$(cut -d'|' -f1 "$W/choice.txt").json" ] && need=$($PY -c "
import json; r=[r for r in json.load(open('$W/plan-$(cut -d'|' -f1 "$W/choice.txt").json')) if r.get('config')][0]
print(int((r['params_shard_bytes'] + r['optim_bytes']) * $N * 1.05))")
  mkdir -p "$CKP"
  free=$(bytes_free "$CKP")
  extra=()
  what="the full shape from $HF"
  if [ "$need" -gt "$free" ] || [ "${CKPT_REDUCED:-0}" = 1 ]; then
    RED=$W/hf-reduced
    [ -s "$RED/model.safetensors.index.json" ] || $PY "$MK" "$RED" --shape "$SHAPE" --layers "$CKPT_LAYERS" \
      --max-shard-bytes $MAXSHARD --jobs 32 | tee -a "$OUT/preempt-write.log"
    extra=(model.config="$RED" model.init.from="$RED")
    what="the $SHAPE width with $CKPT_LAYERS layers ($RED): a full sharded checkpoint needs $((need / 1000000000)) GB, $CKP has $((free / 1000000000)) GB"
  fi
  echo "== preempt: $what"
  rm -rf "${CKP:?}"/* "$W/pre"
  # the launcher's grace after SIGTERM: GRACE (default 120 s; fsdpc's default is 25 s,
  # too short for tens of GB per rank, see the start-up warning this prints)
  $F train "$W/run.yaml" "${OPT[@]}" "${extra[@]}" checkpoint.dir="$CKP" train.max_steps=100000 \
    dist.term_grace_s="${GRACE:-120}" log.dir="$W/pre" --nproc-per-node "$N" >"$OUT/preempt.log" 2>&1 &
  lp=$!
  for _ in $(seq 3000); do grep -q '"step":2,' "$W/pre/metrics.jsonl" 2>/dev/null && break; kill -0 $lp 2>/dev/null || break; sleep 0.1; done
  t0=$EPOCHREALTIME
  kill -TERM $lp
  wait $lp
  rc=$?
  dt=$($PY -c "print(f'{$EPOCHREALTIME - $t0:.1f}')")
  echo "   launcher exit $rc, $dt s after SIGTERM (grace ${GRACE:-120} s)"
  grep -h -E "stopped by SIGTERM|saved .*step-|launcher: stopped|checkpoint save writes" "$OUT/preempt.log" |
    head -4 | cut -c1-240 | sed 's/^/   /'
  ls "$CKP"
  # shellcheck disable=SC2012 # step-NNNNNN: plain names
  st=$(ls -d "$CKP"/step-* 2>/dev/null | tail -1)
  if [ -n "$st" ]; then
    s=$((10#${st##*step-}))
    $F train "$W/run.yaml" "${OPT[@]}" "${extra[@]}" checkpoint.dir="$CKP" checkpoint.resume=auto \
      train.max_steps=$((s + 2)) log.dir="$W/pre2" --nproc-per-node "$N" >"$OUT/resume.log" 2>&1
    echo "   resume exit $?: $(grep -h -m1 "resumed from" "$OUT/resume.log" | cut -c1-200)"
    grep -h -E "step $((s + 1))/|step $((s + 2))/" "$OUT/resume.log" | grep "rank 0" | cut -c1-140 | sed 's/^/   /'
  else
    echo "   FAIL: no step-* checkpoint after SIGTERM"
  fi
fi
