"""Several builds of the flash plugin (var/old, var/new, sandbox variants) side by side
on the GPU machine, in one process: the same accuracy grid as
bench_flash.py check (reference computed once per case, every variant
measured against it), then forward / backward TFLOP/s of every variant that
passed, on the same inputs, with SDPA's flash backend alongside.

  python3 bench_variants.py check|bench|both DIR...   (each DIR holds one
  libfsdpc-attention-flash.so; its name labels the column)"""
import os
import sys

import torch

from bench_flash import (TOL, flash_run, fsdpc_contender, interleaved_ms, make, random_docs,
                         reference, rel, sdpa_contenders)
from flash_ctypes import Flash


def check(variants):
    cases = []
    for T in (1, 17, 128, 1000, 2048, 8192):
        for HD in (64, 128):
            for ratio in (1, 4, 8):
                cases.append((2 if T <= 128 else 1, T, 8, 8 // ratio, HD, True, False))
    cases += [(1, 1000, 8, 2, 128, False, False), (1, 1000, 8, 2, 64, False, False),
              (1, 2048, 8, 2, 128, True, True), (2, 777, 8, 1, 64, True, True),
              (2, 8192, 8, 1, 64, True, True), (1, 8192, 8, 8, 128, True, True)]
    worst = {n: 0.0 for n in variants}
    fails = {n: 0 for n in variants}
    seed = 100
    for B, T, NH, KVH, HD, causal, docs in cases:
        seed += 1
        q, k, v, do = make(B, T, NH, KVH, HD, seed)
        doc = random_docs(B, T, seed) if docs else None
        ref = reference(q, k, v, do, causal, doc)
        line = f"B={B} T={T:<5d} NH={NH} KVH={KVH} HD={HD:<3d} {'docs' if docs else ('causal' if causal else 'full'):6s}"
        for n, fl in variants.items():
            errs = [rel(a, b) for a, b in zip(flash_run(fl, q, k, v, do, causal, doc), ref)]
            e = max(errs)
            worst[n] = max(worst[n], e)
            fails[n] += not e < TOL
            line += f" | {n} {'ok' if e < TOL else 'FAIL'} " + " ".join(f"{x:.2e}" for x in errs)
        print(line, flush=True)
        del ref
    for n in variants:
        print(f"check {n}: {len(cases) - fails[n]} of {len(cases)} cases within {TOL:g}"
              f" (worst {worst[n]:.2e})")
    return {n for n in variants if fails[n] == 0}


def bench(variants, shapes):
    """TFLOP/s of each build beside SDPA's flash and cuDNN backends, all timed
    in bench_flash.interleaved_ms's rounds (each contender after each other
    one alike: the second build's forward no longer always follows the
    first's backward, which moved identical forward code by up to 9 %,
    2026-11-24-flash-s10.md call 5)."""
    tf = lambda flop, ms: flop / ms / 1e9
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("causal, TFLOP/s (fwd FLOPs 2*B*NH*T^2*HD, bwd 2.5x; median over 2n rounds of 5 calls,"
          " the n contenders in rotating orders); sdpa = SDPA's flash backend, cudnn = its cuDNN"
          " backend")
    for B, T, NH, KVH, HD in shapes:
        q, k, v, do = make(B, T, NH, KVH, HD, 7)
        fwd_flop = 4 * B * NH * T * T * HD / 2
        contenders = {n: fsdpc_contender(fl, q, k, v, do) for n, fl in variants.items()}
        sdpa, how = sdpa_contenders(q, k, v, do)
        contenders.update({"sdpa" if n == "flash" else n: c for n, c in sdpa.items()})
        ms = interleaved_ms(contenders, rounds=2 * len(contenders), reps=5)
        row = f"B={B} T={T} NH={NH} KVH={KVH} HD={HD}:"
        for n in variants:
            f, b = ms[n]
            row += f" | {n} fwd {tf(fwd_flop, f):6.1f} bwd {tf(2.5 * fwd_flop, b):6.1f} ({f:.3f}/{b:.3f} ms)"
        if "sdpa" in ms:
            f, b = ms["sdpa"]
            row += f" | sdpa fwd {tf(fwd_flop, f):6.1f} bwd {tf(2.5 * fwd_flop, b):6.1f}"
        if "cudnn" in ms:
            f, b = ms["cudnn"]
            row += f" | cudnn ({how['cudnn']}) fwd {tf(fwd_flop, f):6.1f} bwd {tf(2.5 * fwd_flop, b):6.1f}"
        print(row, flush=True)
        del q, k, v, do, contenders, sdpa
        torch.cuda.empty_cache()


SHAPES = ((4, 2048, 32, 8, 64), (8, 2048, 32, 32, 64), (2, 8192, 32, 8, 64),
          (8, 2048, 16, 16, 128), (8, 2048, 32, 8, 128), (2, 8192, 32, 8, 128))
# BV_SHAPES=acc: the rows of bench_flash.py bench (the acceptance table) and
# the 1B attention shape.
if os.environ.get("BV_SHAPES") == "acc":
    from bench_flash import SHAPES as ACC_SHAPES
    SHAPES = ((4, 2048, 32, 8, 64),) + tuple(ACC_SHAPES)

if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("check", "bench", "both"):
        sys.exit(__doc__)
    variants = {os.path.basename(d.rstrip("/")): Flash(d) for d in sys.argv[2:]}
    ok = set(variants)
    if sys.argv[1] in ("check", "both"):
        ok = check(variants)
    if sys.argv[1] in ("bench", "both"):
        bench({n: f for n, f in variants.items() if n in ok}, SHAPES)
    sys.exit(0 if ok == set(variants) else 1)
