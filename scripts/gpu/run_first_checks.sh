#!/bin/bash
# On the GPU host: issue 42/43 items of session 12 that touch the CUDA path.
#   bash .carry/train/run_first_checks.sh      (carry: scripts/gpu/pack_train_carry.sh)
# 1. The LoRA base's identity by content on the 8B shape (a random bf16 HF
#    folder, 16 GB): the time rank 0 spends reading it once ("LoRA base ...
#    (X s)"), printed as a line; a resume of the run's step-1 checkpoint
#    accepts the same base under another path spelling.
# 2. A PEFT adapter folder over its base on CUDA: `fsdpc generate` on
#    final/ (merged into the bf16 upload) and on final-merged/ give the same
#    greedy tokens; `fsdpc eval` of both is within 1e-3 (bf16).
# Prints "PASS name" / "FAIL name" lines; exit 0 when all pass.
. "$(dirname "$0")/carry_env.sh" # C, OUT, B, F; LD_LIBRARY_PATH
export FSDPC_PLUGIN_PATH=$B/plugins
W=$(mktemp -d)
ok() { echo "PASS $1"; }
bad() { echo "FAIL $1: $2"; rc=1; }
python3 "$C/make_hf_random.py" "$W/base8b" --shape llama3.1-8b --jobs 16 >"$OUT/make8b.log" 2>&1 ||
  bad make8b "$(tail -1 "$OUT/make8b.log")"
$F data synth --task copy --n 20000 --out "$W/d.tok" >/dev/null 2>&1
cat >"$W/l.yaml" <<YAML
model: {from: $W/base8b}
data: {train: $W/d.tok, seq_len: 512, tokenizer: byte}
train: {device: cuda, max_steps: 2, micro_batch_size: 1, log_every: 1}
peft: {method: lora, r: 16, alpha: 32, target_modules: [all-linear], merge_on_save: true}
fsdp: {activation_checkpointing: true}
checkpoint: {dir: $W/ck, save_steps: 1, final_dtype: bf16}
log: {dir: $W/log, progress: off}
YAML
$F train "$W/l.yaml" >"$OUT/lora8b.log" 2>&1 || bad lora8b "$(grep -m1 error "$OUT/lora8b.log")"
line=$(grep -m1 "LoRA base" "$OUT/lora8b.log")
[ -n "$line" ] && ok "identity: $line" || bad identity "no 'LoRA base' line"
ln -s "$W/base8b" "$W/link8b"
$F train "$W/l.yaml" "model.from=$W/link8b/" checkpoint.resume="$W/ck/step-000001" \
  "checkpoint.dir=''" log.dir="$W/log2" >"$OUT/resume8b.log" 2>&1 &&
  grep -q "resumed from" "$OUT/resume8b.log" && ok "resume onto the base spelt another way" ||
  bad resume8b "$(grep -m1 error "$OUT/resume8b.log")"
for m in final final-merged; do
  $F generate "$W/ck/$m" --device cuda --prompt-ids 257,99,111,112,121 --max-new-tokens 16 --json \
    >"$W/$m.json" 2>"$OUT/gen-$m.err" || bad "generate $m" "$(cat "$OUT/gen-$m.err")"
  $F eval "$W/ck/$m" --data "$W/d.tok" --seq-len 512 --batches 8 --device cuda \
    >"$W/$m.eval" 2>"$OUT/eval-$m.err" || bad "eval $m" "$(tail -1 "$OUT/eval-$m.err")"
done
python3 - "$W" <<'PY' && ok "adapter folder = merged folder on CUDA" || bad adapter "see above"
import json, sys
w = sys.argv[1]
a, m = (json.load(open(f"{w}/{n}.json")) for n in ("final", "final-merged"))
ea, em = (json.load(open(f"{w}/{n}.eval")) for n in ("final", "final-merged"))
print("generate ids equal:", a["ids"] == m["ids"], "; eval", ea["loss"], em["loss"])
assert a["ids"] == m["ids"] and abs(ea["loss"] - em["loss"]) <= 1e-3 * em["loss"]
PY
rm -rf "$W"
exit $rc
