#!/bin/bash
# Builds the flash plugin of commit REV from that commit's sources
# (plugins/attention/flash, plugins/common, core/include) into
# DEST/libfsdpc-attention-flash.so, with the flags of this tree's CMake build
# (build.ninja of a RelWithDebInfo build), beside a copy of this build's
# naive plugin: the "old" build of a GPU comparison. Run from the worktree
# root after `cmake --build build`. Usage: build_rev.sh REV DEST
set -euo pipefail
rev=$1
dest=$(realpath -m "$2")
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
git archive "$rev" plugins/attention/flash plugins/common core/include | tar -x -C "$src"
mkdir -p "$dest"
nvcc="${NVCC_LAUNCHER:-} /usr/local/cuda/bin/nvcc -DFSDPC_WITH_CUDA=1 -I$src/core/include -O2
  -DNDEBUG --generate-code=arch=compute_90a,code=[compute_90a,sm_90a] -Xcompiler=-fPIC
  -Xcompiler=-fvisibility=hidden --use_fast_math -std=c++17"
objs=()
for f in "$src"/plugins/attention/flash/*.cu; do
  o=$src/$(basename "$f" .cu).o
  $nvcc -c "$f" -o "$o" &
  objs+=("$o")
  [ "$(jobs -r | wc -l)" -ge 2 ] && wait -n
done
gcc -std=gnu11 -O2 -DNDEBUG -fPIC -fvisibility=hidden -DFSDPC_WITH_CUDA=1 -I"$src/core/include" \
  -I/usr/local/cuda/include -c "$src/plugins/attention/flash/attn_flash.c" -o "$src/attn_flash.o"
wait
g++ -fPIC -Wl,--no-undefined -Wl,-z,nodelete -shared -o "$dest/libfsdpc-attention-flash.so" \
  "$src/attn_flash.o" "${objs[@]}" -L/usr/local/cuda/targets/x86_64-linux/lib -lcudart \
  -lrt -lpthread -ldl
cp build/plugins/libfsdpc-attention-naive.so "$dest/"
