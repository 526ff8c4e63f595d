# A transformers-made HF folder, converted to sharded at world 3 and back to
# a full fp32 checkpoint, gives the same logits in fsdpc (bit for bit), and
# the bf16 output stays close.
DUMP=$1
. "$(dirname "$0")/common.sh"
for fx in hf_tiny_untied hf_tiny_tied_llama3; do
  src=$FSDPC_SOURCE_DIR/tests/fixtures/$fx
  "$FSDPC" convert "$src" $fx-s3 --to sharded --world 3 >c.log 2>&1 || fail "$fx: $(cat c.log)"
  "$FSDPC" convert $fx-s3 $fx-hf --to hf --dtype fp32 >c.log 2>&1 || fail "$fx: $(cat c.log)"
  "$DUMP" "$src" a.safetensors 12 >d.log 2>&1 || fail "$fx dump: $(cat d.log)"
  "$DUMP" $fx-hf b.safetensors 12 >d.log 2>&1 || fail "$fx dump: $(cat d.log)"
  cmp a.safetensors b.safetensors || fail "$fx: logits changed through sharded <-> full"
  grep -q "logits (1, 12, " d.log || fail "$fx: $(cat d.log)"
done
echo PASS
