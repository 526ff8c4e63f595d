#!/usr/bin/env python3
"""Compare two (or more) runs' loss curves from their metrics.jsonl.

usage: loss_gap.py RUN_A RUN_B [RUN_C ...] [--window 50] [--from STEP]

RUN is a log dir holding metrics.jsonl (or the file itself), or several of
them joined by commas (runs of one setting with different seeds): their
per-step mean over the steps they share. For each RUN
after the first: the largest per-step relative gap |b - a| / a over the common
steps, the mean per-step gap, and the relative gaps of the window means.
"""
import argparse, json, os


def load(p):
    if "," in p:
        curves = [load(q) for q in p.split(",") if q]
        common = set.intersection(*(set(c) for c in curves))
        return {k: sum(c[k] for c in curves) / len(curves) for k in common}
    f = os.path.join(p, "metrics.jsonl") if os.path.isdir(p) else p
    rows = [json.loads(l) for l in open(f) if l.strip()]
    return {r["step"]: r["loss"] for r in rows if "loss" in r and "step" in r}


def label(p):
    runs = [q for q in p.split(",") if q]
    name = os.path.basename(runs[0].rstrip("/"))
    return f"{name} (+{len(runs) - 1}, mean)" if len(runs) > 1 else name


ap = argparse.ArgumentParser()
ap.add_argument("runs", nargs="+")
ap.add_argument("--window", type=int, default=50)
ap.add_argument("--from", dest="start", type=int, default=1)
a = ap.parse_args()
base = load(a.runs[0])
for other in a.runs[1:]:
    b = load(other)
    ks = sorted(k for k in base if k in b and k >= a.start)
    if not ks:
        raise SystemExit(f"no common steps between {a.runs[0]} and {other}")
    gaps = [(abs(b[k] - base[k]) / abs(base[k]), k) for k in ks]
    worst = max(gaps)
    print(f"{a.runs[0]} vs {other}: {len(ks)} steps {ks[0]}..{ks[-1]}; "
          f"largest per-step gap {100 * worst[0]:.2f}% at step {worst[1]} "
          f"({base[worst[1]]:.4f} vs {b[worst[1]]:.4f}); mean per-step gap "
          f"{100 * sum(g for g, _ in gaps) / len(gaps):.2f}%; final {base[ks[-1]]:.4f} vs {b[ks[-1]]:.4f}")
    print(f"| steps | {label(a.runs[0])} | {label(other)} | gap |")
    print("|---|---|---|---|")
    wmax = 0.0
    for i in range(0, len(ks), a.window):
        w = ks[i:i + a.window]
        ma = sum(base[k] for k in w) / len(w)
        mb = sum(b[k] for k in w) / len(w)
        g = abs(mb - ma) / ma
        wmax = max(wmax, g)
        print(f"| {w[0]}-{w[-1]} | {ma:.4f} | {mb:.4f} | {100 * g:.2f}% |")
    print(f"largest window gap {100 * wmax:.2f}%\n")
