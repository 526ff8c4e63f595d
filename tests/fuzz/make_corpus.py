#!/usr/bin/env python3
"""Writes the seed corpus for fuzz_safetensors into corpus/ (small files:
valid files of every readable dtype plus one file per refusal class).
Rerun only to regenerate the seeds; libFuzzer finds the rest."""
import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def st(header, data=b"", pad=True, hlen=None):
    h = header if isinstance(header, bytes) else json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * ((8 - len(h) % 8) % 8)
    n = len(h) if hlen is None else hlen
    return struct.pack("<Q", n) + h + data


def t(dtype, shape, b, e):
    return {"dtype": dtype, "shape": shape, "data_offsets": [b, e]}


seeds = {
    "ok_f32": st({"w": t("F32", [2, 2], 0, 16)}, struct.pack("<4f", 1, -2, 3.5, 0)),
    "ok_bf16_meta": st({"__metadata__": {"format": "pt"}, "a": t("BF16", [3], 0, 6)},
                       bytes([0x80, 0x3F, 0xC0, 0x7F, 0x80, 0xFF])),
    "ok_f16": st({"h": t("F16", [2], 0, 4)}, bytes([0x00, 0x3C, 0x01, 0x00])),
    "ok_mixed": st({"a": t("F32", [1], 0, 4), "i": t("I64", [1], 4, 12), "u": t("U8", [4], 12, 16),
                    "d": t("F64", [1], 16, 24)}, bytes(24)),
    "ok_scalar_empty": st({"s": t("F32", [], 0, 4), "z": t("F32", [0, 5], 4, 4)}, bytes(4)),
    "ok_gap": st({"a": t("F32", [1], 8, 12)}, bytes(16)),
    "ok_empty_header": st({}),
    "ok_unpadded": st({"x": t("BF16", [1], 0, 2)}, bytes(2), pad=False),
    "ok_4d": st({"k": t("F32", [1, 1, 2, 1], 0, 8)}, bytes(8)),
    "bad_empty": b"",
    "bad_short": b"\x10\x00\x00",
    "bad_hlen_big": st({}, hlen=1 << 20),
    "bad_hlen_huge": struct.pack("<Q", 0xFFFFFFFFFFFFFFFF) + b"{}",
    "bad_not_json": st(b"{nope}"),
    "bad_not_brace": st(b"[1,2,3] "),
    "bad_trailing": st(b'{}x      '),
    "bad_dtype": st({"w": t("Q7", [1], 0, 4)}, bytes(4)),
    "bad_shape_neg": st({"w": t("F32", [-1], 0, 4)}, bytes(4)),
    "bad_shape_overflow": st({"w": t("F32", [4294967296, 4294967296], 0, 4)}, bytes(4)),
    "bad_shape_float": st({"w": t("F32", [1.5], 0, 4)}, bytes(4)),
    "bad_offsets_range": st({"w": t("F32", [1], 0, 4)}, bytes(2)),
    "bad_offsets_size": st({"w": t("F32", [2], 0, 4)}, bytes(4)),
    "bad_offsets_reversed": st({"w": t("F32", [1], 4, 0)}, bytes(8)),
    "bad_overlap": st({"a": t("F32", [2], 0, 8), "b": t("F32", [2], 4, 12)}, bytes(12)),
    "bad_overlap_hidden": st({"a": t("F32", [4], 0, 16), "z": t("F32", [0], 4, 4),
                              "b": t("F32", [2], 8, 16)}, bytes(16)),
    "bad_dup": st(b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                  b'"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', bytes(8)),
    "bad_meta_type": st({"__metadata__": {"k": 1}}),
    "bad_missing_fields": st({"w": {"dtype": "F32"}}),
    "bad_ndim": st({"w": t("F32", [1] * 9, 0, 4)}, bytes(4)),
    "bad_nested": st(b'{"a":' + b"[" * 200 + b"]" * 200 + b"}"),
}

os.makedirs(OUT, exist_ok=True)
for name, blob in seeds.items():
    with open(os.path.join(OUT, name), "wb") as fp:
        fp.write(blob)
print(f"wrote {len(seeds)} seeds to {OUT}")
