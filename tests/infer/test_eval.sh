# fsdpc eval computes train's evaluation: on the checkpoint of step 3 (and
# on the final HF folder) its loss equals the eval_loss that training
# logged at that step, at world 1 and at world 2; accuracy is a fraction of
# the target tokens; bad input is one line.
. "$(dirname "$0")/common.sh"
"$FSDPC" data synth --task copy --out d.tok >/dev/null 2>&1 || fail "data synth"
"$FSDPC" data synth --task copy --seed 9 --n 2000 --out e.tok >/dev/null 2>&1 || fail "synth eval"
cat >c.yaml <<'YAML'
model: {vocab_size: 259, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2,
        num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 64}
data: {train: d.tok, eval: e.tok, seq_len: 32}
optim: {name: adamw, lr: 3.0e-3}
train: {max_steps: 6, micro_batch_size: 2, global_batch_size: 4, eval_every: 3, eval_batches: 4,
        threads: 1}
checkpoint: {dir: ck, save_steps: 3, final_dtype: fp32}
log: {dir: lg, progress: off}
YAML
timeout 60 "$FSDPC" train c.yaml >t.log 2>&1 || fail "train: $(tail -3 t.log)"
# check NAME CKPT STEP [eval args]: eval's loss = train's eval_loss at STEP
check() {
  local name=$1 ck=$2 step=$3
  shift 3
  timeout 60 "$FSDPC" eval "$ck" --data e.tok "$@" >"$name.json" 2>"$name.err" ||
    fail "$name: $(cat "$name.err")"
  python3 - "$name.json" lg/metrics.jsonl "$step" <<'PY' || fail "$name: $(cat "$name.json")"
import json, math, sys
r = json.load(open(sys.argv[1]))
want = [json.loads(l) for l in open(sys.argv[2]) if json.loads(l).get("step") == int(sys.argv[3])][0]
assert abs(r["loss"] - want["eval_loss"]) <= 1e-9 * abs(want["eval_loss"]), (r["loss"], want)
assert abs(r["perplexity"] - math.exp(r["loss"])) < 1e-9 * r["perplexity"]
assert 0 < r["token_accuracy"] < 1 and r["tokens"] > 0, r
PY
}
check s3 ck/step-000003 3
check s3w2 ck/step-000003 3 --nproc-per-node 2 --master-port 0
check final ck/final 6
check finalw2 ck/final 6 --nproc-per-node 2 --master-port 0
# One line for a missing data file or model.
timeout 30 "$FSDPC" eval ck/final --data nope.tok >x.log 2>&1 && fail "missing data accepted"
[ "$(grep -c . x.log)" = 1 ] || fail "missing data: $(cat x.log)"
timeout 30 "$FSDPC" eval nope --data e.tok >x.log 2>&1 && fail "missing model accepted"
grep -q "nope: no such model folder" x.log || fail "missing model: $(cat x.log)"
# LoRA with dropout: evaluation runs without it, in train and in fsdpc eval.
rm -rf ck lg
timeout 60 "$FSDPC" train c.yaml peft.method=lora peft.r=4 peft.alpha=8 peft.dropout=0.3 \
  "peft.target_modules=[q_proj, v_proj, down_proj]" >t.log 2>&1 || fail "train lora: $(tail -3 t.log)"
check lora_s3 ck/step-000003 3
echo PASS
