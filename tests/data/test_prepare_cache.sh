#!/usr/bin/env bash
# Issue 43 item 4 (the prepared-data cache) and issue 42 item 7 (its
# cleanup): JSONL data that `fsdpc train` prepares is keyed by the content
# of everything that shapes it, reused only when it is trusted, never
# written through a planted link, and `fsdpc data cache` lists and cleans
# it. Each check failed before the fix: an edited template in the
# tokenizer_config.json beside a tokenizer.json reused the old rendering, a
# token file planted at the cache's name (or a link there) was trained on,
# a link at the predictable NAME.tmp had its target overwritten, and there
# was no cleanup command.
. "$(dirname "$0")/../common/cli_expect.sh" data-cache # dir, fail, expect
: "${FSDPC_SOURCE_DIR:?}"
cd "$dir" || exit 1
mkdir -p tok data
cp "$FSDPC_SOURCE_DIR/tests/fixtures/tokenizers/llama3-tiny/tokenizer.json" tok/
# tokenizer_config.json with a chat template (Llama 3 style headers)
config() { # TEMPLATE_ROLE_FILTER
  python3 - "$1" <<'PY'
import json, sys
t = ("{% for m in messages %}<|start_header_id|>{{ m.role" + sys.argv[1] + " }}<|end_header_id|>"
     "{{ m.content }}<|eot_id|>{% endfor %}")
json.dump({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "chat_template": t},
          open("tok/tokenizer_config.json", "w"))
PY
}
config ""
"$FSDPC" data synth --task chat --n 40 --out data/chat.jsonl >/dev/null || fail "synth"
cat >cfg.yaml <<'EOF'
model: {vocab_size: 576, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1,
        num_attention_heads: 2, max_position_embeddings: 256}
data: {train: data/chat.jsonl, tokenizer: tok/tokenizer.json, format: chat, seq_len: 256}
attention: {impl: naive}
optim: {name: adamw, lr: 1.0e-3}
train: {max_steps: 1, micro_batch_size: 1, threads: 1}
log: {dir: out, progress: off}
EOF
train() { "$FSDPC" train cfg.yaml "$@" >run.log 2>&1 || fail "train $*: $(tail -3 run.log)"; }
# the cache file, wherever this fsdpc keeps it
cache_file() { find . -name 'chat.jsonl.*.tok' ! -name '.*' | head -1; }
ls -A data >before.txt

# 1. the first run prepares; the data folder gets nothing (a read-only mount works)
train
grep -q "data: prepared data/chat.jsonl (chat): 40 examples" run.log || fail "first run: $(grep data: run.log)"
ls -A data | cmp -s - before.txt || fail "files written next to the data: $(ls -A data)"
c1=$(cache_file)
[ -n "$c1" ] || fail "no cache file"
train
grep -q "prepared before" run.log || fail "second run did not reuse the cache"

# 2. a template edited in the tokenizer_config.json beside a tokenizer.json file
config "|upper"
train
grep -q "data: prepared data/chat.jsonl" run.log || fail "edited template: the old rendering was reused"
c2=$(find . -name 'chat.jsonl.*.tok' ! -name '.*' -newer "$c1" | head -1)
[ -n "$c2" ] && [ "$c2" != "$c1" ] || fail "edited template: no new cache file"
"$FSDPC" data info "$c2" --tokenizer tok/tokenizer.json --docs 1 | grep -q "USER" ||
  fail "edited template: the cache does not hold the new rendering"
config ""

# 3. a token file planted at the cache's name is not trusted
"$FSDPC" data synth --task chat --n 5 --out other.jsonl >/dev/null
c=$(cache_file)
"$FSDPC" data prepare --in other.jsonl --tokenizer tok/tokenizer.json --format chat --out planted.tok >/dev/null
cp planted.tok "$c"
train
grep -q "data: 40 examples" run.log || fail "planted cache file trained on: $(grep 'data:' run.log)"
grep -q "not reusing .*made from other inputs" run.log || fail "no word about the planted file"

# 4. a link planted at the cache's name, and at NAME.tmp: never written through
cp planted.tok victim.tok
cmp -s planted.tok victim.tok || fail "copy"
rm -f "$c"
ln -s "$dir/victim.tok" "$c"
train
grep -q "data: 40 examples" run.log || fail "linked cache file trained on"
[ -L "$c" ] && fail "the link at the cache's name is still there"
rm -f "$c"
ln -s "$dir/victim.tok" "$c.tmp"
train
cmp -s planted.tok victim.tok || fail "the target of a link at the cache's .tmp was overwritten"
rm -f "$c.tmp"
# data prepare --out X: the same
ln -s "$dir/victim.tok" x.tok.tmp
expect 0 "prepared 5 examples" "$FSDPC" data prepare --in other.jsonl --tokenizer byte --format chat \
  --chat-template "$FSDPC_SOURCE_DIR/configs/templates/chatml.jinja" --out x.tok
cmp -s planted.tok victim.tok || fail "data prepare --out wrote through X.tmp"
ln -sf "$dir/victim.tok" x.tok
expect 0 "prepared 5 examples" "$FSDPC" data prepare --in other.jsonl --tokenizer byte --format chat \
  --chat-template "$FSDPC_SOURCE_DIR/configs/templates/chatml.jinja" --out x.tok
cmp -s planted.tok victim.tok || fail "data prepare --out wrote through a link at X"
[ -f x.tok ] && [ ! -L x.tok ] || fail "x.tok is not a file of its own"

# 5. fsdpc data cache: list marks what the config uses; clean keeps it with --keep-current
touch out/data-cache/.chat.jsonl.0123456789abcdef.tok.fedcba9876543210.tmp
expect 0 "(in use by the config)" "$FSDPC" data cache list --config cfg.yaml
printf '%s\n' "$out" | grep -q "temporary" || fail "list: no temporary file: $out"
n=$(find out/data-cache -name '*.tok' ! -name '.*' | wc -l)
[ "$n" -ge 2 ] || fail "expected an old and a current cache file, found $n"
expect 0 "would remove" "$FSDPC" data cache clean --config cfg.yaml --keep-current --dry-run
[ "$(find out/data-cache -name '*.tok' ! -name '.*' | wc -l)" -eq "$n" ] || fail "--dry-run removed files"
expect 0 "removed" "$FSDPC" data cache clean --config cfg.yaml --keep-current
[ "$(find out/data-cache -name '*.tok*' | wc -l)" -eq 1 ] || fail "keep-current: $(ls -A out/data-cache)"
train
grep -q "prepared before" run.log || fail "clean --keep-current removed the current file"
touch out/data-cache/notes.txt
expect 0 "freed" "$FSDPC" data cache clean out/data-cache
[ "$(ls -A out/data-cache)" = notes.txt ] || fail "clean DIR: left $(ls -A out/data-cache)"
expect 2 "give list or clean" "$FSDPC" data cache out/data-cache
expect 2 "--keep-current needs --config" "$FSDPC" data cache clean out/data-cache --keep-current

[ "$fails" -eq 0 ] && echo "PASS" || exit 1
