#!/usr/bin/env bash
# Issue 14, LoRA on the engine (CPU, Gloo). CASE:
#   equiv   world 1 vs 2 vs 4 under every strategy (and activation
#           checkpointing, no_sync, the size wrap policy) give the same
#           losses, eval losses and grad norms within 1e-5 over 20 steps;
#   resume  checkpoints hold only the adapters and their optimizer state;
#           resuming is bit-exact at world 1 and within 1e-5 resharded at
#           world 2; the final outputs are a PEFT adapter folder and the
#           merged HF folder;
#   convert `fsdpc convert BASE OUT model.adapter=ADAPTER` merges the adapter
#           into the output (HF and sharded), as the run's merged export;
#   plan    the planner's shard, collective and peak bytes against the engine's;
#   config  bad peft blocks get one line and a non-zero exit.
source "$(dirname "$0")/common.sh"
CASE=${1:-equiv}
CMP="python3 $(dirname "$0")/compare_runs.py"
LORA=(peft.method=lora peft.r=4 peft.alpha=8 "peft.target_modules=[q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]"
  train.max_steps=20 optim.lr=1e-2)

case $CASE in
equiv)
  run ref "${LORA[@]}" || fail "world 1 LoRA run failed"
  grep -q "lora.layers.0" "$TMP/ref.log" || fail "no adapter unit in the layout"
  runs=()
  for st in FULL_SHARD SHARD_GRAD_OP NO_SHARD; do
    for n in 2 4; do
      run "$st-$n" "${LORA[@]}" fsdp.sharding_strategy=$st -- --nproc-per-node $n || fail "$st at $n"
      runs+=("$TMP/$st-$n")
    done
  done
  run HYBRID "${LORA[@]}" fsdp.sharding_strategy=HYBRID_SHARD fsdp.hybrid_shard_size=2 -- --nproc-per-node 4 || fail "HYBRID"
  run ckpt-nosync "${LORA[@]}" fsdp.activation_checkpointing=true fsdp.no_sync=true train.micro_batch_size=1 \
    fsdp.wrap.policy=size fsdp.wrap.options.min_num_params=30000 -- --nproc-per-node 2 || fail "ckpt/no_sync/size"
  runs+=("$TMP/HYBRID" "$TMP/ckpt-nosync")
  $CMP "$TMP/ref" "${runs[@]}" || fail "a LoRA run diverged from world 1"
  # the loss falls: the adapters learn
  python3 - "$TMP/ref/metrics.jsonl" <<'PY' || fail "LoRA did not lower the loss"
import json, sys
l = [json.loads(x) for x in open(sys.argv[1]) if '"loss"' in x]
l = [r["loss"] for r in l if "loss" in r]
sys.exit(0 if l[-1] < l[0] - 0.05 else 1)
PY
  ;;
resume)
  run full "${LORA[@]}" peft.dropout=0.1 peft.merge_on_save=true checkpoint.save_steps=10 || fail "full run"
  ck="$TMP/full/ck"
  [ -d "$ck/step-000010" ] || fail "no intermediate checkpoint"
  # only adapters (and their optimizer state) in the checkpoint
  python3 - "$ck/step-000010" "$ck/final" "$ck/final-merged" <<'PY' || fail "checkpoint contents"
