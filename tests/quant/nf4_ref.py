#!/usr/bin/env python3
"""NF4 + double quantization: a numpy reference written from bitsandbytes'
algorithm (0.50.2.dev0: functional.quantize_4bit with compress_statistics,
quantize_blockwise, create_dynamic_map and the CUDA kernels' rounding), in
IEEE fp32, and a check that fsdpc's C module (through nf4_tool) gives the
same codes, scales and dequantized values bit for bit on varied tensors.

usage: nf4_ref.py NF4_TOOL WORKDIR
Prints one line per case and "nf4_ref: N cases agree"; exits 1 on any
difference (naming the first differing element) and on a refusal the C
module should not make, or a non-finite input it does not refuse.

Written independently of quant/nf4.c: the 8-bit rounding walks
bitsandbytes' pivot search literally (the C module counts odd entries), the
NF4 code comes from searchsorted (the C module counts thresholds one by
one), the dynamic map and the scales are formed with numpy's fp32."""
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np

F32 = np.float32
NF4 = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
                -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
                0.07958029955625534, 0.16093020141124725, 0.24611230194568634,
                0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
                0.7229568362236023, 1.0], dtype=F32)
# bitsandbytes' decision tree (dQuantizeNF4) compares against these fp32
# literals, the midpoints of neighbouring codes printed to 16 digits. Four
# midpoints lie on an fp32 tie, where the printed decimal sits just past the
# tie, so the literal is not the midpoint rounded to even: they are taken
# here as a C compiler (and nvcc) reads them, rounded once from the decimal.
THRESH_TEXT = """-0.8480964004993439 -0.6106329262256622 -0.4599952697753906
-0.33967943489551544 -0.23460740596055984 -0.13791173323988914 -0.045525018125772476
0.03979014977812767 0.1202552504837513 0.2035212516784668 0.2920137718319893
0.3893125355243683 0.5016634166240692 0.6427869200706482 0.8614784181118011""".split()


def decimal_to_f32(text):
    """The fp32 nearest to a decimal, rounded once (numpy goes through a
    double, which rounds twice)."""
    exact = Fraction(text)
    guess = F32(float(exact))
    cands = [np.nextafter(guess, F32(-np.inf)), guess, np.nextafter(guess, F32(np.inf))]
    return min(cands, key=lambda v: abs(Fraction(float(v)) - exact))


THRESH = np.array([decimal_to_f32(t) for t in THRESH_TEXT], dtype=F32)
MIDPOINT = ((NF4[:-1].astype(np.float64) + NF4[1:].astype(np.float64)) / 2).astype(F32)


def linspace32(start, end, n):
    """torch.linspace in fp32: forward from start for the first half, back
    from end for the rest."""
    start, end = F32(start), F32(end)
    step = F32((end - start) / F32(n - 1))
    out = []
    for i in range(n):
        if i < n // 2:
            out.append(F32(start + F32(step * F32(i))))
        else:
            out.append(F32(end - F32(step * F32(n - 1 - i))))
    return np.array(out, dtype=F32)


def dynamic_map():
    vals = []
    for e in range(7):
        b = linspace32(0.1, 1.0, 2 ** e + 1)
        means = ((b[:-1] + b[1:]) / F32(2.0)).astype(F32)
        scale = F32(10.0 ** (e - 6)) if e < 6 else F32(1.0)
        vals += list((scale * means).astype(F32)) + list((-scale * means).astype(F32))
    vals += [F32(0.0), F32(1.0)]
    assert len(vals) == 256
    return np.sort(np.array(vals, dtype=F32))


def pivot_search(code, x):
    """bitsandbytes' deterministic 8-bit rounding, vectorized: a binary walk
    of pivots from 127, then the midpoint rule against the bracketing
    entries."""
    n = x.shape[0]
    pivot = np.full(n, 127, dtype=np.int64)
    lo_p = np.zeros(n, dtype=np.int64)
    up_p = np.full(n, 255, dtype=np.int64)
    val = code[pivot]
    for i in (64, 32, 16, 8, 4, 2, 1):
        gt = x > val
        lo_p = np.where(gt, pivot, lo_p)
        up_p = np.where(gt, up_p, pivot)
        pivot = np.where(gt, pivot + i, pivot - i)
        val = code[pivot]
    upper, lower = code[up_p], code[lo_p]
    gt = x > val
    mid_up = ((upper + val) * F32(0.5)).astype(F32)
    mid_lo = ((lower + val) * F32(0.5)).astype(F32)
    return np.where(gt, np.where(x > mid_up, up_p, pivot),
                    np.where(x < mid_lo, lo_p, pivot)).astype(np.uint8)


