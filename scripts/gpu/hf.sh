#!/bin/bash
# The Hugging Face round trip on the GPU host, from a carry made by carry.sh
# (builds nothing there); "base" = an older build carried as base.tar.xz
# (carry.sh with BASE=DIR). Logs and results go to $OUT; PASS / FAIL per part.
#   bash .carry/X/hf.sh export     (issue 13, first round)
#     1. test_cuda_infer_decode: the bf16 KV-cache decoder vs transformers'
#        logits on the HF fixtures (teacher forced), cache vs recompute;
#     2. check_generate.py: greedy tokens vs transformers' generate (fixtures
#        on CPU and CUDA, a 1B-shape bf16 model) and tokens/s side by side,
#        batch 1 and 16, 256 new tokens;
#     3. a GPU fine-tune of that 1B-shape folder (3 steps) whose final/ is
#        loaded by transformers (check_export.py: no missing-file warnings,
#        config.json equal to the source's, eos list, greedy tokens equal);
#     4. fsdpc eval on final/ equals train's eval_loss at the same step.
#   bash .carry/X/hf.sh chateval   (issue 13, second round; with a base build)
#     1. test_cuda_infer_decode (bf16 decoder vs transformers' logits, cache
#        vs recompute through the CUDA-graph step, device argmax ties);
#     2. check_generate.py: greedy vs transformers (fixtures; 1B shape with the
#        fp32 reference and fsdpc's own logits at a divergence), tokens/s and
#        peak device memory: fsdpc (graph / no graph / base) vs transformers
#        eager, batch 1 and 16, 256 new tokens;
#     3. a 3-step GPU fine-tune of the 1B shape whose eval set is a chat JSONL;
#        fsdpc eval on final/ with that JSONL equals train's eval_loss at step 3;
#     4. fsdpc eval of every target token of the JSONL vs transformers (bf16 and
#        fp32) on the same tokens (check_eval.py).
#   bash .carry/X/hf.sh memory     (with a base build) peak memory of fsdpc eval
#     (weights only: no grads or optimizer state) and generate on the 1B shape,
#     base and this build (lib/peak_run.py polls the device); fsdpc eval vs
#     transformers on a chat JSONL again.
#   bash .carry/X/hf.sh adapter    (issues 42.4 and 43.6 on CUDA; about 2
#     minutes) on a random bf16 folder of the 8B width (lib/make_hf_random.py;
#     LAYERS=8 of its 32 layers by default, about 5.6 GB; LAYERS=32 for 8B):
#     1. a 2-step LoRA run with model.from on it: the time rank 0 spends on
#        the base's identity (a CRC-32 of its tensors), the "LoRA base" line;
#     2. its step-1 checkpoint resumes with the same base under another
#        spelling of its path (a link, a trailing slash);
#     3. fsdpc generate (greedy) on final/ (the PEFT adapter folder over its
#        base) and on final-merged/ give the same tokens, and fsdpc eval of
#        both agree within 1e-3 (bf16).
#     DEVICE=cpu SHAPE=tiny LAYERS=2 SEQ=128: the same steps on the CPU (a dry run).
# shellcheck disable=SC2317 # the mode functions run through "$MODE"
MODE=${1:-}
case $MODE in export | chateval | adapter) ;; memory) CARRY_LIBS=0 ;; *)
  echo "usage: hf.sh export | chateval | memory | adapter" >&2
  exit 2
  ;;
esac
. "$(dirname "$0")/carry_env.sh" # C, OUT, B, F, carry_fixtures, part

# chat_jsonl FILE: 24 short two-turn conversations (OpenAI messages)
chat_jsonl() {
  python3 - "$1" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(24):
        f.write(json.dumps({"messages": [
            {"role": "user", "content": f"what is {i} plus {i}? answer in words"},
            {"role": "assistant", "content": f"The sum of {i} and {i} is {2 * i}."}]}) + "\n")
PY
}
export -f chat_jsonl

