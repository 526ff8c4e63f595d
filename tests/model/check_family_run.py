#!/usr/bin/env python3
"""Checks a family's tiny training run (tests/model/test_gemma*_train.sh):
the loss falls by 0.5 over at least 10 steps, and the exported
config.json (RUN/ck/final) holds each key of WANT (a JSON object) with
that value.

usage: check_family_run.py RUN WANT"""
import json
import sys


def main():
    run, want = sys.argv[1], json.loads(sys.argv[2])
    loss = [json.loads(l)["loss"] for l in open(f"{run}/metrics.jsonl") if '"loss"' in l]
    assert len(loss) >= 10 and loss[-1] < loss[0] - 0.5, f"loss did not fall: {loss}"
    c = json.load(open(f"{run}/ck/final/config.json"))
    bad = {k: c.get(k, "(absent)") for k, v in want.items() if c.get(k, "(absent)") != v}
    assert not bad, f"exported config.json: {bad}"
    print(f"loss {loss[0]:.4f} -> {loss[-1]:.4f}")


if __name__ == "__main__":
    main()
