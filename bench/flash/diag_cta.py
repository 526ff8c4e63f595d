"""Where a backward CTA's time goes, from a timing-experiment build of the
flash plugin (sandbox variant 12_bwd_diag_times): per CTA the SM
clock at entry, when K / V arrived, after the first step, after the last,
after the dK / dV stores, and when the dQ writer's last reduce-add was
complete. Prints, summed over every SM, the share of SM time in each
phase and in the gaps between one CTA's end and the next CTA's entry on
the same SM.

Usage (GPU machine): python3 diag_cta.py PLUGIN_DIR [B,T,NH,KVH,HD ...]
"""
import ctypes as C
import os
import statistics
import sys

import torch

from bench_flash import Flash, make

N, CTAS = 8, 32768


def run(plugin_dir, shape):
    B, T, NH, KVH, HD = shape
    fl = Flash(plugin_dir)
    lib = C.CDLL(os.path.join(plugin_dir, "libfsdpc-attention-flash.so"))
    q, k, v, do = make(B, T, NH, KVH, HD, 7)
    st = fl.setup(q, k, True)
    out, dq = torch.empty_like(q), torch.empty_like(q)
    dk, dv = torch.empty_like(k), torch.empty_like(k)
    fl.fwd(st, q, k, v, out)
    for _ in range(3):
        fl.bwd(st, q, k, v, out, do, dq, dk, dv)
    torch.cuda.synchronize()
    buf = (C.c_uint64 * (CTAS * N))()
    rc = lib.flash_bwd90_diag_times(buf, C.c_size_t(C.sizeof(buf)))
    if rc != 0:
        sys.exit(f"flash_bwd90_diag_times: {rc}")
    rows = []
    n_cta = KVH * B * ((T + 127) // 128)
    for i in range(min(n_cta, CTAS)):
        r = buf[i * N:(i + 1) * N]
        rows.append(dict(entry=r[0], kv=r[1], first=r[2] or r[3], steps_done=r[3], stored=r[4],
                         writer=r[5] or r[4], sm=r[6] & 0xffffffff, steps=r[6] >> 32))
    per_sm = {}
    for r in rows:
        per_sm.setdefault(r["sm"], []).append(r)
    tot = dict(kv=0, first=0, steady=0, tail=0, writer=0, gap=0, span=0)
    step_c = []
    for sm, rs in per_sm.items():
        rs.sort(key=lambda r: r["entry"])
        for a, b in zip(rs, rs[1:]):
            tot["gap"] += b["entry"] - max(a["stored"], a["writer"])
        for r in rs:
            end = max(r["stored"], r["writer"])
            tot["kv"] += r["kv"] - r["entry"]
            tot["first"] += r["first"] - r["kv"]
            tot["steady"] += r["steps_done"] - r["first"]
            tot["tail"] += r["stored"] - r["steps_done"]
            tot["writer"] += max(0, r["writer"] - r["stored"])
            if r["steps"] > 1:
                step_c.append((r["steps_done"] - r["first"]) / (r["steps"] - 1))
        tot["span"] += max(max(r["stored"], r["writer"]) for r in rs) - rs[0]["entry"]
    n = len(rows)
    print(f"\nshape B={B} T={T} NH={NH} KVH={KVH} HD={HD}: {n} CTAs on {len(per_sm)} SMs, "
          f"{sum(r['steps'] for r in rows) / n:.1f} steps a CTA")
    print(f"  SM clocks summed over SMs, share of the SMs' spans (first entry to last end):")
    for key, what in (("kv", "entry to K / V arrived"), ("first", "first step"),
                      ("steady", "steps 2..n"), ("tail", "last step done to dK / dV stored"),
                      ("writer", "writer's last reduce-add after that"),
                      ("gap", "between a CTA's end and the next's entry")):
        print(f"  {what:42s} {100 * tot[key] / tot['span']:6.2f} %   per CTA {tot[key] / n:9.0f} clk")
    print(f"  cycles a step (steps 2..n), median {statistics.median(step_c):.0f}")


if __name__ == "__main__":
    shapes = [tuple(int(x) for x in s.split(",")) for s in sys.argv[2:]] or [(2, 8192, 16, 16, 128)]
    for s in shapes:
        run(sys.argv[1], s)
