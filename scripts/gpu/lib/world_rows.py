#!/usr/bin/env python3
"""The table of scripts/gpu/world.sh (and hf70b.sh): one row per fsdpc run and per
PyTorch run (bench/torch_fsdp2_baseline.py), with the planner's peak beside
the measured one for fsdpc.

    python3 scripts/gpu/lib/world_rows.py OUT N [--rows]

With --rows, one line per run instead of the tables:
    ROW fsdpc NAME exit E peak_gib P reserved_gib R plan_peak_gib PP plan_arena_gib PA
        plan_alloc_gib PL plan_device_gib PD
        reserved_vs_plan +x% PASS|FAIL torch_peak_gib TP torch_reserved_gib TR
    ROW torch MODEL-STRATEGY-acA-mbB peak_gib P reserved_gib R tok_s_gpu T
reserved: what the run's allocator reserved (rank0.json reserved_bytes; on
the CPU the arena); plan_arena: the arena the planner lays out, what the
allocator reserves before step 1; plan_alloc: that + the late bytes, the
planner's bound on what is allocated later (cuBLASLt workspace, NCCL's own
buffers at world > 1: 256 + 512 MiB, docs/fsdp.md); plan_device: that + the
CUDA runtime, the device memory the run needs. PASS: exit 0, reserved within
2% of plan_arena and at most plan_alloc (issue 32); the
torch figures are the PyTorch run of the same shape, checkpointing and
micro-batch when there is one ("-" otherwise).

OUT holds fsdpc-rows.txt ("name|cfg|exit|overrides" lines), per row
fsdpc-NAME.metrics.jsonl / .rank0.json / .plan.json / .plan.txt, and
torch.jsonl. Steps after the first 4 give the median step time (as the
PyTorch script's --warmup 4). FLOPs per token as the PyTorch script counts
them (torchtitan): 6 x (params - vocab x hidden) + 12 x layers x hidden x seq;
MFU against 989 TFLOP/s (H200 dense bf16)."""
import json
import os
import re
import statistics
import sys

PEAK_TFLOPS = 989.0
GIB = 2.0**30


def shape_of(cfg):
    try:
        text = open(cfg).read()
    except OSError:
        return None
    out = {}
    for key in ("vocab_size", "hidden_size", "num_hidden_layers", "seq_len"):
        m = re.search(key + r":\s*(\d+)", text)
        if not m:
            return None
        out[key] = int(m.group(1))
    return out


def override(ov, key, default):
    m = re.search(re.escape(key) + r"=(\S+)", ov)
    return m.group(1) if m else default


def flops_per_token(params, v, h, layers, seq):
    return 6 * (params - v * h) + 12 * layers * h * seq


def fsdpc_rows(out, n):
    rows = []
    path = os.path.join(out, "fsdpc-rows.txt")
    if not os.path.exists(path):
        return rows
    for line in open(path):
        name, cfg, rc, ov = line.rstrip("\n").split("|", 3)
        base = os.path.join(out, f"fsdpc-{name}")
        row = {"name": name, "rc": int(rc), "overrides": ov}
        try:
            steps = [r for r in map(json.loads, open(base + ".metrics.jsonl")) if "step" in r]
            r0 = json.load(open(base + ".rank0.json"))
        except (OSError, ValueError):
            steps, r0 = [], None
        steady = [r["step_s"] for r in steps if r["step"] > 4] or [r["step_s"] for r in steps]
        if steady and r0:
            med = statistics.median(steady)
            tokens = steps[-1].get("tokens", 0)
            row.update(step_s=med, tok_s_gpu=tokens / med / n, peak=r0["peak_bytes"]["total"] / GIB,
                       reserved=(r0.get("reserved_bytes") or r0.get("arena_bytes") or 0) / GIB, loss=steps[-1]["loss"])
        try:
            plan = [p for p in json.load(open(base + ".plan.json")) if p.get("config")]
            if plan:
                row["plan"] = plan[0]["peak_bytes"]["total"] / GIB
                row["plan_reserved"] = (plan[0].get("reserved_bytes") or 0) / GIB
                row["plan_arena"] = (plan[0].get("arena_bytes") or 0) / GIB
                row["plan_alloc"] = row["plan_arena"] + (plan[0].get("late_bytes") or 0) / GIB
        except (OSError, ValueError, KeyError):
            pass
        try:
            m = re.search(r"([\d.]+) M params", open(base + ".plan.txt").read())
            params = float(m.group(1)) * 1e6 if m else None
        except OSError:
            params = None
        shape = shape_of(cfg)
        if params and shape and "tok_s_gpu" in row:
            seq = int(override(ov, "data.seq_len", shape["seq_len"]))
            fpt = flops_per_token(params, shape["vocab_size"], shape["hidden_size"],
                                  shape["num_hidden_layers"], seq)
            row["tflops"] = row["tok_s_gpu"] * fpt / 1e12
            row["mfu"] = row["tflops"] / PEAK_TFLOPS
        rows.append(row)
    return rows


