#!/usr/bin/env python3
"""An independent reader of the TensorBoard event files fsdpc writes, from
the format's definition only (no tensorboard, no protobuf library): checks
every record's framing and masked CRC-32C (bitwise, not fsdpc's table),
decodes the Event protobuf wire format by hand, applies TensorBoard's
SessionLog START purge, and compares the scalars with metrics.jsonl.

usage: read_tfevents.py LOG_DIR   (exit 0 = every check passed)"""
import glob
import json
import math
import os
import struct
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def varint(b, i):
    v = shift = 0
    while True:
        x = b[i]
        i += 1
        v |= (x & 0x7F) << shift
        shift += 7
        if not x & 0x80:
            return v, i


def fields(b):
    """(field number, wire type, value) of one message."""
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        elif wt == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        else:
            raise ValueError("wire type %d" % wt)
        yield f, wt, v


def records(path):
    data = open(path, "rb").read()
    i = 0
    while i < len(data):
        assert i + 12 <= len(data), "%s: truncated header at %d" % (path, i)
        head = data[i:i + 8]
        (n,) = struct.unpack("<Q", head)
        (hc,) = struct.unpack("<I", data[i + 8:i + 12])
        assert hc == masked(head), "%s: bad length CRC at %d" % (path, i)
        body = data[i + 12:i + 12 + n]
        (bc,) = struct.unpack("<I", data[i + 12 + n:i + 16 + n])
        assert len(body) == n and bc == masked(body), "%s: bad data CRC at %d" % (path, i)
        yield body
        i += 16 + n


def event(body):
    ev = {"step": 0}
    for f, wt, v in fields(body):
        if f == 1 and wt == 1:
            ev["wall_time"] = struct.unpack("<d", v)[0]
        elif f == 2 and wt == 0:
            ev["step"] = v
        elif f == 3 and wt == 2:
            ev["file_version"] = v.decode()
        elif f == 5 and wt == 2:
            vals = {}
            for f2, wt2, v2 in fields(v):
                assert f2 == 1 and wt2 == 2, "Summary field %d" % f2
                tag, sv = None, None
                for f3, wt3, v3 in fields(v2):
                    if f3 == 1:
                        tag = v3.decode()
                    elif f3 == 2 and wt3 == 5:
                        sv = struct.unpack("<f", v3)[0]
                assert tag and sv is not None, "a Summary.Value without tag or simple_value"
                vals[tag] = sv
            ev["summary"] = vals
        elif f == 7 and wt == 2:
            # upstream event.proto: session_log = 7 (6 is the deprecated
            # log_message, which TensorBoard does not read as a SessionLog)
            ev["session_log"] = {f2: v2 for f2, _, v2 in fields(v)}
        else:
            raise AssertionError("Event field %d (wire type %d) is not one fsdpc writes "
                                 "(upstream: 1 wall_time, 2 step, 3 file_version, 5 summary, "
                                 "7 session_log)" % (f, wt))
    return ev


# metrics.jsonl key -> tag, scale (as core/src/train/metrics.c maps them)
TAGS = {"loss": ("train/loss", 1), "eval_loss": ("eval/loss", 1), "lr": ("train/lr", 1),
        "grad_norm": ("train/grad_norm", 1), "tok_s": ("perf/tokens_per_s", 1),
        "step_s": ("perf/step_s", 1), "comm_s": ("perf/comm_s", 1),
        "peak_bytes": ("memory/peak_MiB", 1 / 1048576)}
for cat in ("params", "grads", "optim", "activations", "comm", "other"):
    TAGS["peak_%s_bytes" % cat] = ("memory/%s_MiB" % cat, 1 / 1048576)


def scalars_from_events(logdir):
    """tag -> {step: value}, read as TensorBoard's accumulator does: files in
    name order, a SessionLog START purges the steps >= its step."""
    out = {}
    files = sorted(glob.glob(os.path.join(logdir, "*tfevents*")))
    assert files, "no event files in " + logdir
    for p in files:
        evs = [event(b) for b in records(p)]
        assert evs and evs[0].get("file_version") == "brain.Event:2", p + ": first record"
        assert len(evs) > 1 and evs[1].get("session_log", {}).get(1) == 1, \
            p + ": second record is not a SessionLog START (field 7, status 1)"
        for ev in evs[1:]:
            if "session_log" in ev:
                status = ev["session_log"].get(1, 0)
                if status == 1:  # START
                    for d in out.values():
                        for s in [s for s in d if s >= ev["step"]]:
                            del d[s]
            if "summary" in ev:
                for tag, v in ev["summary"].items():
                    out.setdefault(tag, {})[ev["step"]] = v
    return out, files


def scalars_from_metrics(logdir):
    """tag -> {step: value} of metrics.jsonl's current run, float32-rounded."""
    lines = [json.loads(l) for l in open(os.path.join(logdir, "metrics.jsonl")) if l.strip()]
    starts = [i for i, o in enumerate(lines) if o.get("event") == "start" and o["resumed_from"] == 0]
    out, seen = {}, set()
    for o in lines[(starts[-1] if starts else 0):]:
        if o.get("event") == "start":
            continue
        assert o["step"] not in seen, "step %d twice in metrics.jsonl" % o["step"]
        seen.add(o["step"])
        for k, (tag, scale) in TAGS.items():
            if k in o:
                out.setdefault(tag, {})[o["step"]] = struct.unpack("<f", struct.pack("<f", o[k] * scale))[0]
    return out


def f32_bits(x):
    b = struct.unpack("<i", struct.pack("<f", x))[0]
    return b if b >= 0 else -(b & 0x7FFFFFFF)  # ordered: adjacent floats differ by 1


def same_f32(a, b):
    """Equal, or adjacent float32s: metrics.jsonl prints the double in
    decimal and this side rounds that text to float32, while fsdpc rounds the
    double itself, so a value next to a float32 midpoint can land one ulp
    apart (seen on perf/step_s)."""
    return a == b or abs(f32_bits(a) - f32_bits(b)) <= 1


def main():
    logdir = sys.argv[1]
    ev, files = scalars_from_events(logdir)
    me = scalars_from_metrics(logdir)
    assert set(ev) == set(me), "tags differ: %s vs %s" % (sorted(ev), sorted(me))
    for tag in me:
        assert set(ev[tag]) == set(me[tag]), "%s: steps differ: %s vs %s" % (
            tag, sorted(ev[tag]), sorted(me[tag]))
        bad = [(k, ev[tag][k], me[tag][k]) for k in me[tag] if not same_f32(ev[tag][k], me[tag][k])]
        assert not bad, "%s differs at (step, event, metrics): %s" % (tag, bad[:5])
    n = len(me["train/loss"])
    print("%d event files, %d tags, %d steps (%d..%d): equal to metrics.jsonl"
          % (len(files), len(me), n, min(me["train/loss"]), max(me["train/loss"])))


if __name__ == "__main__":
    main()
