#!/bin/bash
# Builds tile-shape variants of the flash plugin, each into DEST/<name>/
# (with a copy of the naive plugin), for bench_variants.py to compare in one
# GPU call. Run from the worktree root after `cmake --build build`.
# A variant is: name, then -D flags (see the *_MT/_NW/_BN/_MINB/_NC/_ST
# macros in the plugin's .cu files; unset ones keep their defaults).
set -euo pipefail
dest=${1:-/tmp/flash-variants}
shift || true
obj=build/plugins/attention/flash/CMakeFiles/fsdpc-attention-flash.dir/attn_flash.c.o
nv="${NVCC_LAUNCHER:-} /usr/local/cuda/bin/nvcc -DFSDPC_WITH_CUDA=1 -Icore/include -O3 -DNDEBUG
  --generate-code=arch=compute_90a,code=[compute_90a,sm_90a] -Xcompiler=-fPIC
  -Xcompiler=-fvisibility=hidden --use_fast_math -std=c++17"
build() {
  local name=$1; shift
  local d=$dest/$name
  mkdir -p "$d"
  local objs=()
  for f in plugins/attention/flash/*.cu; do
    $nv "$@" -c "$f" -o "$d/$(basename "$f" .cu).o"
    objs+=("$d/$(basename "$f" .cu).o")
  done
  g++ -fPIC -Wl,--no-undefined -Wl,-z,nodelete -shared -o "$d/libfsdpc-attention-flash.so" \
    $obj "${objs[@]}" /usr/local/cuda/lib/libcudart.so -lcudadevrt -lcudart_static \
    -lrt -lpthread -ldl -L/usr/local/cuda/targets/x86_64-linux/lib
  rm "${objs[@]}"
  cp build/plugins/libfsdpc-attention-naive.so "$d/"
}
while read -r name flags; do
  [ -z "$name" ] || [ "${name:0:1}" = "#" ] && continue
  build "$name" $flags &
  [ "$(jobs -r | wc -l)" -ge 2 ] && wait -n
done
wait
ls "$dest"
