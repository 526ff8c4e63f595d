#!/usr/bin/env bash
# `fsdpc data prepare` with real chat templates (tests/fixtures/chat_templates)
# over real tokenizers (make_hub.py folders): the trained tokens of each
# conversation are exactly the assistant turns after their generation
# prompt (the contents) and their end-of-turn token, per template; train_on last_assistant; the template's own
# raise_exception text, an unsupported construct and an unsupported
# tokenizer file as one-line errors with nothing written.
set -u
: "${FSDPC:?FSDPC must point at the fsdpc executable}" "${FSDPC_SOURCE_DIR:?}"
fix="$FSDPC_SOURCE_DIR/tests/fixtures"
dir=$(mktemp -d "${FSDPC_BINARY_DIR:-/tmp}/prep-hub-XXXXXX")
trap 'rm -rf "$dir"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
models="llama3.1-instruct qwen2.5-instruct llama2-chat zephyr-7b-beta"
# shellcheck disable=SC2086
python3 "$fix/tokenizers/make_hub.py" "$dir/hub" $models >/dev/null || { echo "FAIL: make_hub.py"; exit 1; }
for m in $models; do # the model folder = its tokenizer + its chat template
  python3 - "$dir/hub/$m/tokenizer_config.json" "$fix/chat_templates/$m/tokenizer_config.json" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1]))
cfg["chat_template"] = json.load(open(sys.argv[2]))["chat_template"]
json.dump(cfg, open(sys.argv[1], "w"))
PY
done
cat >"$dir/c.jsonl" <<'EOF'
{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Capital of France?"},{"role":"assistant","content":"Paris"},{"role":"user","content":"Und Deutschland? ünï"},{"role":"assistant","content":"Berlin, natürlich."}]}
{"conversations":[{"from":"human","value":"2+2?"},{"from":"gpt","value":"4 😀"}]}
EOF
# targets MODEL TRAIN_ON EXPECTED...: the dry-run's trained runs (outside {{ }}) in order
targets() {
  local m=$1 on=$2; shift 2
  "$FSDPC" data prepare --in "$dir/c.jsonl" --tokenizer "$dir/hub/$m" --train-on "$on" \
    --dry-run --show 2 >"$dir/out" 2>&1 || { fail "$m: prepare failed: $(cat "$dir/out")"; return; }
  python3 - "$dir/out" "$@" <<'PY' || fail "$m ($on): trained text differs"
import re, sys
out = open(sys.argv[1], encoding="utf-8").read()
runs = []
for block in re.split(r"^--- .*\n", out, flags=re.M)[1:]:  # one example each
    body = block.split("\nchecked ")[0].rstrip("\n")
    runs += [r for r in re.split(r"\{\{.*?\}\}", body, flags=re.S) if r]
want = sys.argv[2:]
if runs != want:
    print(f"trained runs {runs!r}\n      wanted {want!r}")
    sys.exit(1)
PY
}
targets llama3.1-instruct assistant "Paris<|eot_id|>" "Berlin, natürlich.<|eot_id|>" "4 😀<|eot_id|>"
targets qwen2.5-instruct assistant "Paris<|im_end|>" "Berlin, natürlich.<|im_end|>" "4 😀<|im_end|>"
# Llama 2: the turn starts where the prompt "[/INST]" ends, so the space the
# template writes before the content is trained (the model writes it).
targets llama2-chat assistant " Paris </s>" " Berlin, natürlich. </s>" " 4 😀 </s>"
targets zephyr-7b-beta assistant "Paris</s>" "Berlin, natürlich.</s>" "4 😀</s>"
targets qwen2.5-instruct last_assistant "Berlin, natürlich.<|im_end|>" "4 😀<|im_end|>"
# Gemma 3 (issue 36), its template over the byte tokenizer (no Gemma
# tokenizer here): the system turn folded into the first user turn, each
# assistant turn the "model" one, trimmed, ending at <end_of_turn>
python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["chat_template"], end="")' \
  "$fix/chat_templates/gemma3-it/tokenizer_config.json" >"$dir/gemma3.jinja"
