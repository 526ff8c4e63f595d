#!/bin/bash
# On one GPU, in one call: fsdpc LoRA (configs/llama3-8b-lora.yaml: 8B shape,
# r 16 on q,k,v,o,gate,up,down, seq 2048, micro-batch 2, bf16, activation
# checkpointing) and the PyTorch + PEFT baseline of the same shape
# (bench/torch_peft_lora_baseline.py), then one table of tokens/s and peak
# memory (issue 14's speed/memory point).
#
# Build and pack here first (the fsdpc part is skipped, with a note, without
# it; the PyTorch part needs only this script and the baseline beside it):
#   scripts/gpu/pack_train_carry.sh /work/main/.carry/train
# then on the host (run tool, carry .carry/train):
#   bash .carry/train/run_lora_side_by_side.sh
# Env: RUNS (PyTorch variants, default "plain fsdp2 plain+compile": a mode,
# plain or fsdp2, then any of +compile, +wrap (checkpoint_wrapper instead of
# transformers' gradient checkpointing), +autocast (bf16 adapter GEMMs)),
# STEPS (default 12, the first 4 are warm-up), TORCH_TIMEOUT (s per PyTorch
# run, default 240), FSDPC_TIMEOUT (default 400), SKIP_FSDPC=1.
# Writes to $OUT: gpu.txt, fsdpc.log, fsdpc.metrics.jsonl, fsdpc.rank0.json,
# torch-<variant, + as _>.log, torch.jsonl, table.txt.
set -u
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
  fsdpc_note="skipped: no packed build in $C (run scripts/gpu/pack_train_carry.sh $C first)"
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
