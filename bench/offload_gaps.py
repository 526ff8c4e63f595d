#!/usr/bin/env python3
"""Where a cpu_offload step's time goes, from a bench/cuda/cupti_trace.c
trace (the K and C records; the API records are not needed).

    python3 bench/offload_gaps.py TRACE_DIR [--top 20] [--big-ms 50]

Under cpu_offload the optimizer runs on the host, so the GPU trace has no
optimizer kernels to cut steps by (bench/timeline_summary.py); here a step
ends where the compute stream idles longer than --big-ms (the host update
between the last backward and the next forward). For the last complete step
(from the end of one such gap to the end of the next) it prints the kernel
busy time, the host-to-device and device-to-host copies (bytes, busy time,
GB/s while busy, time both directions run at once), and the kernel-idle gaps
of at least 0.5 ms, each with the copies that run during it, largest first,
plus the idle time summed by what the copy engines do meanwhile."""
import glob
import sys


def read(d):
    k, c = [], []
    for path in glob.glob(d + "/trace.*.tsv"):
        for line in open(path, errors="replace"):
            f = line.rstrip("\n").split("\t")
            if len(f) < 7 or f[0] not in ("K", "C"):
                continue
            rec = (int(f[1]), int(f[2]), int(f[4]), f[6])
            (k if f[0] == "K" else c).append(rec)
    k.sort()
    c.sort()
    return k, c


def union(iv):
    out = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def total(iv):
    return sum(e - s for s, e in iv)


def clip(iv, lo, hi):
    return [(max(s, lo), min(e, hi)) for s, e in iv if e > lo and s < hi]


def inter(a, b):
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def main():
    args = sys.argv[1:]
    top = int(args[args.index("--top") + 1]) if "--top" in args else 20
    big = float(args[args.index("--big-ms") + 1]) if "--big-ms" in args else 50.0
    k, c = read(args[0])
    if not k:
        print("no kernel records in", args[0])
        return
    busy = union([(s, e) for s, e, _, _ in k])
    gaps = [(busy[i][1], busy[i + 1][0]) for i in range(len(busy) - 1)]
    ends = [g[1] for g in gaps if g[1] - g[0] > big * 1e6]
    if len(ends) < 2:
        print("fewer than two idle gaps over %.0f ms: no complete step" % big)
        return
    lo, hi = ends[-2], ends[-1]
    print("steps found: %d; the last complete one: %.1f ms" % (len(ends) - 1, (hi - lo) / 1e6))
    kb = clip(busy, lo, hi)
    print("kernels busy %.1f ms, idle %.1f ms" % (total(kb) / 1e6, (hi - lo - total(kb)) / 1e6))
    copies = {}
    for kind, name in (("1", "H2D"), ("2", "D2H")):
        recs = [(s, e, st, n) for s, e, st, n in c if n.startswith("memcpy kind %s " % kind)]
        recs = [r for r in recs if r[1] > lo and r[0] < hi]
        nbytes = sum(int(n.split()[3]) for _, _, _, n in recs)
        iv = union(clip([(s, e) for s, e, _, _ in recs], lo, hi))
        copies[name] = iv
        t = total(iv)
        streams = sorted({st for _, _, st, _ in recs})
        print("%s: %d copies, %.2f GB, busy %.1f ms, %.1f GB/s while busy, streams %s" %
              (name, len(recs), nbytes / 1e9, t / 1e6, nbytes / t if t else 0.0, streams))
    both = inter(copies["H2D"], copies["D2H"])
    print("H2D and D2H at once: %.1f ms" % (total(both) / 1e6))
    idle = []
    prev = lo
    for s, e in kb:
        if s > prev:
            idle.append((prev, s))
        prev = e
    if prev < hi:
        idle.append((prev, hi))
    cls = {"none": 0, "H2D": 0, "D2H": 0, "both": 0}
    for s, e in idle:
        h = inter([(s, e)], copies["H2D"])
        d = inter([(s, e)], copies["D2H"])
        hb = inter(h, d)
        cls["both"] += total(hb)
        cls["H2D"] += total(h) - total(hb)
        cls["D2H"] += total(d) - total(hb)
        cls["none"] += (e - s) - total(h) - total(d) + total(hb)
    print("kernel-idle time by what the copies do: " +
          ", ".join("%s %.1f ms" % (n, v / 1e6) for n, v in cls.items()))
    print("largest kernel-idle gaps (offset from the step's start, length, copies during it):")
    for s, e in sorted(idle, key=lambda g: g[0] - g[1])[:top]:
        if e - s < 5e5:
            break
        during = [(cs, ce, st, n) for cs, ce, st, n in c if ce > s and cs < e]
        desc = {}
        for cs, ce, st, n in during:
            key = ("H2D" if n.startswith("memcpy kind 1 ") else
                   "D2H" if n.startswith("memcpy kind 2 ") else "other") + "/s%d" % st
            desc[key] = desc.get(key, 0) + int(n.split()[3])
        print("  +%8.2f ms  %7.2f ms  %s" %
              ((s - lo) / 1e6, (e - s) / 1e6,
               ", ".join("%s %.0f MB" % (kk, v / 1e6) for kk, v in sorted(desc.items())) or "-"))


if __name__ == "__main__":
    main()
