#!/bin/bash
# On a GPU host, in one call: every CUDA unit test, the element-wise kernel
# bench, CPU-vs-GPU training agreement + HF fixtures (run_train_gpu.sh single),
# reduce_dtype bf16 / cpu_offload checks (run_offload_gpu.sh) and a
# per-kernel profile of the 1B step (run_profile_1b.sh, fsdpc only).
#   bash .carry/train/run_checks.sh [part...]   parts: unit ew train offload profile (default all)
# Prints a summary; all logs go to $OUT/logs.tar.xz. Exit 1 if a part fails.
set -u
C=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
L=$(mktemp -d)
mkdir -p /tmp/rt "$OUT"
tar xf "$C/runtime.tar.xz" -C /tmp/rt
tar xf "$C/build.tar.xz" -C /
B=$(cat "$C/build_dir")
export LD_LIBRARY_PATH=/tmp/rt:$B/lib:${LD_LIBRARY_PATH:-}
parts=${*:-unit ew train offload profile}
rc=0
part() { # name command...
  local n=$1; shift
  echo "===== $n"
  local t0=$SECONDS
  mkdir -p "$L/$n"
  OUT="$L/$n" "$@" >"$L/$n/out.log" 2>&1
  local r=$?
  echo "===== $n: exit $r ($((SECONDS - t0)) s)"
  [ $r -eq 0 ] || rc=1
  return $r
}
for p in $parts; do
  case $p in
  unit)
    for t in test_cuda_ops test_cuda_optim test_cuda_attention test_flash_gpu test_cuda_hf_fixture; do
      FSDPC_SOURCE_DIR=$C/src part "$t" timeout 300 "$B/bin/$t"
      grep -E "Checks|FAIL|rel err .*(FAIL|NaN)|passed|failed" "$L/$t/out.log" | tail -3
    done ;;
  ew) part ew timeout 120 "$B/bin/fsdpc_bench_ew"; cat "$L/ew/out.log" | tail -20 ;;
  train) part train bash "$C/run_train_gpu.sh" single; grep -E "worst|error|OK|Checks" "$L/train/out.log" ;;
  offload) part offload bash "$C/run_offload_gpu.sh"; tail -30 "$L/offload/out.log" ;;
  profile) SKIP_TORCH=1 part profile bash "$C/run_profile_1b.sh" 4; head -40 "$L/profile/out.log" ;;
  esac
done
tar cJf "$OUT/logs.tar.xz" -C "$L" .
exit $rc
