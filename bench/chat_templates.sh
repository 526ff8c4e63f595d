#!/usr/bin/env bash
# Chat template rendering + assistant mask throughput (one thread), per
# fixture template, over 200 generated conversations (a system prompt, 1-4
# user/assistant exchanges, ~2.2 kB of message content each).
# usage: bench/chat_templates.sh [BUILD_DIR] [REPEAT]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
repeat=${2:-20}
convs=$(mktemp --suffix=.json)
trap 'rm -f "$convs"' EXIT
python3 - "$convs" <<'PY'
import json, random, sys
random.seed(1)
words = ("the of and to in is was for on that with as by at from his her they be this have an "
         "which one had were but not you all she can there their").split()
txt = lambda n: " ".join(random.choice(words) for _ in range(n))
convs = []
for i in range(200):
    msgs = [{"role": "system", "content": txt(30)}]
    for t in range(random.randint(1, 4)):
        msgs.append({"role": "user", "content": txt(random.randint(20, 120))})
        msgs.append({"role": "assistant", "content": txt(random.randint(40, 250))})
    convs.append({"messages": msgs})
json.dump(convs, open(sys.argv[1], "w"))
PY
for m in llama2-chat llama3-instruct llama3.1-instruct llama3.2-instruct mistral-instruct-v0.3 \
         qwen2.5-instruct zephyr-7b-beta; do
  "$build/bin/fsdpc_chat_render" bench "tests/fixtures/chat_templates/$m" "$convs" "$repeat"
done
