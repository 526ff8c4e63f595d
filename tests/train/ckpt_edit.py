#!/usr/bin/env python3
"""Edits a checkpoint the way a corrupt disk or a careless hand would, then
fixes its checksums (checksums.rank-*.txt) so that only fsdpc's structural
and numerical checks can catch the edit. For tests/train/test_hostile_train.sh.

Usage: ckpt_edit.py DIR EDIT
  nan-shard     first element of unit.1.param in the first shard file := NaN
  nan-hf        first element of the first tensor of model.safetensors := NaN
  shift         meta.json: the second tensor's unit_offset += 1
  move          meta.json: the last tensor of the last unit moves to unit 0
  step-string   meta.json: trainer_state.step := "5"
  step-huge     meta.json: trainer_state.step := 1e15
  flip          a byte in the middle of the first shard file (checksums NOT fixed)
"""
import glob
import json
import os
import struct
import sys
import zlib


def fix_checksums(d, name):
    path = os.path.join(d, name)
    with open(path, "rb") as f:
        data = f.read()
    crc = "%08x" % (zlib.crc32(data) & 0xFFFFFFFF)
    for m in glob.glob(os.path.join(d, "checksums.rank-*.txt")):
        lines = open(m).read().splitlines()
        out = []
        for ln in lines:
            parts = ln.split(" ", 2)
            if len(parts) == 3 and parts[2] == name:
                ln = "%s %d %s" % (crc, len(data), name)
            out.append(ln)
        open(m, "w").write("\n".join(out) + "\n")


def set_first_float(path, tensor=None):
    with open(path, "r+b") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        hdr = json.loads(f.read(n))
        names = [k for k in hdr if k != "__metadata__"]
        name = tensor if tensor in hdr else sorted(names, key=lambda k: hdr[k]["data_offsets"][0])[0]
        off = hdr[name]["data_offsets"][0]
        f.seek(8 + n + off)
        dt = hdr[name]["dtype"]
        f.write(struct.pack("<f", float("nan")) if dt == "F32" else b"\xc0\x7f")
    return name


def main():
    d, edit = sys.argv[1], sys.argv[2]
    if edit == "nan-shard":
        shard = sorted(glob.glob(os.path.join(d, "shard-*.safetensors")))[0]
        set_first_float(shard, "unit.1.param")
        fix_checksums(d, os.path.basename(shard))
        return
    if edit == "nan-hf":
        print(set_first_float(os.path.join(d, "model.safetensors")))
        return
    if edit == "flip":
        shard = sorted(glob.glob(os.path.join(d, "shard-*.safetensors")))[0]
        with open(shard, "r+b") as f:
            f.seek(os.path.getsize(shard) // 2)
            b = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([b[0] ^ 0xFF]))
        return
    meta = os.path.join(d, "meta.json")
    m = json.load(open(meta))
    if edit == "shift":
        m["tensors"][1]["unit_offset"] += 1
    elif edit == "move":
        last = max(m["tensors"], key=lambda t: (t["unit"], t["unit_offset"]))
        last["unit"] = 0
    elif edit == "step-string":
        m["trainer_state"]["step"] = "5"
    elif edit == "step-huge":
        m["trainer_state"]["step"] = 1e15
    else:
        sys.exit("unknown edit " + edit)
    json.dump(m, open(meta, "w"), indent=1)
    fix_checksums(d, "meta.json")


if __name__ == "__main__":
    main()
