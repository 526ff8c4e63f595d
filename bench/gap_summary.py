#!/usr/bin/env python3
"""Where the GPU idles in a training step, from the traces that
bench/cuda/cupti_trace.c writes with its host API records (R, D lines).

    python3 bench/gap_summary.py TRACE_DIR [--steps 3] [--top 15]

Steps are found as in bench/timeline_summary.py (a run of optimizer kernels
ends one) and then narrowed to the time the trainer measures (step_s):
from the end of the last cudaMemPoolSetAttribute before the step's first
kernel (the peak reset just before the loop's clock starts) to the end
of the closing cudaStreamSynchronize pair. Falls back to the optimizer-run
boundaries where those calls are missing. Within a step:
  busy     the union of every GPU record (kernels, copies, memsets, all streams)
  idle     the rest: each maximal idle interval is a gap
A gap is classified by how the GPU record after it was issued (the runtime
or driver call with its correlation id):
  start    the step's opening gap (host work before its first GPU record)
  end      from the last GPU record to the return of the closing sync
  host     the call came after the GPU went idle: the host was late; the host
           calls inside the gap (main thread) are summed by name, host time
           outside any call is "host code"
  queued   the call came before the GPU went idle: a stream wait, a
           dependency or the GPU's own launch latency
Prints per step: window, busy, idle and kernel-time sums; per class: time
and count; the host calls inside host gaps; the largest gaps with the GPU
records on either side and the host calls between."""
import glob
import os
import re
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timeline_summary import step_windows, union  # noqa: E402


def read(path):
    rank, gpu, api, ncol = None, [], [], 6
    for line in open(path, errors="replace"):
        if line.startswith("#"):
            m = re.match(r"# rank (\d+)", line)
            if m:
                rank = int(m.group(1))
            if line.startswith("# fields") and " corr " in line:
                ncol = 7
            continue
        p = line.rstrip("\n").split("\t", ncol - 1)
        if len(p) < ncol:
            continue
        corr = int(p[5]) if ncol == 7 else -1
        s, e = int(p[1]), int(p[2])
        if p[0] in ("K", "C", "S"):
            gpu.append((s, e, p[0], int(p[4]), p[-1], corr))
        elif p[0] in ("R", "D"):
            api.append((s, e, int(p[3]), corr, p[-1], p[0]))
    gpu.sort()
    api.sort()
    return rank, gpu, api


def windows(gpu, api, nsteps):
    recs = [(g[0], g[1], g[2], g[3], g[4]) for g in gpu]
    comm = {g[3] for g in gpu if "nccl" in g[4].lower()}
    wins = step_windows(recs, comm)
    out = []
    for lo, hi in wins[1:][-nsteps:]:  # the first window holds start-up work
        # the step's first kernel (a copy or memset right after lo may still
        # be the previous step's: its zeroing of the gradients)
        first = next((g for g in gpu if g[0] >= lo and g[2] == "K"), None)
        t0 = lo
        if first:
            resets = [a for a in api if a[4].startswith("cudaMemPoolSetAttribute") and lo <= a[1] <= first[0]]
            if resets:
                t0 = resets[-1][1]
        t1 = hi
        syncs = [a for a in api if a[4].startswith("cudaStreamSynchronize") and a[1] >= hi]
        if syncs:
            t1 = syncs[0][1]
            if len(syncs) > 1 and syncs[1][0] - syncs[0][1] < 50_000:
                t1 = syncs[1][1]
        out.append((t0, t1))
    return out


def gaps_in(busy, lo, hi):
    cur, out = lo, []
    for s, e in busy:
        if e <= lo or s >= hi:
            continue
        if s > cur:
            out.append((cur, s))
        cur = max(cur, e)
    if cur < hi:
        out.append((cur, hi))
    return out


