#!/bin/bash
# Launch to first step on one GPU, in one call (builds nothing there; the
# carry comes from scripts/gpu/pack_train_carry.sh plus bench/startup/ and
# the two bench configs):
#   1. test_cuda_init_world: the device init equals the CPU init bit for
#      bit, and the device HF load pipeline loads what the file holds;
#   2. `fsdpc train` of the 1B and 8B bench shapes (8B with activation
#      checkpointing) from random init and from a random-weight BF16 HF
#      folder (written first to local disk, so its reads come from the page
#      cache), 2 steps each. Each log line is stamped with the wall clock as
#      it arrives, so "launch to the step-1 line" is also measured from
#      outside; the "startup:" line has the phases.
# With before.tar.xz in the carry (an older build, same layout), each run is
# made with it too (before/after in one call; the old one has no phases).
#   bash .carry/startup/run_startup.sh [1b|8b|all] [hf|random|all]
set -u
C=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
W=/tmp/startup
MODELS=${1:-all}
INITS=${2:-all}
mkdir -p /tmp/rt "$OUT" "$W"
tar xf "$C/runtime.tar.xz" -C /tmp/rt
tar xf "$C/build.tar.xz" -C /
B=$(cat "$C/build_dir")
builds=("after:$B")
if [ -f "$C/before.tar.xz" ]; then
  tar xf "$C/before.tar.xz" -C /
  builds=("before:$(cat "$C/before_dir")" "${builds[@]}")
fi
export LD_LIBRARY_PATH=/tmp/rt:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc; free -g | head -2; } | tee "$OUT/gpu.txt"
t0=$SECONDS
LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH timeout 120 "$B/bin/test_cuda_init_world" >"$OUT/test_cuda_init_world.log" 2>&1
echo "test_cuda_init_world: exit $? ($((SECONDS - t0)) s): $(tail -1 "$OUT/test_cuda_init_world.log")"
"$B/bin/fsdpc" data synth --task copy --n 20000 --out "$W/copy.tok" >/dev/null
stamp() { while IFS= read -r l; do printf '%s %s\n' "$EPOCHREALTIME" "$l"; done; }
train() { # name build-dir model [overrides]
  local name=$1 bd=$2 m=$3
  shift 3
  LD_LIBRARY_PATH=$bd/lib:$LD_LIBRARY_PATH "$bd/bin/fsdpc" --version >/dev/null # page cache
  local t=$EPOCHREALTIME
  LD_LIBRARY_PATH=$bd/lib:$LD_LIBRARY_PATH timeout 240 "$bd/bin/fsdpc" train \
    "$C/llama3-$m-base.yaml" data.train="$W/copy.tok" train.max_steps=2 log.dir="$W/$name" \
    log.progress=off "$@" 2>&1 | stamp >"$W/$name.log"
  local first
  first=$(awk '/ step 1\// {print $1; exit}' "$W/$name.log")
  echo "== $name: launch to the step-1 line (outside) $(python3 -c "print(f'{$first - $t:.2f}')" 2>/dev/null) s"
  grep -E " step [12]/|startup:|loaded|error" "$W/$name.log" | cut -d' ' -f2-
}
for m in 1b 8b; do
  [ "$MODELS" = all ] || [ "$MODELS" = "$m" ] || continue
  ac=()
  [ "$m" = 8b ] && ac=(fsdp.activation_checkpointing=true)
  if [ "$INITS" != hf ]; then
    for b in "${builds[@]}"; do train "$m-random-${b%%:*}" "${b#*:}" "$m" "${ac[@]}"; done
  fi
  if [ "$INITS" != random ]; then
    python3 "$C/make_hf_folder.py" --model "$m" --out "$W/hf$m" 2>&1 | tail -1
    for b in "${builds[@]}"; do
      train "$m-hf-${b%%:*}" "${b#*:}" "$m" model.init.from="$W/hf$m" "${ac[@]}"
    done
    rm -rf "$W/hf$m"
  fi
done
tar cJf "$OUT/logs.tar.xz" -C "$W" $(cd "$W" && ls *.log)
echo "total $((SECONDS - t0)) s"
