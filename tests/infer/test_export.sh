# A deployable export: final/ (and `convert --to hf`) keep the source's
# config.json (eos list, number text), copy generation_config.json and the
# tokenizer files, or make them; torch_dtype says what was written.
. "$(dirname "$0")/common.sh"
"$FSDPC" data synth --task copy --out d.tok >/dev/null 2>&1 || fail "data synth"
# The source: a byte-vocabulary model (259) with an eos list, a generation
# config and tokenizer files next to config.json (config only: random init).
$VARIANT "$FIX/hf_tiny_untied" src vocab_size=259 'eos_token_id=[2, 5, 7]' \
  'rope_parameters={"rope_theta": 500000.0, "rope_type": "default"}' || fail "variant"
rm src/model.safetensors
cp "$FIX"/tokenizers/llama3-tiny/* src/
printf '{\n  "do_sample": true,\n  "eos_token_id": [2, 5, 7],\n  "temperature": 0.6\n}\n' \
  >src/generation_config.json
echo 'train: {}' >run.yaml
train() { # NAME SRC [overrides]
  local name=$1 src=$2
  shift 2
  timeout 60 "$FSDPC" train run.yaml model.config="$src" data.train=d.tok data.seq_len=32 \
    train.max_steps=2 train.micro_batch_size=2 train.global_batch_size=2 train.threads=1 \
    log.dir="$name" checkpoint.dir="$name/ck" checkpoint.final_dtype=bf16 log.progress=off \
    "$@" >"$name.log" 2>&1 || fail "$name: $(tail -3 "$name.log")"
}
# compare OUT SRC_CONFIG DTYPE: same JSON except torch_dtype/dtype
compare() {
  python3 - "$1/config.json" "$2" "$3" <<'PY' || fail "$1: config.json differs from $2"
import json, sys
out, src, dt = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
for k in ("torch_dtype", "dtype"):
    if k in src:
        assert out[k] == dt, (k, out[k])
    src.pop(k, None); out.pop(k, None)
assert out == src, {k: (src.get(k), out.get(k)) for k in set(src) | set(out) if src.get(k) != out.get(k)}
assert type(out["rope_parameters"]["rope_theta"]) is float
PY
  grep -q '"rms_norm_eps": 1e-05' "$1/config.json" || fail "$1: rms_norm_eps text changed"
}
train A src
compare A/ck/final src/config.json bfloat16
cmp src/generation_config.json A/ck/final/generation_config.json || fail "generation_config"
for f in tokenizer.json tokenizer_config.json; do
  cmp "src/$f" "A/ck/final/$f" || fail "A: $f not copied"
done
grep -q generation_config.json A/ck/final/checksums.rank-00000.txt || fail "not checksummed"
# convert: a sharded checkpoint of the run back to HF, fp32
train B src checkpoint.save_steps=1
"$FSDPC" convert B/ck/step-000001 C --to hf --dtype fp32 >c.log 2>&1 || fail "convert: $(cat c.log)"
compare C src/config.json float32
cmp src/tokenizer.json C/tokenizer.json || fail "C: tokenizer.json"
# No generation config and no tokenizer in the source folder: made from the
# config (eos list kept) and copied from data.tokenizer.
$VARIANT src src2 vocab_size=600 || fail "variant src2"
train D src2 data.tokenizer="$FIX/tokenizers/llama3-tiny"
python3 - D/ck/final/generation_config.json <<'PY' || fail "D: generation_config.json"
import json, sys
g = json.load(open(sys.argv[1]))
assert g["eos_token_id"] == [2, 5, 7] and g["bos_token_id"] == 1, g
assert json.load(open(sys.argv[1].replace("generation_config", "config")))["vocab_size"] == 600
PY
cmp "$FIX/tokenizers/llama3-tiny/tokenizer.json" D/ck/final/tokenizer.json || fail "D: tokenizer"
echo PASS
