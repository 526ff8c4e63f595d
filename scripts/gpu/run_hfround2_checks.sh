#!/bin/bash
# Issue 13, second round, in one call on a GPU host (builds nothing there;
# the carry: scripts/gpu/pack_train_carry.sh DEST, plus base.tar.xz, an
# older fsdpc build for before/after, and the llama3.2 chat template):
#   1. test_cuda_infer_decode (bf16 decoder vs transformers' logits, cache
#      vs recompute through the CUDA-graph step, device argmax ties);
#   2. check_generate.py: greedy vs transformers (fixtures; 1B shape with the
#      fp32 reference and fsdpc's own logits at a divergence), tokens/s and
#      peak device memory: fsdpc (graph / no graph / base) vs transformers
#      eager, batch 1 and 16, 256 new tokens;
#   3. a 3-step GPU fine-tune of the 1B shape whose eval set is a chat JSONL;
#      fsdpc eval on final/ with that JSONL equals train's eval_loss at step 3;
#   4. fsdpc eval of every target token of the JSONL vs transformers (bf16 and
#      fp32) on the same tokens (check_eval.py).
#   bash .carry/hfround2/run_hfround2_checks.sh
. "$(dirname "$0")/carry_env.sh" # C, OUT, B, F, carry_fixtures, part
carry_fixtures                       # SRC
export PYTHONUNBUFFERED=1
W=/tmp/hfround2
mkdir -p "$W"
FS=$F
[ -f "$C/base.tar.xz" ] && tar xf "$C/base.tar.xz" -C /
BASE=$(cat "$C/base_bin" 2>/dev/null || echo)
BASEARG=()
[ -n "$BASE" ] && [ -x "$BASE" ] && BASEARG=(--base "$C/base_fsdpc.sh")
# the base binary runs with its own libfsdpc
printf '#!/bin/bash\nLD_LIBRARY_PATH=/tmp/rt:%s exec %s "$@"\n' "$(dirname "$(dirname "$BASE")")/lib" \
  "$BASE" >"$C/base_fsdpc.sh" 2>/dev/null && chmod +x "$C/base_fsdpc.sh" 2>/dev/null
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
part decode timeout 120 "$B/bin/test_cuda_infer_decode"
part generate timeout 300 python3 "$C/check_generate.py" --fsdpc "$FS" "${BASEARG[@]}" \
  --fixtures "$SRC/tests/fixtures" --work "$W" --impls eager
cp "$W/results.json" "$OUT/generate_results.json" 2>/dev/null
M=$W/llama1b-shape
finetune() {
  [ -f "$M/config.json" ] || { echo "no $M (check_generate.py makes it)"; return 1; }
  cp "$SRC"/tests/fixtures/tokenizers/llama3-tiny/tokenizer.json "$M/" &&
    cp "$C/llama3.2-tokenizer_config.json" "$M/tokenizer_config.json" || return 1
  python3 - "$W/chat.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(24):
        f.write(json.dumps({"messages": [
            {"role": "user", "content": f"what is {i} plus {i}? answer in words"},
            {"role": "assistant", "content": f"The sum of {i} and {i} is {2 * i}."}]}) + "\n")
PY
  "$FS" data synth --task copy --out "$W/d.tok" >/dev/null || return 1
  printf 'train: {}\n' >"$W/ft.yaml"
  rm -rf "$W/ck" "$W/lg"
  "$FS" train "$W/ft.yaml" model.config="$M" model.init.from="$M" data.train="$W/d.tok" \
    data.eval="$W/chat.jsonl" data.tokenizer="$M" data.seq_len=256 train.device=cuda \
    train.max_steps=3 train.micro_batch_size=4 train.global_batch_size=4 train.eval_every=3 \
    train.eval_batches=4 checkpoint.dir="$W/ck" checkpoint.final_dtype=bf16 log.dir="$W/lg" \
    log.progress=off || return 1
  ls -la "$W/ck/final"
}
export -f finetune
export W M SRC FS C B
part finetune timeout 200 bash -c finetune
evalcheck() {
  "$FS" eval "$W/ck/final" --data "$W/chat.jsonl" >"$W/eval.json" || return 1
  cat "$W/eval.json"
  python3 - "$W/eval.json" "$W/lg/metrics.jsonl" <<'PY' || return 1
import json, sys
r = json.load(open(sys.argv[1]))
m = [json.loads(l) for l in open(sys.argv[2])]
want = [x for x in m if x.get("step") == 3 and "eval_loss" in x][0]["eval_loss"]
d = abs(r["loss"] - want) / abs(want)
print(f"fsdpc eval final/ --data chat.jsonl: loss {r['loss']!r} ({int(r['tokens'])} targets); "
      f"train's eval_loss at step 3 on chat.jsonl: {want!r}; relative difference {d:.3e}; "
      f"peak device {r['peak_device_bytes'] / 2**20:.0f} MiB "
      f"{ {k: round(v / 2**20) for k, v in r['peak_device_bytes_by_category'].items()} }")
sys.exit(0 if d <= 1e-6 else 1)
PY
  "$FS" data prepare --in "$W/chat.jsonl" --tokenizer "$W/ck/final" --out "$W/chat.tok" || return 1
  "$FS" eval "$W/ck/final" --data "$W/chat.jsonl" --batches all train.micro_batch_size=1 \
    train.global_batch_size=1 >"$W/eval_all.json" || return 1
  cat "$W/eval_all.json"
  python3 "$C/check_eval.py" --model "$W/ck/final" --tok "$W/chat.tok" \
    --fsdpc-json "$W/eval_all.json"
}
export -f evalcheck
part eval timeout 200 bash -c evalcheck
cp "$W"/eval*.json "$W/lg/metrics.jsonl" "$OUT/" 2>/dev/null
echo "overall: $([ $rc = 0 ] && echo PASS || echo FAIL)"
exit $rc
