"""Summarise an Nsight Compute CSV (--metrics gpu__time_duration.sum --csv):
total GPU time per kernel name, largest first, and per coarse category.
    python3 bench/profile_summary.py ncu.csv [--grid]"""
import csv
import re
import sys
from collections import defaultdict


def category(name):
    n = name.lower()
    if "nccl" in n:
        return "nccl"
    if any(k in n for k in ("gemm", "nvjet", "cutlass", "sm90_xmma", "cublas")):
        return "gemm"
    if any(k in n for k in ("flash", "attn", "attention", "fmha", "sdpa")):
        return "attention"
    if any(k in n for k in ("adam", "sgd", "optim")):
        return "optimizer"
    if any(k in n for k in ("xent", "cross_entropy", "log_softmax", "nll")):
        return "loss"
    return "other"


def main():
    path = sys.argv[1]
    by_grid = "--grid" in sys.argv
    lines = [l for l in open(path, errors="replace") if not l.startswith("==")]
    tot = defaultdict(float)
    cnt = defaultdict(int)
    cat = defaultdict(float)
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        v = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "ns")
        us = v / 1000.0 if unit in ("ns", "nsecond") else v * 1000.0 if unit in ("ms", "msecond") else v
        name = re.sub(r"\(.*", "", row["Kernel Name"])[:90]
        key = f"{name} grid{row.get('Grid Size')} blk{row.get('Block Size')}" if by_grid else name
        tot[key] += us
        cnt[key] += 1
        cat[category(row["Kernel Name"])] += us
    total = sum(tot.values())
    print(f"total kernel time {total / 1000:.1f} ms over {sum(cnt.values())} kernels")
    for c, us in sorted(cat.items(), key=lambda x: -x[1]):
        print(f"  {c:10s} {us / 1000:9.2f} ms  {100 * us / total:5.1f}%")
    for k, us in sorted(tot.items(), key=lambda x: -x[1])[:40]:
        print(f"{us / 1000:9.2f} ms {cnt[k]:6d}x  {k}")


if __name__ == "__main__":
    main()
