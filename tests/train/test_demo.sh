#!/usr/bin/env bash
# The README's first run, end to end: make the QA data, train
# configs/tiny-cpu.yaml from scratch, and check that the loss falls from about
# ln(259) to well below it and that the model answers what it was taught.
set -u
: "${FSDPC:?}" "${FSDPC_SOURCE_DIR:?}"
TMP=$(mktemp -d /tmp/fsdpc-demo-test.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; tail -30 "$TMP/train.log"; exit 1; }
"$FSDPC" data synth --task qa --out "$TMP/qa.tok" >/dev/null || fail "data synth"
"$FSDPC" train "$FSDPC_SOURCE_DIR/configs/tiny-cpu.yaml" data.train="$TMP/qa.tok" \
  log.dir="$TMP/out" >"$TMP/train.log" 2>&1 || fail "training failed"
python3 - "$TMP/out/metrics.jsonl" "$TMP/train.log" <<'PY' || fail "the demo did not learn"
import json, math, re, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if "step" in r]
first, last = rows[0], rows[-1]
print(f"loss at step {first['step']}: {first['loss']:.3f}; final loss {last['loss']:.3f}, "
      f"eval loss {last.get('eval_loss')}")
assert first["loss"] > 2.0, "first logged loss should be high"
assert last["eval_loss"] < 0.5 * math.log(259) / 4, "eval loss did not fall well below ln(vocab)"
want = {"capital of France": "Paris", "capital of Kenya": "Nairobi",
        "color of the sky": "blue", "opposite of light": "dark"}
got = dict(re.findall(r'generate: "Q: (.*?)\?\\nA: " -> "(.*)"', open(sys.argv[2]).read()))
print("answers:", got)
right = sum(got.get(q) == a for q, a in want.items())
assert right >= 3, f"only {right} of 4 answers right"
PY
echo "PASS: the demo learns"
