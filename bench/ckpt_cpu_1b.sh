#!/usr/bin/env bash
# Checkpoint save/load time and per-rank peak host memory for a 1.1 B
# parameter Llama (TinyLlama shape, random init) on CPU, 2 ranks, SGD
# without momentum (no optimizer state, to fit a small machine):
#   1. train 2 steps at world 2: a sharded save after step 1, the final full
#      (HF, bf16) save after step 2;
#   2. resume from the sharded checkpoint at world 2 (load), and at world 1
#      (load with resharding);
#   3. model.init.from the HF folder at world 2 (per-rank range reads, the
#      peak-memory bound check);
#   4. fsdpc convert sharded -> HF fp32 and HF -> sharded (world 4).
# Usage: bench/ckpt_cpu_1b.sh BUILD_DIR WORK_DIR   (needs ~25 GB of disk)
set -eu
B=$(realpath "$1")
W=$2
F=$B/bin/fsdpc
export FSDPC_PLUGIN_PATH=$B/plugins
mkdir -p "$W"
cd "$W"
[ -f qa.tok ] || "$F" data synth --task qa --out qa.tok >/dev/null
cat > 1b.yaml <<'YAML'
model:
  vocab_size: 32000
  hidden_size: 2048
  intermediate_size: 5632
  num_hidden_layers: 22
  num_attention_heads: 32
  num_key_value_heads: 4
  max_position_embeddings: 2048
  tie_word_embeddings: false
data: {train: qa.tok, seq_len: 16}
optim: {name: sgd, lr: 1.0e-4, momentum: 0.0}
schedule: {name: constant}
train: {max_steps: 2, micro_batch_size: 1, global_batch_size: 2}
checkpoint: {dir: ck, save_steps: 1, final_dtype: bf16}
log: {progress: off, level: debug}
YAML
show() { grep -E "saved|loaded|resumed|peak host memory|converted" "$1" | sed 's/^/    /'; }
t() { local s=$(date +%s.%N); "$@"; echo "    wall $(echo "$(date +%s.%N) - $s" | bc) s"; }
rm -rf ck log1 log2 log3 log4 hf32 sh4
echo "1. train 2 steps, world 2 FULL_SHARD (sharded save at step 1, full bf16 at the end)"
t "$F" train 1b.yaml log.dir=log1 --nproc-per-node 2 --master-port 0 >run1.log 2>&1
show run1.log
du -sh ck/step-000001 ck/final | sed 's/^/    /'
echo "2a. resume from ck/step-000001 at world 2 (1 more step, then the final full save)"
t "$F" train 1b.yaml log.dir=log2 checkpoint.dir=ck2 checkpoint.resume=ck/step-000001 \
  --nproc-per-node 2 --master-port 0 >run2.log 2>&1
show run2.log
echo "2b. resume from ck/step-000001 at world 1 (resharding 2 -> 1)"
t "$F" train 1b.yaml log.dir=log3 checkpoint.dir=ck3 checkpoint.resume=ck/step-000001 \
  checkpoint.final_format=sharded >run3.log 2>&1
show run3.log
rm -rf ck2 ck3
echo "3. model.init.from=ck/final (HF bf16) at world 2"
t "$F" train 1b.yaml log.dir=log4 checkpoint.dir="''" model.init.from=ck/final train.max_steps=1 \
  --nproc-per-node 2 --master-port 0 >run4.log 2>&1
show run4.log
echo "4a. fsdpc convert ck/step-000001 -> HF fp32"
/usr/bin/time -f "    max RSS %M KiB, wall %e s" "$F" convert ck/step-000001 hf32 --to hf --dtype fp32 2>&1 | sed 's/^/    /'
echo "4b. fsdpc convert hf32 -> sharded, world 4 FULL_SHARD"
/usr/bin/time -f "    max RSS %M KiB, wall %e s" "$F" convert hf32 sh4 --to sharded --world 4 2>&1 | sed 's/^/    /'
