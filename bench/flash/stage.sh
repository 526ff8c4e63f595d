#!/bin/bash
# Copies what run_device.sh needs into DEST (default /work/main/.carry/flash):
# the test binary, the two attention plugins, the Python scripts and the
# runtime libraries the GPU machine lacks. Run from the worktree root after
# `cmake --build build`.
set -euo pipefail
dest=${1:-/work/main/.carry/flash}
rm -rf "$dest" && mkdir -p "$dest/plugins"
cp build/bin/test_flash_gpu "$dest/"
cp build/plugins/libfsdpc-attention-flash.so build/plugins/libfsdpc-attention-naive.so "$dest/plugins/"
cp bench/flash/*.py bench/flash/run_device.sh "$dest/"
/work/shared/device/pack-runtime.sh "$dest/rt.tar.xz" build/bin/test_flash_gpu "$dest"/plugins/*.so >/dev/null
du -sh "$dest"
