"""The tools demo's checks after training (tests/train/test_demo_tools.sh).

usage: check_demo_tools.py FSDPC TEMPLATE TRAIN.jsonl METRICS.jsonl CKPT OUT_DIR

- The model starts from nothing: the loss of step 1 is that of a uniform
  guess over the 259 byte-tokenizer ids, ln(259) = 5.56.
- The held-out questions are read off the training data: a phrasing (the
  question with its city, or its two numbers, taken out) that the data asks
  about other cities (sums) but never about this one. Every city gets one;
  HELD_SUMS operand pairs (fixed seed) get one each. None of these questions
  occurs in the data. Their prompts (tools declared in the system turn, the
  question, the assistant header) are rendered by jinja2 as transformers
  renders them (hf_chat.py), not by fsdpc; the wanted answer is the
  assistant's tool call as the template renders it, with its <|im_end|>.
- `fsdpc generate` (greedy, on the final checkpoint) must answer at least
  MIN_RIGHT of each tool's held-out prompts with exactly that call: the
  right tool and the right arguments, read off the question."""
import json
import math
import os
import random
import re
import subprocess
import sys

MIN_RIGHT = 0.85  # of each tool's held-out prompts answered with the right call
HELD_SUMS = 16

fsdpc, template, train, metrics, ckpt, out = sys.argv[1:7]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "template"))
import hf_chat  # noqa: E402

rows = [r for r in map(json.loads, open(metrics)) if "step" in r]
first, last = rows[0], rows[-1]
print(f"loss at step {first['step']}: {first['loss']:.3f} (uniform: {math.log(259):.3f}); "
      f"final {last['loss']:.3f}, eval {last.get('eval_loss')}")
assert first["step"] == 1 and abs(first["loss"] - math.log(259)) < 0.3, \
    "the first loss is not that of an untrained model"
assert last["eval_loss"] < 0.5, "the eval loss on the assistant turns did not fall below 0.5"

# phrasing -> the cities (sums) the data asks in it; the call's shape
seen = {"get_weather": {}, "add": {}}
asked, tools, operands = set(), None, set()
for line in open(train):
    conv = json.loads(line)
    tools = conv["tools"]
    question, call = conv["messages"][0]["content"], conv["messages"][1]["tool_calls"][0]
    fn, args = call["function"]["name"], call["function"]["arguments"]
    asked.add(question)
    if fn == "get_weather":
        seen[fn].setdefault(question.replace(args["city"], "%s"), set()).add(args["city"])
    else:
        seen[fn].setdefault(re.sub(r"\d+", "%d", question), set()).add(args["a"] + args["b"])
        operands |= {args["a"], args["b"]}
cities = sorted(set().union(*seen["get_weather"].values()))
print(f"data: {len(asked)} questions, {len(cities)} cities, "
      f"{len(seen['get_weather'])} + {len(seen['add'])} phrasings")
assert len(seen["get_weather"]) > 1 and len(seen["add"]) > 1, "one phrasing per tool: no held-out"


def unseen(fn, key):
    """The first phrasing of fn that the data never asks about key."""
    return next(p for p in sorted(seen[fn]) if key not in seen[fn][p])


held = [(unseen("get_weather", c) % c, "get_weather", {"city": c}) for c in cities]
r = random.Random(HELD_SUMS)
for _ in range(HELD_SUMS):
    a, b = r.choice(sorted(operands)), r.choice(sorted(operands))
    held.append((unseen("add", a + b) % (a, b), "add", {"a": a, "b": b}))

tmpl = hf_chat.hf_env().from_string(open(template).read())
cases = []
for question, fn, args in held:
    assert question not in asked, f"held-out question in the data: {question}"
    msgs = [{"role": "user", "content": question},
            {"role": "assistant", "tool_calls": [
                {"type": "function", "function": {"name": fn, "arguments": args}}]}]
    prompt = hf_chat.render(tmpl, {}, msgs[:1], add_generation_prompt=True, tools=tools)
    full = hf_chat.render(tmpl, {}, msgs, tools=tools)
    assert full.startswith(prompt), "the template's generation prompt is not a prefix of the turn"
    call = full[len(prompt):]
    assert call.startswith("<tool_call>") and "<|im_end|>" in call, call
    cases.append((question, prompt, call[:call.index("<|im_end|>") + len("<|im_end|>")], fn))

prompts = os.path.join(out, "held_prompts.jsonl")
with open(prompts, "w") as f:
    for _, prompt, _, _ in cases:
        f.write(json.dumps({"prompt": prompt}) + "\n")
longest = max(len(c[2].encode()) for c in cases)
gen = subprocess.run([fsdpc, "generate", ckpt, "--file", prompts, "--json", "--no-bos",
                      "--device", "cpu", "--batch-size", "32", "--max-new-tokens", str(longest)],
                     capture_output=True, text=True)
assert gen.returncode == 0, f"fsdpc generate failed: {gen.stderr[-2000:]}"
texts = {r["index"]: r["text"] for r in map(json.loads, gen.stdout.splitlines())}
right, total = {"get_weather": 0, "add": 0}, {"get_weather": 0, "add": 0}
tool_right = 0
for i, (question, _, call, tool) in enumerate(cases):
    text = texts.get(i, "")
    ok = text.startswith(call)
    right[tool] += ok
    total[tool] += 1
    tool_right += text.startswith(call[:call.index('"arguments"')])
    print(f"{'ok ' if ok else 'BAD'} {question!r} -> {text[:len(call)]!r}")
print(f"held-out: right tool {tool_right}/{len(cases)}; right tool and arguments: "
      + ", ".join(f"{t} {right[t]}/{total[t]}" for t in right))
for tool, n in right.items():
    assert n >= MIN_RIGHT * total[tool], \
        f"{tool}: only {n} of {total[tool]} held-out prompts answered with the right call"
