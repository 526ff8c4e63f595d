#!/bin/bash
# session 11 (final build): 1B compiled-vs-fsdpc rounds (fsdpc default and at fp32
# logits), then the per-kernel profile
C=$(cd "$(dirname "$0")" && pwd)
O=$OUT
OUT=$O ROUNDS=2 SIDE_NEW_ARGS=fsdp.mixed_precision.logits_dtype=fp32 bash "$C/run_gaps.sh" rounds1b 2>&1 | grep -E "ROUNDS|exit" | awk '!seen[$0]++'
OUT=$O/prof bash "$C/run_gaps.sh" profile 2>&1 | head -40
echo "== call done ($SECONDS s)"
