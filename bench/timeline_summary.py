#!/usr/bin/env python3
"""Exposed communication per training step, from the kernel timelines that
bench/cuda/cupti_trace.c writes (one trace.<pid>.tsv per rank).

    python3 bench/timeline_summary.py TRACE_DIR [--steps 2] [--chrome out.json]

The compute stream is the one with the most non-NCCL kernel time (the
GEMMs); a stream that runs no NCCL kernel is a compute stream too; every
other stream is a communication stream (fsdpc's comm stream also runs the
bf16 casts before all-gathers and the fp32 adds after reduce-scatters). An
NCCL kernel on a compute stream (the grad norm's scalar all-reduce) counts
as communication, not compute: with it, the compute stream used to be taken
for a communication stream at world > 1, and no step was found. Steps end
where a run of optimizer kernels (fsdpc_mt_kernel, *adam*, *sgd*) ends on a
compute stream; the last STEPS steps are summarised. Per rank and step:
  busy compute   the union of non-NCCL compute-stream records
  comm stream    the union of communication-stream records and of NCCL
                 kernels on compute streams (NCCL only: nccl)
  exposed        time when such a communication record runs and no compute
                 record does: what compute waited on, as a share of the step
  idle           neither stream busy (host gaps: launches, syncs)
--chrome writes those steps as a Chrome trace (chrome://tracing, Perfetto):
one process per rank, one thread per stream."""
import glob
import json
import os
import re
import sys

OPT = re.compile(r"fsdpc_mt_kernel|adam|sgd", re.I)
SPLIT_GAP = 50  # non-optimizer compute kernels that separate two optimizer runs


def read_trace(path):
    """GPU records (start, end, kind, stream, name), sorted. Reads both layouts
    of cupti_trace.c: "kind start end device stream name" and, with a
    "# fields ... corr ..." line, "kind start end device stream corr name";
    host API records (R, D) are left out."""
    rank, recs, ncol = None, [], 6
    for line in open(path, errors="replace"):
        if line.startswith("#"):
            m = re.match(r"# rank (\d+)", line)
            if m:
                rank = int(m.group(1))
            if line.startswith("# fields") and " corr " in line:
                ncol = 7
            continue
        p = line.rstrip("\n").split("\t", ncol - 1)
        if len(p) < ncol or p[0] not in ("K", "C", "S"):
            continue
        kind, start, end, stream, name = p[0], p[1], p[2], p[4], p[-1]
        recs.append((int(start), int(end), kind, int(stream), name))
    recs.sort()
    return rank, recs


def union(intervals):
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def clip(iv, lo, hi):
    return [(max(s, lo), min(e, hi)) for s, e in iv if e > lo and s < hi]


def length(iv):
    return sum(e - s for s, e in iv)


def minus(a, b):
    """a \\ b for sorted disjoint interval lists."""
    out, j = [], 0
    for s, e in a:
        cur = s
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            out.append((cur, e))
    return out


def is_nccl(r):
    return "nccl" in r[4].lower()


def comm_streams_of(recs):
    """Streams that run NCCL kernels, except the one with the most non-NCCL
    kernel time (the compute stream)."""
    busy = {}
    for r in recs:
        if r[2] == "K" and not is_nccl(r):
            busy[r[3]] = busy.get(r[3], 0) + r[1] - r[0]
    compute = max(busy, key=busy.get) if busy else None
    return {r[3] for r in recs if is_nccl(r) and r[3] != compute}


def is_comm(r, comm_streams):
    return r[3] in comm_streams or is_nccl(r)


def step_windows(recs, comm_streams):
    compute = [r for r in recs if not is_comm(r, comm_streams) and r[2] == "K"]
    ends, last_opt, since = [], None, 0
    for r in compute:
        if OPT.search(r[4]):
            if last_opt is not None and since > SPLIT_GAP:
                ends.append(last_opt)
            last_opt, since = r[1], 0
        else:
            since += 1
    if last_opt is not None:
        ends.append(last_opt)
    t0 = recs[0][0] if recs else 0
    return [(ends[i - 1] if i else t0, ends[i]) for i in range(len(ends))]


