#!/bin/bash
# On a multi-GPU host: fsdpc on the Llama-3.2-1B shape (seq 2048,
# micro-batch 4, flash) under several engine settings, one RESULT line each.
#   bash .carry/train/run_1b_variants.sh NPROC "name|override override..." ...
# e.g. run_1b_variants.sh 4 "default|" "sep|fsdp.wrap.options.separate_embedding=true"
# A token env:NAME=VALUE sets an environment variable for that variant only.
. "$(dirname "$0")/carry_env.sh" # C, OUT, B, F; LD_LIBRARY_PATH
N=$1
shift
W=$(mktemp -d)
export FSDPC_PLUGIN_PATH=$B/plugins
$F data synth --task copy --n 300000 --out "$W/copy.tok" >/dev/null
for v in "$@"; do
  name=${v%%|*}
  read -r -a toks <<<"${v#*|}"
  ov=() envs=()
  for t in "${toks[@]}"; do
    case $t in env:*) envs+=("${t#env:}") ;; *) ov+=("$t") ;; esac
  done
  timeout 180 env "${envs[@]}" $F train configs/bench/llama3-1b-base.yaml data.train="$W/copy.tok" \
    train.micro_batch_size=4 train.max_steps=12 train.log_every=1 log.dir="$W/$name" \
    "${ov[@]}" --nproc-per-node "$N" >"$OUT/variant-$name.log" 2>&1
  echo "variant $name exit $?"
  grep -E "error" "$OUT/variant-$name.log" | head -3
  python3 - "$W/$name" "$N" "$name" <<'PY'
import json, sys, statistics
d, n, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
try:
    rows = [r for r in map(json.loads, open(f"{d}/metrics.jsonl")) if "step" in r]
    r0 = json.load(open(f"{d}/rank0.json"))
except Exception as e:
    print("no metrics:", e); sys.exit(0)
med = statistics.median([r["step_s"] for r in rows if r["step"] > 4])
print(f"RESULT {name} step_s {med:.4f} tok_s_gpu {rows[-1]['tokens'] / med / n:.0f} peak_alloc_gib "
      f"{r0['peak_bytes']['total'] / 2**30:.2f} reserved_gib {(r0.get('reserved_bytes') or 0) / 2**30:.2f} "
      f"loss {rows[-1]['loss']:.4f}")
PY
done
