# fsdpc eval on JSONL datasets (text, instruction, prompt/completion, chat):
# prepared as train prepares them (the model folder's tokenizer and chat
# template), target tokens only, over 1 and 2 ranks. Its loss equals the
# eval_loss train logged on the same JSONL and the eval of the token file
# `fsdpc data prepare` makes; with every batch, it counts exactly the target
# tokens of that file. Bad JSONL is one line.
. "$(dirname "$0")/common.sh"
mkdir tok && cp "$FIX/tokenizers/llama3-tiny/tokenizer.json" tok/ &&
  cp "$FIX/chat_templates/llama3.2-instruct/tokenizer_config.json" tok/ || fail "fixtures"
python3 - <<'PY' || fail "make jsonl"
import json
def w(name, rows):
    with open(name, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
w("chat.jsonl", [{"messages": [{"role": "user", "content": f"what is {i} plus {i}?"},
                                {"role": "assistant", "content": f"It is {2 * i}."}]}
                  for i in range(24)])
w("pc.jsonl", [{"prompt": f"count to {i % 5}:",
                "completion": " " + " ".join(str(k) for k in range(i % 5 + 1))} for i in range(24)])
w("ins.jsonl", [{"instruction": "Add the numbers.", "input": f"{i} and {i + 1}",
                 "output": f"{2 * i + 1}"} for i in range(20)])
w("text.jsonl", [{"text": f"The number {i} comes before {i + 1}."} for i in range(20)])
PY
"$FSDPC" data synth --task copy --out d.tok >/dev/null 2>&1 || fail "data synth"
cat >c.yaml <<'YAML'
model: {vocab_size: 576, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2,
        num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 256}
data: {train: d.tok, eval: chat.jsonl, seq_len: 128, tokenizer: tok}
optim: {name: adamw, lr: 3.0e-3}
train: {max_steps: 3, micro_batch_size: 2, global_batch_size: 4, eval_every: 3, eval_batches: 4,
        threads: 1}
checkpoint: {dir: ck, final_dtype: fp32}
log: {dir: lg, progress: off}
YAML
timeout 90 "$FSDPC" train c.yaml >t.log 2>&1 || fail "train: $(tail -3 t.log)"
[ -f ck/final/tokenizer.json ] || fail "final/ has no tokenizer.json"
ev() { # NAME ARGS...: fsdpc eval ck/final ARGS > NAME.json
  local n=$1
  shift
  timeout 90 "$FSDPC" eval ck/final "$@" >"$n.json" 2>"$n.err" || fail "$n: $(cat "$n.err")"
}
# 1. train's eval_loss on chat.jsonl at step 3 (final/ = step 3)
ev chat --data chat.jsonl
# 2. the same numbers on the token file `fsdpc data prepare` makes with the
#    model's tokenizer and template
"$FSDPC" data prepare --in chat.jsonl --tokenizer ck/final --out chat.tok >/dev/null ||
  fail "data prepare"
ev chattok --data chat.tok
ev chatw2 --data chat.jsonl --nproc-per-node 2 --master-port 0
python3 - lg/metrics.jsonl <<'PY' || fail "chat: $(cat chat.json chattok.json chatw2.json)"
import json, sys
want = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l).get("step") == 3][0]["eval_loss"]
a, b, c = (json.load(open(f + ".json")) for f in ("chat", "chattok", "chatw2"))
assert abs(a["loss"] - want) <= 1e-9 * abs(want), (a, want)
assert a["loss"] == b["loss"] and a["tokens"] == b["tokens"], (a, b)
assert abs(c["loss"] - a["loss"]) <= 1e-9 * a["loss"] and c["tokens"] == a["tokens"], (a, c)
assert 0 <= a["token_accuracy"] <= 1 and a["tokens"] > 0 and c["world_size"] == 2, a
# weights only (an HF folder): no gradient or optimizer memory
for r in (a, c):
    cat = r["peak_device_bytes_by_category"]
    assert cat["grads"] == 0 and cat["optim"] == 0 and cat["params"] > 0, r
PY
# 3. every batch of each format: exactly the prepared file's target tokens
#    (a target needs a token before it in its example), at 1 and 2 ranks
one="train.micro_batch_size=1 train.global_batch_size=1"
for f in chat pc ins text; do
  "$FSDPC" data prepare --in $f.jsonl --tokenizer ck/final --out $f.all.tok >/dev/null ||
    fail "prepare $f"
  ev $f.all --data $f.jsonl --batches all $one
  ev $f.allw2 --data $f.jsonl --batches all train.micro_batch_size=1 train.global_batch_size=2 \
    --nproc-per-node 2 --master-port 0
  python3 - $f <<'PY' || fail "$f: $(cat $f.all.json)"
import json, struct, sys
f = sys.argv[1]
data = open(f + ".all.tok", "rb").read()
magic, version, width, vocab, eos, flags = struct.unpack_from("<8sIIIII", data, 0)
n_tokens, n_docs = struct.unpack_from("<QQ", data, 32)
at = 64 + ((n_tokens * width + 7) // 8) * 8
off = struct.unpack_from("<%dQ" % (n_docs + 1), data, at)
at += 8 * (n_docs + 1)
bit = lambda i: (data[at + (i >> 3)] >> (i & 7)) & 1 if flags & 1 else 1
want = sum(bit(i) for d in range(n_docs) for i in range(off[d] + 1, off[d + 1]))
r, r2 = json.load(open(f + ".all.json")), json.load(open(f + ".allw2.json"))
assert r["tokens"] == want, (f, r, want)
assert r2["tokens"] == want and abs(r2["loss"] - r["loss"]) <= 1e-9 * r["loss"], (r, r2)
print(f, "targets", want, "of", n_tokens, "tokens; loss", r["loss"])
PY
done
# 4. bad input: one line and a non-zero exit
printf '{"messages": [{"role": "user", "content": "hi"}]}\nnot json\n' >bad.jsonl
timeout 60 "$FSDPC" eval ck/final --data bad.jsonl >x.out 2>x.log && fail "bad JSONL accepted"
[ "$(grep -c . x.log)" = 1 ] || fail "bad JSONL: $(cat x.log)"
[ -s x.out ] && fail "bad JSONL wrote output: $(cat x.out)"
timeout 60 "$FSDPC" eval ck/final --data chat.jsonl --batches >x.log 2>&1 && fail "--batches"
grep -q "needs a value" x.log || fail "--batches: $(cat x.log)"
echo PASS
