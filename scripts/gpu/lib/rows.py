#!/usr/bin/env python3
"""One printed line per fsdpc training run, from its log folder (metrics.jsonl
and rank0.json), for the scripts of scripts/gpu:

  rows.py result DIR N NAME
      RESULT NAME step_s S tok_s_gpu T peak_alloc_gib P reserved_gib R loss L
      (median step time of the steps after the 4th; tokens/s per GPU at N GPUs)
  rows.py offload PLAN DIR NAME EXIT [--shape SHAPE] [--first K] [--loss0]
      ROW [SHAPE] NAME tok_s T step_s S dev_gib D plan_dev_gib P host_gib H
          plan_host_gib Q pinned_gib N plan_pinned_gib M [loss0 L] [exit X]
      LOSS [SHAPE] NAME l1 l2 ...
      (medians over the steps from K on, all steps when fewer; the measured
      figures from rank0.json beside `fsdpc plan --json`'s for the run, PLAN)
"""
import argparse
import json
import statistics
import sys

G = 2**30


def steps(d):
    return [r for r in map(json.loads, open(f"{d}/metrics.jsonl")) if "step" in r]


def result(d, n, name):
    try:
        rows = steps(d)
        r0 = json.load(open(f"{d}/rank0.json"))
    except Exception as e:
        print("no metrics:", e)
        return
    med = statistics.median([r["step_s"] for r in rows if r["step"] > 4])
    tok = rows[-1]["tokens"] if "tokens" in rows[-1] else 4 * 2048 * n
    print(f"RESULT {name} step_s {med:.4f} tok_s_gpu {tok / med / n:.0f} peak_alloc_gib "
          f"{r0['peak_bytes']['total'] / G:.2f} reserved_gib {(r0.get('reserved_bytes') or 0) / G:.2f} "
          f"loss {rows[-1]['loss']:.4f}")


def offload(a):
    def f(x):
        return "%.3f" % (x / G) if x is not None else "-"
    try:
        mine = [r for r in json.load(open(a.plan)) if r["config"]][0]
    except Exception:
        mine = {}
    try:
        rk = json.load(open(a.dir + "/rank0.json"))
    except Exception:
        rk = {}
    m = None  # the LOSS line needs the steps only
    try:
        m = steps(a.dir)
        late = [r for r in m if r["step"] >= a.first] or m
        tok = statistics.median(r["tok_s"] for r in late)
        sts = statistics.median(r["step_s"] for r in late)
        loss0 = m[0]["loss"]
    except Exception:
        tok = sts = loss0 = None
    who = "%s %-9s" % (a.shape, a.name) if a.shape else "%-15s" % a.name
    loss = (" loss0 %s" % ("%.5f" % loss0 if loss0 else "-")) if a.loss0 else ""
    print("ROW %s tok_s %s step_s %s dev_gib %s plan_dev_gib %s host_gib %s plan_host_gib %s "
          "pinned_gib %s plan_pinned_gib %s%s%s" % (
              who, "%.0f" % tok if tok else "-", "%.3f" % sts if sts else "-",
              f(rk.get("peak_bytes", {}).get("total")), f(mine.get("peak_bytes", {}).get("total")),
              f(rk.get("host_rss_peak_bytes")), f(mine.get("host_total_bytes")),
              f(rk.get("host_pinned_bytes")), f(mine.get("host_pinned_bytes")),
              loss, "" if a.exit == "0" else " exit " + a.exit), flush=True)
    if m is not None:
        print("LOSS %s %s" % (who, " ".join("%.6f" % r["loss"] for r in m)))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "result":
        result(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["offload"])
    p.add_argument("plan")
    p.add_argument("dir")
    p.add_argument("name")
    p.add_argument("exit")
    p.add_argument("--shape")
    p.add_argument("--first", type=int, default=5)
    p.add_argument("--loss0", action="store_true")
    offload(p.parse_args())


if __name__ == "__main__":
    main()