"$FSDPC" data prepare --in "$dir/c.jsonl" --tokenizer byte --chat-template "$dir/gemma3.jinja" \
  --dry-run --show 2 >"$dir/out" 2>&1 || fail "gemma3-it: prepare failed: $(cat "$dir/out")"
grep -qF "Be brief.

Capital of France?<end_of_turn>" "$dir/out" || fail "gemma3-it: system turn not folded: $(cat "$dir/out")"
python3 - "$dir/out" "Paris<end_of_turn>" "Berlin, natürlich.<end_of_turn>" "4 😀<end_of_turn>" <<'PY' ||
import re, sys
out = open(sys.argv[1], encoding="utf-8").read()
runs = []
for block in re.split(r"^--- .*\n", out, flags=re.M)[1:]:
    body = block.split("\nchecked ")[0].rstrip("\n")
    runs += [r for r in re.split(r"\{\{.*?\}\}", body, flags=re.S) if r]
if runs != sys.argv[2:]:
    print(f"trained runs {runs!r}\n      wanted {sys.argv[2:]!r}")
    sys.exit(1)
PY
  fail "gemma3-it: trained text differs"

expect1() { # expect1 PATTERN CMD...: exit 1, one line with PATTERN, no x.tok
  local pat=$1; shift
  rm -f "$dir/x.tok"
  "$@" >"$dir/o" 2>"$dir/e"; rc=$?
  [ "$rc" -eq 1 ] || fail "'$*' exited $rc: $(cat "$dir/e")"
  grep -qF -- "$pat" "$dir/e" || fail "'$*' error lacks '$pat': $(cat "$dir/e")"
  [ "$(wc -l <"$dir/e")" -eq 1 ] || fail "'$*' error is not one line: $(cat "$dir/e")"
  [ ! -e "$dir/x.tok" ] && [ ! -e "$dir/x.tok.tmp" ] || fail "'$*' left output behind"
}
printf '%s\n' '{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}' \
  '{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}' >"$dir/nonalt.jsonl"
expect1 "nonalt.jsonl:2: chat template: " \
  "$FSDPC" data prepare --in "$dir/nonalt.jsonl" --tokenizer "$dir/hub/llama2-chat" --out "$dir/x.tok"
expect1 "raise_exception: Conversation roles must alternate user/assistant/user/assistant/..." \
  "$FSDPC" data prepare --in "$dir/nonalt.jsonl" --tokenizer "$dir/hub/llama2-chat" --out "$dir/x.tok"
"$FSDPC" data prepare --in "$dir/nonalt.jsonl" --tokenizer "$dir/hub/llama2-chat" --skip-bad \
  --out "$dir/x.tok" | grep -q "skipped 1 bad example" || fail "skip-bad did not skip the template's refusal"
printf "{%% for m in messages %%}{%% include 'x' %%}{%% endfor %%}" >"$dir/inc.jinja"
expect1 "inc.jinja:1:27: unsupported construct 'include'" \
  "$FSDPC" data prepare --in "$dir/c.jsonl" --tokenizer byte --chat-template "$dir/inc.jinja" --out "$dir/x.tok"
mkdir -p "$dir/wp"
printf '{"model":{"type":"WordPiece","vocab":{"a":0}}}' >"$dir/wp/tokenizer.json"
expect1 "wp/tokenizer.json" \
  "$FSDPC" data prepare --in "$dir/c.jsonl" --tokenizer "$dir/wp" --out "$dir/x.tok"
expect1 "no chat template" \
  "$FSDPC" data prepare --in "$dir/c.jsonl" --tokenizer byte --out "$dir/x.tok"

[ "$fails" -eq 0 ] && echo "PASS" || exit 1
