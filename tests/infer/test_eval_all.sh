# Issue 42.2: evaluation covers every example. The last, smaller batch is
# evaluated (fsdpc eval --batches all and train's default), the counts are
# reported, eval_loss does not depend on the micro-batch or global batch
# size or the world size, and `fsdpc eval CKPT --data X` works for a run
# that held out data.eval_fraction.
. "$(dirname "$0")/common.sh"
"$FSDPC" data synth --task qa --n 700 --out qa.tok >/dev/null 2>&1 || fail "data synth"
cat >c.yaml <<'YAML'
model: {vocab_size: 259, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2,
        num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 64,
        tie_word_embeddings: true}
data: {train: qa.tok, seq_len: 32, eval_fraction: 0.1}
optim: {name: adamw, lr: 3.0e-3}
train: {max_steps: 6, micro_batch_size: 4, eval_every: 3, threads: 1, log_every: 1}
checkpoint: {dir: ck, save_steps: 3, final_dtype: fp32}
log: {dir: lg, progress: off}
YAML
timeout 90 "$FSDPC" train c.yaml >t.log 2>&1 || fail "train: $(tail -3 t.log)"
grep -q "^eval: [0-9]* sequences of 32 tokens (every example), [0-9]* target tokens" t.log ||
  fail "train does not report what it evaluates: $(grep '^eval' t.log)"

ev() { # NAME MODEL ARGS...: fsdpc eval MODEL --data qa.tok --batches all ARGS > NAME.json
  local n=$1 m=$2
  shift 2
  timeout 90 "$FSDPC" eval "$m" --data qa.tok --batches all "$@" >"$n.json" 2>"$n.err" ||
    fail "$n: $(cat "$n.err")"
}
# The trained run held out data.eval_fraction: its final/ and its step-3
# checkpoint both evaluate on another file.
ev g1 ck/final train.micro_batch_size=1 train.global_batch_size=1
ev g8 ck/final train.micro_batch_size=4 train.global_batch_size=8
ev g6w2 ck/final train.micro_batch_size=3 train.global_batch_size=6 --nproc-per-node 2 --master-port 0
ev step3 ck/step-000003 train.micro_batch_size=4 train.global_batch_size=8
python3 - <<'PY' || fail "every example: $(cat g1.json g8.json g6w2.json)"
import json
g1, g8, g6 = (json.load(open(n + ".json")) for n in ("g1", "g8", "g6w2"))
print("sequences %d, target tokens %d; batches %d / %d / %d; loss %.12f"
      % (g1["sequences"], g1["tokens"], g1["batches"], g8["batches"], g6["batches"], g1["loss"]))
assert g1["sequences"] % 8 and g1["sequences"] % 6, "pick data whose windows leave a partial batch"
for r in (g8, g6):
    assert r["sequences"] == g1["sequences"] and r["tokens"] == g1["tokens"], (g1, r)
    assert abs(r["loss"] - g1["loss"]) <= 1e-9 * g1["loss"], (g1["loss"], r["loss"])
assert g8["batches"] == -(-g1["sequences"] // 8) and g6["batches"] == -(-g1["sequences"] // 6)
PY
grep -q '"loss"' step3.json || fail "eval of the sharded checkpoint: $(cat step3.err)"

# Training's eval_loss (every held-out window by default) is the same at any
# micro-batch size: with lr 0 the weights stay the init, the batches differ.
for mb in 4 6; do
  timeout 90 "$FSDPC" train c.yaml train.max_steps=1 train.eval_every=1 optim.lr=0 \
    train.micro_batch_size=$mb log.dir=mb$mb "checkpoint.dir=''" >mb$mb.log 2>&1 ||
    fail "train mb $mb: $(tail -2 mb$mb.log)"
done
python3 - <<'PY' || fail "eval_loss depends on the micro-batch size"
import json
a, b = ([json.loads(l)["eval_loss"] for l in open(d + "/metrics.jsonl") if '"eval_loss"' in l][0]
        for d in ("mb4", "mb6"))
print("eval_loss at micro-batch 4: %.15f, at 6: %.15f" % (a, b))
assert abs(a - b) <= 1e-9 * a, (a, b)
PY
echo PASS
