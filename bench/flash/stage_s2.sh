#!/bin/bash
# Session 2: stages the tile-shape variants for one GPU call into DEST
# (default /work/main/.carry/flash2): var/base (a build of the previous
# kernels, BASE_SO), var/v1 (this tree's defaults, build/), var/v2.. (from
# variants.sh, read on stdin), test_flash_gpu, the scripts and the runtime.
set -euo pipefail
dest=${1:-/work/main/.carry/flash2}
base_so=${BASE_SO:-/tmp/flash-base/libfsdpc-attention-flash.so}
rm -rf "$dest" && mkdir -p "$dest/var/base" "$dest/var/v1"
cp "$base_so" build/plugins/libfsdpc-attention-naive.so "$dest/var/base/"
cp build/plugins/libfsdpc-attention-flash.so build/plugins/libfsdpc-attention-naive.so "$dest/var/v1/"
bash bench/flash/variants.sh "$dest/var" >/dev/null
cp build/bin/test_flash_gpu "$dest/"
cp bench/flash/*.py bench/flash/run_device_s2.sh "$dest/"
/work/shared/device/pack-runtime.sh "$dest/rt.tar.xz" build/bin/test_flash_gpu "$dest"/var/v1/*.so >/dev/null
du -sh "$dest"
