#!/usr/bin/env bash
# Issue 21's flow at a tiny shape on the CPU (2 ranks, Gloo): a random HF
# folder written by scripts/gpu/lib/make_hf_random.py in 4 files with an index,
# planned, trained from at world 2 with the final export, the export's index
# checked against the input's, SIGTERM to the launcher mid-training saves and
# the run resumes (scripts/gpu/hf70b.sh in its CPU mode, then its reduced-
# depth preemption path). Needs python3 with numpy (python3-numpy).
set -u
: "${FSDPC:?FSDPC must point at the fsdpc executable}"
: "${FSDPC_SOURCE_DIR:?FSDPC_SOURCE_DIR must point at the source tree}"
PY=python3
$PY -c "import numpy" 2>/dev/null || PY=/usr/bin/python3 # a pyenv python3 may lack it
OUT=$(mktemp -d /tmp/fsdpc-hf-random.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
fail() { echo "FAIL: $*"; tail -20 "$OUT"/*.log "$OUT"/log.txt 2>/dev/null; exit 1; }
for reduced in 0 1; do
  DEVICE=cpu PY=$PY OUT=$OUT CKPT_REDUCED=$reduced bash "$FSDPC_SOURCE_DIR/scripts/gpu/hf70b.sh" 2 \
    >"$OUT/log.txt" 2>&1 || fail "hf70b.sh exited $? (CKPT_REDUCED=$reduced)"
  cat "$OUT/log.txt"
  grep -q "4 files, 39 tensors" "$OUT/log.txt" || fail "the export is not 4 files of 39 tensors"
  grep -q "tensors and shapes match the input" "$OUT/log.txt" || fail "export differs from the input"
  grep -q "index covers every tensor" "$OUT/log.txt" || fail "the export's index misses tensors"
  n=$(grep -c "peak host memory of the load .* within bound" "$OUT/log.txt")
  [ "$n" = 2 ] || fail "expected 2 ranks' load lines within bound, got $n"
  grep -q "launcher exit 0, .* after SIGTERM (grace 120 s)" "$OUT/log.txt" || fail "SIGTERM did not end the run with exit 0"
  grep -q "stopped by SIGTERM after step [0-9]*; saved" "$OUT/log.txt" || fail "no preemption save"
  grep -q "resume exit 0: .*resumed from .*step-" "$OUT/log.txt" || fail "the run did not resume"
  if [ $reduced = 1 ]; then
    grep -q "tiny width with 2 layers (.*hf-reduced)" "$OUT/log.txt" || fail "the reduced preemption path was not taken"
  fi
  rm -rf "${OUT:?}"/*
done
echo PASS
