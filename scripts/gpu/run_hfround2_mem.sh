#!/bin/bash
# Issue 13, second round, call 2: peak memory of fsdpc eval (weights only:
# no grads or optimizer state) and generate on the 1B shape, before (base
# build) and after; fsdpc eval vs transformers on a chat JSONL again.
#   bash .carry/hfround2/run_hfround2_mem.sh
set -u
C=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
W=/tmp/hfround2m
mkdir -p /tmp/rt "$OUT" "$W"
tar xf "$C/runtime.tar.xz" -C /tmp/rt
tar xf "$C/build.tar.xz" -C /
tar xf "$C/base.tar.xz" -C /
B=$(cat "$C/build_dir")
SRC=$(dirname "$B")
mkdir -p "$SRC/tests/fixtures" && cp -r "$C"/src/tests/fixtures/* "$SRC/tests/fixtures/"
export PYTHONUNBUFFERED=1
FS=$B/bin/fsdpc
BASE=$(cat "$C/base_bin")
new() { LD_LIBRARY_PATH=/tmp/rt:$B/lib "$FS" "$@"; }
old() { LD_LIBRARY_PATH=/tmp/rt:$(dirname "$(dirname "$BASE")")/lib "$BASE" "$@"; }
export -f new old
export FS BASE B
M=$W/llama1b-shape
python3 - "$M" <<'PY'
import sys, torch
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM
cfg = LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192,
                  num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                  head_dim=64, max_position_embeddings=131072, rms_norm_eps=1e-5,
                  rope_theta=500000.0, tie_word_embeddings=True, bos_token_id=128000,
                  eos_token_id=[128001, 128008, 128009],
                  rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})
torch.manual_seed(0)
with torch.device("cuda"):
    m = LlamaForCausalLM(cfg).to(torch.bfloat16)
m.save_pretrained(sys.argv[1])
GenerationConfig(bos_token_id=128000, eos_token_id=[128001, 128008, 128009]).save_pretrained(sys.argv[1])
PY
cp "$SRC"/tests/fixtures/tokenizers/llama3-tiny/tokenizer.json "$M/"
cp "$C/llama3.2-tokenizer_config.json" "$M/tokenizer_config.json"
python3 - "$W/chat.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(24):
        f.write(json.dumps({"messages": [
            {"role": "user", "content": f"what is {i} plus {i}? answer in words"},
            {"role": "assistant", "content": f"The sum of {i} and {i} is {2 * i}."}]}) + "\n")
PY
P="python3 $C/peak_run.py"
EV=(--batches 100000 train.micro_batch_size=1 train.global_batch_size=1 data.seq_len=256 --device cuda)
new data prepare --in "$W/chat.jsonl" --tokenizer "$M" --out "$W/chat.tok" || exit 1
echo "== eval, after (chat.jsonl)"
$P "$W/eval_new.json" bash -c "new eval $M --data $W/chat.jsonl ${EV[*]}"
cat "$W/eval_new.json"
echo "== eval, after (chat.tok)"
$P "$W/eval_new_tok.json" bash -c "new eval $M --data $W/chat.tok ${EV[*]}"
cat "$W/eval_new_tok.json"
echo "== eval, before (base build; chat.tok)"
$P "$W/eval_old_tok.json" bash -c "old eval $M --data $W/chat.tok ${EV[*]}"
cat "$W/eval_old_tok.json"
python3 - "$W" <<'PY'
import json, sys
a, b = (json.load(open(f"{sys.argv[1]}/{n}.json")) for n in ("eval_new_tok", "eval_old_tok"))
print(f"chat.tok: after loss {a['loss']!r} targets {a['tokens']}; before loss {b['loss']!r} "
      f"targets {b['tokens']}; equal: {a['loss'] == b['loss'] and a['tokens'] == b['tokens']}")
PY
python3 "$C/check_eval.py" --model "$M" --tok "$W/chat.tok" --fsdpc-json "$W/eval_new.json"
echo "== generate, 16 prompts x 256 new tokens, batch 16: host RSS and device peaks"
python3 - "$W/prompts.jsonl" <<'PY'
import json, sys, torch
g = torch.Generator().manual_seed(2)
with open(sys.argv[1], "w") as f:
    for n in torch.randint(16, 65, (16,), generator=g):
        f.write(json.dumps({"ids": torch.randint(1000, 120000, (int(n),), generator=g).tolist()}) + "\n")
PY
GA=(--file "$W/prompts.jsonl" --json --no-bos --device cuda --max-new-tokens 256 --batch-size 16 --ignore-eos)
$P "$W/gen_new.json" bash -c "new generate $M ${GA[*]}"
python3 -c "import json,sys; r=json.loads(open(sys.argv[1]).readline()); print({k: r[k] for k in ('batch_seconds','peak_device_bytes','peak_host_rss_bytes')})" "$W/gen_new.json"
$P "$W/gen_old.json" bash -c "old generate $M ${GA[*]}"
python3 -c "import json,sys; r=json.loads(open(sys.argv[1]).readline()); print({k: r[k] for k in ('batch_seconds',)})" "$W/gen_old.json"
python3 - "$W" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(f"{sys.argv[1]}/{n}.json")] for n in ("gen_new", "gen_old"))
same = sum(x["ids"] == y["ids"] for x, y in zip(a, b))
print(f"generate batch 16: {same} of {len(a)} rows give the same 256 greedy tokens, before and after")
PY
/usr/bin/time -v bash -c "old generate $M ${GA[*]} >/dev/null" 2>&1 | grep -E "Maximum resident"
/usr/bin/time -v bash -c "new generate $M ${GA[*]} >/dev/null" 2>&1 | grep -E "Maximum resident"
cp "$W"/*.json "$OUT/" 2>/dev/null
echo done
