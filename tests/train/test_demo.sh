#!/usr/bin/env bash
# The README's commands, verbatim, in a fresh checkout (a copy of the
# repository's tracked files, no data/, no out/, whose build/ is this
# build), as the README's reader runs them: every ```sh block that follows a
# `<!-- readme-test: NAME -->` marker, in order, with bash -e. The one line
# not run is `bash scripts/test.sh` (the test suite, which runs this test).
#   test_demo.sh learn: blocks setup, quickstart, shard -- the demo learns
#     (the loss falls from about ln(259) = 5.5, the model answers the facts it
#     was trained on) and leaves its metrics, TensorBoard events, final model
#     and plot; the sharded runs and the config check succeed.
#   test_demo.sh chat: block chat -- the chat demo learns (eval loss on the
#     assistant turns below 0.3, held-out phrasings answered as
#     "<answer><|im_end|>") and `generate --chat` on its final/ answers.
set -u
: "${FSDPC:?FSDPC must point at the fsdpc executable}"
: "${FSDPC_SOURCE_DIR:?}"
what=${1:-learn}
TMP=$(mktemp -d /tmp/fsdpc-readme-test.XXXXXX)
trap 'pkill -KILL -f "$TMP" 2>/dev/null; rm -rf "$TMP"' EXIT
fail() {
  echo "FAIL: $*"
  tail -20 "$TMP/readme.log" 2>/dev/null
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
  cp -r "$src/README.md" "$src/configs" "$src/scripts" "$tree/" || fail "copying README and configs"
fi
[ ! -e "$tree/data" ] && [ ! -e "$tree/out" ] || fail "the checkout is not fresh"
ln -s "$(dirname "$(dirname "$FSDPC")")" "$tree/build"

# block NAME: the lines of the ```sh block after <!-- readme-test: NAME.
block() {
  awk -v name="$1" '$0 ~ "<!-- readme-test: " name "[ -]" {m = 1; next}
    m && /^```/ {if (inb) exit; inb = 1; next} m && inb' "$tree/README.md"
}
case $what in
learn) names="setup quickstart shard" ;;
chat) names="chat" ;;
*) fail "usage: test_demo.sh learn|chat" ;;
esac
for n in $names; do
  block "$n" | grep -v '^bash scripts/test.sh\b' >"$TMP/$n.sh"
  [ "$(wc -l <"$TMP/$n.sh")" -ge 1 ] || fail "no '$n' command block in README.md"
  echo "--- the README's '$n' commands:"
  cat "$TMP/$n.sh"
  (cd "$tree" && bash -e "$TMP/$n.sh") >"$TMP/$n.log" 2>&1 || {
    cp "$TMP/$n.log" "$TMP/readme.log"
    fail "a README '$n' command failed"
  }
done

if [ "$what" = chat ]; then
  python3 - "$tree/out/tiny-chat-cpu/metrics.jsonl" "$TMP/chat.log" <<'PY' || fail "the chat demo did not learn"
import json, re, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if "step" in r]
first, last = rows[0], rows[-1]
print(f"loss at step {first['step']}: {first['loss']:.3f}; final {last['loss']:.3f}, "
      f"eval {last.get('eval_loss')}")
assert last["eval_loss"] < 0.3, "eval loss on the assistant turns did not fall below 0.3"
log = open(sys.argv[2]).read()
want = {"Quick question: capital of Kenya?": "Nairobi", "capital of France?": "Paris",
        "color of the sky?": "blue", "Quick question: opposite of light?": "dark"}
got = dict(re.findall(r'generate: "<\|im_start\|>user\\n(.*?)<\|im_end\|>\\n<\|im_start\|>'
                      r'assistant\\n" -> "(.*)"', log))
print("answers:", got)
right = sum(got.get(q, "").startswith(a + "<|im_end|>") for q, a in want.items())
assert right >= 3, f"only {right} of 4 held-out prompts answered as '<answer><|im_end|>'"
# the last command, generate --chat on final/, streams its answer last
assert log.rstrip().splitlines()[-1].startswith("Nairobi<|im_end|>"), log[-300:]
PY
  echo "PASS: the README's chat commands run verbatim; the chat model learns and can be chatted with"
  exit 0
fi

out=$tree/out/tiny-cpu
python3 - "$out/metrics.jsonl" "$TMP/quickstart.log" <<'PY' || fail "the demo did not learn"
import json, math, re, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if "step" in r]
first, last = rows[0], rows[-1]
print(f"loss at step {first['step']}: {first['loss']:.3f}; final loss {last['loss']:.3f}, "
      f"eval loss {last.get('eval_loss')}")
assert first["loss"] > 2.0, "first logged loss should be high"
assert last["eval_loss"] < 0.5 * math.log(259) / 4, "eval loss did not fall below ln(vocab)"
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
for d in w4 hybrid; do
  grep -q '"step":60' "$tree/out/$d/metrics.jsonl" || fail "the README's $d run did not reach step 60"
done
[ -s "$tree/out/w4/ckpt/final/model.safetensors" ] && [ ! -e "$tree/out/hybrid/ckpt" ] ||
  fail "the sharded runs' checkpoints are not where the README says"
grep -q "^setup: all packages present" "$TMP/setup.log" || fail "the set-up line did not run"
echo "PASS: the README's commands run verbatim and the demo learns"
