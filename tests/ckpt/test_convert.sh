# fsdpc convert: sharded -> HF (fp32, bf16), HF -> sharded at any world size
# and strategy, round trips bit-exact; the full format's multi-file split
# and index; deterministic output.
. "$(dirname "$0")/common.sh"
conv() { timeout 60 "$FSDPC" convert "$@" >>convert.log 2>&1 || fail "convert $*: $(tail -1 convert.log)"; }

run W2 2 checkpoint.save_steps=4 || fail "run"
conv W2/ck/step-000004 H1 --to hf --dtype fp32
for f in config.json model.safetensors config.yaml; do [ -f H1/$f ] || fail "H1/$f missing"; done
grep -q '"architectures":[[:space:]]*\["LlamaForCausalLM"\]' H1/config.json || fail "config.json"
grep -q '"torch_dtype":[[:space:]]*"float32"' H1/config.json || fail "torch_dtype fp32"
conv H1 S3 --to sharded --world 3
[ -f S3/shard-00002-of-00003.safetensors ] || fail "3 shard files expected"
conv S3 H2 --to hf --dtype fp32
cmp H1/model.safetensors H2/model.safetensors || fail "HF -> sharded(3) -> HF changed the weights"
conv H1 N4 --to sharded --world 4 --strategy NO_SHARD
[ "$(ls N4/shard-*.safetensors | wc -l)" = 1 ] || fail "NO_SHARD writes one shard file"
conv N4 H3 --to hf --dtype fp32
cmp H1/model.safetensors H3/model.safetensors || fail "HF -> sharded(NO_SHARD) -> HF"
conv H1 Y4 --to sharded --world 4 --strategy HYBRID_SHARD --hybrid-shard-size 2
conv Y4 H4 --to hf --dtype fp32
cmp H1/model.safetensors H4/model.safetensors || fail "HF -> sharded(HYBRID) -> HF"
conv W2/ck/step-000004 B1 --to hf
grep -q '"torch_dtype":[[:space:]]*"bfloat16"' B1/config.json || fail "torch_dtype bf16"
s32=$(stat -c %s H1/model.safetensors) s16=$(stat -c %s B1/model.safetensors)
[ $((s16 * 2)) -lt $((s32 + 4096)) ] && [ $((s16 * 2)) -gt $((s32 - 4096)) ] || fail "bf16 size $s16 vs $s32"
# The output folder must not exist; a missing source is one line.
timeout 20 "$FSDPC" convert W2/ck/step-000004 H1 --to hf >o.log 2>&1 && fail "overwrote H1"
grep -q "H1 already exists" o.log || fail "exists message: $(cat o.log)"
timeout 20 "$FSDPC" convert nope Z --to hf >o.log 2>&1 && fail "missing source accepted"
grep -q "checkpoint nope: no such folder" o.log || fail "missing source message: $(cat o.log)"

# Training resumes from a converted checkpoint (step 0, fresh optimizer) at world 2.
run R 2 checkpoint.resume=S3 || fail "resume from converted: $(tail -1 R.log)"
grep -q "optimizer state starts fresh" R.log || fail "fresh optimizer not said"

# The final full checkpoint: above max_shard_size it is split with an index;
# the same weights give the same bytes.
run F1 1 || fail "F1"
run F2 1 || fail "F2"
cmp F1/ck/final/model.safetensors F2/ck/final/model.safetensors || fail "final not deterministic"
cmp F1/ck/final/config.json F2/ck/final/config.json || fail "config.json not deterministic"
run M 1 checkpoint.options.max_shard_size=20000 || fail "split run: $(tail -1 M.log)"
n=$(ls M/ck/final/model-*-of-*.safetensors | wc -l)
[ "$n" -gt 2 ] || fail "expected several files, got $n"
[ -f M/ck/final/model-00001-of-0000$n.safetensors ] || fail "HF file names"
grep -q '"model.norm.weight":' M/ck/final/model.safetensors.index.json || fail "index weight_map"
grep -q '"total_size":' M/ck/final/model.safetensors.index.json || fail "index total_size"
conv M/ck/final MH --to hf --dtype fp32 checkpoint.options.max_shard_size=5000000000
cmp F1/ck/final/model.safetensors MH/model.safetensors || fail "split + merge changed the weights"
echo PASS