def summarise(rank, recs, nsteps):
    comm_streams = comm_streams_of(recs)
    wins = step_windows(recs, comm_streams)[-nsteps:]
    comp = union((r[0], r[1]) for r in recs if not is_comm(r, comm_streams))
    comm = union((r[0], r[1]) for r in recs if is_comm(r, comm_streams))
    nccl = union((r[0], r[1]) for r in recs if is_nccl(r))
    rows = []
    for lo, hi in wins:
        c, m, nc = clip(comp, lo, hi), clip(comm, lo, hi), clip(nccl, lo, hi)
        both = union(c + m)
        rows.append(dict(rank=rank, step_ms=(hi - lo) / 1e6, compute_ms=length(c) / 1e6,
                         comm_ms=length(m) / 1e6, nccl_ms=length(nc) / 1e6,
                         exposed_ms=length(minus(m, c)) / 1e6,
                         exposed_nccl_ms=length(minus(nc, c)) / 1e6,
                         idle_ms=(hi - lo - length(both)) / 1e6, lo=lo, hi=hi))
    return rows, comm_streams


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    d = args[0]
    nsteps = int(args[args.index("--steps") + 1]) if "--steps" in args else 2
    chrome = args[args.index("--chrome") + 1] if "--chrome" in args else None
    files = sorted(glob.glob(os.path.join(d, "trace.*.tsv")))
    if not files:
        sys.exit(f"timeline_summary: no trace.*.tsv in {d} (did CUPTI start? see the run's log)")
    events, all_rows = [], []
    print(f"exposed communication over the last {nsteps} steps, per rank (ms)")
    print("rank step  step_ms  compute  comm_stream  nccl  exposed  exposed_nccl  idle  exposed_share")
    for i, f in enumerate(files):
        rank, recs = read_trace(f)
        rank = i if rank is None else rank
        if not recs:
            print(f"{rank:4d}  no records in {f}")
            continue
        rows, comm_streams = summarise(rank, recs, nsteps)
        for k, r in enumerate(rows):
            all_rows.append(r)
            print(f"{rank:4d} {k:4d} {r['step_ms']:8.2f} {r['compute_ms']:8.2f} {r['comm_ms']:11.2f} "
                  f"{r['nccl_ms']:6.2f} {r['exposed_ms']:8.2f} {r['exposed_nccl_ms']:12.2f} "
                  f"{r['idle_ms']:6.2f} {r['exposed_ms'] / r['step_ms'] * 100:12.1f}%")
        if chrome and rows:
            lo, hi = rows[0]["lo"], rows[-1]["hi"]
            for s, e, kind, stream, name in recs:
                if e > lo and s < hi:
                    tid = f"stream {stream}{' (comm)' if stream in comm_streams else ''}"
                    events.append(dict(name=name[:120], ph="X", ts=(s - lo) / 1e3, dur=(e - s) / 1e3,
                                       pid=f"rank {rank}", tid=tid))
    if all_rows:
        tot = sum(r["step_ms"] for r in all_rows)
        print(f"all ranks: exposed communication {sum(r['exposed_ms'] for r in all_rows) / tot * 100:.1f}% "
              f"of the step (NCCL kernels alone {sum(r['exposed_nccl_ms'] for r in all_rows) / tot * 100:.1f}%), "
              f"idle {sum(r['idle_ms'] for r in all_rows) / tot * 100:.1f}%, "
              f"mean step {tot / len(all_rows):.2f} ms over {len(all_rows)} rank-steps")
    else:
        print("no complete step found (no optimizer kernels in the traces)")
    if chrome:
        with open(chrome, "w") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)


if __name__ == "__main__":
    main()
