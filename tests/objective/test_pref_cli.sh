#!/usr/bin/env bash
# Preference fine-tuning through the CLI (issue 38): `data prepare --format
# preference` on TRL's layouts (plain, conversational, implicit prompt) and
# its one-line refusals with the row's line number; dpo with LoRA (the
# reference is the base with the adapters off), dpo on a full fine-tune
# (objective.reference: precompute) and simpo train to the same loss,
# log-probs, grad norm (and full fine-tunes to the same final weights) at
# world 1 as at world 2 and 4 (dpo LoRA), 4 (dpo full), 2 (simpo) over 20
# steps (1e-5 relative); the refusals of mismatched data and objectives.
source "$FSDPC_SOURCE_DIR/tests/train/common.sh"
CMP="python3 $FSDPC_SOURCE_DIR/tests/train/compare_runs.py"
TPL="$FSDPC_SOURCE_DIR/configs/templates/chatml.jinja"

python3 - "$TMP" <<'EOF'
import json, random, sys
d = sys.argv[1]
r = random.Random(7)
with open(f"{d}/pairs.jsonl", "w") as f:
    for i in range(400):
        w = "".join(r.choice("abcdef") for _ in range(4))
        bad = "".join(r.choice("abcdef") for _ in range(4))
        f.write(json.dumps({"prompt": f"Q: {w}\nA:", "chosen": " " + w[::-1],
                            "rejected": " " + bad}) + "\n")
with open(f"{d}/conv.jsonl", "w") as f:
    u = [{"role": "user", "content": "hi"}]
    f.write(json.dumps({"prompt": u, "chosen": [{"role": "assistant", "content": "hello"}],
                        "rejected": [{"role": "assistant", "content": "go"}]}) + "\n")
    f.write(json.dumps({"chosen": u + [{"role": "assistant", "content": "yes"}],
                        "rejected": u + [{"role": "assistant", "content": "no"}]}) + "\n")
with open(f"{d}/implicit.jsonl", "w") as f:
    f.write(json.dumps({"chosen": "Q: x\nA: good", "rejected": "Q: x\nA: bad"}) + "\n")
EOF
cd "$TMP" || fail "cd"
prep() { "$FSDPC" data prepare --tokenizer byte "$@"; }

# plain rows: two documents a row, the prompt masked
prep --in pairs.jsonl --out pairs.tok >prep.log 2>&1 || fail "prepare (detected)"
grep -q "800 examples (preference)" prep.log || fail "prepare: $(cat prep.log)"
# the implicit prompt is the common start less the space: " good" and " bad" trained
prep --in implicit.jsonl --format preference --out imp.tok --show 1 >imp.log 2>&1 || fail "implicit"
grep -qF "{{Q: x" imp.log && grep -qF "A:}} good" imp.log && grep -qF "A:}} bad" imp.log ||
  fail "implicit prompt: $(cat imp.log)"
# conversational rows through the template, only the completion trained
prep --in conv.jsonl --chat-template "$TPL" --out conv.tok --show 2 >conv.log 2>&1 ||
  fail "conversational: $(tail -1 conv.log)"
grep -q "4 examples (preference)" conv.log || fail "conversational count: $(cat conv.log)"
grep -q "}}hello<|im_end|>" conv.log && grep -q "}}no<|im_end|>" conv.log ||
  fail "conversational masks: $(cat conv.log)"
prep --in conv.jsonl --out x.tok >convnt.log 2>&1 && fail "conversational without a template"
grep -q "conv.jsonl:1: a conversational row needs a chat template" convnt.log ||
  fail "no-template message: $(cat convnt.log)"

