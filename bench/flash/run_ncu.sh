#!/bin/bash
# On the GPU machine: ncu counters of the flash plugin's backward and forward
# kernels and of SDPA's cuDNN kernels on one or more shapes (the third
# launch of each: warm), staged by bench/flash/stage.sh into CARRY.
#   SHAPES="2,8192,32,8,128 4,2048,32,8,64" V=new OUT=$OUT bash .carry/flash/run_ncu.sh
# Writes $OUT/ncu_<shape>.csv (raw, one row per kernel and metric) and prints
# a table of the quoted metrics per kernel.
set -u
C=${CARRY:-$(dirname "$0")}
OUT=${OUT:-/tmp/out}
mkdir -p /tmp/rt "$OUT" && tar xf $C/rt.tar.xz -C /tmp/rt && export LD_LIBRARY_PATH=/tmp/rt
M=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
M=$M,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed
M=$M,l1tex__data_bank_reads.avg.pct_of_peak_sustained_elapsed
M=$M,l1tex__data_bank_writes.avg.pct_of_peak_sustained_elapsed
M=$M,sm__inst_executed.avg.per_cycle_active,sm__throughput.avg.pct_of_peak_sustained_elapsed
M=$M,gpu__time_duration.sum,sm__cycles_active.avg,smsp__cycles_active.avg.pct_of_peak_sustained_elapsed
M=$M,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active
M=$M,lts__t_sectors_op_red.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
# EXTRA_M: more metrics, comma-separated (e.g. lts__t_sector_hit_rate.pct,dram__bytes_read.sum)
M=$M${EXTRA_M:+,$EXTRA_M}
for s in ${SHAPES:-2,8192,32,8,128}; do
  (cd $C && timeout ${NCU_S:-240} ncu --clock-control none --metrics "$M" --csv \
    --kernel-name "regex:flash_(fwd|bwd)90|cudnn|sdpa|fmha|sm90" --launch-skip-before-match 0 \
    python3 ncu_case.py var/${V:-new} ${s//,/ } >"$OUT/ncu_${s//,/_}.csv" 2>"$OUT/ncu_${s//,/_}.err")
  echo "ncu $s exit $?"
  python3 - "$OUT/ncu_${s//,/_}.csv" <<'PY'
import collections, csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    sys.exit("no rows")
h = rows[0]
ki, mi, vi, ii = h.index("Kernel Name"), h.index("Metric Name"), h.index("Metric Value"), h.index("ID")
per = collections.OrderedDict()
for r in rows[1:]:
    per.setdefault((r[ii], r[ki][:60]), {})[r[mi]] = r[vi]
names = sorted({m for v in per.values() for m in v})
short = {n: n.split("__")[1][:34] if "__" in n else n for n in names}
for (i, k), v in per.items():
    print(f"{i:>3} {k}")
    print("     " + "  ".join(f"{short[n]}={v.get(n, '')}" for n in names))
PY
done
# OPCODES=1: also the executed instructions per SASS opcode of each kernel
# (sass__inst_executed_per_opcode), one shape, $OUT/ops_<shape>.csv.
if [ "${OPCODES:-0}" = 1 ]; then
  s=${SHAPES%% *}
  (cd $C && timeout ${NCU_S:-240} ncu --clock-control none --metrics sass__inst_executed_per_opcode \
    --print-metric-instances details --csv --kernel-name "regex:${OPS_KERNELS:-flash_(fwd|bwd)90|prop}" \
    python3 ncu_case.py var/${V:-new} ${s//,/ } >"$OUT/ops_${s//,/_}.csv" 2>"$OUT/ops_${s//,/_}.err")
  echo "ncu opcodes $s exit $?"
fi
# STALLS=1: ncu's WarpStateStats section and the stall reasons (warps
# waiting for each, per issued instruction) of the backward kernels, one
# shape, $OUT/stalls_<shape>.csv.
if [ "${STALLS:-0}" = 1 ]; then
  s=${SHAPES%% *}
  R=smsp__average_warps_issue_stalled_
  S=""
  for w in barrier long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle \
    dispatch_stall not_selected selected sleeping no_instruction branch_resolving membar \
    lg_throttle drain misc tex_throttle imc_miss; do
    S="$S${S:+,}${R}${w}_per_issue_active.ratio"
  done
  (cd $C && timeout ${NCU_S:-240} ncu --clock-control none --section WarpStateStats --metrics "$S" --csv \
    --kernel-name "regex:${OPS_KERNELS:-flash_bwd90|bprop}" \
    python3 ncu_case.py var/${V:-new} ${s//,/ } >"$OUT/stalls_${s//,/_}.csv" 2>"$OUT/stalls_${s//,/_}.err")
  echo "ncu stalls $s exit $?"
fi
# SOURCE=1: ncu's SourceCounters (sampled warp stalls per SASS instruction)
# of one launch of the plugin's backward and of cuDNN's bprop, one shape:
# $OUT/src.ncu-rep and, per kernel, the source page as CSV
# ($OUT/src_sass.csv; with a -lineinfo build also $OUT/src_cuda.csv).
if [ "${SOURCE:-0}" = 1 ]; then
  s=${SHAPES%% *}
  ncu --version | tail -1
  (cd $C && timeout ${NCU_S:-240} ncu --clock-control none --section SourceCounters \
    --section WarpStateStats --import-source yes --kernel-name "regex:${OPS_KERNELS:-flash_bwd90|bprop}" \
    --launch-skip 2 --launch-count 2 -o "$OUT/src" \
    python3 ncu_case.py var/${V:-new} ${s//,/ } >"$OUT/src.log" 2>&1)
  echo "ncu source $s exit $?"
  ncu -i "$OUT/src.ncu-rep" --page source --csv --print-source sass >"$OUT/src_sass.csv" 2>"$OUT/src_sass.err"
  echo "source page sass exit $? $(wc -c <"$OUT/src_sass.csv") bytes"
  ncu -i "$OUT/src.ncu-rep" --page source --csv --print-source cuda,sass >"$OUT/src_cuda.csv" 2>"$OUT/src_cuda.err"
  echo "source page cuda,sass exit $? $(wc -c <"$OUT/src_cuda.csv") bytes"
  ncu -i "$OUT/src.ncu-rep" --page details --csv >"$OUT/src_details.csv" 2>&1
fi