import json, struct, sys, glob
def names(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return [k for k in json.loads(f.read(n)) if k != "__metadata__"]
step, final, merged = sys.argv[1:4]
meta = open(step + "/meta.json").read()
assert "lora_A" in meta and "embed_tokens" not in meta and "q_proj.weight" not in meta, meta[:300]
a = names(final + "/adapter_model.safetensors")
assert "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight" in a, a[:4]
assert "base_model.model.model.layers.2.mlp.down_proj.lora_B.weight" in a, a[:4]
assert len(a) == 3 * 7 * 2, len(a)
c = json.load(open(final + "/adapter_config.json"))
assert c["peft_type"] == "LORA" and c["r"] == 4 and c["lora_alpha"] == 8 and c["task_type"] == "CAUSAL_LM"
assert sorted(c["target_modules"]) == sorted(["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
m = names(merged + "/model.safetensors")
assert "model.layers.0.self_attn.q_proj.weight" in m and not any("lora" in k for k in m)
PY
  cp -r "$ck/step-000010" "$TMP/step10"
  run res1 "${LORA[@]}" peft.dropout=0.1 checkpoint.resume="$TMP/step10" || fail "resume at world 1"
  run res2 "${LORA[@]}" peft.dropout=0.1 checkpoint.resume="$TMP/step10" fsdp.sharding_strategy=NO_SHARD \
    train.micro_batch_size=2 -- --nproc-per-node 2 || fail "resume at world 2"
  grep -q "resumed from" "$TMP/res2.log" || fail "world 2 did not resume"
  # another base: refused, naming both
  run res3 "${LORA[@]}" checkpoint.resume="$TMP/step10" model.init.from="$ck/final-merged" &&
    fail "resumed adapters onto another base"
  grep -q "trained on other weights (random init: tensors crc32 00000000) than model.init.from $ck/final-merged holds now" "$TMP/res3.log" ||
    fail "no base-identity message: $(tail -2 "$TMP/res3.log")"
  # offline conversion: adapters between sharded layouts; no HF output
  "$FSDPC" convert "$TMP/step10" "$TMP/cv" --to sharded --world 2 >"$TMP/cv.log" 2>&1 || fail "convert"
  "$FSDPC" convert "$TMP/step10" "$TMP/cvhf" --to hf >"$TMP/cvhf.log" 2>&1 && fail "converted adapters to HF"
  grep -q "LoRA checkpoint (adapters only)" "$TMP/cvhf.log" || fail "convert --to hf: $(cat "$TMP/cvhf.log")"
  run rescv "${LORA[@]}" checkpoint.resume="$TMP/cv" train.max_steps=12 -- --nproc-per-node 2 ||
    fail "resume from the converted checkpoint"
  grep -q "resumed from" "$TMP/rescv.log" || fail "the converted checkpoint was not resumed"
  # the shipped CPU LoRA config trains on top of an HF folder (this run's merged one)
  SRC=$(cd "$(dirname "$0")/../.." && pwd)
  timeout 120 "$FSDPC" train "$SRC/configs/tiny-lora-cpu.yaml" model.from="$ck/final-merged" \
    data.train="$TMP/qa.tok" train.max_steps=3 \
    schedule.warmup_steps=1 train.eval_every=0 train.micro_batch_size=2 log.dir="$TMP/shipped" \
    checkpoint.dir="$TMP/shipped/ck" >"$TMP/shipped.log" 2>&1 || fail "configs/tiny-lora-cpu.yaml"
  [ -f "$TMP/shipped/ck/final/adapter_model.safetensors" ] && [ -f "$TMP/shipped/ck/final-merged/model.safetensors" ] ||
    fail "configs/tiny-lora-cpu.yaml: no adapter or merged folder"
  # a LoRA run's final/ replaces a full fine-tune's final/ of the same folder, whole
  timeout 120 "$FSDPC" train "$CFG" train.max_steps=3 log.dir="$TMP/rep" checkpoint.dir="$TMP/rep/ck" \
    >"$TMP/rep.log" 2>&1 || fail "full run into rep"
  [ -f "$TMP/rep/ck/final/model.safetensors" ] || fail "no full final/"
  timeout 120 "$FSDPC" train "$CFG" "${LORA[@]}" train.max_steps=3 log.dir="$TMP/rep" \
    checkpoint.dir="$TMP/rep/ck" >"$TMP/rep2.log" 2>&1 || fail "LoRA run over a full final/"
  [ -f "$TMP/rep/ck/final/adapter_config.json" ] && [ ! -e "$TMP/rep/ck/final/model.safetensors" ] &&
    [ -z "$(ls -A "$TMP/rep/ck" | grep -v '^final$')" ] || fail "final/ not replaced whole: $(ls -A "$TMP/rep/ck" "$TMP/rep/ck/final")"
  # under train.epochs the merged checkpoint records the steps run, as the
  # final one does (it used to record train.max_steps)
  "$FSDPC" data synth --task qa --n 40 --seed 4 --out "$TMP/small.tok" >/dev/null || fail "synth"
  run ep "${LORA[@]}" data.train="$TMP/small.tok" data.eval_fraction=0 train.eval_every=0 train.epochs=2 train.max_steps=1000 peft.merge_on_save=true \
    checkpoint.final_format=sharded || fail "LoRA run with train.epochs"
  python3 - "$TMP/ep/metrics.jsonl" "$TMP/ep/ck/final-merged/meta.json" <<'PY' || fail "merged checkpoint step"
import json, sys
steps = [json.loads(l).get("step", 0) for l in open(sys.argv[1])]
merged = json.load(open(sys.argv[2]))["trainer_state"]["step"]
assert merged == max(steps) < 1000, (merged, max(steps))
PY
  last() { grep '"step": *20' "$1/metrics.jsonl" | head -1 | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print(repr(r["loss"]), repr(r["grad_norm"]))'; }
  [ "$(last "$TMP/full")" = "$(last "$TMP/res1")" ] || fail "world-1 resume not bit-exact: $(last "$TMP/full") vs $(last "$TMP/res1")"
  ;;
convert)
  # a full fine-tune's final/ as the base (an fsdpc checkpoint and a bare HF
  # folder), adapters trained on it, and the run's own merged export
  run base train.max_steps=3 || fail "base run"
  B="$TMP/base/ck/final"
  run ad "${LORA[@]}" train.max_steps=4 model.init.from="$B" peft.merge_on_save=true || fail "LoRA run"
  A="$TMP/ad/ck/final"
  mkdir "$TMP/hf" && cp "$B/config.json" "$B/model.safetensors" "$TMP/hf/" || fail "copy"
  cv() { "$FSDPC" convert "$@" >>"$TMP/cv.log" 2>&1 || fail "convert $*: $(tail -1 "$TMP/cv.log")"; }
  cv "$B" "$TMP/m1" --to hf --dtype fp32 model.adapter="$A" peft.method=none
  grep -q "merged the LoRA adapter $A into 21 weights" "$TMP/cv.log" || fail "no merge line: $(cat "$TMP/cv.log")"
  cv "$TMP/hf" "$TMP/m2" --to hf --dtype fp32 model.adapter="$A"
  # sharded at world 2 (each rank merges its own ranges), then back to HF
  cv "$B" "$TMP/s2" --to sharded --world 2 model.adapter="$A"
  cv "$TMP/s2" "$TMP/m3" --to hf --dtype fp32
  # a converted folder records model.adapter; converting it again must not merge twice
  cv "$TMP/m1" "$TMP/m4" --to hf --dtype fp32
  for m in m2 m3 m4; do
    cmp "$TMP/m1/model.safetensors" "$TMP/$m/model.safetensors" || fail "$m is not m1"
  done
  NPY=/usr/bin/python3
  [ -x "$NPY" ] || NPY=python3
  PYTHONPATH="$(dirname "$0")/../common" "$NPY" - "$B" "$TMP/ad/ck/final-merged" "$TMP/m1" <<'PY' || fail "the merged conversion"
import sys
import numpy as np
from st_np import load
base, run, conv = (load(d) for d in sys.argv[1:4])
assert sorted(base) == sorted(run) == sorted(conv), "tensor names differ"
changed = [k for k in base if not np.array_equal(base[k], conv[k])]
assert len(changed) == 3 * 7 and all("proj" in k for k in changed), changed
for k in base:  # the run merges in fp32, the conversion in double: an ulp apart
    d = np.abs(conv[k] - run[k]).max()
    assert d <= 1e-6 * max(1.0, np.abs(run[k]).max()), f"{k}: {d}"
print(f"convert: {len(changed)} projections merged, within 1e-6 of the run's merged export")
PY
  ;;
plan)
  # the planner against the engine: shard bytes, collective bytes per step
  # exact and the total peak within 5%, at 2 and 4 ranks under every strategy
  SRC=$(cd "$(dirname "$0")/../.." && pwd)
  for n in 2 4; do
    cat >"$TMP/spec$n.yaml" <<YAML
base: $SRC/configs/tiny-cpu.yaml
set: {train.threads: 1, train.eval_every: 0, data.eval_fraction: 0, schedule.warmup_steps: 1,
      data.train: $TMP/qa.tok, data.seq_len: 32, train.micro_batch_size: 4, peft.method: lora,
      peft.r: 8, peft.dropout: 0.1, peft.target_modules: [all-linear], checkpoint.dir: $TMP/bck}
matrix:
  fsdp.sharding_strategy:
    - FULL_SHARD
    - SHARD_GRAD_OP
    - NO_SHARD
    - {name: HYBRID_SHARD, fsdp.sharding_strategy: HYBRID_SHARD, fsdp.hybrid_shard_size: 2}
    - {name: FULL_SHARD/ckpt/accum2, fsdp.sharding_strategy: FULL_SHARD, train.grad_accum_steps: 2,
       fsdp.activation_checkpointing: true}
nproc_per_node: $n
warmup_steps: 1
steps: 1
repeats: 1
timeout_s: 120
YAML
    "$FSDPC" bench "$TMP/spec$n.yaml" --out "$TMP/out$n" >"$TMP/table$n.txt" 2>"$TMP/err$n.txt" ||
      fail "bench at $n ranks: $(tail -3 "$TMP/err$n.txt")"
    python3 "$SRC/tests/bench/check_bench_plan.py" "$TMP/out$n/bench.json" "$n" 5 ||
      fail "planner vs engine at $n ranks"
  done
  ;;
config)
  bad() { # overrides... expected-substring
    local want=${!#}
    out=$("$FSDPC" config check "$CFG" "${@:1:$#-1}" 2>&1)
    [ $? -ne 0 ] || fail "accepted: $*"
    [ "$(printf '%s\n' "$out" | grep -c .)" -le 2 ] || fail "more than one line for $*: $out"
    printf '%s' "$out" | grep -q -- "$want" || fail "for $* expected '$want', got: $out"
  }
  bad peft.method=lora "peft.target_modules=[q_proj, qkv]" "model_type llama has no module 'qkv'"
  # Phi-3's fused projections take its own names, and only them
  bad peft.method=lora model.model_type=phi3 "peft.target_modules=[q_proj]" \
    "model_type phi3 has no module 'q_proj'; use qkv_proj, o_proj, gate_up_proj, down_proj"
  bad peft.method=lora "peft.target_modules=[gate_up_proj]" "model_type llama has no module 'gate_up_proj'"
  "$FSDPC" config check "$CFG" peft.method=lora model.model_type=phi3 \
    "peft.target_modules=[qkv_proj, o_proj, gate_up_proj, down_proj]" >/dev/null 2>&1 ||
    fail "Phi-3's module names were refused"
  bad peft.method=lora "peft.target_modules=[]" "peft.target_modules is empty"
  bad peft.method=lora "peft.target_modules=[q_proj, q_proj]" "listed twice"
  bad peft.method=lora peft.r=0 "peft.r"
  bad peft.method=lora peft.alpha=0 "peft.alpha"
  bad peft.method=lora peft.dropout=1 "peft.dropout"
  bad peft.method=dora "peft.method"
  "$FSDPC" config check "$CFG" peft.method=lora "peft.target_modules=[all-linear]" peft.rslora=true >/dev/null 2>&1 ||
    fail "a good peft block was refused"
  ;;
*) fail "unknown case $CASE" ;;
esac
echo "ok: lora $CASE"
