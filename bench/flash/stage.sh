#!/bin/bash
# Stages one GPU call of the flash experiments into DEST (default
# /work/main/$CARRY, CARRY default .carry/flash):
#   var/old    the flash plugin of commit BASE_REV (default main), built from
#              that commit's sources by build_rev.sh
#   var/new    this tree's build (build/plugins)
#   var/NAME   each sandbox variant named on the command line, e.g.
#              06_fwd_diag_noexp (build/bench/flash/NAME: run
#              `cmake --build build --target flash_sandbox` first)
# each beside a copy of the naive plugin; then test_flash_gpu, the scripts
# (run_device.sh, gpu_check.sh, ...) and the runtime libraries. Usage, from
# the worktree root after `cmake --build build`:
#   [CARRY=.carry/NAME] [BASE_REV=REV] [DEST=DIR] bash bench/flash/stage.sh [VARIANT...]
# then pass the carry folder (relative to the repository root, e.g.
# .carry/flash) to the device tool and run a script of it there (README.md).
# For training runs also pack the train carry:
#   bash scripts/gpu/carry.sh DEST/train
set -euo pipefail
carry=${CARRY:-.carry/flash}
dest=${DEST:-/work/main/$carry}
rm -rf "$dest" && mkdir -p "$dest/var/new"
bash bench/flash/build_rev.sh "${BASE_REV:-main}" "$dest/var/old"
cp build/plugins/libfsdpc-attention-flash.so build/plugins/libfsdpc-attention-naive.so \
  "$dest/var/new/"
for v in "$@"; do
  so=build/bench/flash/$v/libfsdpc-attention-flash.so
  [ -f "$so" ] || { echo "stage.sh: $so not built (cmake --build build --target flash_sandbox)" >&2; exit 1; }
  mkdir -p "$dest/var/$v" && cp "$so" build/plugins/libfsdpc-attention-naive.so "$dest/var/$v/"
done
cp build/bin/test_flash_gpu "$dest/"
cp bench/flash/*.py bench/flash/*.sh "$dest/"
/work/shared/device/pack-runtime.sh "$dest/rt.tar.xz" build/bin/test_flash_gpu "$dest"/var/*/*.so >/dev/null
du -sh "$dest"
