# fsdpc generate on fsdpc checkpoints: the end-of-training generation of
# `fsdpc train` and `fsdpc generate final/` are the same code and give the
# same text; a sharded step checkpoint gives the same tokens as its HF
# conversion; bad prompts files are one line.
. "$(dirname "$0")/common.sh"
"$FSDPC" data synth --task copy --out d.tok >/dev/null 2>&1 || fail "data synth"
cat >c.yaml <<'YAML'
model: {vocab_size: 259, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2,
        num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 64}
data: {train: d.tok, seq_len: 32}
optim: {name: adamw, lr: 1.0e-2}
train: {max_steps: 30, micro_batch_size: 4, global_batch_size: 8, threads: 1,
        generate_prompts: ["copy abc -> ", "copy xy -> "], generate_tokens: 12}
checkpoint: {dir: ck, save_steps: 15, final_dtype: fp32}
log: {dir: lg, progress: off}
YAML
timeout 120 "$FSDPC" train c.yaml >t.log 2>&1 || fail "train: $(tail -3 t.log)"
for p in "copy abc -> " "copy xy -> "; do
  want=$(grep -F "generate: \"$p\" -> " t.log | sed 's/^generate: "[^"]*" -> "\(.*\)"$/\1/')
  got=$(timeout 60 "$FSDPC" generate ck/final --prompt "$p" --max-new-tokens 12 2>g.err) ||
    fail "generate: $(cat g.err)"
  got=$(printf '%s' "$got" | sed -z 's/\n*$//; s/\n/\\n/g')
  [ -n "$want" ] && [ "$got" = "$want" ] || fail "'$p': train printed '$want', generate '$got'"
done
# A sharded checkpoint and its HF conversion: the same greedy tokens.
"$FSDPC" convert ck/step-000015 hf --to hf --dtype fp32 >c.log 2>&1 || fail "convert: $(cat c.log)"
printf '{"prompt": "copy abc -> "}\n{"ids": [257, 99, 111, 112, 121]}\n{"prompt": "copy hello -> "}\n' >p.jsonl
timeout 60 "$FSDPC" generate ck/step-000015 --file p.jsonl --json --max-new-tokens 10 >a.json 2>a.err ||
  fail "sharded: $(cat a.err)"
timeout 60 "$FSDPC" generate hf --file p.jsonl --json --max-new-tokens 10 --batch-size 2 >b.json 2>b.err ||
  fail "hf: $(cat b.err)"
python3 - a.json b.json <<'PY' || fail "sharded and HF tokens differ"
import json, sys
a = [json.loads(l)["ids"] for l in open(sys.argv[1])]
b = [json.loads(l)["ids"] for l in open(sys.argv[2])]
assert len(a) == 3 and a == b, (a, b)
PY
# Bad input: one line, exit 1.
printf '{"prompt": "x"}\nnot json\n' >bad.jsonl
timeout 60 "$FSDPC" generate hf --file bad.jsonl >x.log 2>&1 && fail "bad prompts file accepted"
grep -q "bad.jsonl:2: expected a JSON object" x.log || fail "bad file: $(cat x.log)"
[ "$(grep -c . x.log)" = 1 ] || fail "bad file: more than one line: $(cat x.log)"
timeout 60 "$FSDPC" generate hf --prompt-ids 1,999 >x.log 2>&1 && fail "id outside vocab accepted"
grep -q "outside the vocabulary" x.log || fail "bad id: $(cat x.log)"
# --chat: the prompt is the user's turn of the model's chat template. A model
# with the Llama-3 tokenizer fixture and the Llama 3 Instruct template
# (exported into final/ from data.tokenizer) renders exactly the text below.
mkdir tokchat && cp "$FIX/tokenizers/llama3-tiny/tokenizer.json" tokchat/ &&
  cp "$FIX/chat_templates/llama3-instruct/tokenizer_config.json" tokchat/
timeout 120 "$FSDPC" train c.yaml model.vocab_size=600 data.tokenizer=tokchat checkpoint.dir=ck2 \
  log.dir=lg2 train.max_steps=1 checkpoint.save_steps=0 'train.generate_prompts=[]' >t2.log 2>&1 ||
  fail "train (chat): $(tail -3 t2.log)"
[ -f ck2/final/tokenizer_config.json ] || fail "final/ lacks the tokenizer config"
timeout 60 "$FSDPC" generate ck2/final --chat --system "Be brief." --prompt " hello " \
  --max-new-tokens 3 --json >chat.json 2>chat.err || fail "chat: $(cat chat.err)"
want=$(printf '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nhello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nX')
want=${want%X} # $(...) drops trailing newlines
timeout 60 "$FSDPC" generate ck2/final --no-bos --prompt "$want" --max-new-tokens 3 --json \
  >plain.json 2>plain.err || fail "plain: $(cat plain.err)"
python3 - chat.json plain.json <<'PY' || fail "--chat prompt ids differ from the rendered text's"
import json, sys
a, b = (json.loads(open(f).readline()) for f in sys.argv[1:3])
assert a["prompt_ids"] == b["prompt_ids"] and a["prompt_ids"][0] == 556, (a, b)
assert a["prompt_ids"].count(565) == 2, a  # two <|eot_id|>: special tokens became ids
PY
printf '{"messages": [{"role": "user", "content": "hello"}]}\n' >m.jsonl
timeout 60 "$FSDPC" generate ck2/final --file m.jsonl --max-new-tokens 2 >x.log 2>&1 &&
  fail "messages without --chat accepted"
grep -q "pass --chat" x.log || fail "messages without --chat: $(cat x.log)"
timeout 60 "$FSDPC" generate ck2/final --chat --file m.jsonl --json --max-new-tokens 2 >x.json 2>&1 ||
  fail "messages: $(cat x.json)"
# --top-logits: per generated token the N highest (id, logit), highest first;
# greedy picks the first; the tokens are those of the device greedy path
H=$FIX/hf_tiny_untied
for dev in "--device cpu"; do
  timeout 60 "$FSDPC" generate "$H" --prompt-ids 5,6,7 --max-new-tokens 6 --json $dev \
    >g.json 2>/dev/null || fail "greedy"
  timeout 60 "$FSDPC" generate "$H" --prompt-ids 5,6,7 --max-new-tokens 6 --json --top-logits 4 \
    $dev >t.json 2>/dev/null || fail "--top-logits"
  python3 - g.json t.json <<'PY' || fail "--top-logits: $(cat t.json)"
import json, sys
g, t = (json.loads(open(f).readline()) for f in sys.argv[1:3])
assert g["ids"] == t["ids"] and len(t["top_logits"]) == len(t["ids"]) == 6, (g, t)
for tok, top in zip(t["ids"], t["top_logits"]):
    assert len(top) == 4 and top[0][0] == tok, top
    vals = [v for _, v in top]
    assert vals == sorted(vals, reverse=True) and len({i for i, _ in top}) == 4, top
assert g["peak_device_bytes"] > 0, g
PY
done
timeout 60 "$FSDPC" generate "$H" --prompt-ids 5 --top-logits 101 >x.log 2>&1 && fail "top 101"
grep -q -- "--top-logits expects an integer in \[0, 100\], got '101'" x.log || fail "top 101: $(cat x.log)"
echo PASS