def short(name, n=60):
    name = re.sub(r"\(.*", "", name)
    name = re.sub(r"^void ", "", name)
    return name[:n]


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    nsteps = int(args[args.index("--steps") + 1]) if "--steps" in args else 3
    top = int(args[args.index("--top") + 1]) if "--top" in args else 15
    files = sorted(glob.glob(os.path.join(args[0], "trace.*.tsv")))
    if not files:
        sys.exit(f"gap_summary: no trace.*.tsv in {args[0]} (did CUPTI start? see the run's log)")
    for f in files:
        rank, gpu, api = read(f)
        if not gpu:
            print(f"{f}: no GPU records")
            continue
        if not api:
            print(f"{f}: no host API records (traced with FSDPC_TRACE_API=0 or an older tracer)")
        by_corr = {}
        for a in api:
            if a[3] and (a[3] not in by_corr or a[5] == "R"):
                by_corr[a[3]] = a
        threads = defaultdict(int)
        for a in api:
            threads[a[2]] += 1
        main_tid = max(threads, key=threads.get) if threads else None
        mapi = [a for a in api if a[2] == main_tid]
        busy = union((g[0], g[1]) for g in gpu)
        starts = [g[0] for g in gpu]
        import bisect

        wins = windows(gpu, api, nsteps)
        print(f"rank {rank}: {len(gpu)} GPU records, {len(api)} host API records; last {len(wins)} steps")
        print("step  window_ms  busy_ms  idle_ms  idle%  kernel_sum_ms  gaps  start_ms  host_ms  queued_ms  end_ms")
        cls_t, cls_n = defaultdict(float), defaultdict(int)
        host_calls = defaultdict(float)
        host_after = defaultdict(float)
        biggest = []
        tot_win = tot_idle = 0.0
        for k, (t0, t1) in enumerate(wins):
            gs = gaps_in(busy, t0, t1)
            idle = sum(e - s for s, e in gs)
            ksum = sum(g[1] - g[0] for g in gpu if g[2] == "K" and g[0] >= t0 and g[1] <= t1)
            per = defaultdict(float)
            for s, e in gs:
                i = bisect.bisect_left(starts, e)
                nxt = gpu[i] if i < len(gpu) and gpu[i][0] == e else None
                prv = None
                j = bisect.bisect_left(starts, s) - 1
                while j >= 0 and gpu[j][1] != s and j > bisect.bisect_left(starts, s) - 64:
                    j -= 1
                if j >= 0 and gpu[j][1] == s:
                    prv = gpu[j]
                launch = by_corr.get(nxt[5]) if nxt else None
                inside = [a for a in mapi if a[1] > s and a[0] < e]
                if s == t0:
                    c = "start"
                elif nxt is None:
                    c = "end"
                elif launch is None or launch[0] >= s:
                    c = "host"
                else:
                    c = "queued"
                per[c] += e - s
                cls_t[c] += e - s
                cls_n[c] += 1
                if c in ("host", "start"):
                    covered = union((max(a[0], s), min(a[1], e)) for a in inside)
                    for a in inside:
                        host_calls[a[4]] += min(a[1], e) - max(a[0], s)
                    host_calls["(host code, no CUDA call)"] += (e - s) - sum(b - a for a, b in covered)
                    before = [a for a in mapi if launch and a[1] <= launch[0]]
                    if c == "host" and before:
                        host_after[before[-1][4]] += e - s
                biggest.append((e - s, k, c, prv[4] if prv else "-", nxt[4] if nxt else "-",
                                ", ".join(f"{a[4]} {(min(a[1], e) - max(a[0], s)) / 1e3:.0f}us" for a in
                                          sorted(inside, key=lambda a: a[0] - a[1])[:4])))
            w = t1 - t0
            tot_win += w
            tot_idle += idle
            print(f"{k:4d} {w / 1e6:10.2f} {(w - idle) / 1e6:8.2f} {idle / 1e6:8.2f} {idle / w * 100:5.1f}% "
                  f"{ksum / 1e6:14.2f} {len(gs):5d} {per['start'] / 1e6:9.3f} {per['host'] / 1e6:8.3f} "
                  f"{per['queued'] / 1e6:10.3f} {per['end'] / 1e6:7.3f}")
        if not wins:
            print("no complete steady step found (fewer than 2 optimizer runs)")
            continue
        print(f"idle {tot_idle / tot_win * 100:.1f}% of the measured step "
              f"(mean window {tot_win / len(wins) / 1e6:.2f} ms, idle {tot_idle / len(wins) / 1e6:.2f} ms a step)")
        print("per class, ms a step (count a step):")
        for c in ("start", "host", "queued", "end"):
            print(f"  {c:7s} {cls_t[c] / len(wins) / 1e6:8.3f} ({cls_n[c] / len(wins):.0f})")
        print("host calls inside start/host gaps, ms a step:")
        for n, t in sorted(host_calls.items(), key=lambda x: -x[1])[:12]:
            print(f"  {t / len(wins) / 1e6:8.3f}  {n}")
        print("host gaps by the last host call before the late launch, ms a step:")
        for n, t in sorted(host_after.items(), key=lambda x: -x[1])[:10]:
            print(f"  {t / len(wins) / 1e6:8.3f}  {n}")
        print(f"largest {top} gaps: us step class | GPU record before -> after | host calls inside")
        for d, k, c, p, n, ins in sorted(biggest, reverse=True)[:top]:
            print(f"  {d / 1e3:8.1f} {k} {c:6s} | {short(p)} -> {short(n)} | {ins}")


if __name__ == "__main__":
    main()
