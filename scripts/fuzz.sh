#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, ASan + UBSan) in build-fuzz and runs
# each for SECONDS (default 5) on a copy of its seed corpus.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
#   (targets: safetensors config tokfile store nf4 jinja prepare tokenizer jsonl; all by default)
# FUZZ_MAX_LEN sets libFuzzer's -max_len (jinja: 65536 by default, templates
# up to 64 KB; jsonl: 1048576, whole dataset files with conversations of
# thousands of turns); FUZZ_RSS_MB its -rss_limit_mb (default 2048).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(safetensors config tokfile store nf4 jinja prepare tokenizer jsonl)
command -v clang >/dev/null || { echo "fuzz.sh: clang is needed (apt-get install clang)"; exit 1; }
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug -DFSDPC_FUZZ=ON \
  -DFSDPC_CUDA=OFF >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]/#/fuzz_}"
for t in "${targets[@]}"; do
  case $t in safetensors) seeds=corpus ;; *) seeds=corpus_$t ;; esac
  work=build-fuzz/corpus-work/$t
  mkdir -p "$work"
  cp -n tests/fuzz/$seeds/* "$work"/ 2>/dev/null || true
  if [ "$t" = jinja ]; then cp -n tests/fixtures/chat_corpus/templates/* "$work"/; fi
  args=()
  [ -f tests/fuzz/$t.dict ] && args=(-dict=tests/fuzz/$t.dict)
  len=${FUZZ_MAX_LEN:-}
  if [ -z "$len" ] && [ "$t" = jinja ]; then len=65536; fi
  if [ -z "$len" ] && [ "$t" = jsonl ]; then len=1048576; fi
  [ -z "$len" ] || args+=(-max_len="$len")
  if [ "$t" = jsonl ]; then args+=(-timeout=120); fi # a 1 MB file under ASan
  echo "== fuzz_$t for $secs s"
  ASAN_OPTIONS=detect_leaks=1 build-fuzz/bin/fuzz_$t "${args[@]}" -max_total_time="$secs" \
    -rss_limit_mb="${FUZZ_RSS_MB:-2048}" -artifact_prefix=build-fuzz/fuzz_$t- -print_final_stats=1 "$work"
done
