#!/bin/bash
# The HF round trip on a GPU host, in one call (builds nothing there; the
# carry comes from scripts/gpu/pack_train_carry.sh):
#   1. test_cuda_infer_decode: the bf16 KV-cache decoder vs transformers'
#      logits on the HF fixtures (teacher forced), cache vs recompute;
#   2. check_generate.py: greedy tokens vs transformers' generate (fixtures
#      on CPU and CUDA, a 1B-shape bf16 model) and tokens/s side by side,
#      batch 1 and 16, 256 new tokens;
#   3. a GPU fine-tune of that 1B-shape folder (3 steps) whose final/ is
#      loaded by transformers (check_export.py: no missing-file warnings,
#      config.json equal to the source's, eos list, greedy tokens equal);
#   4. fsdpc eval on final/ equals train's eval_loss at the same step.
#   bash .carry/hfround/run_hfround_checks.sh
# Prints PASS/FAIL per part; logs and results go to $OUT.
. "$(dirname "$0")/carry_env.sh" # C, OUT, B, F, carry_fixtures, part
carry_fixtures                       # SRC
export PYTHONUNBUFFERED=1
W=/tmp/hfround
mkdir -p "$W"
FS=$F
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
part decode timeout 300 "$B/bin/test_cuda_infer_decode"
part generate timeout 420 python3 "$C/check_generate.py" --fsdpc "$FS" \
  --fixtures "$SRC/tests/fixtures" --work "$W"
cp "$W/results.json" "$OUT/generate_results.json" 2>/dev/null
M=$W/llama1b-shape
finetune() {
  [ -f "$M/config.json" ] || { echo "no $M (check_generate.py makes it)"; return 1; }
  cp "$SRC"/tests/fixtures/tokenizers/llama3-tiny/* "$M/"
  "$FS" data synth --task copy --out "$W/d.tok" >/dev/null &&
    "$FS" data synth --task copy --seed 9 --n 3000 --out "$W/e.tok" >/dev/null || return 1
  printf 'train: {}\n' >"$W/ft.yaml"
  rm -rf "$W/ck" "$W/lg"
  "$FS" train "$W/ft.yaml" model.config="$M" model.init.from="$M" data.train="$W/d.tok" \
    data.eval="$W/e.tok" data.seq_len=128 train.device=cuda train.max_steps=3 \
    train.micro_batch_size=4 train.global_batch_size=4 train.eval_every=3 train.eval_batches=4 \
    checkpoint.dir="$W/ck" checkpoint.final_dtype=bf16 log.dir="$W/lg" log.progress=off || return 1
  ls -la "$W/ck/final"
  python3 "$C/check_export.py" "$W/ck/final" "$M" --fsdpc "$FS" --work "$W"
}
export -f finetune
export W M SRC FS C B
part export timeout 400 bash -c finetune
evalcheck() {
  "$FS" eval "$W/ck/final" --data "$W/e.tok" >"$W/eval.json" || return 1
  python3 - "$W/eval.json" "$W/lg/metrics.jsonl" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
m = [json.loads(l) for l in open(sys.argv[2])]
want = [x for x in m if x.get("step") == 3 and "eval_loss" in x][0]["eval_loss"]
d = abs(r["loss"] - want) / abs(want)
print(f"fsdpc eval on final/: loss {r['loss']!r} (accuracy {r['token_accuracy']:.4f}); "
      f"train's eval_loss at step 3: {want!r}; relative difference {d:.3e}")
sys.exit(0 if d <= 1e-6 else 1)
PY
}
export -f evalcheck
part eval timeout 200 bash -c evalcheck
echo "overall: $([ $rc = 0 ] && echo PASS || echo FAIL)"
exit $rc
