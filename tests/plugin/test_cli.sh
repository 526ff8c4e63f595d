#!/usr/bin/env bash
# `fsdpc plugins list|info`: the table, the refused section, info pages,
# --help, and one-line errors with the right exit codes.
# Usage: test_cli.sh TEST_PLUGIN_DIR   (FSDPC names the executable)
set -u
: "${FSDPC:?FSDPC must name the fsdpc executable}"
dir=${1:?test plugin folder}
fails=0
check() { # check DESCRIPTION COMMAND...: the command must succeed
  local what=$1; shift
  if ! "$@"; then echo "FAIL: $what"; fails=$((fails + 1)); fi
}
has() { grep -qF -- "$2" <<<"$1"; }

out=$("$FSDPC" plugins list --path "$dir" 2>&1); rc=$?
check "list exits 0" test $rc -eq 0
check "list has a header" has "$out" "KIND"
check "list shows wrap/transformer" grep -qE '^wrap +transformer +1\.0\.0 +1\.3 +100 ' <<<"$out"
check "list shows wrap/size" grep -qE '^wrap +size +1\.0\.0 +1\.3 +50 ' <<<"$out"
check "list shows a valid test plugin" grep -qE '^optim +test-picky +0\.1\.0 +1\.0 +90 ' <<<"$out"
check "list has a refused section" has "$out" "refused:"
check "refused ABI 2 line" has "$out" "  libfsdpc-optim-test-abi2.so: ABI 2.0, this fsdpc speaks 1.x"
check "refused v2 entry line" has "$out" "  libfsdpc-optim-test-entry2.so: ABI 2.x, this fsdpc speaks 1.x"
check "seven refused lines" test "$(grep -c '^  libfsdpc-optim-test-' <<<"$out")" -eq 7

# Without --path the test plugins are not on the search path.
out=$(FSDPC_PLUGIN_PATH= "$FSDPC" plugins list 2>&1)
check "test plugins stay out of a normal list" bash -c "! grep -q test- <<<\"\$0\"" "$out"
check "normal list still has transformer" has "$out" "transformer"

out=$("$FSDPC" plugins info wrap/size 2>&1); rc=$?
check "info exits 0" test $rc -eq 0
check "info shows description" has "$out" "description:  units of whole modules"
check "info shows option type/default/range" \
  grep -qE 'min_num_params +int +100000000 +\[1, 1000000000000000\]' <<<"$out"
out=$("$FSDPC" plugins info transformer 2>&1)
check "info by bare name" has "$out" "separate_lm_head"

out=$("$FSDPC" plugins info test-abi2 --path "$dir" 2>&1); rc=$?
check "info of a refused plugin fails" test $rc -eq 1
check "info of a refused plugin gives the reason" has "$out" \
  "optim 'test-abi2' cannot be used: libfsdpc-optim-test-abi2.so: ABI 2.0, this fsdpc speaks 1.x"
check "refusal is one line" test "$(wc -l <<<"$out")" -eq 1

out=$("$FSDPC" plugins info optim/nope 2>&1); rc=$?
check "info of a missing plugin fails" test $rc -eq 1
check "missing plugin message" has "$out" "optim 'nope' not found"

for args in "plugins --help" "plugins list --help" "plugins info --help"; do
  out=$("$FSDPC" $args 2>&1); rc=$?
  check "$args exits 0" test $rc -eq 0
  check "$args prints usage" has "$out" "usage: fsdpc plugins"
done
"$FSDPC" plugins frobnicate >/dev/null 2>&1; rc=$?
check "unknown subcommand exits 2" test $rc -eq 2
"$FSDPC" plugins list --path >/dev/null 2>&1; rc=$?
check "--path without a folder exits 2" test $rc -eq 2
"$FSDPC" plugins info bogus/x >/dev/null 2>&1; rc=$?
check "unknown kind exits 2" test $rc -eq 2

if [ $fails -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "all plugin CLI checks passed"
