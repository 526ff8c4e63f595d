#!/bin/bash
# Stages one GPU call of the flash experiments into DEST (default
# /work/main/$CARRY, CARRY default .carry/flash): var/old (the flash plugin
# of commit BASE_REV, default main, built here from that commit's sources),
# var/new (this tree's build/), the variants of variants.sh read on stdin
# (lines "name -Dflags...", e.g. bench/flash/variants-s7.txt; /dev/null for
# none), test_flash_gpu, the Python scripts, run_device.sh,
# run_device_dbg.sh and the runtime libraries. Usage, from the worktree root
# after `ninja -C build`:
#   [CARRY=.carry/NAME] [BASE_REV=REV] bash bench/flash/stage.sh [DEST] < VARIANTS
# then pass the carry folder (relative to the repository root, e.g.
# .carry/flash) to the device tool and run bench/flash/run_device.sh there
# (see its header). For training runs also pack the train carry:
#   bash scripts/gpu/pack_train_carry.sh DEST/train
set -euo pipefail
carry=${CARRY:-.carry/flash}
dest=${1:-/work/main/$carry}
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
cp bench/flash/*.py bench/flash/run_device.sh bench/flash/run_device_dbg.sh bench/flash/run_ncu.sh "$dest/"
/work/shared/device/pack-runtime.sh "$dest/rt.tar.xz" build/bin/test_flash_gpu "$dest"/var/new/*.so >/dev/null
rm -rf "$src"
du -sh "$dest"
