#!/usr/bin/env bash
# Issue 22 on the CPU: scripts/gpu/nodes.sh (the script that runs the
# same checks on GPUs) with Gloo, 2 "nodes" x 2 ranks on this machine.
#   test_two_nodes.sh PARTS   (hybrid,slurm,torchrun | kill | sameport | fail)
# FSDPC and FSDPC_SOURCE_DIR come from ctest. The script prints PASS/FAIL
# lines and exits non-zero when a check fails.
set -u
: "${FSDPC:?FSDPC must point at the fsdpc executable}"
: "${FSDPC_SOURCE_DIR:?FSDPC_SOURCE_DIR must point at the source tree}"
OUT=$(mktemp -d /tmp/fsdpc-two-nodes-test.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
DEVICE=cpu OUT=$OUT bash "$FSDPC_SOURCE_DIR/scripts/gpu/nodes.sh" 2 "$1" 2>&1 | grep -v "Killed"
rc=${PIPESTATUS[0]}
[ $rc = 0 ] || for f in "$OUT"/*.log; do echo "--- $f"; tail -5 "$f"; done
exit $rc
