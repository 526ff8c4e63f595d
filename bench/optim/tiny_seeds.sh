#!/bin/bash
# adamw8bit vs adamw on the tiny CPU demo's shape, over several seeds: the
# tiny model at lr 3e-3 is chaotic (two fp32 runs whose eps differs by 1e-4
# end up to 3% apart), so one seed cannot resolve a 2% gap; the mean curve
# over seeds can. Three runs a seed: adamw, adamw8bit, adamw with eps x 1.0001
# (the noise floor). ~26 s a run on one core.
#   bash bench/optim/tiny_seeds.sh FSDPC DATA.tok OUTDIR [SEEDS...]
# then: python3 bench/loss_gap.py A1,A2,.. Q1,Q2,.. E1,E2,..  (printed at the end)
set -eu
F=$1 D=$2 O=$3
shift 3
S=${*:-42 1 2 3 4 5 6 7 8 9}
C=$(cd "$(dirname "$0")/../.." && pwd)/configs/tiny-cpu.yaml
mkdir -p "$O"
for s in $S; do
  for v in "adamw|optim.name=adamw" "adamw8bit|optim.name=adamw8bit" "eps|optim.name=adamw optim.eps=1.0001e-8"; do
    n=${v%%|*}
    read -r -a ov <<<"${v#*|}"
    "$F" train "$C" data.train="$D" train.seed="$s" "${ov[@]}" log.dir="$O/$n-$s" \
      checkpoint.dir="$O/$n-$s/ck" train.threads=1 train.log_every=1 log.tensorboard=false \
      train.generate_tokens=0 >"$O/$n-$s.log" 2>&1
  done
done
join() { local p=$1 out= s; for s in $S; do out+="$O/$p-$s,"; done; echo "${out%,}"; }
python3 "$(dirname "$0")/../loss_gap.py" "$(join adamw)" "$(join adamw8bit)" "$(join eps)"
