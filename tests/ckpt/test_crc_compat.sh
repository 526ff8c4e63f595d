#!/usr/bin/env bash
# Checkpoints written before CRC-32 moved to zlib still load: the fixture
# tests/fixtures/ckpt_s11_tiny/step-000002 was saved by the session-11 build
# (its slicing-by-8 table), with checksums.rank-00000.txt as it wrote them.
# A resume verifies every file's size and CRC before using it; a flipped
# byte must still be refused (the check is live, not skipped).
set -u
: "${FSDPC:?run through ctest}"
: "${FSDPC_SOURCE_DIR:?}"
T=$(mktemp -d /tmp/fsdpc-crc-compat.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
cp -r "$FSDPC_SOURCE_DIR/tests/fixtures/ckpt_s11_tiny/." "$T/" && cd "$T" || fail "copy"
mkdir ck && mv step-000002 ck/ || fail "layout"
# The checksums zlib computes equal those the old build wrote.
while read -r crc size name; do
  got=$(python3 -c "import sys, zlib; print('%08x' % zlib.crc32(open(sys.argv[1], 'rb').read()))" \
    "ck/step-000002/$name")
  [ "$got" = "$crc" ] || fail "$name: zlib $got, the old build wrote $crc"
done <ck/step-000002/checksums.rank-00000.txt

"$FSDPC" train ck/step-000002/config.yaml checkpoint.resume=auto log.progress=off >ok.log 2>&1 ||
  fail "resuming the old checkpoint: $(grep -m1 error ok.log)"
grep -q "step 3/3 loss" ok.log || fail "the resume did not train step 3: $(tail -3 ok.log)"
grep -qi "checksum" ok.log && fail "a checksum complaint: $(grep -i checksum ok.log)"

rm -rf ck/final log && cp -r ck/step-000002 bad &&
  printf '\001' | dd of=bad/shard-00000-of-00001.safetensors bs=1 seek=20000 conv=notrunc 2>/dev/null
"$FSDPC" train ck/step-000002/config.yaml checkpoint.resume=bad "checkpoint.dir=''" \
  log.progress=off >bad.log 2>&1 && fail "a flipped byte was loaded"
grep -q "bad/shard-00000-of-00001.safetensors: checksum mismatch" bad.log ||
  fail "no checksum error: $(grep -m1 error bad.log)"
echo "PASS: the session-11 checkpoint's CRCs verify through zlib; a flipped byte is refused"
