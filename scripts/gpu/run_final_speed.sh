#!/bin/bash
# On one H200: issue 16's speed figures of a build in one call: the flash
# acceptance table (bench/flash/bench_flash.py check, then bench: fsdpc's
# kernels beside SDPA's flash and cuDNN backends) and the side by side
# (run_gaps.sh side: PyTorch FSDP2 eager and --compile, fsdpc new and base;
# 1B micro-batch 4, 8B with checkpointing micro-batch 1; clocks sampled).
#   here:   bash scripts/gpu/pack_train_carry.sh .carry/final   (the build: "new")
#           plus base.tar.xz + base_dir (an older build: bin/fsdpc, lib/, plugins/)
#   device: OUT=$OUT SIDE_S=330 bash .carry/final/run_final_speed.sh   (repo root)
. "$(dirname "$0")/carry_env.sh" # C, OUT, B, F; LD_LIBRARY_PATH
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit,driver_version --format=csv,noheader
timeout 240 python3 bench/flash/bench_flash.py check "$B/plugins" >"$OUT/flash_check.log" 2>&1
echo "flash check exit $?: $(tail -1 "$OUT/flash_check.log")"
timeout 200 python3 bench/flash/bench_flash.py bench "$B/plugins" 2>&1 | tee "$OUT/flash_bench.log"
echo "== flash done ($SECONDS s)"
T_END=${SIDE_S:-330} bash "$C/run_gaps.sh" side
