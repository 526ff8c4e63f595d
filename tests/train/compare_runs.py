#!/usr/bin/env python3
"""Compares the metrics.jsonl of training runs with a reference run.

usage: compare_runs.py REF_DIR RUN_DIR... [--rtol 1e-5] [--keys loss,eval_loss]
Exits 1 with one line per mismatch when any step's value differs from the
reference by more than rtol (relative), or when the steps differ."""
import json
import sys


def load(d):
    rows = {}
    with open(f"{d}/metrics.jsonl") as f:
        for line in f:
            o = json.loads(line)
            rows[o["step"]] = o
    return rows


def main():
    args = sys.argv[1:]
    rtol, keys = 1e-5, ["loss", "eval_loss", "grad_norm"]
    if "--rtol" in args:
        i = args.index("--rtol")
        rtol = float(args[i + 1])
        del args[i:i + 2]
    if "--keys" in args:
        i = args.index("--keys")
        keys = args[i + 1].split(",")
        del args[i:i + 2]
    ref, runs = load(args[0]), args[1:]
    bad = 0
    for d in runs:
        got = load(d)
        if sorted(got) != sorted(ref):
            print(f"{d}: steps {sorted(got)} != reference steps {sorted(ref)}")
            bad += 1
            continue
        worst = 0.0
        for step, r in ref.items():
            for k in keys:
                if k not in r:
                    continue
                a, b = got[step].get(k), r[k]
                if a is None:
                    print(f"{d}: step {step} has no {k}")
                    bad += 1
                    continue
                rel = abs(a - b) / max(abs(b), 1e-12)
                worst = max(worst, rel)
                if rel > rtol:
                    print(f"{d}: step {step} {k} {a!r} vs reference {b!r} (rel {rel:.2e})")
                    bad += 1
        print(f"{d}: worst relative difference {worst:.2e} over {len(ref)} steps")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
