#!/usr/bin/env bash
# bench/timeline_summary.py on a synthetic two-rank CUPTI trace: per step a
# 100 us GEMM on the compute stream (7), an 80 us NCCL kernel on the comm
# stream (9) from 50 to 130 us (30 us of it exposed), 5 optimizer kernels,
# 60 element-wise kernels and a 4 us NCCL all-reduce on the compute stream
# (the grad norm's, as at world > 1): exposed communication 3.4% of a 1 ms
# step (NCCL 3.4%), three steps found, the last two summarised, a Chrome
# trace written. The all-reduce on the compute stream once made the script
# take it for a communication stream and find no step.
set -u
: "${FSDPC_SOURCE_DIR:?FSDPC_SOURCE_DIR must point at the source tree}"
TMP=$(mktemp -d /tmp/fsdpc-timeline.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
python3 - "$TMP" <<'PY'
import sys
d = sys.argv[1]
for r in (0, 1):
    with open(f"{d}/trace.{100 + r}.tsv", "w") as f:
        f.write(f"# rank {r}\n")
        for step in range(3):
            b = step * 1000
            rows = [("K", b, b + 100, 7, "gemm_fwd"), ("K", b + 50, b + 130, 9, "ncclDevKernel_AllGather")]
            rows += [("K", b + 130 + 2 * i, b + 131 + 2 * i, 7, "void fsdpc_mt_kernel<AdamW>") for i in range(5)]
            rows += [("K", b + 200 + i, b + 201 + i, 7, "ew") for i in range(60)]
            rows += [("K", b + 300, b + 304, 7, "ncclDevKernel_AllReduce_Sum_f64")]
            for k, s, e, st, n in rows:
                f.write(f"{k}\t{s * 1000}\t{e * 1000}\t0\t{st}\t{n}\n")
PY
out=$(python3 "$FSDPC_SOURCE_DIR/bench/timeline_summary.py" "$TMP" --steps 2 --chrome "$TMP/c.json") || {
  echo "FAIL: timeline_summary.py exited $?"; exit 1; }
echo "$out"
echo "$out" | grep -q "all ranks: exposed communication 3.4% of the step (NCCL kernels alone 3.4%)" ||
  { echo "FAIL: exposed share is not 3.4%"; exit 1; }
[ "$(echo "$out" | grep -cE '^ +[01] +[01] +1\.00 ')" = 4 ] || { echo "FAIL: want 2 ranks x 2 steps of 1.00 ms"; exit 1; }
python3 -c "import json,sys; e=json.load(open('$TMP/c.json'))['traceEvents']; sys.exit(0 if len(e) > 100 and any('(comm)' in x['tid'] for x in e) else 1)" ||
  { echo "FAIL: the Chrome trace lacks events or the comm stream"; exit 1; }
echo PASS
