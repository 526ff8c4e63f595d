#!/bin/bash
# session 11 (final build), a confirmation on another machine: 1B compiled PyTorch and
# fsdpc (default) in turn, 3 rounds
C=$(cd "$(dirname "$0")" && pwd)
OUT=$OUT ROUNDS=3 bash "$C/run_gaps.sh" rounds1b 2>&1 | grep -E "ROUNDS|exit|gpu|H200" | awk '!seen[$0]++'
grep -h "" "$OUT/clocks-"*.csv 2>/dev/null | head -0
echo "== call done ($SECONDS s)"
