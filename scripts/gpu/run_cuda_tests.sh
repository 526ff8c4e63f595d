#!/bin/bash
# Runs the CUDA tests on a GPU host of the device tool, from binaries built
# on the development machine (see docs/cuda.md):
#   scripts/gpu/pack_cuda_carry.sh DEST    (here: builds DEST/{build.tar.xz,runtime.tar.xz})
#   bash DEST/run_cuda_tests.sh [ops] [optim] [attention] [sanitize] [nccl] [nccl-cold] [bench] [bench-ew]
# The test binaries look for plugins under the build directory compiled into
# them, so build.tar.xz restores that directory at the same absolute path.
# Logs go to $OUT (or /tmp/out).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/rt
tar xf "$HERE/runtime.tar.xz" -C /tmp/rt
tar xf "$HERE/build.tar.xz" -C /
export LD_LIBRARY_PATH=/tmp/rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
BUILD=$(cat "$HERE/build_dir")
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv |
  tee "$OUT/gpu.txt"
rc=0
run() { # name, command...
  local name=$1
  shift
  echo "=== $name"
  local t0=$(date +%s%N)
  timeout 300 "$@" >"$OUT/$name.log" 2>&1
  local r=$?
  cat "$OUT/$name.log"
  echo "=== $name: exit $r ($(( ($(date +%s%N) - t0) / 1000000 )) ms)"
  [ $r -eq 0 ] || rc=1
}
for what in "${@:-ops optim attention}"; do
  for w in $what; do
    case $w in
    ops) run ops "$BUILD/bin/test_cuda_ops" ;;
    optim) run optim "$BUILD/bin/test_cuda_optim" ;;
    attention) run attention "$BUILD/bin/test_cuda_attention" ;;
    sanitize)
      run sanitize-ops compute-sanitizer --tool memcheck --report-api-errors no "$BUILD/bin/test_cuda_ops"
      run sanitize-attn compute-sanitizer --tool memcheck "$BUILD/bin/test_cuda_attention" ;;
    nccl) run nccl bash "$HERE/test_nccl.sh" "$BUILD/bin/fsdpc_nccl_probe" ;;
    nccl-cold) HANG_VARIANT=cold run nccl-cold bash "$HERE/test_nccl.sh" "$BUILD/bin/fsdpc_nccl_probe" ;;
    bench) run bench "$BUILD/bin/fsdpc_bench_cuda" ;;
    bench-ew) run bench-ew "$BUILD/bin/fsdpc_bench_ew" ;;
    esac
  done
done
exit $rc
