# Issue 42.4, a chat model that can be chatted with: the chat demo's config
# saves its model; the template it was trained with travels into final/
# (chat_template.jinja, tokenizer_config.json's chat_template);
# `generate --chat` renders with it (or with the config's
# data.chat_template); generate and eval take a PEFT adapter folder over its
# base; generation_config.json's sampling defaults apply.
. "$(dirname "$0")/common.sh"
ln -s "$FSDPC_SOURCE_DIR/configs" configs
tmpl=configs/templates/chatml.jinja

# 1. The chat demo, a few steps: final/ with the template beside it.
"$FSDPC" data synth --task chat --n 300 --out data/chat.jsonl >/dev/null 2>&1 || fail "data synth"
timeout 120 "$FSDPC" train configs/tiny-chat-cpu.yaml train.max_steps=4 train.eval_every=0 schedule.warmup_steps=1 \
  train.generate_tokens=0 >demo.log 2>&1 || fail "chat demo: $(tail -3 demo.log)"
F=out/tiny-chat-cpu/ckpt/final
[ -s $F/model.safetensors ] || fail "the chat demo's config saved no model: $(ls out/tiny-chat-cpu)"
cmp -s $F/chat_template.jinja $tmpl || fail "final/chat_template.jinja is not the trained template"
python3 - $F/tokenizer_config.json $tmpl <<'PY' || fail "tokenizer_config.json lacks the template"
import json, sys
assert json.load(open(sys.argv[1]))["chat_template"] == open(sys.argv[2]).read()
PY

# 2. generate --chat renders the question with it: the same ids as the
#    ChatML text written out.
q="capital of Kenya?"
gen() { # NAME MODEL ARGS...
  local n=$1 m=$2
  shift 2
  timeout 60 "$FSDPC" generate "$m" --json --max-new-tokens 6 "$@" >"$n.json" 2>"$n.err" ||
    fail "generate $n: $(cat "$n.err")"
}
gen chat $F --chat --prompt "$q"
gen text $F --no-bos --prompt $'<|im_start|>user\ncapital of Kenya?<|im_end|>\n<|im_start|>assistant\n'
# 3. ... or with the config's data.chat_template when the folder has none.
cp -r $F bare && rm bare/chat_template.jinja bare/tokenizer_config.json &&
  sed -i '/chat_template.jinja\|tokenizer_config.json/d' bare/checksums.rank-00000.txt || fail "bare copy"
gen bare bare --chat --prompt "$q"
python3 - <<'PY' || fail "--chat ids: $(cat chat.json text.json bare.json)"
import json
c, t, b = (json.load(open(n + ".json")) for n in ("chat", "text", "bare"))
assert c["prompt_ids"] == t["prompt_ids"] == b["prompt_ids"] and c["ids"] == t["ids"] == b["ids"], (c, t)
PY

# 4. An HF tokenizer with data.chat_template: its tokenizer_config.json
#    keeps its keys and takes the trained template.
mkdir tok && cp "$FIX/tokenizers/llama3-tiny/tokenizer.json" tok/ &&
  cp "$FIX/chat_templates/llama3.2-instruct/tokenizer_config.json" tok/ || fail "fixtures"
printf '{"messages": [{"role": "user", "content": "hi %d"}, {"role": "assistant", "content": "yo %d"}]}\n' \
  $(seq 1 60 | sed 's/.*/& &/') >hf.jsonl
cat >hf.yaml <<YAML
model: {vocab_size: 576, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1,
        num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 64}
data: {train: hf.jsonl, tokenizer: tok, chat_template: $tmpl, seq_len: 64}
train: {max_steps: 1, micro_batch_size: 2, threads: 1}
checkpoint: {dir: hfck, final_dtype: fp32}
log: {dir: hflog, progress: off}
YAML
timeout 60 "$FSDPC" train hf.yaml >hf.log 2>&1 || fail "hf run: $(tail -2 hf.log)"
python3 - hfck/final/tokenizer_config.json tok/tokenizer_config.json $tmpl <<'PY' || fail "hf tokenizer_config.json"
import json, sys
got, src, t = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), open(sys.argv[3]).read()
assert got["chat_template"] == t and src["chat_template"] != t
assert {k: v for k, v in got.items() if k != "chat_template"} == \
       {k: v for k, v in src.items() if k != "chat_template"}
