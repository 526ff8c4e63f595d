#!/usr/bin/env bash
# fsdp.mixed_precision.linear: fp8 through the CLI, on the CPU (the layers'
# projections through the FP8 emulation of ops/cpu/fp8_linear.c):
# - linear: bf16 (the default) is the run without the key, bit for bit;
# - each recipe changes the run (not one loss equal to bf16's at every
#   step) yet tracks it within 5e-2 over 10 steps;
# - world 2 matches world 1 under each recipe, and world 4 under tensorwise
#   (1e-5: the scales are per micro-batch GEMM, so only the gradient
#   reduction's order differs), and the weights agree after training;
# - resuming from a step-5 checkpoint gives the same losses and weights;
# - the planner counts the FP8 scratch of a device run (fsdpc plan);
# - values outside the enums are refused with one line naming the key.
source "$(dirname "$0")/common.sh"
CMP="python3 $(dirname "$0")/compare_runs.py"

run auto || fail "default run"
run bf16 fsdp.mixed_precision.linear=bf16 || fail "bf16 run"
$CMP "$TMP/auto" "$TMP/bf16" --rtol 0 || fail "linear=bf16 differs from the default"
for r in tensorwise rowwise; do
  run "$r" fsdp.mixed_precision.linear=fp8 fsdp.mixed_precision.fp8_recipe=$r \
    checkpoint.save_steps=5 || fail "$r run"
  run "$r-w2" fsdp.mixed_precision.linear=fp8 fsdp.mixed_precision.fp8_recipe=$r \
    -- --nproc-per-node 2 || fail "$r run at world 2"
  $CMP "$TMP/bf16" "$TMP/$r" --rtol 5e-2 --keys loss,eval_loss || fail "fp8 $r does not track bf16"
  python3 - "$TMP/bf16/metrics.jsonl" "$TMP/$r/metrics.jsonl" <<'PY' || fail "fp8 $r changed nothing"
import json, sys
load = lambda p: [r["loss"] for r in map(json.loads, open(p)) if "step" in r]
a, b = load(sys.argv[1]), load(sys.argv[2])
same = sum(x == y for x, y in zip(a, b))
print(f"losses equal at {same} of {len(a)} steps; last {a[-1]:.6f} (bf16) {b[-1]:.6f} (fp8)")
sys.exit(0 if same < len(a) else 1)
PY
  $CMP "$TMP/$r" "$TMP/$r-w2" --weights || fail "fp8 $r: world 2 diverged from world 1"
done
run tensorwise-w4 fsdp.mixed_precision.linear=fp8 -- --nproc-per-node 4 || fail "run at world 4"
$CMP "$TMP/tensorwise" "$TMP/tensorwise-w4" --weights || fail "fp8: world 4 diverged from world 1"
# resume bit-exact: from step 5 of the tensorwise run, the same losses and
# final weights (the masters are fp32; the scales are recomputed each GEMM)
run res fsdp.mixed_precision.linear=fp8 checkpoint.resume="$TMP/tensorwise/ck/step-000005" ||
  fail "resume under fp8"
grep -q "resumed from" "$TMP/res.log" || fail "the fp8 run did not resume"
python3 - "$TMP/tensorwise/metrics.jsonl" "$TMP/res/metrics.jsonl" <<'PY' || fail "fp8 resume not bit-exact"
import json, sys
load = lambda p: {r["step"]: r["loss"] for r in map(json.loads, open(p)) if "step" in r}
a, b = load(sys.argv[1]), load(sys.argv[2])
assert sorted(b) == list(range(6, 11)), sorted(b)
bad = [s for s in b if a[s] != b[s]]
print(f"resumed steps 6-10: {len(b) - len(bad)} of {len(b)} losses equal")
sys.exit(1 if bad else 0)
PY
cmp -s "$TMP/tensorwise/ck/final/model.safetensors" "$TMP/res/ck/final/model.safetensors" ||
  fail "fp8 resume: final weights differ"
$CMP "$TMP/tensorwise" "$TMP/rowwise" --rtol 0 >/dev/null 2>&1 && fail "the two recipes ran the same"
# The planner counts the FP8 copies' scratch on a device: the tiny model
# planned for CUDA (micro-batch 2 x 32 = 64 rows; C 64, F 160, q 64, kv 32)
# holds the largest projection's block (fsdpc__fp8_linear_scratch_bytes:
# gate/up or down; rowwise's GEMM blocks of 4 x 256-byte-rounded pieces or
# tensorwise's 256 bytes of scales, x or x^T, dy, dy^T, W^T) more
# activation bytes.
plan() {
  "$FSDPC" plan "$CFG" train.device=cuda collectives.impl=gloo "$@" --json 2>"$TMP/plan.err" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["activations_bytes"])'
}
a=$(plan) || fail "plan bf16: $(cat "$TMP/plan.err")"
b=$(plan fsdp.mixed_precision.linear=fp8) || fail "plan fp8: $(cat "$TMP/plan.err")"
want=$(python3 -c '
u = lambda n: (n + 255) // 256 * 256
blk = lambda ea, eb, v: u(ea) + u(eb) + 4 * u(4 * v)
N = 64
tw = lambda i, o: 256 + u(N * i) + 2 * u(N * o) + u(o * i)
lin = lambda i, o: max(blk(o * i, N * i, max(N, o)), blk(o * i, N * o, max(N, i)),
                       blk(N * i, N * o, max(i, o)), tw(i, o))
print(max(lin(64, 64), lin(64, 32), lin(64, 160), lin(160, 64)))')
[ $((b - a)) = "$want" ] || fail "plan: fp8 adds $((b - a)) activation bytes, want $want"
for kv in linear=fp16 fp8_recipe=blockwise; do
  out=$("$FSDPC" train "$CFG" "fsdp.mixed_precision.$kv" log.dir="$TMP/bad" 2>&1)
  rc=$?
  [ $rc -ne 0 ] || fail "$kv was accepted"
  [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "more than one line for $kv: $out"
  printf '%s\n' "$out" | grep -q "fsdp.mixed_precision.${kv%%=*}: '${kv#*=}' is not one of" ||
    fail "unexpected message for $kv: $out"
done
echo "PASS: linear fp8 (bf16 default unchanged; tensorwise and rowwise track bf16, world 2 = world 1)"