def nf4_codes(prod):
    c = np.searchsorted(THRESH, prod, side="left")  # thresholds strictly below
    c[np.isnan(prod)] = 0  # every comparison of the tree fails for NaN
    return c.astype(np.uint8)


def quantize(x, bs, dq):
    n = x.shape[0]
    nb = -(-n // bs)
    pad = np.zeros(nb * bs, dtype=F32)
    pad[:n] = x
    blocks = pad.reshape(nb, bs)
    absmax = np.abs(blocks).max(axis=1).astype(F32)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        inv = (F32(1.0) / absmax).astype(F32)
        prod = (blocks * inv[:, None]).astype(F32).reshape(-1)
    ncode = n + (n & 1)  # an odd n quantizes one padding zero too
    codes = nf4_codes(prod[:ncode])
    packed = (codes[0::2] << 4 | codes[1::2]).astype(np.uint8)
    out = {"codes": packed, "absmax": absmax, "offset": np.array([0.0], dtype=F32)}
    if dq:
        acc = np.add.accumulate(absmax.astype(np.float64))[-1]  # in order, as the C sum
        offset = F32(acc / nb)
        v = (absmax - offset).astype(F32)
        nb2 = -(-nb // 256)
        v2 = np.zeros(nb2 * 256, dtype=F32)
        v2[:nb] = v
        absmax2 = np.abs(v2.reshape(nb2, 256)).max(axis=1).astype(F32)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            inv2 = (F32(1.0) / absmax2).astype(F32)
            p = (v2.reshape(nb2, 256) * inv2[:, None]).astype(F32).reshape(-1)[:nb]
        out.update(qabsmax=pivot_search(dynamic_map(), p), absmax2=absmax2,
                   offset=np.array([offset], dtype=F32))
    return out


def dequantize(q, n, bs, dq):
    codes = np.empty(q["codes"].shape[0] * 2, dtype=np.uint8)
    codes[0::2], codes[1::2] = q["codes"] >> 4, q["codes"] & 15
    if dq:
        m = dynamic_map()
        blk = np.arange(q["qabsmax"].shape[0]) // 256
        scale = (m[q["qabsmax"]] * q["absmax2"][blk]).astype(F32)
        scale = (scale + q["offset"][0]).astype(F32)
    else:
        scale = q["absmax"]
    return (NF4[codes[:n]] * scale[np.arange(n) // bs]).astype(F32)


def cases(rng):
    """(name, tensor, block_size, double_quant)."""
    normal = lambda n, s=0.02: (rng.standard_normal(n) * s).astype(F32)
    yield "n1", normal(1), 64, True
    yield "n2", normal(2), 64, False
    for n in (63, 64, 65, 127, 4096):
        yield f"normal{n}", normal(n), 64, True
    yield "many_blocks", normal(64 * 600 + 17), 64, True  # absmax2: 3 blocks, short tail
    yield "many_blocks_plain", normal(64 * 600 + 17), 64, False
    for bs in (32, 128, 256, 4096):
        yield f"block{bs}", normal(bs * 5 + 3), bs, True
    yield "zeros", np.zeros(1000, dtype=F32), 64, True
    z = normal(64 * 40)
    z[64 * 3:64 * 5] = 0.0
    z[-64:] = -0.0
    yield "zero_blocks", z, 64, True
    yield "zero_blocks_plain", z.copy(), 64, False
    d = normal(64 * 20)
    d[:64] = rng.standard_normal(64).astype(F32) * F32(1e-41)  # a block of denormals: 1/absmax overflows
    d[64:128] = F32(1.17e-38) * rng.standard_normal(64).astype(F32)  # near the normal limit
    d[200] = F32(1e-45)
    yield "denormals", d, 64, True
    yield "denormals_plain", d.copy(), 64, False
    o = normal(64 * 30)
    o[5] = F32(3e38)
    o[700] = F32(-1e30)
    o[1000] = F32(1e-30)
    yield "outliers", o, 64, True
    yield "constant", np.full(64 * 300, 0.5, dtype=F32), 64, True  # absmax2 = 0
    t = np.tile(NF4, 40) * F32(0.25)
    yield "table_values", t.astype(F32), 64, True
    # Values landing exactly on the thresholds (absmax 1): ties go down.
    th = np.concatenate([THRESH, [F32(1.0)], -THRESH, [F32(-1.0)]] * 4).astype(F32)
    yield "thresholds", th, 32, False
    nxt = np.nextafter(th, F32(np.inf)).astype(F32)
    nxt[15::16] = F32(1.0)
    yield "thresholds_up", nxt, 32, False
    bf = normal(64 * 50, 1.0).view(np.uint32) & np.uint32(0xFFFF0000)
    yield "bf16_values", bf.view(F32), 64, True
    yield "heavy_tail", (rng.standard_cauchy(64 * 270) * 0.01).astype(F32), 64, True


def first_diff(a, b):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    if a.dtype == F32:
        a, b = a.view(np.uint32), b.view(np.uint32)
    if a.shape != b.shape:
        return f"shape {a.shape} vs {b.shape}"
    idx = np.nonzero(a != b)[0]
    return None if idx.size == 0 else f"element {idx[0]}: C {a[idx[0]]:#x} ref {b[idx[0]]:#x}"


def run_tool(tool, work, x, bs, dq):
    os.makedirs(work, exist_ok=True)
    src = os.path.join(work, "in.f32")
    x.astype("<f4").tofile(src)
    return subprocess.run([tool, src, work, str(bs), "1" if dq else "0"],
                          capture_output=True, text=True)


def main():
    tool, work = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(37)
    ref_map = dynamic_map()
    off = np.nonzero(THRESH != MIDPOINT)[0]
    print(f"NF4 thresholds that are not the fp32 midpoint rounded to even: {list(off)}")
    bad = 0
    count = 0
    for name, x, bs, dq in cases(rng):
        count += 1
        r = run_tool(tool, os.path.join(work, name), x, bs, dq)
        if r.returncode != 0:
            print(f"FAIL {name}: nf4_tool refused: {r.stderr.strip()}")
            bad += 1
            continue
        d = os.path.join(work, name)
        got = lambda f, t: np.fromfile(os.path.join(d, f), dtype=t)
        ref = quantize(x, bs, dq)
        ref["deq"] = dequantize(ref, x.shape[0], bs, dq)
        checks = [("map", got("map", F32), ref_map), ("codes", got("codes", np.uint8), ref["codes"]),
                  ("absmax", got("absmax", F32), ref["absmax"]),
                  ("offset", got("offset", F32), ref["offset"]), ("deq", got("deq", F32), ref["deq"])]
        if dq:
            checks += [("qabsmax", got("qabsmax", np.uint8), ref["qabsmax"]),
                       ("absmax2", got("absmax2", F32), ref["absmax2"])]
        fails = [f"{what} {msg}" for what, c, r_ in checks if (msg := first_diff(c, r_))]
        if fails:
            bad += 1
            print(f"FAIL {name} (n {x.shape[0]}, block {bs}, double_quant {dq}): " + "; ".join(fails))
        else:
            err = np.max(np.abs(ref["deq"].astype(np.float64) - x)) if x.size else 0.0
            print(f"ok   {name} (n {x.shape[0]}, block {bs}, double_quant {dq}): "
                  f"bit-equal, max |x - deq| {err:.3g}")
    for name, v in (("nan", np.nan), ("inf", np.inf), ("-inf", -np.inf)):
        x = np.zeros(130, dtype=F32)
        x[129] = v
        r = run_tool(tool, os.path.join(work, "refuse_" + name), x, 64, True)
        line = r.stderr.strip()
        if r.returncode != 1 or "element 129" not in line or "\n" in line:
            print(f"FAIL refuse_{name}: rc {r.returncode}, stderr {line!r}")
            bad += 1
        else:
            print(f"ok   refuse_{name}: {line}")
    if bad:
        print(f"nf4_ref: {bad} of {count + 3} cases differ")
        return 1
    print(f"nf4_ref: {count} cases agree bit for bit, 3 non-finite inputs refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
