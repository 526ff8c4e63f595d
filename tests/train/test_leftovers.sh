#!/usr/bin/env bash
# Issue 43.10, the small leftovers: each mistake is refused before step 1
# with one line that names it (exit non-zero), instead of being silent or
# failing later with a message about something else.
set -u
: "${FSDPC:?run through ctest}"
: "${FSDPC_BINARY_DIR:?}"
T=$(mktemp -d /tmp/fsdpc-leftovers.XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T"
fail() {
  echo "FAIL: $*"
  exit 1
}
"$FSDPC" data synth --task qa --n 60 --out qa.tok >/dev/null 2>&1 || fail "data synth"
cat >t.yaml <<'YAML'
model: {vocab_size: 259, hidden_size: 8, intermediate_size: 16, num_hidden_layers: 1,
        num_attention_heads: 2, num_key_value_heads: 1, max_position_embeddings: 16,
        tie_word_embeddings: true}
data: {train: qa.tok, seq_len: 15}
optim: {name: adamw, lr: 1.0e-2}
train: {max_steps: 2, micro_batch_size: 2, threads: 1, log_every: 1}
checkpoint: {final_dtype: fp32}
log: {dir: log, progress: off}
YAML
# refused NAME WANT [args...]: train fails, with WANT in one line, no step run.
refused() {
  local name=$1 want=$2
  shift 2
  "$FSDPC" train t.yaml "$@" >"$name.log" 2>&1 && fail "$name: accepted"
  grep -qF -- "$want" "$name.log" || fail "$name: the error does not say '$want': $(tail -2 "$name.log")"
  grep -q "^step 1/" "$name.log" && fail "$name: refused only after training began"
  echo "ok $name: $(grep -F -- "$want" "$name.log" | head -1)"
}
refused plugins_path "plugins.paths (or --path): '$T/nowhere': no such file or folder" "plugins.paths=[$T/nowhere]"
refused collectives "collectives 'bogus' not found" collectives.impl=bogus
refused eos "model.eos_token_id (259) is not a token of the vocabulary" model.eos_token_id=259
refused bos "model.bos_token_id (300) is not a token of the vocabulary" model.bos_token_id=300
touch afile
refused ckpt_file "checkpoint.dir 'afile' exists and is not a folder" checkpoint.dir=afile
"$FSDPC" config check t.yaml checkpoint.dir=afile >cc.log 2>&1 && fail "config check accepted a file as checkpoint.dir"

# A plugin built for another machine: glibc says "No such file or directory".
mkdir arm && cp "$FSDPC_BINARY_DIR/plugins/libfsdpc-optim-sgd.so" arm/libfsdpc-optim-armsgd.so &&
  printf '\267\000' | dd of=arm/libfsdpc-optim-armsgd.so bs=1 seek=18 conv=notrunc 2>/dev/null ||
  fail "making the aarch64 plugin"
refused wrong_arch "libfsdpc-optim-armsgd.so: built for aarch64 (ELF machine 183" \
  "plugins.paths=[$T/arm]" optim.name=armsgd
grep -q "No such file" wrong_arch.log && fail "wrong_arch: still 'No such file': $(cat wrong_arch.log)"

# NaN in the initial weights: refused at the load, naming the tensor.
"$FSDPC" train t.yaml checkpoint.dir=ck >base.log 2>&1 || fail "base run: $(tail -2 base.log)"
cp -r ck/final nanm && rm nanm/checksums.rank-00000.txt && python3 - nanm/model.safetensors <<'PY'
import json, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
off = 8 + n + h["model.layers.0.mlp.up_proj.weight"]["data_offsets"][0] + 4 * 5
b[off:off + 4] = struct.pack("<f", float("nan"))
open(sys.argv[1], "wb").write(b)
PY
refused nan_init "nanm: tensor model.layers.0.mlp.up_proj.weight holds a NaN or Inf at element 5" \
  model.init.from=nanm
echo "PASS: every leftover is refused before step 1, naming it"
