#!/bin/bash
# Session 7 (forward epilogue, ffwd2): stages one GPU call into DEST
# (default /work/main/.carry/ffwd2): var/old (the flash plugin of commit
# BASE_REV, default main, built here from that commit's sources), var/new
# (this tree's build/), the variants of variants.sh read on stdin,
# test_flash_gpu, the scripts and the runtime libraries. Usage, from the
# worktree root after `ninja -C build`:
#   bash bench/flash/stage_s7.sh [DEST] < bench/flash/variants-s7.txt
set -euo pipefail
dest=${1:-/work/main/.carry/ffwd2}
rev=${BASE_REV:-main}
src=$(mktemp -d)
git archive "$rev" plugins/attention/flash bench/flash/variants.sh | tar -x -C "$src"
rm -rf "$dest" && mkdir -p "$dest/var/new"
cp build/plugins/libfsdpc-attention-flash.so build/plugins/libfsdpc-attention-naive.so "$dest/var/new/"
ln -s "$PWD/build" "$src/build"
ln -s "$PWD/core" "$src/core"
echo "old" | (cd "$src" && bash bench/flash/variants.sh "$dest/var") >/dev/null
bash bench/flash/variants.sh "$dest/var" >/dev/null
cp build/bin/test_flash_gpu "$dest/"
cp bench/flash/*.py bench/flash/run_device_s7.sh "$dest/"
/work/shared/device/pack-runtime.sh "$dest/rt.tar.xz" build/bin/test_flash_gpu "$dest"/var/new/*.so >/dev/null
rm -rf "$src"
du -sh "$dest"
