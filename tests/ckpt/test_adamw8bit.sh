# adamw8bit (8-bit blockwise AdamW): its loss curve follows adamw's within
# 2%; its state costs 2 bytes per parameter plus block scales; a checkpoint
# resumes bit-exactly at the same world and reshards from 2 to 3 ranks; a bad
# option and a checkpoint of another optimizer are refused with one line.
# With fsdp.offload.optimizer all of this holds bit for bit (see below).
. "$(dirname "$0")/common.sh"

# G = 12 splits over 2 and 3 ranks; min_8bit_size 0 quantizes every tensor
# of this tiny model (its largest has 8288 elements).
Q="optim.name=adamw8bit optim.options.min_8bit_size=0 train.global_batch_size=12"

run F1 1 train.global_batch_size=12 train.max_steps=30 || fail "adamw run: $(tail -1 F1.log)"
run Q1 1 $Q train.max_steps=30 checkpoint.save_steps=10 || fail "adamw8bit run: $(tail -1 Q1.log)"
close_losses F1 Q1 0.02
# Optimizer bytes: 2 per parameter + 8 per 256-element block, vs adamw's 8.
bytes() { grep -o "$2=[0-9]*" "$1.log" | head -1 | cut -d= -f2; }
fp=$(bytes F1 params) fo=$(bytes F1 optim) o=$(bytes Q1 optim)
[ -n "$fp" ] && [ -n "$fo" ] && [ -n "$o" ] || fail "no shard bytes in the log"
# n: adamw's padded element count (padding <= 15 per unit, 3 units); the
# blocks: one per 256 elements plus at most one partial block per tensor.
awk -v fp="$fp" -v fo="$fo" -v o="$o" 'BEGIN { n = fp / 4;
  exit !(fo == 8 * n && o >= 2 * (n - 45) + 8 * int(n / 256) && o <= 2 * n + 8 * (n / 256 + 21)) }' ||
  fail "optimizer bytes: adamw8bit $o, adamw $fo, for $fp bytes of params"

run A2 2 $Q checkpoint.save_steps=4 || fail "straight world-2 run: $(tail -1 A2.log)"
grep -q '"exp_avg.absmax"' A2/ck/step-000004/meta.json || fail "meta.json lacks the scale slots"
run B2 2 $Q checkpoint.resume=A2/ck/step-000004 || fail "resume at world 2: $(tail -1 B2.log)"
same_losses A2 B2
cmp A2/ck/final/model.safetensors B2/ck/final/model.safetensors || fail "weights after resume"
run C3 3 $Q checkpoint.resume=A2/ck/step-000004 || fail "reshard to world 3: $(tail -1 C3.log)"
grep -q "resumed from A2/ck/step-000004 at step 4 (saved at world 2" C3.log || fail "C3: resume not logged"
[ "$(losses C3 | wc -l)" = 4 ] || fail "C3: expected steps 5..8"
close_losses A2 C3 1e-4

# fsdp.offload.optimizer streams the 8-bit state through two buffers (on
# the CPU device the copies are memcpy): with the default buffers a unit is
# one piece; with 16 KiB buffers (SMALL) this model's units at world 1 go in
# pieces, cut inside parameters on their block bounds. Losses and
# checkpoint shards are bit-identical to the state kept in place, with
# every tensor 8-bit ($Q) and with the default min_8bit_size (fp32 state of
# the small tensors in the same pieces); an offloaded checkpoint resumes
# bit-exactly and reshards 2->3 with offload on, as the plain run's does.
OFF=fsdp.offload.optimizer=true
SMALL="$OFF fsdp.offload.buffer_mib=0.015625"
pieces() { sed -n 's/.*offload.optimizer: .* streamed in \([0-9]*\) pieces.*/\1/p' "$1.log" | head -1; }
# (the shards: meta.json, config.yaml and their checksums name the option)
same_shards() {
  [ "$(cd "$1" && ls shard-*)" = "$(cd "$2" && ls shard-*)" ] || fail "$2: other shard files"
  for f in $(cd "$1" && ls shard-*); do
    cmp "$1/$f" "$2/$f" || fail "offloaded checkpoint $2/$f differs"
  done
}
run O1 1 $Q $SMALL train.max_steps=30 checkpoint.save_steps=10 || fail "offloaded run: $(tail -1 O1.log)"
[ "$(pieces O1)" -gt 3 ] 2>/dev/null || fail "O1: expected more pieces than units: $(grep offload O1.log)"
same_losses Q1 O1
same_shards Q1/ck/step-000010 O1/ck/step-000010
run O2 2 $Q $OFF checkpoint.save_steps=4 || fail "offloaded world-2 run: $(tail -1 O2.log)"
[ "$(pieces O2)" = 3 ] || fail "O2: expected one piece per unit: $(grep offload O2.log)"
same_losses A2 O2
same_shards A2/ck/step-000004 O2/ck/step-000004
run OB2 2 $Q $SMALL checkpoint.resume=O2/ck/step-000004 || fail "offloaded resume: $(tail -1 OB2.log)"
same_losses A2 OB2
cmp A2/ck/final/model.safetensors OB2/ck/final/model.safetensors || fail "weights after resume"
run OC3 3 $Q $OFF checkpoint.resume=O2/ck/step-000004 || fail "offloaded reshard: $(tail -1 OC3.log)"
[ "$(losses OC3 | wc -l)" = 4 ] || fail "OC3: expected steps 5..8"
same_losses C3 OC3
M="optim.name=adamw8bit train.global_batch_size=12 checkpoint.save_steps=4"
run M1 1 $M || fail "adamw8bit default min_8bit_size: $(tail -1 M1.log)"
run MO1 1 $M $SMALL || fail "offloaded, default min_8bit_size: $(tail -1 MO1.log)"
[ "$(pieces MO1)" -gt 3 ] 2>/dev/null || fail "MO1: expected more pieces than units"
same_losses M1 MO1
same_shards M1/ck/step-000004 MO1/ck/step-000004
cmp M1/ck/final/model.safetensors MO1/ck/final/model.safetensors || fail "final weights differ"

run Bad 1 $Q optim.options.min_8bit_size=-1 && fail "min_8bit_size=-1 accepted"
grep -q "min_8bit_size" Bad.log || fail "bad option message: $(tail -1 Bad.log)"
run W2 2 train.global_batch_size=12 checkpoint.save_steps=4 || fail "adamw world-2 run"
run X2 2 $Q checkpoint.resume=W2/ck/step-000004 && fail "adamw state resumed as adamw8bit"
grep -q "exp_avg.absmax" X2.log || fail "slot mismatch message: $(tail -1 X2.log)"
echo PASS
