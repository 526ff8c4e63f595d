#!/usr/bin/env python3
"""Compares the metrics.jsonl of training runs with a reference run.

usage: compare_runs.py REF_DIR RUN_DIR... [--rtol 1e-5] [--keys loss,eval_loss] [--weights]
Exits 1 with one line per mismatch when any step's value differs from the
reference by more than rtol (relative), or when the steps differ. With
--weights it also compares DIR/ck/final/model.safetensors (fp32, written by
checkpoint.dir=DIR/ck checkpoint.final_dtype=fp32): every tensor's
||run - ref|| / ||ref|| must be within rtol."""
import array
import json
import math
import struct
import sys


def load_st(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            raise SystemExit(f"{path}: {name} is {t['dtype']}, want F32 (checkpoint.final_dtype=fp32)")
        a = array.array("f")
        a.frombytes(data[t["data_offsets"][0]:t["data_offsets"][1]])
        out[name] = a
    return out


def compare_weights(ref_dir, run_dir, rtol):
    ref = load_st(f"{ref_dir}/ck/final/model.safetensors")
    got = load_st(f"{run_dir}/ck/final/model.safetensors")
    if sorted(ref) != sorted(got):
        print(f"{run_dir}: tensors differ from the reference's")
        return 1
    worst, bad = 0.0, 0
    for name, r in ref.items():
        g = got[name]
        num = math.sqrt(sum((x - y) ** 2 for x, y in zip(g, r)))
        den = math.sqrt(sum(y * y for y in r)) or 1e-30
        rel = num / den
        worst = max(worst, rel)
        if rel > rtol:
            print(f"{run_dir}: final weight {name} differs: rel {rel:.2e}")
            bad += 1
    print(f"{run_dir}: final weights, worst relative difference {worst:.2e} over {len(ref)} tensors")
    return bad


def load(d):
    rows = {}
    with open(f"{d}/metrics.jsonl") as f:
        for line in f:
            o = json.loads(line)
            if "step" in o:  # step records; {"event": "start", ...} lines are run records
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
    weights = "--weights" in args
    if weights:
        args.remove("--weights")
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
        if weights:
            bad += compare_weights(args[0], d, rtol)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
