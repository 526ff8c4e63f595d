#!/usr/bin/env bash
# `fsdpc plan` and `fsdpc bench`: help, the plan table, --gpu-mem, --host-mem, --json,
# --dry-run, and one-line errors with exit codes (1 failure, 2 usage).
. "$(dirname "$0")/../common/cli_expect.sh" bench-cli # dir, fail, expect
src=${FSDPC_SOURCE_DIR:?}

tiny=$src/configs/tiny-cpu.yaml
bench=$src/configs/bench/tiny-cpu-strategies.yaml
expect 0 "usage: fsdpc plan" "$FSDPC" plan --help
expect 0 "usage: fsdpc bench" "$FSDPC" bench --help
expect 0 "* FULL_SHARD" "$FSDPC" plan "$tiny" --world 4
expect 0 "HYBRID_SHARD" "$FSDPC" plan "$tiny" --world 4 --nproc-per-node 2
# FULL_SHARD's 50.2 MiB fits in 0.05 GiB (51.2 MiB); NO_SHARD's 57.65 MiB does not.
out=$("$FSDPC" plan "$tiny" --world 4 --gpu-mem 0.05)
echo "$out" | grep -E '^\* FULL_SHARD +off +off .* yes$' >/dev/null || fail "FULL_SHARD should fit: $out"
echo "$out" | grep -E '^  NO_SHARD +off +off .* no \(device\)$' >/dev/null || fail "NO_SHARD should not fit: $out"
# --host-mem: per-rank host memory x ranks per machine against it. On the CPU
# the whole peak is host memory: 4 ranks of ~50 MiB do not fit in 0.1 GiB,
# and the config's own variant gets one line saying so.
out=$("$FSDPC" plan "$tiny" --world 4 --host-mem 0.1 2>"$dir/err")
echo "$out" | grep -E '^\* FULL_SHARD +off +off .* no \(host\)$' >/dev/null || fail "host should not fit: $out"
grep -q "does not fit: not enough host memory; host memory needed .* GiB per machine of 0.1 GiB (--host-mem)" \
  "$dir/err" || fail "no host refusal line: $(cat "$dir/err")"
[ "$(wc -l <"$dir/err")" -eq 1 ] || fail "host refusal is not one line"
out=$("$FSDPC" plan "$tiny" --world 4 --nproc-per-node 1 --host-mem 0.1)
echo "$out" | grep -E '^\* FULL_SHARD +off +off .* yes$' >/dev/null || fail "one rank per machine fits: $out"
expect 0 "host memory 64.0 GiB per machine (--host-mem)" "$FSDPC" plan "$tiny" --host-mem 64
expect 2 "--host-mem expects a positive number, got 'lots'" "$FSDPC" plan "$tiny" --host-mem lots
expect 2 "--host-mem expects a positive number, got '-1'" "$FSDPC" plan "$tiny" --host-mem -1
"$FSDPC" plan "$tiny" --world 2 --json | python3 -c '
import json, sys
rows = json.load(sys.stdin)
assert len(rows) == 8, len(rows)
full = [r for r in rows if r["strategy"] == "FULL_SHARD" and not r["activation_checkpointing"]][0]
assert full["config"] and full["shard_size"] == 2, full
# CPU: nothing pinned; the pageable host figure is the arena (the tracked
# peak laid out: at least the peak, within 1% of it here)
assert full["host_pinned_bytes"] == 0 and full["host_pageable_bytes"] == full["arena_bytes"], full
peak = full["peak_bytes"]["total"]
assert peak <= full["arena_bytes"] <= 1.01 * peak, full
assert full["host_total_bytes"] == full["host_pageable_bytes"] and full["fits_host"] in (True, False), full
' || fail "plan --json"
# save_mlp: the checkpointed rows say so and hold each layer's gate and up
# (2 x L - 2 more (N, F) buffers than the full policy's shared pair)
"$FSDPC" plan "$tiny" --world 2 --json >"$dir/full.json"
"$FSDPC" plan "$tiny" --world 2 --json fsdp.activation_checkpointing_policy=save_mlp >"$dir/mlp.json"
python3 - "$dir/full.json" "$dir/mlp.json" "$tiny" <<'PY' || fail "plan save_mlp"
import json, re, sys
full, mlp = (json.load(open(p)) for p in sys.argv[1:3])
cfg = open(sys.argv[3]).read()
get = lambda k: int(re.search(rf"{k}: *(\d+)", cfg).group(1))
L, F = get("num_hidden_layers"), get("intermediate_size")
N = get("micro_batch_size") * get("seq_len")
for a, b in zip(full, mlp):
    if not a["activation_checkpointing"]:
        assert a["activations_bytes"] == b["activations_bytes"] and "activation_checkpointing_policy" not in b, b
        continue
    assert a["activation_checkpointing_policy"] == "full" and b["activation_checkpointing_policy"] == "save_mlp", b
    assert b["activations_bytes"] - a["activations_bytes"] == 2 * (L - 1) * N * F * 4, (a, b)
