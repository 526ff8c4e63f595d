# Shared by the HF round-trip tests (refusal, export, generate, eval).
# Needs FSDPC and FSDPC_SOURCE_DIR from ctest's environment.
set -u
: "${FSDPC:?run through ctest}"
T=$(mktemp -d /tmp/fsdpc-infer-test.XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
FIX=$FSDPC_SOURCE_DIR/tests/fixtures
VARIANT="python3 $FSDPC_SOURCE_DIR/tests/infer/hf_variant.py"
