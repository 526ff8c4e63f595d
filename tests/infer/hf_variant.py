#!/usr/bin/env python3
"""hf_variant.py SRC DST EDIT...: copies an HF folder (config.json +
model.safetensors) to DST with edits, for the refusal tests.

EDIT is one of
  key=JSON        set config.json key (a JSON value; 'null' included)
  -key            remove config.json key
  +tensor:NAME:N  add an F32 tensor NAME of shape [N] (zeros)
  -tensor:NAME    drop tensor NAME
Plain Python (json, struct): no numpy or safetensors needed."""
import json
import os
import shutil
import struct
import sys


def read_st(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return header, data


def write_st(path, header, blobs):
    meta = header.pop("__metadata__", None)
    out, off, body = {}, 0, []
    if meta is not None:
        out["__metadata__"] = meta
    for name, (info, blob) in blobs.items():
        out[name] = {"dtype": info["dtype"], "shape": info["shape"],
                     "data_offsets": [off, off + len(blob)]}
        off += len(blob)
        body.append(blob)
    h = json.dumps(out).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(body))


def main():
    src, dst, edits = sys.argv[1], sys.argv[2], sys.argv[3:]
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    st = os.path.join(src, "model.safetensors")
    header, data = read_st(st) if os.path.exists(st) else ({}, b"")
    blobs = {}
    for name, info in header.items():
        if name != "__metadata__":
            b, e = info["data_offsets"]
            blobs[name] = (info, data[b:e])
    for e in edits:
        if e.startswith("+tensor:"):
            _, name, n = e.split(":")
            blobs[name] = ({"dtype": "F32", "shape": [int(n)]}, b"\0" * (4 * int(n)))
        elif e.startswith("-tensor:"):
            del blobs[e.split(":", 1)[1]]
        elif e.startswith("-"):
            cfg.pop(e[1:], None)
        else:
            k, v = e.split("=", 1)
            cfg[k] = json.loads(v)
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    if os.path.exists(st):
        write_st(os.path.join(dst, "model.safetensors"), header, blobs)


main()
