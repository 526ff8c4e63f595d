#!/usr/bin/env bash
# Acceptance (CPU): configs/bench/tiny-cpu-strategies.yaml -- FULL_SHARD,
# SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD/2 at world 4 -- finishes, writes the
# table, CSV, JSON and chart; the planner's params/grads/optim bytes equal the
# engine's accounting exactly and its total peak is within 25% of measured.
# Also: a failing variant is a row that says why, and baseline rows merge.
set -u
: "${FSDPC:?FSDPC must point at the fsdpc executable}"
src=${FSDPC_SOURCE_DIR:?}
dir=$(mktemp -d "${FSDPC_BINARY_DIR:-/tmp}/bench-XXXXXX")
trap 'rm -rf "$dir"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

"$FSDPC" data synth --task qa --out "$dir/qa.tok" >/dev/null 2>&1 || { echo "FAIL: data synth"; exit 1; }

# A PyTorch-style baseline line, as bench/torch_fsdp2_baseline.py writes it.
cat > "$dir/torch.jsonl" <<'J'
RESULT {"model": "tiny", "strategy": "full", "ac": 0, "bs": 16, "seq": 64, "world": 4, "step_s": 0.1, "tok_s_gpu": 2560.0, "params": 820000, "tflops_gpu": 0.01, "peak_alloc_gib": 0.04, "peak_reserved_gib": 0.06, "loss": 4.0}
J

start=$(date +%s)
"$FSDPC" bench "$src/configs/bench/tiny-cpu-strategies.yaml" --out "$dir/out" --steps 3 \
  --warmup 1 --repeats 2 --baseline "$dir/torch.jsonl" "data.train=$dir/qa.tok" \
  >"$dir/table.txt" 2>"$dir/progress.txt"
rc=$?
took=$(( $(date +%s) - start ))
cat "$dir/table.txt"
[ "$rc" -eq 0 ] || { fail "bench exited $rc: $(tail -3 "$dir/progress.txt")"; exit 1; }
echo "bench took ${took}s"
[ "$took" -lt 180 ] || fail "bench took ${took}s (limit 180)"
for f in bench.csv bench.json bench.svg bench.png; do
  [ -s "$dir/out/$f" ] || fail "missing $dir/out/$f"
done
grep -q "FULL_SHARD" "$dir/table.txt" || fail "table lacks FULL_SHARD"
grep -q "memory per rank" "$dir/table.txt" || fail "table lacks the memory part"

python3 - "$dir/out" <<'PY' || fails=$((fails + 1))
import csv, json, sys, xml.dom.minidom
out = sys.argv[1]
doc = json.load(open(out + "/bench.json"))
rows = doc["rows"]
names = [r["name"] for r in rows if r["source"] == "fsdpc"]
assert names == ["FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD/2"], names
base = [r for r in rows if r["source"] == "baseline"]
assert len(base) == 1 and base[0]["name"].startswith("torch full"), base
bad = []
for r in rows:
    if r["source"] != "fsdpc":
        continue
    assert r["ok"], r
    assert r["world"] == 4 and r["step_s"]["n"] == 6, r  # 3 steps x 2 repeats
    assert r["step_s"]["min"] <= r["step_s"]["median"] <= r["step_s"]["max"]
    assert r["tok_s"] > 0 and abs(r["tok_s_per_rank"] * 4 - r["tok_s"]) < 1e-6 * r["tok_s"]
    assert r["flops_per_token"] > 0 and r["tflops_per_rank"] > 0
    assert r["final_loss"] > 0
    p, m = r["planned"], r["shard_bytes"]
    for k in ("params", "grads", "optim"):
        if p[k] != m[k]:
            bad.append("%s %s planned %d measured %d" % (r["name"], k, p[k], m[k]))
    pt, mt = p["peak_bytes"]["total"], r["peak_bytes"]["total"]
    err = abs(pt - mt) / mt
    print("%-16s planned %.2f MiB measured %.2f MiB (%.2f%%)" % (r["name"], pt / 2**20, mt / 2**20, 100 * err))
    if err > 0.25:
        bad.append("%s total peak off by %.1f%%" % (r["name"], 100 * err))
    for k in ("all_gather", "reduce_scatter", "all_reduce"):
        if p["comm_bytes_per_step"][k] != r["comm_bytes_per_step"][k]:
            bad.append("%s %s bytes planned %d measured %d" % (r["name"], k, p["comm_bytes_per_step"][k], r["comm_bytes_per_step"][k]))
# Same seed and batch: every strategy ends on the same loss (fp32 rounding).
losses = [r["final_loss"] for r in rows if r["source"] == "fsdpc"]
assert max(losses) - min(losses) < 1e-3, losses
by = {r["name"]: r for r in rows}
assert by["NO_SHARD"]["comm_bytes_per_step"]["all_gather"] == 0
assert by["SHARD_GRAD_OP"]["peak_bytes"]["comm"] > by["FULL_SHARD"]["peak_bytes"]["comm"]
assert by["HYBRID_SHARD/2"]["comm_bytes_per_step"]["all_reduce"] > 0
with open(out + "/bench.csv") as f:
    cr = list(csv.DictReader(f))
