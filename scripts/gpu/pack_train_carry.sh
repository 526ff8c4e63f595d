#!/bin/bash
# Packs the fsdpc executable, libfsdpc, every plugin and the CUDA test
# binaries of build/ (absolute paths, unpacked at / on the GPU host), the
# runtime libraries the GPU host lacks, and the scripts, into DEST (a folder
# the device tool carries, e.g. .carry/train). Usage: pack_train_carry.sh DEST
set -euo pipefail
DEST=$(realpath -m "$1")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=${BUILD:-$ROOT/build}  # BUILD: another build folder (absolute)
mkdir -p "$DEST"
files=$(cd / && ls -d "${B#/}"/bin/fsdpc "${B#/}"/lib/libfsdpc.so* "${B#/}"/lib/libfsdpc_cupti_trace.so "${B#/}"/plugins/*.so \
  "${B#/}"/bin/test_cuda_* "${B#/}"/bin/test_flash_gpu "${B#/}"/bin/fsdpc_dump_logits "${B#/}"/bin/fsdpc_bench_* 2>/dev/null || true)
(cd / && tar cJf "$DEST/build.tar.xz" $files)
/work/shared/device/pack-runtime.sh "$DEST/runtime.tar.xz" $(cd / && for f in $files; do echo /$f; done) >/dev/null
echo "$B" >"$DEST/build_dir"
cp "$ROOT"/scripts/gpu/run_*.sh "$ROOT"/scripts/gpu/carry_env.sh "$ROOT"/scripts/gpu/check_*.py \
  "$ROOT/bench/profile_summary.py" \
  "$ROOT/tests/train/compare_runs.py" "$ROOT/tests/fixtures/check_hf_load.py" \
  "$ROOT/bench/torch_peft_lora_baseline.py" "$ROOT/bench/timeline_summary.py" "$ROOT/bench/loss_gap.py" \
  "$ROOT/bench/gap_summary.py" "$ROOT/bench/offload_gaps.py" \
  "$ROOT/scripts/gpu/world_rows.py" "$ROOT/scripts/gpu/make_hf_random.py" "$DEST/"
# the HF fixtures, where the fixture test looks for them (its source dir)
mkdir -p "$DEST/src/tests/fixtures" && cp -r "$ROOT"/tests/fixtures/hf_tiny_* "$DEST/src/tests/fixtures/"
# a tokenizer for the export check (run_hfround_checks.sh)
mkdir -p "$DEST/src/tests/fixtures/tokenizers" &&
  cp -r "$ROOT/tests/fixtures/tokenizers/llama3-tiny" "$DEST/src/tests/fixtures/tokenizers/"
du -sh "$DEST"/*
