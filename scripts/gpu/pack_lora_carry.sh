#!/bin/bash
# Packs what scripts/gpu/run_lora_checks.sh and run_lora_side_by_side.sh need
# on the GPU host into DEST (a folder the device tool carries): fsdpc,
# libfsdpc, the plugins and fsdpc_dump_logits of a CUDA build folder
# (BUILD, default build), their runtime libraries, the scripts and
# configs/llama3-8b-lora.yaml. Usage: pack_lora_carry.sh DEST [BUILD]
set -euo pipefail
DEST=$(realpath -m "$1")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$(realpath "${2:-$ROOT/build}")
mkdir -p "$DEST"
files=$(cd / && ls -d "${B#/}"/bin/fsdpc "${B#/}"/lib/libfsdpc.so* "${B#/}"/plugins/*.so \
  "${B#/}"/bin/fsdpc_dump_logits 2>/dev/null || true)
(cd / && tar cJf "$DEST/build.tar.xz" $files)
/work/shared/device/pack-runtime.sh "$DEST/runtime.tar.xz" $(cd / && for f in $files; do echo /$f; done) >/dev/null
echo "$B" >"$DEST/build_dir"
cp "$ROOT"/scripts/gpu/run_lora_*.sh "$ROOT"/scripts/gpu/carry_env.sh \
  "$ROOT"/scripts/gpu/check_lora_peft.py \
  "$ROOT/tests/train/compare_runs.py" "$ROOT/tests/fixtures/check_hf_load.py" \
  "$ROOT/configs/llama3-8b-lora.yaml" "$ROOT/bench/profile_summary.py" "$DEST/"
du -sh "$DEST"/*