def torch_rows(out):
    path = os.path.join(out, "torch.jsonl")
    if not os.path.exists(path):
        return []
    return [json.loads(l) for l in open(path) if l.strip()]


def fmt(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) else "-"


def gib(v):
    """GiB with 2 decimals; below 1 GiB (the CPU check's tiny shapes) in MiB."""
    if not isinstance(v, (int, float)):
        return "-"
    return f"{v:.2f}" if v >= 1 or v == 0 else f"{v * 1024:.3f} MiB"


def same_run(fsdpc_row, torch_row):
    """The PyTorch row of a fsdpc row: same shape (1b/8b in the name), same
    checkpointing and micro-batch (its overrides)."""
    name, ov = fsdpc_row["name"], fsdpc_row["overrides"]
    ac = 1 if override(ov, "fsdp.activation_checkpointing", "false") == "true" else 0
    mb = int(override(ov, "train.micro_batch_size", "0"))
    return (name.startswith(str(torch_row.get("model")) + "-") and int(torch_row.get("ac", -1)) == ac
            and int(torch_row.get("bs", -1)) == mb and not torch_row.get("compile"))


def rows_lines(out, n):
    t = torch_rows(out)
    for r in fsdpc_rows(out, n):
        ok = "FAIL"
        dev = "-"
        if r.get("reserved") and r.get("plan_arena"):
            d = r["reserved"] / r["plan_arena"] - 1
            dev = f"{d * 100:+.2f}%"
            ok = "PASS" if r["rc"] == 0 and abs(d) <= 0.02 and r["reserved"] <= r["plan_alloc"] else "FAIL"
        tr = next((x for x in t if same_run(r, x)), {})
        print(f"ROW fsdpc {r['name']} exit {r['rc']} peak_gib {gib(r.get('peak'))} "
              f"reserved_gib {gib(r.get('reserved'))} plan_peak_gib {gib(r.get('plan'))} "
              f"plan_arena_gib {gib(r.get('plan_arena'))} plan_alloc_gib {gib(r.get('plan_alloc'))} "
              f"plan_device_gib {gib(r.get('plan_reserved'))} "
              f"reserved_vs_plan {dev} {ok} "
              f"torch_peak_gib {gib(tr.get('peak_alloc_gib'))} torch_reserved_gib {gib(tr.get('peak_reserved_gib'))}")
    for x in t:
        comp = "-compiled" if x.get("compile") else ""
        print(f"ROW torch {x['model']}-{x['strategy']}-ac{x['ac']}-mb{x['bs']}{comp} "
              f"peak_gib {x['peak_alloc_gib']:.2f} reserved_gib {x['peak_reserved_gib']:.2f} "
              f"tok_s_gpu {x['tok_s_gpu']:.0f}")


def main():
    out, n = sys.argv[1], int(sys.argv[2])
    if "--rows" in sys.argv[3:]:
        rows_lines(out, n)
        return
    print(f"## world {n}: fsdpc rows (planner = `fsdpc plan` with the same overrides, config's row)\n")
    print("| row | exit | step s | tokens/s per GPU | TFLOP/s per GPU | MFU | peak GiB | planner GiB "
          "| planner error | reserved GiB | loss |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in fsdpc_rows(out, n):
        err = "-"
        if "plan" in r and "peak" in r and r["peak"] > 0:
            err = f"{(r['plan'] - r['peak']) / r['peak'] * 100:+.1f}%"
        mfu = f"{r['mfu'] * 100:.1f}%" if "mfu" in r else "-"
        print(f"| {r['name']} | {r['rc']} | {fmt(r.get('step_s'), '.4f')} | {fmt(r.get('tok_s_gpu'), ',.0f')} "
              f"| {fmt(r.get('tflops'), '.1f')} | {mfu} | {gib(r.get('peak'))} | {gib(r.get('plan'))} "
              f"| {err} | {gib(r.get('reserved'))} | {fmt(r.get('loss'), '.4f')} |")
    t = torch_rows(out)
    if t:
        print("\n## PyTorch FSDP2 rows (bench/torch_fsdp2_baseline.py)\n")
        print("| model | strategy | compiled | ac | bs | step s | tokens/s per GPU | TFLOP/s per GPU | MFU "
              "| peak alloc GiB | reserved GiB |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in t:
            comp = "yes" if r.get("compile") else "no"
            print(f"| {r['model']} | {r['strategy']} | {comp} | {r['ac']} | {r['bs']} | {r['step_s']:.4f} "
                  f"| {r['tok_s_gpu']:,.0f} | {r['tflops_gpu']:.1f} | {r['tflops_gpu'] / PEAK_TFLOPS * 100:.1f}% "
                  f"| {r['peak_alloc_gib']:.2f} | {r['peak_reserved_gib']:.2f} |")


if __name__ == "__main__":
    main()