# malformed rows: one line, the file and line number, non-zero
bad() { # EXPECT JSONL-ROW
  printf '{"prompt": "p", "chosen": " a", "rejected": " b"}\n%s\n' "$2" >bad.jsonl
  prep --in bad.jsonl --format preference --chat-template "$TPL" --out bad.tok >bad.log 2>&1 &&
    fail "accepted: $2"
  [ "$(wc -l <bad.log)" = 1 ] || fail "not one line for $2: $(cat bad.log)"
  grep -qF "bad.jsonl:2: $1" bad.log || fail "want 'bad.jsonl:2: $1', got: $(cat bad.log)"
  [ ! -e bad.tok ] || fail "left a token file for $2"
}
bad "missing field 'rejected'" '{"prompt": "p", "chosen": " a"}'
bad "chosen is a string and rejected is an array" '{"prompt": "p", "chosen": " a", "rejected": []}'
bad "prompt: expected a string" '{"prompt": 3, "chosen": " a", "rejected": " b"}'
bad "chosen is empty after the prompt" '{"chosen": "same", "rejected": "same!"}'
bad "rejected: the completion must be one assistant message" \
  '{"prompt": [{"role": "user", "content": "q"}], "chosen": [{"role": "assistant", "content": "a"}], "rejected": []}'

# training: 20 steps, world 1, 2 and 4 agree
PAIRS=(data.train="$TMP/pairs.tok" data.seq_len=32 data.eval_fraction=0 train.eval_every=0
  train.max_steps=20 train.global_batch_size=8 train.micro_batch_size=1 optim.weight_decay=0)
KEYS=loss,grad_norm,logps/chosen,logps/rejected
world() { # NAME WORLDS overrides... : runs NAME-1 and NAME-n for each n, compares them
  local name=$1 ws=$2
  shift 2
  for n in 1 $ws; do
    run "$name-$n" "${PAIRS[@]}" "$@" -- --nproc-per-node $n || fail "$name at world $n"
  done
  local w=--weights # the full model's final weights (LoRA's are adapters: metrics only)
  [[ $name == *lora* ]] && w=
  local runs=()
  for n in $ws; do runs+=("$TMP/$name-$n"); done
  $CMP "$TMP/$name-1" "${runs[@]}" --keys $KEYS $w || fail "$name: world 1 and $ws differ"
}
world dpo-lora "2 4" objective.name=dpo peft.method=lora peft.r=4 peft.alpha=8 optim.lr=1e-2
world dpo-full 4 objective.name=dpo objective.reference=precompute
world simpo 2 objective.name=simpo
grep -q '"rewards/accuracies"' "$TMP/dpo-lora-1/metrics.jsonl" || fail "no rewards in metrics.jsonl"
grep -q 'rewards/margins' "$TMP/dpo-full-1.log" || fail "no rewards in the log line"
grep -q 'reference log-probs of 20 steps precomputed' "$TMP/dpo-full-1.log" || fail "precompute log"
# the first step's policy is its reference: loss ln 2, rewards 0
python3 - "$TMP/dpo-lora-1/metrics.jsonl" <<'EOF' || fail "dpo's first step"
import json, math, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"step"' in l][0]
assert abs(r["loss"] - math.log(2)) < 1e-9 and r["rewards/chosen"] == 0.0, r
EOF

# refusals: one line, what to do
refused() { # NAME WANT overrides...
  local name=$1 want=$2
  shift 2
  run "$name" "$@" && fail "$name: trained, want a refusal"
  grep -qF -- "$want" <<<"$(tail -n 1 "$TMP/$name.log")" ||
    fail "$name: '$want' not in: $(tail -n 1 "$TMP/$name.log")"
}
refused sft-on-pairs "holds preference pairs, which objective.name 'sft'" "${PAIRS[@]}"
refused dpo-on-text "prepare them with \`fsdpc data prepare --format preference\`" \
  objective.name=simpo
refused dpo-full-noref "objective.reference: precompute" "${PAIRS[@]}" objective.name=dpo
refused dpo-packing "leave data.packing at auto" "${PAIRS[@]}" objective.name=simpo \
  data.packing=examples
echo "preference cli: ok"