# hf_work DIR: the fixtures where the build looks for them (SRC), W=DIR, FS=F
hf_work() {
  carry_fixtures # SRC
  export PYTHONUNBUFFERED=1
  W=$1
  mkdir -p "$W"
  FS=$F
}

export_check() {
  hf_work /tmp/hfround
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
  part decode timeout 300 "$B/bin/test_cuda_infer_decode"
  part generate timeout 420 python3 "$C/check_generate.py" --fsdpc "$FS" \
    --fixtures "$SRC/tests/fixtures" --work "$W"
  cp "$W/results.json" "$OUT/generate_results.json" 2>/dev/null
  M=$W/llama1b-shape
  finetune() {
    [ -f "$M/config.json" ] || { echo "no $M (check_generate.py makes it)"; return 1; }
    cp "$SRC"/tests/fixtures/tokenizers/llama3-tiny/* "$M/"
    "$FS" data synth --task copy --out "$W/d.tok" >/dev/null &&
      "$FS" data synth --task copy --seed 9 --n 3000 --out "$W/e.tok" >/dev/null || return 1
    printf 'train: {}\n' >"$W/ft.yaml"
    rm -rf "$W/ck" "$W/lg"
    "$FS" train "$W/ft.yaml" model.config="$M" model.init.from="$M" data.train="$W/d.tok" \
      data.eval="$W/e.tok" data.seq_len=128 train.device=cuda train.max_steps=3 \
      train.micro_batch_size=4 train.global_batch_size=4 train.eval_every=3 train.eval_batches=4 \
      checkpoint.dir="$W/ck" checkpoint.final_dtype=bf16 log.dir="$W/lg" log.progress=off || return 1
    ls -la "$W/ck/final"
    python3 "$C/check_export.py" "$W/ck/final" "$M" --fsdpc "$FS" --work "$W"
  }
  export -f finetune
  export W M SRC FS C B
  part export timeout 400 bash -c finetune
  evalcheck() {
    "$FS" eval "$W/ck/final" --data "$W/e.tok" >"$W/eval.json" || return 1
    python3 - "$W/eval.json" "$W/lg/metrics.jsonl" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
m = [json.loads(l) for l in open(sys.argv[2])]
want = [x for x in m if x.get("step") == 3 and "eval_loss" in x][0]["eval_loss"]
d = abs(r["loss"] - want) / abs(want)
print(f"fsdpc eval on final/: loss {r['loss']!r} (accuracy {r['token_accuracy']:.4f}); "
      f"train's eval_loss at step 3: {want!r}; relative difference {d:.3e}")
sys.exit(0 if d <= 1e-6 else 1)
PY
  }
  export -f evalcheck
  part eval timeout 200 bash -c evalcheck
  echo "overall: $([ $rc = 0 ] && echo PASS || echo FAIL)"
  exit $rc
}

chateval() {
  hf_work /tmp/hfround2
  [ -f "$C/base.tar.xz" ] && tar xf "$C/base.tar.xz" -C /
  BASE=$(cat "$C/base_bin" 2>/dev/null || echo)
  BASEARG=()
  [ -n "$BASE" ] && [ -x "$BASE" ] && BASEARG=(--base "$C/base_fsdpc.sh")
  # the base binary runs with its own libfsdpc
  printf '#!/bin/bash\nLD_LIBRARY_PATH=/tmp/rt:%s exec %s "$@"\n' "$(dirname "$(dirname "$BASE")")/lib" \
    "$BASE" >"$C/base_fsdpc.sh" 2>/dev/null && chmod +x "$C/base_fsdpc.sh" 2>/dev/null
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
  part decode timeout 120 "$B/bin/test_cuda_infer_decode"
  part generate timeout 300 python3 "$C/check_generate.py" --fsdpc "$FS" "${BASEARG[@]}" \
    --fixtures "$SRC/tests/fixtures" --work "$W" --impls eager
  cp "$W/results.json" "$OUT/generate_results.json" 2>/dev/null
  M=$W/llama1b-shape
  finetune() {
    [ -f "$M/config.json" ] || { echo "no $M (check_generate.py makes it)"; return 1; }
    cp "$SRC"/tests/fixtures/tokenizers/llama3-tiny/tokenizer.json "$M/" &&
      cp "$C/llama3.2-tokenizer_config.json" "$M/tokenizer_config.json" || return 1
    chat_jsonl "$W/chat.jsonl"
    "$FS" data synth --task copy --out "$W/d.tok" >/dev/null || return 1
    printf 'train: {}\n' >"$W/ft.yaml"
    rm -rf "$W/ck" "$W/lg"
    "$FS" train "$W/ft.yaml" model.config="$M" model.init.from="$M" data.train="$W/d.tok" \
      data.eval="$W/chat.jsonl" data.tokenizer="$M" data.seq_len=256 train.device=cuda \
      train.max_steps=3 train.micro_batch_size=4 train.global_batch_size=4 train.eval_every=3 \
      train.eval_batches=4 checkpoint.dir="$W/ck" checkpoint.final_dtype=bf16 log.dir="$W/lg" \
      log.progress=off || return 1
    ls -la "$W/ck/final"
  }
  export -f finetune
  export W M SRC FS C B
  part finetune timeout 200 bash -c finetune
  evalcheck() {
    "$FS" eval "$W/ck/final" --data "$W/chat.jsonl" >"$W/eval.json" || return 1
    cat "$W/eval.json"
    python3 - "$W/eval.json" "$W/lg/metrics.jsonl" <<'PY' || return 1
import json, sys
r = json.load(open(sys.argv[1]))
m = [json.loads(l) for l in open(sys.argv[2])]
want = [x for x in m if x.get("step") == 3 and "eval_loss" in x][0]["eval_loss"]
d = abs(r["loss"] - want) / abs(want)
print(f"fsdpc eval final/ --data chat.jsonl: loss {r['loss']!r} ({int(r['tokens'])} targets); "
      f"train's eval_loss at step 3 on chat.jsonl: {want!r}; relative difference {d:.3e}; "
      f"peak device {r['peak_device_bytes'] / 2**20:.0f} MiB "
      f"{ {k: round(v / 2**20) for k, v in r['peak_device_bytes_by_category'].items()} }")
sys.exit(0 if d <= 1e-6 else 1)
PY
    "$FS" data prepare --in "$W/chat.jsonl" --tokenizer "$W/ck/final" --out "$W/chat.tok" || return 1
    "$FS" eval "$W/ck/final" --data "$W/chat.jsonl" --batches all train.micro_batch_size=1 \
      train.global_batch_size=1 >"$W/eval_all.json" || return 1
    cat "$W/eval_all.json"
    python3 "$C/check_eval.py" --model "$W/ck/final" --tok "$W/chat.tok" \
      --fsdpc-json "$W/eval_all.json"
  }
  export -f evalcheck
  part eval timeout 200 bash -c evalcheck
  cp "$W"/eval*.json "$W/lg/metrics.jsonl" "$OUT/" 2>/dev/null
  echo "overall: $([ $rc = 0 ] && echo PASS || echo FAIL)"
  exit $rc
}

memory() {
  W=/tmp/hfround2m
  mkdir -p "$W"
  tar xf "$C/base.tar.xz" -C /
  carry_fixtures # SRC
  export PYTHONUNBUFFERED=1
  FS=$B/bin/fsdpc
  BASE=$(cat "$C/base_bin")
  new() { LD_LIBRARY_PATH=/tmp/rt:$B/lib "$FS" "$@"; }
  old() { LD_LIBRARY_PATH=/tmp/rt:$(dirname "$(dirname "$BASE")")/lib "$BASE" "$@"; }
  export -f new old
  export FS BASE B
  M=$W/llama1b-shape
  # the random 1B-shape folder of check_generate.py (seed 0, bf16, eos list)
  python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import check_generate; check_generate.make_1b(sys.argv[2])' \
    "$C" "$M"
  cp "$SRC"/tests/fixtures/tokenizers/llama3-tiny/tokenizer.json "$M/"
  cp "$C/llama3.2-tokenizer_config.json" "$M/tokenizer_config.json"
  chat_jsonl "$W/chat.jsonl"
  P="python3 $C/lib/peak_run.py"
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
  echo "done"
}

adapter() {
  export FSDPC_PLUGIN_PATH=$B/plugins
  W=/tmp/hfadapter
  rm -rf "$W" && mkdir -p "$W"
  local dev=${DEVICE:-cuda} seq=${SEQ:-512}
  [ "$dev" = cpu ] || nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
  part make timeout 150 python3 "$C/lib/make_hf_random.py" "$W/base" --shape "${SHAPE:-llama3.1-8b}" \
    --layers "${LAYERS:-8}" --jobs 16
  "$F" data synth --task copy --n 20000 --out "$W/d.tok" >/dev/null || exit 1
  cat >"$W/l.yaml" <<YAML
model: {from: $W/base}
data: {train: $W/d.tok, seq_len: $seq, tokenizer: byte}
train: {device: $dev, max_steps: 2, micro_batch_size: 1, log_every: 1}
peft: {method: lora, r: 16, alpha: 32, target_modules: [all-linear], merge_on_save: true}
fsdp: {activation_checkpointing: true}
checkpoint: {dir: $W/ck, save_steps: 1, final_dtype: bf16}
log: {dir: $W/log, progress: off}
YAML
  part lora timeout 120 "$F" train "$W/l.yaml"
  grep -m1 "LoRA base" "$OUT/lora.log" || { echo "FAIL identity: no 'LoRA base' line"; rc=1; }
  # the same base through a link, with a trailing slash
  ln -s "$W/base" "$W/link"
  part resume timeout 120 "$F" train "$W/l.yaml" "model.from=$W/link/" \
    checkpoint.resume="$W/ck/step-000001" "checkpoint.dir=''" log.dir="$W/log2"
  grep -q "resumed from" "$OUT/resume.log" || { echo "FAIL resume: no 'resumed from' line"; rc=1; }
  # one_model M: generate and eval of one folder, their JSON in $W/M.gen, $W/M.eval
  one_model() {
    "$F" generate "$W/ck/$1" --device "$dev" --prompt-ids 257,99,111,112,121 --max-new-tokens 16 \
      --json >"$W/$1.gen" && "$F" eval "$W/ck/$1" --data "$W/d.tok" --seq-len "$seq" --batches 8 \
      --device "$dev" >"$W/$1.eval" && cat "$W/$1.gen" "$W/$1.eval"
  }
  export -f one_model
  export F W dev seq
  for m in final final-merged; do part "model-$m" timeout 120 bash -c "one_model $m"; done
  part compare python3 - "$W" <<'EOF'
import json, sys
w = sys.argv[1]
g = {n: json.load(open(f"{w}/{n}.gen")) for n in ("final", "final-merged")}
e = {n: json.load(open(f"{w}/{n}.eval")) for n in g}
print("generate ids equal:", g["final"]["ids"] == g["final-merged"]["ids"],
      "; eval loss: adapter folder", e["final"]["loss"], "merged folder", e["final-merged"]["loss"])
assert g["final"]["ids"] == g["final-merged"]["ids"]
assert abs(e["final"]["loss"] - e["final-merged"]["loss"]) <= 1e-3 * e["final-merged"]["loss"]
EOF
  rm -rf "$W"
  echo "overall: $([ $rc = 0 ] && echo PASS || echo FAIL)"
  exit $rc
}

case $MODE in
export) export_check ;;
*) "$MODE" ;;
esac
