#!/usr/bin/env python3
# In-situ durations of the cross-entropy softmax kernel and the GEMM launched just before it
# (the logits GEMM), over the last 3 steps of a CUPTI trace (bench/cuda/cupti_trace.c):
#   python3 insitu.py TRACE_DIR...   (folders holding trace.<pid>.tsv, from run_gaps.sh trace)
import glob, statistics, sys, re
# in-situ kernel durations (us) from a cupti_trace.c TSV: the last 3 steps' kernels matching patterns
for d in sys.argv[1:]:
    f = glob.glob(f"{d}/trace.*.tsv")[0]
    recs = []
    for line in open(f, errors="replace"):
        if line.startswith("#"): continue
        p = line.rstrip("\n").split("\t")
        if len(p) < 6 or p[0] != "K": continue
        recs.append((int(p[1]), int(p[2]), p[-1]))
    recs.sort()
    x = [(e - s) / 1e3 for s, e, n in recs if re.search(r"xent_row|xent_cluster", n)]
    # the GEMM just before each softmax kernel: the logits GEMM
    g = []
    for i, (s, e, n) in enumerate(recs):
        if re.search(r"xent_row|xent_cluster", n):
            g.append((recs[i-1][1] - recs[i-1][0]) / 1e3)
    print(f"{d}: softmax kernels {len(x)}, last 12 median {statistics.median(x[-12:]):.0f} us "
          f"(min {min(x[-12:]):.0f}, max {max(x[-12:]):.0f}); logits GEMM median {statistics.median(g[-12:]):.0f} us")
