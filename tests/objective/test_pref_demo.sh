#!/usr/bin/env bash
# DPO after SFT on a tiny CPU model (issue 38's demo, docs/objectives.md
# "DPO after SFT"). SFT answers "Q: <word>\nA:" with " yes" 70% and " no"
# 30% of the time, so its greedy answer is " yes" (checked on 20 words seen
# by neither run); DPO with LoRA on pairs of other words preferring " no"
# to " yes" must turn that around. DPO runs with TRL's beta 0.1 and RPO's
# NLL term (objective.options.rpo_alpha 1): without it the tiny model lowers
# both answers' log-probs together (DPO's displacement) and its greedy
# answers degenerate (0 of 20 right in every seed tried), though the reward
# accuracy reaches 1. Held out: DPO trains for less than an
# epoch and each step's metrics come from its forward before its update, so
# the last steps' rewards/accuracies are measured on pairs never trained on:
# their mean must pass 0.9; and the trained model's greedy answers
# (train.generate_prompts) to the 20 held-out words must be the chosen
# " no" in more than 90%.
source "$FSDPC_SOURCE_DIR/tests/train/common.sh"
cd "$TMP" || fail "cd"
python3 - "$TMP" <<'EOF'
import json, random, sys
d = sys.argv[1]
r = random.Random(11)
words = set()
while len(words) < 2400:
    words.add("".join(r.choice("abcdef") for _ in range(5)))
words = sorted(words)
r.shuffle(words)
sft, dpo, held = words[:600], words[600:2380], words[2380:]
right = lambda w: " no"
wrong = lambda w: " yes"
with open(f"{d}/sft.jsonl", "w") as f:
    for i, w in enumerate(sft):
        f.write(json.dumps({"prompt": f"Q: {w}\nA:", "completion": " no" if i % 10 < 3 else " yes"}) + "\n")
with open(f"{d}/dpo.jsonl", "w") as f:
    for w in dpo:
        f.write(json.dumps({"prompt": f"Q: {w}\nA:", "chosen": right(w), "rejected": wrong(w)}) + "\n")
with open(f"{d}/held.txt.yaml", "w") as f:  # one override: a YAML flow list
    f.write("train.generate_prompts=[" + ", ".join(json.dumps(f"Q: {w}\nA:") for w in held) + "]")
with open(f"{d}/held.txt", "w") as f:
    for w in held:
        f.write(f"{w}{right(w)}\n")
EOF
"$FSDPC" data prepare --in sft.jsonl --tokenizer byte --out sft.tok >/dev/null || fail "prepare sft"
"$FSDPC" data prepare --in dpo.jsonl --tokenizer byte --out dpo.tok >/dev/null || fail "prepare dpo"
# SFT: whole model, the answers' format
run sft data.train="$TMP/sft.tok" data.seq_len=16 data.eval_fraction=0 train.eval_every=0 \
  train.max_steps=120 train.global_batch_size=16 train.micro_batch_size=8 optim.lr=3e-3 \
  train.generate_tokens=4 "$(cat "$TMP/held.txt.yaml")" || fail "sft"
[ -f "$TMP/sft/ck/final/config.json" ] || fail "sft: no final HF folder"
# DPO: LoRA on the SFT model (its reference: the same model, adapters off)
run dpo model.from="$TMP/sft/ck/final" data.train="$TMP/dpo.tok" data.seq_len=32 \
  data.eval_fraction=0 train.eval_every=0 objective.name=dpo objective.beta=0.1 \
  objective.options.rpo_alpha=1.0 peft.method=lora peft.r=8 peft.alpha=16 \
  peft.target_modules=[all-linear] optim.lr=2e-3 optim.weight_decay=0 \
  train.max_steps=110 train.global_batch_size=16 train.micro_batch_size=8 \
  train.generate_tokens=4 "$(cat "$TMP/held.txt.yaml")" || fail "dpo"
python3 - "$TMP" <<'EOF' || fail "DPO did not move the preference"
import json, re, sys
d = sys.argv[1]
gen = lambda log: re.findall(r'generate: "Q: (\w+)\\nA:" -> "(.*)"', open(log, errors="replace").read())
before = sum(1 for w, t in gen(f"{d}/sft.log") if t.startswith(" yes"))
print(f"after SFT: greedy ' yes' {before}/20")
assert before > 0.9 * 20, "SFT's greedy answer is not ' yes'"
rows = [json.loads(l) for l in open(f"{d}/dpo/metrics.jsonl") if '"step"' in l]
acc = [r["rewards/accuracies"] for r in rows[-15:]]
held_acc = sum(acc) / len(acc)
want = dict(l.rstrip("\n").split(" ", 1) for l in open(f"{d}/held.txt"))
got = gen(f"{d}/dpo.log")
hits = sum(1 for w, t in got if t.startswith(" " + want[w]))
print(f"last step logps/chosen {rows[-1]['logps/chosen']:.3f} logps/rejected "
      f"{rows[-1]['logps/rejected']:.3f}")
print(f"held-out rewards/accuracies {held_acc:.3f} (last 15 steps); greedy answers right "
      f"{hits}/{len(got)}; first step accuracy {rows[0]['rewards/accuracies']:.3f}")
assert len(got) == len(want), f"{len(got)} generations for {len(want)} prompts"
assert held_acc > 0.9 and hits > 0.9 * len(want)
EOF
echo "preference demo: ok"
