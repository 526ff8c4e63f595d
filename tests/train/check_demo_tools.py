"""The tools demo's checks after training (tests/train/test_demo_tools.sh).

usage: check_demo_tools.py FSDPC TEMPLATE TRAIN.jsonl METRICS.jsonl CKPT OUT_DIR [MIN_RIGHT]

- The SFT starts from a model that does not know the conversations (the
  pre-training of configs/tiny-codes-cpu.yaml saw only `code "XYZ" = "XYZ"`
  lines): the loss of step 1 is above 2 nats a target.
- Held-out prompts: the HELD city codes that the data never holds
  (`fsdpc data synth --task tools` leaves out every code whose letters'
  places in their sets sum to a multiple of 6; this script checks that
  none is in the data), asked in the data's phrasings in turn, half about
  the weather, half about traffic. The tool is picked by a keyword of the
  question; its argument is a copy of the question's last word (in quotes), a code
  the model has never seen (each of its letters it has seen in that place).
- The prompt is what `fsdpc generate --chat --system "Tools: ..."` renders
  with the checkpoint's template: jinja2 as transformers runs it
  (hf_chat.py) renders the same text from the data's `tools` column, so the
  model is asked exactly as it was trained. The wanted answer is the
  assistant's tool call as the template renders it, with its <|im_end|>.
- `fsdpc generate --chat` (greedy, on the final checkpoint) must answer at
  least MIN_RIGHT (default 27) of the HELD (36) prompts with exactly that
  call: the right tool and the right argument. An untrained model answers
  none (the test checks that the bar fails after one SFT step)."""
import json
import math
import os
import itertools
import re
import subprocess
import sys

HELD = 36
LETTERS = ["BCDFGJ", "KLMNOE", "PQRSUV"]
WEATHER = ['Weather in "%s"?', 'Is it raining in "%s"?', 'How hot is it in "%s"?']
TRAFFIC = ['Traffic in "%s"?', 'Are the roads busy in "%s"?', 'Any jams in "%s"?']

fsdpc, template, train, metrics, ckpt, out = sys.argv[1:7]
min_right = int(sys.argv[7]) if len(sys.argv) > 7 else 27
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "template"))
import hf_chat  # noqa: E402

if metrics != "-":
    rows = [r for r in map(json.loads, open(metrics)) if "step" in r]
    first, last = rows[0], rows[-1]
    print(f"loss at step {first['step']}: {first['loss']:.3f} (uniform: {math.log(259):.3f}); "
          f"final {last['loss']:.3f}, eval {last.get('eval_loss')}")
    assert first["step"] == 1 and first["loss"] > 2.0, \
        "the first loss is not that of a model new to the conversations"

tools, names, phrasings = None, set(), set()
for line in open(train):
    conv = json.loads(line)
    tools = conv["tools"]
    call = conv["messages"][1]["tool_calls"][0]["function"]
    names.add(call["arguments"]["city"])
    phrasings.add(conv["messages"][0]["content"].replace(call["arguments"]["city"], "%s"))
assert phrasings == set(WEATHER + TRAFFIC), f"the data's phrasings changed: {sorted(phrasings)}"


def held_out(code):
    return sum(LETTERS[k].index(c) for k, c in enumerate(code)) % 6 == 0


codes = ["".join(x) for x in itertools.product(*LETTERS)]
held = [c for c in codes if held_out(c)]
assert len(held) == HELD and not names & set(held), "a held-out code is in the data"
assert names <= set(codes), f"codes outside the letter sets: {sorted(names - set(codes))[:5]}"
print(f"data: {len(names)} city codes, none held out; {HELD} held-out codes")

tmpl = hf_chat.hf_env().from_string(open(template).read())
cases = []
for k, name in enumerate(held):
    tool = "get_weather" if k % 2 == 0 else "get_traffic"
    question = (WEATHER if tool == "get_weather" else TRAFFIC)[(k // 2) % 3] % name
    msgs = [{"role": "user", "content": question},
            {"role": "assistant", "tool_calls": [
                {"type": "function", "function": {"name": tool, "arguments": {"city": name}}}]}]
    prompt = hf_chat.render(tmpl, {}, msgs[:1], add_generation_prompt=True, tools=tools)
    system = prompt.split("\n", 1)[1].split("<|im_end|>", 1)[0]
    as_chat = hf_chat.render(tmpl, {}, [{"role": "system", "content": system}] + msgs[:1],
                             add_generation_prompt=True)
    assert as_chat == prompt, "--system does not render the prompt the tools column does"
    full = hf_chat.render(tmpl, {}, msgs, tools=tools)
    assert full.startswith(prompt), "the template's generation prompt is not a prefix of the turn"
    call = full[len(prompt):]
    call = call[:call.index("<|im_end|>") + len("<|im_end|>")]
    assert re.fullmatch(r'<tool_call>\{"name": "get_\w+", "arguments": \{"city": "[A-Z]{3}"\}\}'
                        r'</tool_call><\|im_end\|>', call), call
    cases.append((question, call, tool))

prompts = os.path.join(out, "held_prompts.jsonl")
with open(prompts, "w") as f:
    for question, _, _ in cases:
        f.write(json.dumps({"prompt": question}) + "\n")
longest = max(len(c[1].encode()) for c in cases)
gen = subprocess.run([fsdpc, "generate", ckpt, "--chat", "--system", system, "--file", prompts,
                      "--json", "--device", "cpu", "--batch-size", str(HELD),
                      "--max-new-tokens", str(longest)], capture_output=True, text=True)
assert gen.returncode == 0, f"fsdpc generate failed: {gen.stderr[-2000:]}"
texts = {r["index"]: r["text"] for r in map(json.loads, gen.stdout.splitlines())}
right = tool_right = 0
for i, (question, call, tool) in enumerate(cases):
    text = texts.get(i, "")
    ok = text.startswith(call)
    right += ok
    tool_right += text.startswith(call[:call.index('"arguments"')])
    print(f"{'ok ' if ok else 'BAD'} {question!r} -> {text[:len(call)]!r}")
print(f"held-out: right tool {tool_right}/{len(cases)}; right tool and argument {right}/{len(cases)} "
      f"(bar {min_right})")
assert right >= min_right, f"only {right} of {len(cases)} held-out prompts answered with the right call"
