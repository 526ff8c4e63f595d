#!/bin/bash
# session 11's acceptance call (final build): CUDA tests, flash check + bench, side by
# side with a row of new at fp32 logits (its default on CUDA is now bf16)
C=$(cd "$(dirname "$0")" && pwd)
O=$OUT
OUT=$O/tests bash "$C/run_gaps.sh" tests 2>&1 | grep -E "exit" | awk '!seen[$0]++' | tr '\n' ' '; echo
OUT=$O SIDE_NEW_ARGS=fsdp.mixed_precision.logits_dtype=fp32 SIDE_S=330 bash "$C/run_final_speed.sh" > "$O/final.txt" 2>&1
grep -E "^ *[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+|check exit|RESULT side|CLOCKS|compile1b RESULT|eager1b RESULT|8b RESULT" "$O/final.txt" | awk '!seen[$0]++' | cut -c1-230
echo "== call done ($SECONDS s)"
