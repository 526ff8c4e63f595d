#!/usr/bin/env bash
# `fsdpc plugins info flash` names the shapes flash supports, and `list`
# shows it with a score above naive's so that `auto` prefers it on CUDA.
set -u
: "${FSDPC:?FSDPC must name the fsdpc executable}"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

out=$("$FSDPC" plugins info flash 2>&1) || fail "plugins info flash exits non-zero: $out"
grep -q '^attention/flash ' <<<"$out" || fail "info has no attention/flash header: $out"
if grep -q 'without CUDA' <<<"$out"; then
  echo "note: this build has no CUDA; flash supports nothing"
else
  grep -q 'head dims 64 and 128' <<<"$out" || fail "info does not list head dims: $out"
  grep -q 'GQA' <<<"$out" || fail "info does not mention GQA: $out"
  grep -q 'document masking' <<<"$out" || fail "info does not mention doc masking: $out"
fi
list=$("$FSDPC" plugins list 2>&1)
fs=$(awk '$1 == "attention" && $2 == "flash" {print $5}' <<<"$list")
ns=$(awk '$1 == "attention" && $2 == "naive" {print $5}' <<<"$list")
[ -n "$fs" ] && [ -n "$ns" ] && [ "$fs" -gt "$ns" ] || fail "flash score '$fs' not above naive '$ns'"
[ $fails -eq 0 ] && echo "ok" || exit 1
