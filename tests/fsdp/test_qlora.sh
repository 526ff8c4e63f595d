#!/usr/bin/env bash
# Issue 37, QLoRA on the CPU engine (quantization.method nf4 under LoRA on
# all seven projections). CASE:
#   equiv   world 1 vs 2 vs 4 under every strategy (and HYBRID_SHARD,
#           activation checkpointing + no_sync) give the same losses, eval
#           losses and grad norms within 1e-5 over 20 steps; the losses are
#           not the unquantized run's;
#   resume  resuming from step 10 is bit-exact at worlds 1, 2 and 4, and
#           within 1e-5 from world 1 to world 2 (FULL_SHARD: the 4-bit base
#           resharded, the gradients summed in another order); the
#           checkpoint holds the adapters only; the merged export's base is
#           the NF4 dequantization of the unquantized init by the numpy
#           reference (tests/quant/nf4_ref.py), bit for bit; the same
#           weights loaded from an HF folder give the same export;
#   generate `fsdpc generate` on an intermediate checkpoint (adapters only)
#           runs on the NF4-dequantized base + adapters: the same greedy
#           tokens and logits as on the merged export of a run stopped at
#           that step, from random init and from model.init.from; another
#           base is refused in one line.
source "$(dirname "$0")/../train/common.sh"
CASE=${1:-equiv}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
CMP="python3 $SRC/tests/train/compare_runs.py"
LORA=(peft.method=lora peft.r=4 peft.alpha=8 "peft.target_modules=[all-linear]" train.max_steps=20 optim.lr=1e-2)
Q=(quantization.method=nf4)

case $CASE in
equiv)
  run ref "${LORA[@]}" "${Q[@]}" || fail "world 1 QLoRA run failed"
  run plain "${LORA[@]}" || fail "world 1 LoRA run failed"
  runs=()
  for st in FULL_SHARD SHARD_GRAD_OP NO_SHARD; do
    for n in 2 4; do
      run "$st-$n" "${LORA[@]}" "${Q[@]}" fsdp.sharding_strategy=$st -- --nproc-per-node $n || fail "$st at $n"
      runs+=("$TMP/$st-$n")
    done
  done
  run HYBRID "${LORA[@]}" "${Q[@]}" fsdp.sharding_strategy=HYBRID_SHARD fsdp.hybrid_shard_size=2 -- --nproc-per-node 4 || fail "HYBRID"
  run ckpt-nosync "${LORA[@]}" "${Q[@]}" fsdp.activation_checkpointing=true fsdp.no_sync=true train.micro_batch_size=1 -- --nproc-per-node 2 ||
    fail "ckpt/no_sync"
  runs+=("$TMP/HYBRID" "$TMP/ckpt-nosync")
  $CMP "$TMP/ref" "${runs[@]}" || fail "a QLoRA run diverged from world 1"
  $CMP "$TMP/ref" "$TMP/plain" --keys loss >/dev/null && fail "QLoRA gave the unquantized losses"
  python3 - "$TMP/ref/metrics.jsonl" <<'PY' || fail "QLoRA did not lower the loss"
import json, sys
l = [json.loads(x) for x in open(sys.argv[1]) if '"loss"' in x]
l = [r["loss"] for r in l if "loss" in r]
sys.exit(0 if l[-1] < l[0] - 0.05 else 1)
PY
  ;;
resume)
  # at each world: the run saved at step 10, resumed at the same world; the
  # world-1 checkpoint resumed at world 2 (the 4-bit base resharded)
  for n in 1 2 4; do
    run full$n "${LORA[@]}" "${Q[@]}" checkpoint.save_steps=10 -- --nproc-per-node $n || fail "full run at world $n"
    [ -d "$TMP/full$n/ck/step-000010" ] || fail "no intermediate checkpoint at world $n"
    run res$n "${LORA[@]}" "${Q[@]}" checkpoint.resume="$TMP/full$n/ck/step-000010" -- --nproc-per-node $n ||
      fail "resume at world $n"
    grep -q "resumed from" "$TMP/res$n.log" || fail "world $n did not resume"
  done
  grep -q "lora_A" "$TMP/full1/ck/step-000010/meta.json" && ! grep -q "q_proj.weight\"" "$TMP/full1/ck/step-000010/meta.json" ||
    fail "the checkpoint does not hold the adapters only"
  run res12 "${LORA[@]}" "${Q[@]}" checkpoint.resume="$TMP/full1/ck/step-000010" -- --nproc-per-node 2 ||
    fail "world-1 checkpoint resumed at world 2"
  python3 - "$TMP" <<'PY' || fail "resume"
import json, sys
def rows(d):
    return {r["step"]: r for r in map(json.loads, open(sys.argv[1] + "/" + d + "/metrics.jsonl")) if "loss" in r}
for n in (1, 2, 4):
    full, res = rows(f"full{n}"), rows(f"res{n}")
    for s in range(11, 21):
        assert (res[s]["loss"], res[s]["grad_norm"]) == (full[s]["loss"], full[s]["grad_norm"]), \
            f"world-{n} resume not bit-exact at step {s}: {res[s]['loss']!r} vs {full[s]['loss']!r}"
# resharded: world 2 sums the adapters' gradients in another order than world 1
full, r12 = rows("full1"), rows("res12")
for s in range(11, 21):
    for k in ("loss", "grad_norm"):
        assert abs(r12[s][k] - full[s][k]) <= 1e-5 * abs(full[s][k]), f"world 1 -> 2 step {s} {k}: {r12[s][k]} vs {full[s][k]}"
