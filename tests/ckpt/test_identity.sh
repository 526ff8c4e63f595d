# Issue 43.6, identities by content. A LoRA checkpoint binds its base by a
# CRC-32 of the base's tensors (names, dtypes, shapes, bytes): the same base
# under another spelling of its path resumes; a base whose weights changed
# in place (same path, same header) is refused. Optimizer state is checked
# for what it means, not only for checksums: negative or out-of-range
# adamw8bit block scales, moments too large for the next step and a
# negative second moment are refused even with their checksums recomputed.
. "$(dirname "$0")/common.sh"

run B 1 train.max_steps=4 || fail "base run: $(tail -1 B.log)"
L="model.from=B/ck/final peft.method=lora peft.r=4 peft.alpha=8 checkpoint.save_steps=2"
run L 1 $L train.max_steps=3 || fail "LoRA run: $(tail -1 L.log)"
grep -q "LoRA base B/ck/final: [0-9]* tensors, .* tensors crc32 [0-9a-f]\{8\}" L.log ||
  fail "the base's identity is not logged: $(grep -m1 'LoRA base' L.log)"
ln -s "$T/B" link
# The same base, spelt three other ways: resumes.
for p in ./B//ck/final/ "$T/B/ck/final" link/ck/final; do
  run R1 1 peft.method=lora peft.r=4 peft.alpha=8 "model.from=$p" train.max_steps=3 \
    checkpoint.resume=L/ck/step-000002 "checkpoint.dir=''" || fail "base spelt $p: $(grep -m1 error R1.log)"
  grep -q "resumed from L/ck/step-000002" R1.log || fail "$p: not resumed"
done
# One weight changed in place, under the same path (the header is the same).
python3 - B/ck/final/model.safetensors <<'PY'
import json, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
off = 8 + n + h["model.layers.1.mlp.down_proj.weight"]["data_offsets"][0]
b[off:off + 4] = struct.pack("<f", struct.unpack("<f", b[off:off + 4])[0] + 0.25)
open(sys.argv[1], "wb").write(b)
PY
rm B/ck/final/checksums.rank-00000.txt
run R2 1 $L train.max_steps=3 checkpoint.resume=L/ck/step-000002 "checkpoint.dir=''" &&
  fail "resumed adapters onto weights changed in place"
grep -q "its adapters were trained on other weights (B/ck/final: tensors crc32 [0-9a-f]*) than model.init.from B/ck/final holds now" R2.log ||
  fail "changed base: $(grep -m1 error R2.log)"

# Optimizer state: edit one slot of a saved checkpoint, recompute its CRC.
# tamper NAME CKPT SLOT PYTHON-EXPR-ON-ARRAY
tamper() {
  rm -rf "$1" && cp -r "$2" "$1" && python3 - "$1" "$3" "$4" <<'PY'
import json, struct, sys, zlib, array
d, slot, expr = sys.argv[1:]
f = d + "/shard-00000-of-00001.safetensors"
b = bytearray(open(f, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
t = h["unit.0." + slot]
o0, o1 = (8 + n + x for x in t["data_offsets"])
a = array.array("f", bytes(b[o0:o1]))
exec(expr)
b[o0:o1] = a.tobytes()
open(f, "wb").write(b)
lines = open(d + "/checksums.rank-00000.txt").read().splitlines()
out = []
for l in lines:
    crc, size, name = l.split(" ", 2)
    if name == "shard-00000-of-00001.safetensors":
        crc = "%08x" % zlib.crc32(bytes(b))
    out.append(" ".join((crc, size, name)))
open(d + "/checksums.rank-00000.txt", "w").write("\n".join(out) + "\n")
PY
}
refused() { # NAME WANT
  run "R$1" 1 $Q checkpoint.resume="$1" "checkpoint.dir=''" && fail "$1: tampered state resumed"
  grep -q "$2" "R$1.log" || fail "$1: $(grep -m1 error "R$1.log")"
  echo "ok $1: $(grep -m1 "$2" "R$1.log" | cut -c1-160)"
}
Q="optim.name=adamw8bit optim.options.min_8bit_size=0"
run Q 1 $Q checkpoint.save_steps=4 || fail "adamw8bit run: $(tail -1 Q.log)"
S=Q/ck/step-000004
tamper neg $S exp_avg.absmax "a[0] = -a[0]"
refused neg "holds the negative value"
tamper big $S exp_avg.absmax "a[0:256] = array.array('f', [1e30] * 256)"
refused big "adamw8bit: saved exp_avg block scale 1e+30 at element 0 is above every value of its block"
tamper huge1 $S exp_avg_sq "a[0] = 3e38"
tamper huge huge1 exp_avg_sq.absmax "a[0:256] = array.array('f', [3e38] * 256)"
refused huge "adamw8bit: saved exp_avg_sq value 3e+38 .* is too large for the next step"
# fp32 AdamW: a negative second moment.
run A 1 checkpoint.save_steps=4 || fail "adamw run"
Q=""
tamper negv A/ck/step-000004 exp_avg_sq "a[3] = -1.0"
refused negv "tensor model.embed_tokens.weight (optimizer state 'exp_avg_sq') holds the negative value -1 at element 3"
echo PASS