PY
cmp -s hfck/final/chat_template.jinja $tmpl || fail "hf: chat_template.jinja"
"$FSDPC" generate hfck/final --chat --prompt hi --max-new-tokens 2 >/dev/null 2>g.err || fail "$(cat g.err)"

# 5. A PEFT adapter folder over its base: generate and eval merge it.
"$FSDPC" data synth --task qa --n 400 --out qa.tok >/dev/null 2>&1 || fail "data synth qa"
cat >base.yaml <<'YAML'
model: {vocab_size: 259, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2,
        num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 64,
        tie_word_embeddings: true}
data: {train: qa.tok, seq_len: 32}
optim: {name: adamw, lr: 1.0e-2}
train: {max_steps: 20, micro_batch_size: 4, threads: 1}
checkpoint: {dir: base, final_dtype: fp32}
log: {dir: baselog, progress: off}
YAML
timeout 60 "$FSDPC" train base.yaml >base.log 2>&1 || fail "base: $(tail -2 base.log)"
cat >lora.yaml <<'YAML'
model: {from: base/final}
data: {train: qa.tok, seq_len: 32, eval: qa.tok}
peft: {method: lora, r: 4, alpha: 8, target_modules: [all-linear], merge_on_save: true}
optim: {name: adamw, lr: 2.0e-2}
train: {max_steps: 10, micro_batch_size: 4, threads: 1, eval_every: 10}
checkpoint: {dir: lora, final_dtype: fp32}
log: {dir: loralog, progress: off}
YAML
timeout 60 "$FSDPC" train lora.yaml >lora.log 2>&1 || fail "lora: $(tail -2 lora.log)"
[ -f lora/final/adapter_config.json ] || fail "no adapter folder"
gen adapter lora/final --prompt-ids 257,81,58 --top-logits 3
gen merged lora/final-merged --prompt-ids 257,81,58 --top-logits 3
gen plain base/final --prompt-ids 257,81,58 --top-logits 3
for m in lora/final lora/final-merged; do
  n=$(basename $m)
  timeout 60 "$FSDPC" eval $m --data qa.tok --seq-len 32 --batches all >$n.eval 2>$n.eerr ||
    fail "eval $m: $(cat $n.eerr)"
done
python3 - <<'PY' || fail "adapter folder: $(cat adapter.json merged.json final.eval final-merged.eval)"
import json
a, m, p = (json.load(open(n + ".json")) for n in ("adapter", "merged", "plain"))
la = [x[1] for s in a["top_logits"] for x in s]
lm = [x[1] for s in m["top_logits"] for x in s]
lp = [x[1] for s in p["top_logits"] for x in s]
assert a["ids"] == m["ids"] and max(abs(x - y) for x, y in zip(la, lm)) < 1e-4, (a, m)
assert max(abs(x - y) for x, y in zip(la, lp)) > 1e-3, "the adapter changed nothing"
ea, em = (json.load(open(n + ".eval")) for n in ("final", "final-merged"))
want = [json.loads(l)["eval_loss"] for l in open("loralog/metrics.jsonl") if '"eval_loss"' in l][-1]
print("eval: adapter folder %.8f, merged folder %.8f, train's eval_loss %.8f" % (ea["loss"], em["loss"], want))
assert abs(ea["loss"] - em["loss"]) <= 1e-6 * em["loss"] and abs(ea["loss"] - want) <= 1e-5 * want
PY

# 6. Sampling defaults from generation_config.json (as transformers: greedy
#    unless do_sample; then its temperature, top_k, top_p).
cp -r base/final sampled && rm sampled/checksums.rank-00000.txt sampled/config.yaml
python3 - sampled/generation_config.json <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
g.update(do_sample=True, temperature=1.5, top_k=20, top_p=0.95)
json.dump(g, open(sys.argv[1], "w"))
PY
gen s_default sampled --prompt-ids 257,81,58 --seed 7
gen s_flags base/final --prompt-ids 257,81,58 --seed 7 --temperature 1.5 --top-k 20 --top-p 0.95
gen s_greedy sampled --prompt-ids 257,81,58 --seed 7 --temperature 0
python3 - <<'PY' || fail "generation_config.json sampling: $(cat s_default.json s_flags.json plain.json)"
import json
d, f, g, p = (json.load(open(n + ".json")) for n in ("s_default", "s_flags", "s_greedy", "plain"))
assert d["ids"] == f["ids"], (d["ids"], f["ids"])
assert g["ids"] == p["ids"][:6] and d["ids"] != g["ids"], (d["ids"], g["ids"])
PY
echo PASS
