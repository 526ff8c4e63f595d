#!/bin/bash
# Packs what the GPU host needs to run the CUDA tests into DEST (a folder
# the device tool carries, e.g. /work/main/.carry/cuda): the CUDA test
# binaries and plugins of build/ (with their absolute path), the runtime
# libraries the GPU host lacks, and the scripts. Usage: pack_cuda_carry.sh DEST
set -euo pipefail
DEST=$1
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/build
mkdir -p "$DEST"
files=$(cd / && ls -d "${B#/}"/bin/test_cuda_* "${B#/}"/plugins/*.so \
  "${B#/}"/bin/fsdpc_nccl_probe "${B#/}"/bin/fsdpc_bench_cuda \
  "${B#/}"/bin/fsdpc_bench_ew 2>/dev/null || true)
(cd / && tar cJf "$DEST/build.tar.xz" $files)
/work/shared/device/pack-runtime.sh "$DEST/runtime.tar.xz" $(cd / && for f in $files; do echo /$f; done) >/dev/null
echo "$B" >"$DEST/build_dir"
cp "$ROOT/scripts/gpu/run_cuda_tests.sh" "$DEST/"
[ -f "$ROOT/tests/cuda/test_nccl.sh" ] && cp "$ROOT/tests/cuda/test_nccl.sh" "$DEST/"
du -sh "$DEST"/*