print("resume: steps 11-20 bit-exact at worlds 1, 2 and 4; world 1 -> 2 within 1e-5")
PY
  # the merged export's base: B stays zero at lr 0, so merged = base
  Z=(train.max_steps=2 schedule.warmup_steps=1 optim.lr=0 peft.merge_on_save=true)
  run mq "${LORA[@]}" "${Q[@]}" "${Z[@]}" || fail "merged QLoRA run"
  run mp "${LORA[@]}" "${Z[@]}" || fail "merged LoRA run"
  # an existing adapter onto the 4-bit base: refused in one line
  run ad "${LORA[@]}" "${Q[@]}" model.adapter="$TMP/full1/ck/final" model.init.from="$TMP/mp/ck/final-merged" &&
    fail "model.adapter onto an nf4 base was accepted"
  [ "$(wc -l <"$TMP/ad.log")" = 1 ] && grep -q "model.adapter merges .* nf4 holds as 4-bit codes" "$TMP/ad.log" ||
    fail "model.adapter onto an nf4 base: not the one-line refusal: $(cat "$TMP/ad.log")"
  # numpy: Debian's python3 (as tests/quant/CMakeLists.txt finds it)
  NPY=/usr/bin/python3
  [ -x "$NPY" ] || NPY=python3
  PYTHONPATH="$SRC/tests/quant:$SRC/tests/common" "$NPY" - "$TMP/mp/ck/final-merged" "$TMP/mq/ck/final-merged" <<'PY' || fail "merged base"
import sys
import numpy as np
import nf4_ref
from st_np import load
plain, quant = load(sys.argv[1]), load(sys.argv[2])
assert sorted(plain) == sorted(quant) and plain, "tensors differ"
nq = 0
for k, x in plain.items():
    if any(p in k for p in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")):
        want = nf4_ref.dequantize(nf4_ref.quantize(x.copy(), 64, True), x.shape[0], 64, True)
        nq += 1
    else:
        want = x
    bad = np.nonzero(want.view(np.uint32) != quant[k].view(np.uint32))[0]
    assert bad.size == 0, f"{k}[{bad[0]}]: {quant[k][bad[0]]!r}, reference {want[bad[0]]!r}"
assert nq == 3 * 7, nq
print(f"merged: {nq} projections = nf4_ref's dequantization, the rest unquantized, bit for bit")
PY
  # quantize on load: the same base read from an HF folder (the plain run's
  # merged fp32 export) gives the same 4-bit base, so the same merged export
  run mh "${LORA[@]}" "${Q[@]}" "${Z[@]}" model.init.from="$TMP/mp/ck/final-merged" ||
    fail "QLoRA from an HF folder"
  cmp "$TMP/mq/ck/final-merged/model.safetensors" "$TMP/mh/ck/final-merged/model.safetensors" ||
    fail "QLoRA from an HF folder: another base than from the same weights' random init"
  ;;
generate)
  # A saves at step 2 of 4; B stops at step 2 and exports the merge: with a
  # constant lr, B's final-merged is A's step 2 merged by the trainer
  G=("${LORA[@]}" "${Q[@]}" schedule.name=constant schedule.warmup_steps=0 train.eval_every=0)
  run base train.max_steps=3 || fail "base run"
  for from in "" "$TMP/base/ck/final"; do
    k=${from:+hf}
    run "a$k" "${G[@]}" train.max_steps=4 checkpoint.save_steps=2 ${from:+model.init.from=$from} || fail "run a$k"
    run "b$k" "${G[@]}" train.max_steps=2 peft.merge_on_save=true ${from:+model.init.from=$from} || fail "run b$k"
    gen() { timeout 60 "$FSDPC" generate "$1" --prompt-ids 257,81,58 --max-new-tokens 12 --ignore-eos \
      --json --top-logits 4 --device cpu "${@:3}" >"$TMP/$2.json" 2>"$TMP/$2.log" || fail "generate $1: $(tail -1 "$TMP/$2.log")"; }
    gen "$TMP/a$k/ck/step-000002" "step$k"
    gen "$TMP/b$k/ck/final-merged" "merged$k"
    gen "$TMP/a$k/ck/step-000002" "plain$k" quantization.method=none
    python3 - "$TMP/step$k.json" "$TMP/merged$k.json" "$TMP/plain$k.json" <<'PY' || fail "generate on the step checkpoint ($k)"
import json, sys
s, m, p = (json.loads(open(f).read()) for f in sys.argv[1:4])
assert s["ids"] == m["ids"], (s["ids"], m["ids"])
d = max(abs(a[1] - b[1]) for x, y in zip(s["top_logits"], m["top_logits"]) for a, b in zip(x, y))
assert d <= 1e-6, f"logits {d} apart"
# the base is the NF4 one: unquantized, the same adapters give other logits
q = max(abs(a[1] - b[1]) for x, y in zip(s["top_logits"], p["top_logits"]) for a, b in zip(x, y))
assert q > 1e-4, f"quantization.method none changed the logits by {q} only"
print(f"step checkpoint = merged export: {len(s['ids'])} tokens, logits within {d:.1e}; unquantized base {q:.1e} away")
PY
  done
  # the adapters onto another base: refused in one line, naming both
  timeout 60 "$FSDPC" generate "$TMP/ahf/ck/step-000002" --prompt-ids 257,81 --device cpu \
    model.init.from="$TMP/bhf/ck/final-merged" >"$TMP/other.log" 2>&1 && fail "adapters generated on another base"
  [ "$(grep -c . "$TMP/other.log")" = 1 ] && grep -q "trained on other weights" "$TMP/other.log" ||
    fail "another base: not the one-line refusal: $(cat "$TMP/other.log")"
  ;;
*)
  fail "unknown case $CASE"
  ;;
esac
echo "PASS"
