#!/bin/bash
# Session 6 (Hopper forward, ffwd): stages one GPU call into DEST (default
# /work/main/.carry/ffwd): var/old (the flash plugin of commit BASE_REV,
# the Hopper kernels before this session, built here from that commit's
# sources), var/new (this tree's build/), the variants of variants.sh read
# on stdin, test_flash_gpu, the scripts and the runtime libraries. Usage,
# from the worktree root after `ninja -C build`:
#   bash bench/flash/stage_s4.sh [DEST] < variants.txt
set -euo pipefail
dest=${1:-/work/main/.carry/ffwd}
rev=${BASE_REV:-52ea156}
src=$(mktemp -d)
git archive "$rev" plugins/attention/flash bench/flash/variants.sh | tar -x -C "$src"
rm -rf "$dest" && mkdir -p "$dest/var/new"
cp build/plugins/libfsdpc-attention-flash.so build/plugins/libfsdpc-attention-naive.so "$dest/var/new/"
ln -s "$PWD/build" "$src/build"
ln -s "$PWD/core" "$src/core"
echo "old" | (cd "$src" && bash bench/flash/variants.sh "$dest/var") >/dev/null
bash bench/flash/variants.sh "$dest/var" >/dev/null
cp build/bin/test_flash_gpu "$dest/"
cp bench/flash/*.py bench/flash/run_device_s6*.sh "$dest/"
/work/shared/device/pack-runtime.sh "$dest/rt.tar.xz" build/bin/test_flash_gpu "$dest"/var/new/*.so >/dev/null
rm -rf "$src"
du -sh "$dest"
