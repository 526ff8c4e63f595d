#!/bin/bash
# Packs a build for the GPU host into DEST, a folder the device tool carries
# (e.g. /work/main/.carry/NAME; passed to it as .carry/NAME):
#   build.tar.xz     fsdpc, libfsdpc (+ the CUPTI tracer), every plugin, the
#                    CUDA test and bench binaries, test_hf_fixture (its
#                    CPU families mode), fsdpc_dump_logits and
#                    fsdpc_nccl_probe of BUILD, at their absolute paths
#                    (unpacked at / there: the binaries find their plugins
#                    and fixtures through the paths compiled into them)
#   runtime.tar.xz   the shared libraries the GPU host lacks
#                    (/work/shared/device/pack-runtime.sh)
#   build_dir        BUILD's path
#   *.sh, lib/       this folder's scripts (run them from the carry)
#   check_*.py       the oracles of tests/gpu/
#   the helpers the scripts call (bench/*_summary.py, loss_gap.py,
#   offload_gaps.py, torch_peft_lora_baseline.py, startup/make_hf_folder.py,
#   tests/train/compare_runs.py, tests/fixtures/check_hf_load.py,
#   tests/cuda/test_nccl.sh), the bench configs they read from the carry
#   (llama3-1b-base.yaml, llama3-8b-base.yaml, llama3-8b-lora.yaml), the
#   Llama 3.2 tokenizer_config.json (llama3.2-tokenizer_config.json) and the
#   HF fixtures under src/tests/fixtures (carry_env.sh's carry_fixtures).
# BASE=DIR also packs an older build folder's bin/fsdpc, lib/ and plugins/
# as base.tar.xz, with base_dir and base_bin: the "base" (before) of
# speed.sh one, hf.sh chateval|memory and speed.sh startup.
# PACK_RUNTIME: the runtime packer (default /work/shared/device/pack-runtime.sh,
# called as PACKER OUT.tar.xz FILE...).
# Usage: carry.sh DEST [BUILD]   (BUILD: default build/, or the env BUILD)
set -euo pipefail
DEST=$(realpath -m "$1")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$(realpath "${2:-${BUILD:-$ROOT/build}}")
mkdir -p "$DEST"
binaries() { # build folder -> its files to carry, relative to /
  local b=${1#/}
  # shellcheck disable=SC2012,SC2015 # build outputs: plain names; no match is no file
  (cd / && ls -d "$b"/bin/fsdpc "$b"/lib/libfsdpc.so* "$b"/lib/libfsdpc_cupti_trace.so "$b"/plugins/*.so \
    "$b"/bin/test_cuda_* "$b"/bin/test_flash_gpu "$b"/bin/test_hf_fixture "$b"/bin/fsdpc_dump_logits "$b"/bin/fsdpc_bench_* \
    "$b"/bin/fsdpc_nccl_probe 2>/dev/null || true)
}
files=$(binaries "$B")
# shellcheck disable=SC2086 # one word a file
(cd / && tar cJf "$DEST/build.tar.xz" $files)
# shellcheck disable=SC2046
"${PACK_RUNTIME:-/work/shared/device/pack-runtime.sh}" "$DEST/runtime.tar.xz" $(for f in $files; do echo "/$f"; done) >/dev/null
echo "$B" >"$DEST/build_dir"
if [ -n "${BASE:-}" ]; then
  BB=$(realpath "$BASE")
  base=$(cd / && ls -d "${BB#/}"/bin/fsdpc "${BB#/}"/lib "${BB#/}"/plugins)
  # shellcheck disable=SC2086
  (cd / && tar cJf "$DEST/base.tar.xz" $base)
  echo "$BB" >"$DEST/base_dir"
  echo "$BB/bin/fsdpc" >"$DEST/base_bin"
fi
G=$ROOT/scripts/gpu
cp "$G"/*.sh "$DEST/"
mkdir -p "$DEST/lib" && cp "$G"/lib/* "$DEST/lib/"
cp "$ROOT"/tests/gpu/*.py "$ROOT"/tests/gpu/cli_api_check.sh "$DEST/"
cp "$ROOT"/bench/{profile_summary,timeline_summary,gap_summary,loss_gap,offload_gaps}.py \
  "$ROOT/bench/torch_peft_lora_baseline.py" "$ROOT/bench/torch_peft_dpo_baseline.py" \
  "$ROOT/bench/startup/make_hf_folder.py" "$ROOT/tests/train/compare_runs.py" \
  "$ROOT/tests/fixtures/check_hf_load.py" "$ROOT/tests/cuda/test_nccl.sh" \
  "$ROOT"/configs/bench/llama3-{1b,8b}-base.yaml "$ROOT/configs/llama3-8b-lora.yaml" \
  "$ROOT/configs/bench/llama3-8b-dpo-lora.yaml" "$DEST/"
cp "$ROOT/tests/fixtures/chat_templates/llama3.2-instruct/tokenizer_config.json" \
  "$DEST/llama3.2-tokenizer_config.json"
# the HF fixtures and a tokenizer, where the tests look for them (their source dir)
mkdir -p "$DEST/src/tests/fixtures/tokenizers"
cp -r "$ROOT"/tests/fixtures/hf_tiny_* "$DEST/src/tests/fixtures/"
cp -r "$ROOT/tests/fixtures/tokenizers/llama3-tiny" "$DEST/src/tests/fixtures/tokenizers/"
du -sh "$DEST"/*.tar.xz
