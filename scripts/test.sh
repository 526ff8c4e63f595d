#!/usr/bin/env bash
# The test command: check the formatting (scripts/check-format.sh: the C,
# C++ and CUDA files of scripts/format-paths.txt as .clang-format says) and the include layers
# (scripts/include_graph.py --check), configure, build (CUDA parts too when nvcc is present),
# run every test with ctest, then rebuild the parsers' tests with
# AddressSanitizer + UBSan and run those (label "asan"), then run each
# libFuzzer target for a few seconds (scripts/fuzz.sh; needs clang).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
bash scripts/check-format.sh
python3 scripts/include_graph.py --check >/dev/null || {
  python3 scripts/include_graph.py
  echo "test.sh: an include runs against the layers (scripts/include_graph.py)" >&2
  exit 1
}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"
if [ "${FSDPC_SKIP_ASAN:-0}" != 1 ]; then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DFSDPC_SANITIZE=ON -DFSDPC_CUDA=OFF
  cmake --build build-asan -j "$jobs"
  ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure -L asan -j "$jobs"
fi
if [ "${FSDPC_SKIP_FUZZ:-0}" != 1 ] && command -v clang >/dev/null; then
  bash scripts/fuzz.sh "${FSDPC_FUZZ_SECONDS:-5}"
fi
