#!/usr/bin/env bash
# The flash kernels keep their winners only (issue 40): in
# plugins/attention/flash/ every preprocessor conditional of a CUDA source or
# header is an include guard, an architecture check or C++ linkage, never a
# build switch; no file there is over 800 lines; and each sandbox variant
# (bench/flash/variants/) defines one of the entry points bench/flash's
# CMakeLists.txt looks for to know what it replaces.
set -u
: "${FSDPC_SOURCE_DIR:?FSDPC_SOURCE_DIR must name the source tree}"
dir=$FSDPC_SOURCE_DIR/plugins/attention/flash
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

shopt -s nullglob
allowed='#ifndef FSDPC_FLASH\w*_C?U?H$|#if defined\(__CUDA_ARCH__\) && defined\(__CUDA_ARCH_FEAT_SM90_ALL\)$|#ifdef __cplusplus$'
for f in "$dir"/*.cu "$dir"/*.cuh "$dir"/*.h; do
  while IFS= read -r line; do
    fail "a build switch: $line"
  done < <(grep -nH -E '^\s*#\s*(if|ifdef|ifndef|elif)\b' "$f" | grep -v -E ":($allowed)")
  n=$(wc -l <"$f")
  [ "$n" -le 800 ] || fail "$(basename "$f") has $n lines (> 800)"
done
variants=("$FSDPC_SOURCE_DIR"/bench/flash/variants/*.cu)
[ ${#variants[@]} -gt 0 ] || fail "no sandbox variants in bench/flash/variants"
for v in "${variants[@]}"; do
  grep -qE 'int flash_(fwd|bwd)_sm90\(' "$v" || fail "$(basename "$v") defines neither flash_fwd_sm90 nor flash_bwd_sm90"
done
[ $fails -eq 0 ] && echo "ok" || exit 1
