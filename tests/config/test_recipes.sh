#!/usr/bin/env bash
# Issue 42.9: `cmake --install` installs the ready-made configs and chat
# templates, and `fsdpc recipes list|copy NAME DEST` (torchtune's tune ls /
# tune cp) lists and copies them; a copied chat config runs from any folder.
set -u
: "${FSDPC:?run through ctest}"
: "${FSDPC_BINARY_DIR:?}"
T=$(mktemp -d /tmp/fsdpc-recipes.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
cmake --install "$FSDPC_BINARY_DIR" --prefix "$T/inst" >"$T/install.log" 2>&1 ||
  fail "cmake --install: $(tail -3 "$T/install.log")"
share=$T/inst/share/fsdpc/configs
for f in tiny-cpu.yaml tiny-chat-cpu.yaml tiny-lora-cpu.yaml bench/tiny-cpu-strategies.yaml \
  templates/chatml.jinja; do
  [ -f "$share/$f" ] || fail "cmake --install did not install configs/$f"
done
mkdir "$T/work" && cd "$T/work" || fail "cd"
F=$T/inst/bin/fsdpc
"$F" recipes list >list.txt 2>&1 || fail "recipes list: $(cat list.txt)"
grep -q "^recipes in $share " list.txt || fail "the installed fsdpc lists another folder: $(head -1 list.txt)"
grep -q "^  tiny-cpu  *A small Llama" list.txt || fail "tiny-cpu is not listed: $(cat list.txt)"
grep -q "^  bench/llama3-1b-base " list.txt || fail "bench configs are not listed"
grep -q "^  templates/chatml.jinja " list.txt || fail "templates are not listed"
# copy: into a file, into a folder; a copied chat config validates from here
"$F" recipes copy tiny-chat-cpu my-chat.yaml >c.log 2>&1 || fail "copy: $(cat c.log)"
mkdir mine && "$F" recipes copy templates/chatml.jinja mine >c2.log 2>&1 || fail "copy: $(cat c2.log)"
cmp -s mine/chatml.jinja "$share/templates/chatml.jinja" || fail "the template copy differs"
grep -q "chat_template: $share/templates/chatml.jinja" my-chat.yaml ||
  fail "the copy's template does not point at the installed one: $(grep chat_template my-chat.yaml)"
"$F" data synth --task chat --n 200 --out data/chat.jsonl >/dev/null 2>&1 || fail "data synth"
"$F" config check my-chat.yaml >check.log 2>&1 || fail "config check of the copy: $(tail -1 check.log)"
# never overwrites; an unknown name says how to list
"$F" recipes copy tiny-cpu my-chat.yaml >x.log 2>&1 && fail "copy overwrote a file"
grep -q "my-chat.yaml: File exists; remove it or choose another name" x.log || fail "$(cat x.log)"
"$F" recipes copy tiny-gpu x.yaml >x.log 2>&1 && fail "copied an unknown recipe"
grep -q "no recipe 'tiny-gpu'" x.log || fail "$(cat x.log)"
"$F" recipes >x.log 2>&1
[ $? = 2 ] || fail "recipes without a subcommand is not a usage error"
echo "PASS: cmake --install ships the recipes; fsdpc recipes lists and copies them"
