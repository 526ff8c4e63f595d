#!/usr/bin/env bash
# The start-up phases in the log: after its first step, rank 0 logs one
# "startup:" line with every phase (launch, device, plugins, comm, alloc,
# weights and how they were made, model, data, the first step) and the total
# from launch to the first step, which is at least the sum of its parts.
# At world 1 and at world 2 under the launcher (whose start counts as the
# launch), from random init and from an HF folder (the final model of the
# first run).
. "$(dirname "$0")/common.sh"

check() { # check NAME HOW
  python3 - "$TMP/$1.log" "$2" <<'PY' || fail "$1: no well-formed startup line"
import re, sys
lines = [l for l in open(sys.argv[1]) if "startup:" in l]
assert len(lines) == 1, f"{len(lines)} startup lines"
l = lines[0]
print(l.strip())
names = ["launch", "device", "plugins", "comm", "alloc", "weights", "model", "data",
         "until step", "first step"]
v = {}
for n in names:
    m = re.search(rf"\b{n} (\d+\.\d+)s", l)
    assert m, f"phase {n} missing"
    v[n] = float(m.group(1))
assert f"({sys.argv[2]})" in l, f"weights not made by {sys.argv[2]}"
total = float(re.search(r"launch to first step (\d+\.\d+)s", l).group(1))
parts = sum(v.values())
assert v["launch"] > 0 and v["first step"] > 0, v
assert parts <= total + 0.02 * len(names) and total < parts + 1.0, (parts, total)
PY
}

run w1 train.max_steps=2 schedule.warmup_steps=0 || fail "world 1 run"
check w1 "random init on the host"
run w2 train.max_steps=2 schedule.warmup_steps=0 -- --nproc-per-node 2 || fail "world 2 run"
check w2 "random init on the host"
final=$(find "$TMP/w1" -name model.safetensors -printf '%h\n' | head -1)
[ -n "$final" ] || fail "no final model in $TMP/w1"
run hf train.max_steps=1 schedule.warmup_steps=0 model.init.from="$final" || fail "run from the HF folder"
check hf "HF load"
echo "OK"
