#!/bin/bash
# optim.in_backward on one H100/H200 in one call (about 2 minutes), from a
# carry of a CUDA build (scripts/gpu/carry.sh):
#   here:   bash scripts/gpu/carry.sh /work/main/.carry/NAME
#   device: OUT=$OUT bash tests/gpu/in_backward_check.sh .carry/NAME   (from the repo root)
# The 1B shape (configs/bench/llama3-1b-base.yaml, micro-batch 4, seq 2048,
# train.max_grad_norm 0), 20 steps each: the plain step twice (a and b),
# then optim.in_backward=true; the same three with LoRA. Prints
#   RESULT  per run: steps, median step time, tokens/s, measured peak and
#           reserved GiB, the planner's peak and arena (`fsdpc plan --json`);
#   LOSS    per pair: the worst relative difference of the 20 losses and
#           grad norms, in_backward vs plain a, and plain b vs plain a (the
#           embedding's backward adds with atomics on the GPU, so two plain
#           runs need not be bit for bit equal);
#   PASS/FAIL per in_backward run: 20 steps with finite losses; losses and
#           grad norms within max(2 x the plain runs' own difference, 1e-5)
#           of plain a (exactly equal when the plain runs are); the measured
#           peak equal to the planner's within 0.1% and reserved within 2%
#           of its arena; the full fine-tune's peak below the plain one's by
#           at least 3 GiB (the plan: 33.88 -> 30.14 GiB).
# Logs and metrics in $OUT/in_backward_logs.tar.xz, the lines in $OUT/results.txt.
CARRY=${1:?usage: in_backward_check.sh CARRY_DIR}
. "$CARRY/carry_env.sh" # C, OUT, B, F; LD_LIBRARY_PATH
export FSDPC_PLUGIN_PATH=$B/plugins PYTHONUNBUFFERED=1
W=$(mktemp -d)
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/results.txt"
"$F" data synth --task copy --n 300000 --out "$W/copy.tok" >/dev/null
CFG=configs/bench/llama3-1b-base.yaml
BASE=(data.train="$W/copy.tok" train.micro_batch_size=4 train.max_grad_norm=0 train.max_steps=20
  train.log_every=1)
LORA=(peft.method=lora peft.r=16 peft.alpha=32)

row() { # name overrides...
  local name=$1
  shift
  timeout 200 "$F" train "$CFG" "${BASE[@]}" "$@" log.dir="$W/$name" >"$W/$name.log" 2>&1
  echo "row $name exit $?"
  grep -m2 "error" "$W/$name.log"
  "$F" plan "$CFG" "${BASE[@]}" "$@" --world 1 --json >"$W/$name.plan.json" 2>"$W/$name.plan.err" ||
    echo "   plan failed: $(head -1 "$W/$name.plan.err")"
}

row plain-a
row plain-b
row ib optim.in_backward=true
row lora-a "${LORA[@]}"
row lora-b "${LORA[@]}"
row lora-ib "${LORA[@]}" optim.in_backward=true

python3 - "$W" <<'PY' | tee -a "$OUT/results.txt"
import json, math, os, statistics, sys
w = sys.argv[1]
G = 2 ** 30
def load(name):
    p = os.path.join(w, name, "metrics.jsonl")
    rows = [r for r in map(json.loads, open(p)) if "step" in r] if os.path.exists(p) else []
    rank = os.path.join(w, name, "rank0.json")
    r0 = json.load(open(rank)) if os.path.exists(rank) else {}
    plan = {}
    try:
        plan = [r for r in json.load(open(os.path.join(w, name + ".plan.json"))) if r["config"]][0]
    except (OSError, ValueError, IndexError):
        pass
    return rows, r0, plan
def worst(a, b, key):
    if len(a) != len(b) or not a:
        return math.inf
    return max(abs(x[key] - y[key]) / max(abs(x[key]), 1e-30) for x, y in zip(a, b))
runs = {n: load(n) for n in ("plain-a", "plain-b", "ib", "lora-a", "lora-b", "lora-ib")}
for n, (rows, r0, plan) in runs.items():
    if not rows:
        print(f"RESULT {n}: no metrics (see its log)")
        continue
    med = statistics.median([r["step_s"] for r in rows if r["step"] > 4] or [math.nan])
    peak = r0.get("peak_bytes", {}).get("total") or max(r["peak_bytes"] for r in rows)
    res = r0.get("reserved_bytes") or 0
    print(f"RESULT {n} steps {len(rows)} step_s {med:.4f} tok_s {rows[-1]['tokens'] / med:.0f} "
          f"peak_gib {peak / G:.3f} reserved_gib {res / G:.3f} "
          f"plan_peak_gib {plan.get('peak_bytes', {}).get('total', 0) / G:.3f} "
          f"plan_arena_gib {plan.get('arena_bytes', 0) / G:.3f} loss_last {rows[-1]['loss']:.4f}")
bad = 0
for base, ib in (("plain", "ib"), ("lora", "lora-ib")):
    a, b, x = runs[base + "-a"][0], runs[base + "-b"][0], runs[ib][0]
    ok = len(x) == 20 and all(math.isfinite(r["loss"]) for r in x)
    for key in ("loss", "grad_norm"):
        det, d = worst(a, b, key), worst(a, x, key)
        tol = 0.0 if det == 0 else max(2 * det, 1e-5)
        print(f"LOSS {ib} {key}: in_backward vs {base}-a {d:.3e}, {base}-b vs {base}-a {det:.3e} (bound {tol:.3e})")
        ok &= d <= tol
    rows, r0, plan = runs[ib]
    peak, res = r0.get("peak_bytes", {}).get("total", 0), r0.get("reserved_bytes") or 0
    ppeak, parena = plan.get("peak_bytes", {}).get("total", 0), plan.get("arena_bytes", 0)
    mem = ppeak > 0 and abs(peak - ppeak) <= 0.001 * ppeak and parena > 0 and abs(res - parena) <= 0.02 * parena
    print(f"PEAK {ib}: measured {peak / G:.3f} GiB vs planned {ppeak / G:.3f}; reserved {res / G:.3f} vs arena {parena / G:.3f}: {'ok' if mem else 'off'}")
    ok &= mem
    if ib == "ib":
        pa = runs["plain-a"][1].get("peak_bytes", {}).get("total", 0)
        saved = (pa - peak) / G
        print(f"SAVED {ib}: peak {pa / G:.3f} -> {peak / G:.3f} GiB ({saved:.2f} GiB less)")
        ok &= saved >= 3.0
    print(f"{'PASS' if ok else 'FAIL'} {ib}")
    bad += not ok
sys.exit(1 if bad else 0)
PY
rc=${PIPESTATUS[0]}
tar -C "$W" --exclude=copy.tok -cJf "$OUT/in_backward_logs.tar.xz" . 2>/dev/null
rm -rf "$W"
exit "$rc"
