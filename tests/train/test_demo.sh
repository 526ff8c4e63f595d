#!/usr/bin/env bash
# The README's quick start, verbatim, in a fresh checkout: the lines of the
# code block after the "<!-- quickstart" marker run exactly as written from
# a copy of the repository's tracked files (no data/, no out/) whose build/
# is this build. Then: the demo learns (the loss falls from about
# ln(259) = 5.5 and the model answers the facts it was trained on), and the
# run left its metrics, TensorBoard events, final model and plot.
set -u
: "${FSDPC:?FSDPC must point at the fsdpc executable}"
: "${FSDPC_SOURCE_DIR:?}"
TMP=$(mktemp -d /tmp/fsdpc-readme-test.XXXXXX)
trap 'pkill -KILL -f "$TMP" 2>/dev/null; rm -rf "$TMP"' EXIT
fail() {
  echo "FAIL: $*"
  tail -20 "$TMP/quickstart.log" 2>/dev/null
  exit 1
}
src=$FSDPC_SOURCE_DIR
tree=$TMP/checkout
mkdir -p "$tree"
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
  # The tracked files as they are now (a clone of HEAD plus local edits).
  (cd "$src" && git ls-files -z | tar --null -T - --ignore-failed-read -cf - 2>/dev/null) |
    tar -C "$tree" -xf - || fail "copying the tracked files"
else
  cp -r "$src/README.md" "$src/configs" "$tree/" || fail "copying README and configs"
fi
[ ! -e "$tree/data" ] && [ ! -e "$tree/out" ] || fail "the checkout is not fresh"
ln -s "$(dirname "$(dirname "$FSDPC")")" "$tree/build"

# The quick-start block, as written.
awk '/<!-- quickstart/ {m = 1; next} m && /^```/ {if (inb) exit; inb = 1; next} m && inb' \
  "$tree/README.md" >"$TMP/quickstart.sh"
[ "$(wc -l <"$TMP/quickstart.sh")" -ge 2 ] || fail "no quick-start block in README.md"
echo "--- README quick start:"
cat "$TMP/quickstart.sh"
(cd "$tree" && bash -e "$TMP/quickstart.sh") >"$TMP/quickstart.log" 2>&1 ||
  fail "a README quick-start command failed"

out=$tree/out/tiny-cpu
python3 - "$out/metrics.jsonl" "$TMP/quickstart.log" <<'PY' || fail "the demo did not learn"
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
[ -s "$out/ckpt/final/model.safetensors" ] && [ -s "$out/ckpt/final/config.json" ] ||
  fail "the demo did not keep its final model in $out/ckpt/final"
ls "$out"/events.out.tfevents.* >/dev/null 2>&1 || fail "no TensorBoard event file"
python3 "$src/tests/obs/read_tfevents.py" "$out" || fail "event files differ from metrics.jsonl"
[ "$(head -c 4 "$out/loss.png" | od -An -c | tr -d ' ')" = "211PNG" ] || fail "no loss.png"
echo "PASS: the README's quick start runs verbatim and the demo learns"
