#!/usr/bin/env python3
"""Reads fsdpc's TensorBoard event files with TensorBoard's own reader
(tensorboard.backend.event_processing.event_accumulator, installed on the
GPU host) and checks that it returns the same scalars as metrics.jsonl.

usage: check_tensorboard.py LOG_DIR [LOG_DIR...]
  e.g. after a run that was stopped by SIGTERM at step 45 and resumed to 120:
    fsdpc train tiny.yaml log.dir=P checkpoint.dir=P/ck log.tensorboard=true   # SIGTERM it
    fsdpc train tiny.yaml log.dir=P checkpoint.dir=P/ck log.tensorboard=true checkpoint.resume=auto
    python3 tests/gpu/check_tensorboard.py P
Exit 0 when every tag TensorBoard reads equals metrics.jsonl (as float32) at
every step, each step once; prints one line per directory."""
import json
import os
import struct
import sys

from tensorboard.backend.event_processing import event_accumulator

# metrics.jsonl key -> TensorBoard tag and scale (core/src/train/metrics.c)
TAGS = {"loss": ("train/loss", 1), "eval_loss": ("eval/loss", 1), "lr": ("train/lr", 1),
        "grad_norm": ("train/grad_norm", 1), "tok_s": ("perf/tokens_per_s", 1),
        "step_s": ("perf/step_s", 1), "comm_s": ("perf/comm_s", 1),
        "peak_bytes": ("memory/peak_MiB", 1 / 1048576)}
for cat in ("params", "grads", "optim", "activations", "comm", "other"):
    TAGS["peak_%s_bytes" % cat] = ("memory/%s_MiB" % cat, 1 / 1048576)


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def from_metrics(logdir):
    lines = [json.loads(l) for l in open(os.path.join(logdir, "metrics.jsonl")) if l.strip()]
    fresh = [i for i, o in enumerate(lines) if o.get("event") == "start" and o["resumed_from"] == 0]
    out, seen = {}, set()
    for o in lines[(fresh[-1] if fresh else 0):]:
        if "step" not in o:
            continue
        assert o["step"] not in seen, "step %d twice in metrics.jsonl" % o["step"]
        seen.add(o["step"])
        for k, (tag, scale) in TAGS.items():
            if k in o:
                out.setdefault(tag, {})[o["step"]] = f32(o[k] * scale)
    return out


def from_tensorboard(logdir):
    acc = event_accumulator.EventAccumulator(logdir, size_guidance={event_accumulator.SCALARS: 0},
                                             purge_orphaned_data=True)
    acc.Reload()
    out = {}
    for tag in acc.Tags()["scalars"]:
        events = acc.Scalars(tag)
        steps = [e.step for e in events]
        assert len(steps) == len(set(steps)), "%s: a step twice in TensorBoard" % tag
        out[tag] = {e.step: e.value for e in events}
    return out


def main():
    bad = 0
    for logdir in sys.argv[1:]:
        tb, me = from_tensorboard(logdir), from_metrics(logdir)
        problems = []
        if set(tb) != set(me):
            problems.append("tags: tensorboard %s, metrics.jsonl %s" % (sorted(tb), sorted(me)))
        for tag in sorted(set(tb) & set(me)):
            if tb[tag] != me[tag]:
                diff = [s for s in sorted(set(tb[tag]) | set(me[tag])) if tb[tag].get(s) != me[tag].get(s)]
                problems.append("%s differs at steps %s" % (tag, diff[:8]))
        steps = sorted(me.get("train/loss", {}))
        if problems:
            bad += 1
            print("FAIL %s: %s" % (logdir, "; ".join(problems)))
        else:
            print("OK %s: TensorBoard's reader returns the metrics.jsonl values for %d tags, steps %d..%d (%d steps)"
                  % (logdir, len(me), steps[0], steps[-1], len(steps)))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
