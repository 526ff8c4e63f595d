#!/bin/bash
# Session 2b: stages one GPU call into DEST (default /work/main/.carry/flash2b):
# var/base (the kernels of commit BASE_REV, built here from that commit's
# sources), var/v1 (this tree's build/), the variants of variants.sh (read
# on stdin), test_flash_gpu, the scripts and the runtime libraries.
set -euo pipefail
dest=${1:-/work/main/.carry/flash2b}
rev=${BASE_REV:-b23ad3c}
src=$(mktemp -d)
git archive "$rev" plugins/attention/flash | tar -x -C "$src"
rm -rf "$dest" && mkdir -p "$dest/var/v1"
cp build/plugins/libfsdpc-attention-flash.so build/plugins/libfsdpc-attention-naive.so "$dest/var/v1/"
# variants.sh compiles plugins/attention/flash/*.cu relative to the cwd: run
# it once in the base sources (with this build's attn_flash.c.o and naive).
ln -s "$PWD/build" "$src/build"
ln -s "$PWD/core" "$src/core"
echo "base" | (cd "$src" && bash "$OLDPWD/bench/flash/variants.sh" "$dest/var") >/dev/null
bash bench/flash/variants.sh "$dest/var" >/dev/null
cp build/bin/test_flash_gpu "$dest/"
cp bench/flash/*.py bench/flash/run_device_s2b.sh "$dest/"
/work/shared/device/pack-runtime.sh "$dest/rt.tar.xz" build/bin/test_flash_gpu "$dest"/var/v1/*.so >/dev/null
rm -rf "$src"
du -sh "$dest"
