#!/usr/bin/env bash
# The tool-calling demo, end to end, in two stages as real tool-calling SFT
# is done: pre-train configs/tiny-codes-cpu.yaml from scratch on a text that
# repeats city codes (`fsdpc data synth --task codes`; the held-out codes
# never occur in it), make the tools JSONL, check what is trained (calls
# and answers with their <|im_end|>; never the tool declarations or the
# tool results), check that the held-out bar fails after one SFT step from
# the pretrained model, fine-tune configs/tiny-tools-cpu.yaml from it, and
# check that `fsdpc generate --chat` calls the right tool with the right
# argument on held-out prompts (check_demo_tools.py says how).
# Not in ctest yet: whether pre-training forms a copying head for each of
# the three letters depends on the draw of its text (36/36 on one draw,
# 1/36 and 5/36 on the synth's; docs/data.md, "Fine-tune on tool-calling
# and reasoning data").
set -u
: "${FSDPC:?}" "${FSDPC_SOURCE_DIR:?}"
TMP=$(mktemp -d /tmp/fsdpc-demo-tools.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; tail -30 "$TMP/train.log" 2>/dev/null; exit 1; }
cfg=$FSDPC_SOURCE_DIR/configs/tiny-tools-cpu.yaml
tmpl=$FSDPC_SOURCE_DIR/configs/templates/chatml-tools.jinja
# Stage 1: pre-training from scratch, every step logged (the first loss is
# that of a uniform guess over the 259 byte ids).
"$FSDPC" data synth --task codes --n 30000 --out "$TMP/codes.tok" >/dev/null || fail "synth codes"
"$FSDPC" train "$FSDPC_SOURCE_DIR/configs/tiny-codes-cpu.yaml" data.train="$TMP/codes.tok" \
  log.dir="$TMP/pre" train.log_every=1 train.eval_every=0 checkpoint.dir="$TMP/preck" \
  >"$TMP/train.log" 2>&1 || fail "pre-training failed"
python3 - "$TMP/pre/metrics.jsonl" <<'PY' || fail "pre-training did not start from scratch"
import json, math, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if "step" in r]
print(f"pre-training: loss at step 1 {rows[0]['loss']:.3f} (uniform: {math.log(259):.3f}), "
      f"at step {rows[-1]['step']} {rows[-1]['loss']:.3f}")
assert rows[0]["step"] == 1 and abs(rows[0]["loss"] - math.log(259)) < 0.3
PY
pre=$TMP/preck/final
# Stage 2 data: the tools conversations and their masks.
"$FSDPC" data synth --task tools --n 4000 --out "$TMP/tools.jsonl" >/dev/null || fail "data synth"
"$FSDPC" data prepare --config "$cfg" --chat-template "$tmpl" --in "$TMP/tools.jsonl" --dry-run \
  --show 1 >"$TMP/show.txt" 2>&1 || fail "prepare --dry-run: $(tail -1 "$TMP/show.txt")"
python3 - "$TMP/show.txt" <<'PY' || fail "the masks of the tool conversations"
import re, sys
text = open(sys.argv[1]).read()
body = text.split("\n", 1)[1].rsplit("\nchecked", 1)[0]
trained = re.sub(r"\{\{.*?\}\}", "|", body, flags=re.S)
print("targets:", [t for t in trained.split("|") if t.strip()])
assert re.search(r'<tool_call>\{"name": "get_(weather|traffic)", "arguments": \{"city": "[A-Z]{3}"\}\}</tool_call><\|im_end\|>', trained), "the call is not a target"
assert "Tools:" not in trained and "<|im_start|>tool" not in trained, "declarations or results trained"
PY
# The bar fails without the SFT: one step from the pretrained model answers
# no held-out prompt with the right call.
"$FSDPC" train "$cfg" data.train="$TMP/tools.jsonl" data.chat_template="$tmpl" model.init.from="$pre" \
  log.dir="$TMP/out0" train.max_steps=1 schedule.warmup_steps=0 train.eval_every=0 \
  train.generate_tokens=0 checkpoint.dir="$TMP/ck0" checkpoint.final_dtype=fp32 \
  >"$TMP/train0.log" 2>&1 || fail "1 step: $(tail -1 "$TMP/train0.log")"
if python3 "$FSDPC_SOURCE_DIR/tests/train/check_demo_tools.py" "$FSDPC" "$tmpl" "$TMP/tools.jsonl" \
  - "$TMP/ck0/final" "$TMP" >"$TMP/check0.log" 2>&1; then
  cat "$TMP/check0.log"
  fail "the held-out bar passes after one SFT step"
fi
grep '^held-out' "$TMP/check0.log" || fail "the one-step check did not run: $(tail -3 "$TMP/check0.log")"
# Stage 2: SFT from the pretrained model, every step logged (the first loss
# is checked); the held-out prompts are answered by `fsdpc generate --chat`
# from the final checkpoint, in fp32 as trained.
"$FSDPC" train "$cfg" data.train="$TMP/tools.jsonl" data.chat_template="$tmpl" model.init.from="$pre" \
  log.dir="$TMP/out" train.log_every=1 train.generate_tokens=0 checkpoint.dir="$TMP/ck" \
  checkpoint.final_dtype=fp32 >"$TMP/train.log" 2>&1 || fail "training failed"
python3 "$FSDPC_SOURCE_DIR/tests/train/check_demo_tools.py" "$FSDPC" "$tmpl" "$TMP/tools.jsonl" \
  "$TMP/out/metrics.jsonl" "$TMP/ck/final" "$TMP" || fail "the tools demo did not learn"
echo "PASS: the tools demo calls the right tool with the right argument on held-out prompts"
