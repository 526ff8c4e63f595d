"""The planner against the engine in one `fsdpc bench` result (bench.json):
every fsdpc row ran, its planned total peak is within 5% of the measured
one, and its shard bytes and collective bytes per step are exact (a row
named *8bit*: its optimizer bytes within 1% over; a row named
*offload-optim*: its optimizer peak exact, or within 1% over for 8bit). With
--host (a CPU run, where the tracked peak is host memory) the planned
pageable host memory must match the measured peak within 5% too, with
nothing pinned. Prints one line per row; exits 1 naming every miss.

    check_bench_plan.py BENCH_JSON WORLD ROWS [--host]
"""
import json
import sys


def main():
    path, world, want_rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    host = "--host" in sys.argv[4:]
    rows = [r for r in json.load(open(path))["rows"] if r["source"] == "fsdpc"]
    if len(rows) != want_rows:
        print("FAIL (world %d): %d fsdpc rows, expected %d: %s"
              % (world, len(rows), want_rows, [r["name"] for r in rows]))
        return 1
    bad = []
    for r in rows:
        if not r["ok"]:
            bad.append("%s failed: %s" % (r["name"], r.get("reason")))
            continue
        p = r["planned"]
        pt, mt = p["peak_bytes"]["total"], r["peak_bytes"]["total"]
        err = abs(pt - mt) / mt
        print("world %d %-40s planned %8.3f MiB measured %8.3f MiB (%.2f%%)"
              % (world, r["name"], pt / 2**20, mt / 2**20, 100 * err))
        if err > 0.05:
            bad.append("%s: total peak off by %.2f%% (planned %d measured %d)"
                       % (r["name"], 100 * err, pt, mt))
        if host:
            hp = p["host_pageable_bytes"]
            herr = abs(hp - mt) / mt
            print("world %d %-40s host planned %8.3f MiB measured %8.3f MiB (%.2f%%)"
                  % (world, r["name"], hp / 2**20, mt / 2**20, 100 * herr))
            if herr > 0.05 or p["host_pinned_bytes"] != 0:
                bad.append("%s: host planned %d (pinned %d) measured %d"
                           % (r["name"], hp, p["host_pinned_bytes"], mt))
        # offload.optimizer: the state and the two stream buffers (a piece
        # each), exactly; adamw8bit's state and largest piece differ per
        # rank (partial blocks), the planner adds the largest of each and
        # gives the largest rank's state (shard_bytes are rank 0's): at most
        # 1% over
        q8 = "8bit" in r["name"]
        po, mo = p["peak_bytes"]["optim"], r["peak_bytes"]["optim"]
        if "offload-optim" in r["name"] and not (po == mo or (q8 and mo <= po <= 1.01 * mo)):
            bad.append("%s: optimizer peak planned %d measured %d" % (r["name"], po, mo))
        if q8 and not r["shard_bytes"]["optim"] <= p["optim"] <= 1.01 * r["shard_bytes"]["optim"]:
            bad.append("%s: optim planned %d measured (rank 0) %d"
                       % (r["name"], p["optim"], r["shard_bytes"]["optim"]))
        for k in ("params", "grads") + (() if q8 else ("optim",)):
            if p[k] != r["shard_bytes"][k]:
                bad.append("%s: %s planned %d measured %d" % (r["name"], k, p[k], r["shard_bytes"][k]))
        for k in ("all_gather", "reduce_scatter", "all_reduce"):
            if p["comm_bytes_per_step"][k] != r["comm_bytes_per_step"][k]:
                bad.append("%s: %s bytes planned %d measured %d"
                           % (r["name"], k, p["comm_bytes_per_step"][k], r["comm_bytes_per_step"][k]))
    if bad:
        print("FAIL (world %d): %s" % (world, "; ".join(bad)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