PY
"$FSDPC" plan "$tiny" fsdp.activation_checkpointing=true fsdp.activation_checkpointing_policy=save_mlp |
  grep -E '^\* FULL_SHARD +mlp ' >/dev/null || fail "plan table: no mlp row for the config's variant"
expect 1 "activation_checkpointing_policy" "$FSDPC" plan "$tiny" fsdp.activation_checkpointing_policy=some
expect 2 "--world expects an integer in [1, 1048576], got '0'" "$FSDPC" plan "$tiny" --world 0
expect 2 "unknown option '--frob'" "$FSDPC" plan "$tiny" --frob
expect 2 "is not a multiple" "$FSDPC" plan "$tiny" --world 4 --nproc-per-node 3
expect 1 "nope.yaml" "$FSDPC" plan "$dir/nope.yaml"
expect 1 "must divide" "$FSDPC" plan "$tiny" --world 4 fsdp.hybrid_shard_size=3

expect 0 "HYBRID_SHARD/2" "$FSDPC" bench "$bench" --dry-run
expect 0 "planned peak" "$FSDPC" bench "$bench" --dry-run
expect 2 "unknown option '--frob'" "$FSDPC" bench x.yaml --frob
expect 2 "--steps expects an integer in [1, 1000000], got '0'" "$FSDPC" bench x.yaml --steps 0
expect 1 "cannot open bench file" "$FSDPC" bench "$dir/nope.yaml"
printf 'base: x.yaml\nmatrix: {fsdp.sharding_strategy: FULL_SHARD}\n' > "$dir/b1.yaml"
expect 1 "b1.yaml:2:" "$FSDPC" bench "$dir/b1.yaml"
printf 'matrix: {fsdp.sharding_strategy: [FULL_SHARD]}\n' > "$dir/b2.yaml"
expect 1 "missing 'base'" "$FSDPC" bench "$dir/b2.yaml"
printf 'base: x.yaml\nrepeat: 3\n' > "$dir/b3.yaml"
expect 1 "unknown key 'repeat'" "$FSDPC" bench "$dir/b3.yaml"
printf 'base: x.yaml\nsteps: -1\n' > "$dir/b4.yaml"
expect 1 "expected an integer" "$FSDPC" bench "$dir/b4.yaml"
printf 'base: x.yaml\nmatrix: [\n' > "$dir/b5.yaml"
expect 1 "YAML" "$FSDPC" bench "$dir/b5.yaml"
printf 'not json\n' > "$dir/bad.jsonl"
expect 1 "bad.jsonl:1: not a bench JSON" "$FSDPC" bench "$bench" --baseline "$dir/bad.jsonl"

[ "$fails" -eq 0 ] && echo "bench cli: all checks passed"
exit "$fails"
