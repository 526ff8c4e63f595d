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
echo PASS
