"""Where a contender's time goes in bench_flash.py's figures, for chosen
acceptance shapes: the forward and backward ms with a host sync after every
call (as `bench`) and back to back (ten calls between two events, no sync:
the host's launch cost hidden), the host's own time per call, and the SM
clock and power while each contender runs alone for a few seconds
(nvidia-smi sampled every 50 ms; the script prints the windows).

With ORDERS=1 instead: bench's interleaved timing as it was before
2026-11-24 (four rounds of ten calls, one fixed order a call) with the
contenders in each of three rotated orders, three times each, and each
contender's forward timed right after ten backward calls of each contender
(does the one before change the figure?).

Usage (GPU machine): [ORDERS=1] python3 diag_timing.py PLUGIN_DIR [B,T,NH,KVH,HD ...]
"""
import os
import statistics
import subprocess
import sys
import time

import torch
from torch.nn.attention import sdpa_kernel

from bench_flash import (Flash, fsdpc_contender, interleaved_ms, make, sdpa_contenders,
                         times_ms)


def back_to_back_ms(fn, calls=10, rounds=8):
    return statistics.median(times_ms(fn, rounds, 1, calls))


def host_us(fn, calls=20):
    torch.cuda.synchronize()
    t = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        t.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
    return statistics.median(t)


def soak(fn, seconds):
    t0 = time.time()
    n = 0
    while time.time() - t0 < seconds:
        fn()
        n += 1
        if n % 20 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return t0, time.time()


def contenders_of(fl, q, k, v, do, sdpa=("flash", "cudnn")):
    """fsdpc and the SDPA backends named in sdpa, as interleaved_ms takes them."""
    fns = {"fsdpc": fsdpc_contender(fl, q, k, v, do)}
    extra, _ = sdpa_contenders(q, k, v, do)
    fns.update({n: c for n, c in extra.items() if n in sdpa})
    return fns


def orders(plugin_dir, shapes):
    fl = Flash(plugin_dir)
    for B, T, NH, KVH, HD in shapes:
        q, k, v, do = make(B, T, NH, KVH, HD, 7)
        fns = contenders_of(fl, q, k, v, do)
        names = list(fns)
        flop = 4 * B * NH * T * T * HD / 2
        print(f"\nshape B={B} T={T} NH={NH} KVH={KVH} HD={HD}: bench's interleaved timing,"
              " f+b TFLOP/s per contender, fsdpc / cudnn")
        for rep in range(3):
            for r in range(len(names)):
                order = names[r:] + names[:r]
                ms = interleaved_ms({n: fns[n] for n in order}, rounds=4, reps=10, fixed=True)
                tf = {n: 3.5 * flop / (f + b) / 1e9 for n, (f, b) in ms.items()}
                fw = {n: flop / f / 1e9 for n, (f, b) in ms.items()}
                print(f"  order {'>'.join(order):20s} f+b " +
                      " ".join(f"{n} {tf[n]:6.1f}" for n in names) + "  fwd " +
                      " ".join(f"{n} {fw[n]:6.1f}" for n in names) +
                      f"  ratio {tf['fsdpc'] / tf.get('cudnn', float('nan')):.3f}", flush=True)
        print("  forward TFLOP/s of each (rows) right after 10 backward calls of each (columns),"
              " median of 6")
        res = {}
        for _ in range(6):
            for x in names:
                for pre in names:
                    pb, _, pbwd = fns[pre]
                    with sdpa_kernel(pb) if pb is not None else _null():
                        for _ in range(10):
                            pbwd()
                    xb, xfwd, _ = fns[x]
                    with sdpa_kernel(xb) if xb is not None else _null():
                        t = times_ms(xfwd, 10, 0)
                    res.setdefault((x, pre), []).extend(t)
        print("  " + " " * 8 + "".join(f"{'after ' + p:>14s}" for p in names))
        for x in names:
            print(f"  {x:8s}" + "".join(f"{flop / statistics.median(res[(x, p)]) / 1e9:14.1f}"
                                       for p in names))
        del q, k, v, do, fns
        torch.cuda.empty_cache()


def main():
    plugin_dir = sys.argv[1]
    shapes = [tuple(int(x) for x in s.split(",")) for s in sys.argv[2:]] or [(2, 8192, 16, 16, 128)]
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw",
                            "--format=csv,noheader,nounits", "-lms", "50"],
                           stdout=subprocess.PIPE, text=True)
    fl = Flash(plugin_dir)
    windows = []
    for B, T, NH, KVH, HD in shapes:
        q, k, v, do = make(B, T, NH, KVH, HD, 7)
        fns = contenders_of(fl, q, k, v, do, sdpa=("cudnn",))
        print(f"\nshape B={B} T={T} NH={NH} KVH={KVH} HD={HD}")
        print(f"{'who':6s} {'pass':4s} {'synced ms':>10s} {'b2b ms':>8s} {'host us':>8s}")
        for who, (backend, fwd, bwd) in fns.items():
            for name, fn in (("fwd", fwd), ("bwd", bwd)):
                with sdpa_kernel(backend) if backend is not None else _null():
                    s = statistics.median(times_ms(fn, 20, 3))
                    b = back_to_back_ms(fn)
                    h = host_us(fn)
                print(f"{who:6s} {name:4s} {s:10.4f} {b:8.4f} {h:8.1f}", flush=True)
        for who, (backend, fwd, bwd) in fns.items():
            for name, fn in (("fwd", fwd), ("bwd", bwd)):
                with sdpa_kernel(backend) if backend is not None else _null():
                    time.sleep(1.0)
                    w = soak(fn, 3.0)
                windows.append((f"{B},{T},{NH},{KVH},{HD} {who} {name}", w))
        del q, k, v, do, fns
        torch.cuda.empty_cache()
    time.sleep(0.3)
    smi.terminate()
    samples = []
    for line in smi.stdout.read().splitlines():
        try:
            ts, clk, pw = [x.strip() for x in line.split(",")]
            t = time.mktime(time.strptime(ts.split(".")[0], "%Y/%m/%d %H:%M:%S")) + \
                float("0." + ts.split(".")[1])
            samples.append((t, float(clk), float(pw)))
        except (ValueError, IndexError):
            pass
    print(f"\nclock and power while each runs alone 3 s (last 2 s of it; {len(samples)} samples)")
    for name, (t0, t1) in windows:
        sel = [(c, p) for t, c, p in samples if t0 + 1.0 <= t <= t1]
        if sel:
            print(f"{name:34s} SM MHz median {statistics.median(c for c, _ in sel):6.0f}"
                  f" min {min(c for c, _ in sel):6.0f}  power W median"
                  f" {statistics.median(p for _, p in sel):6.1f}  n={len(sel)}")


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


if __name__ == "__main__":
    if os.environ.get("ORDERS") == "1":
        orders(sys.argv[1], [tuple(int(x) for x in s.split(",")) for s in sys.argv[2:]]
               or [(2, 8192, 16, 16, 128)])
    else:
        main()
