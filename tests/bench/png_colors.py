#!/usr/bin/env python3
"""Counts the pixels of each given colour in an 8-bit RGB/RGBA PNG (the
charts cairo writes), decoded here with zlib and PNG's row filters only.

usage: png_colors.py FILE.png RRGGBB...   prints "RRGGBB count" per colour"""
import struct
import sys
import zlib


def pixels(path):
    png = open(path, "rb").read()
    assert png[:8] == b"\x89PNG\r\n\x1a\n", path + ": not a PNG"
    w, h, depth, ctype = struct.unpack(">IIBB", png[16:26])
    assert depth == 8 and ctype in (2, 6), (depth, ctype)
    bpp = 3 if ctype == 2 else 4
    i, idat = 8, b""
    while i < len(png):
        (n,) = struct.unpack(">I", png[i:i + 4])
        if png[i + 4:i + 8] == b"IDAT":
            idat += png[i + 8:i + 8 + n]
        i += 12 + n
    raw, stride, prev, out = zlib.decompress(idat), w * bpp, bytearray(w * bpp), []
    for y in range(h):
        f, row = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = row[x - bpp] if x >= bpp else 0
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            if f == 1:
                row[x] = (row[x] + a) & 255
            elif f == 2:
                row[x] = (row[x] + b) & 255
            elif f == 3:
                row[x] = (row[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                row[x] = (row[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out.append(bytes(row))
        prev = row
    return w, h, bpp, out


def main():
    w, h, bpp, rows = pixels(sys.argv[1])
    want = {bytes.fromhex(c): 0 for c in sys.argv[2:]}
    for row in rows:
        for x in range(0, len(row), bpp):
            # cairo's RGB24 surface is stored as BGRx but written to PNG as RGB
            k = bytes(row[x:x + 3])
            if k in want:
                want[k] += 1
    print("size %d %d" % (w, h))
    for k, n in want.items():
        print(k.hex(), n)


if __name__ == "__main__":
    main()