assert len(cr) == 5 and cr[0]["name"] == "FULL_SHARD" and float(cr[0]["tok_s"]) > 0, cr[0]
# The chart, drawn by cairo (text as glyph outlines): an SVG of the PNG's
# size with bars, grid and glyphs as paths.
svg = xml.dom.minidom.parse(out + "/bench.svg").documentElement
assert svg.tagName == "svg" and svg.getAttribute("width").startswith("980"), svg.getAttribute("width")
assert len(svg.getElementsByTagName("path")) > 50, len(svg.getElementsByTagName("path"))
if bad:
    print("FAIL: " + "; ".join(bad))
    sys.exit(1)
PY
# The PNG holds the variants' bars (4e79a7), the baseline's (f28e2b) and no
# failure text (c00000).
python3 "$src/tests/bench/png_colors.py" "$dir/out/bench.png" 4e79a7 f28e2b c00000 >"$dir/colors.txt" &&
  awk '$1 == "4e79a7" && $2 > 1000 {a = 1} $1 == "f28e2b" && $2 > 100 {b = 1}
       $1 == "c00000" && $2 == 0 {c = 1} END {exit !(a && b && c)}' "$dir/colors.txt" ||
  fail "bench.png lacks its bars or shows failures: $(tr '\n' ' ' <"$dir/colors.txt")"

# A failing variant is a row that says why; the bench still finishes.
cat > "$dir/fail.yaml" <<YAML
base: $src/configs/tiny-cpu.yaml
set: {train.eval_every: 0, data.eval_fraction: 0, schedule.warmup_steps: 1, train.threads: 1,
      data.train: $dir/qa.tok, checkpoint.dir: "", log.tensorboard: false}
matrix:
  fsdp.sharding_strategy: [NO_SHARD, {name: hybrid-3, fsdp.sharding_strategy: HYBRID_SHARD, fsdp.hybrid_shard_size: 3}]
  fsdp.max_inflight_allgathers: [2, 3]
nproc_per_node: 2
warmup_steps: 1
steps: 1
YAML
# Issue 43 item 5: links planted at the outputs are replaced, never written
# through (before, the victim file was overwritten).
mkdir -p "$dir/fail"
echo "the victim's own contents" >"$dir/victim.txt"
cp "$dir/victim.txt" "$dir/victim.orig"
for f in bench.csv bench.json bench.svg bench.png; do ln -s "$dir/victim.txt" "$dir/fail/$f"; done
"$FSDPC" bench "$dir/fail.yaml" --out "$dir/fail" >"$dir/fail.txt" 2>&1
rc=$?
cmp -s "$dir/victim.txt" "$dir/victim.orig" || fail "bench wrote through a link planted in --out"
for f in bench.csv bench.json bench.svg; do
  [ -f "$dir/fail/$f" ] && [ ! -L "$dir/fail/$f" ] || fail "$f is not a file of its own"
done
# A bench with a failed variant exits 1 (not a crash), after writing its outputs.
[ "$rc" -eq 1 ] || fail "bench with failed variants exited $rc, want 1: $(tail -3 "$dir/fail.txt")"
grep -q "bench: variant .* failed: " "$dir/fail.txt" || fail "no line naming the failed variant"
python3 "$src/tests/bench/png_colors.py" "$dir/fail/bench.png" c00000 >"$dir/colors.txt" &&
  awk '$1 == "c00000" && $2 > 200 {ok = 1} END {exit !ok}' "$dir/colors.txt" ||
  fail "the chart does not list the failed variants (red text): $(tr '\n' ' ' <"$dir/colors.txt")"
python3 - "$dir/fail/bench.json" <<'PY' || fails=$((fails + 1))
import json, sys
rows = {r["name"]: r for r in json.load(open(sys.argv[1]))["rows"]}
assert set(rows) == {"sharding_strategy=NO_SHARD max_inflight_allgathers=2", "sharding_strategy=NO_SHARD max_inflight_allgathers=3",
                     "sharding_strategy=hybrid-3 max_inflight_allgathers=2", "sharding_strategy=hybrid-3 max_inflight_allgathers=3"}, rows.keys()
ok = rows["sharding_strategy=NO_SHARD max_inflight_allgathers=2"]
assert ok["ok"], ok
off = rows["sharding_strategy=NO_SHARD max_inflight_allgathers=3"]
assert not off["ok"] and "max_inflight_allgathers" in off["reason"], off
h3 = rows["sharding_strategy=hybrid-3 max_inflight_allgathers=2"]
assert not h3["ok"] and "divide" in h3["reason"] and "\n" not in h3["reason"], h3
print("failure rows:", off["reason"], "|", h3["reason"])
PY
grep -q "FAILED" "$dir/fail.txt" || fail "the table does not show FAILED rows"

[ "$fails" -eq 0 ] && echo "bench: all checks passed"
exit "$fails"
