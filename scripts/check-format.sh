#!/usr/bin/env bash
# Checks that every C, C++ and CUDA source and header of the tree is
# formatted as the root .clang-format says (clang-format 14, Debian's
# clang-format package), without changing a file. Exit 0 when all are;
# 1 with the files and a count otherwise (2: no clang-format).
#   scripts/check-format.sh          check (scripts/test.sh runs this first)
#   scripts/check-format.sh --fix    format them in place
# Files are the tracked and the untracked-but-not-ignored ones under git,
# except generated code and test fixtures that keep their upstream form.
set -euo pipefail
cd "$(dirname "$0")/.."
fix=0
[ "${1:-}" = --fix ] && fix=1
cf=${CLANG_FORMAT:-}
if [ -z "$cf" ]; then
  for c in clang-format-14 clang-format; do
    if command -v "$c" >/dev/null; then
      cf=$c
      break
    fi
  done
fi
if [ -z "$cf" ]; then
  echo "check-format: clang-format not found (Debian: apt-get install clang-format)" >&2
  exit 2
fi
# The style is pinned to clang-format 14: another major formats some
# constructs differently, so say which one ran.
ver=$("$cf" --version | sed -n 's/.*version \([0-9]*\).*/\1/p')
[ "$ver" = 14 ] || echo "check-format: note: $cf is version $ver; the tree is formatted with 14" >&2

mapfile -t files < <(git ls-files --cached --others --exclude-standard -- \
  '*.c' '*.h' '*.cc' '*.cpp' '*.cu' '*.cuh' |
  grep -v -E '(^|/)fixtures/|\.pb-c\.[ch]$' |
  while read -r f; do [ -f "$f" ] && echo "$f"; done)
if [ "$fix" = 1 ]; then
  printf '%s\0' "${files[@]}" | xargs -0 -n 50 "$cf" -i --style=file
  echo "check-format: formatted ${#files[@]} files"
  exit 0
fi
# One clang-format per 50 files; each difference is a "FILE:LINE:COL:
# error:" line on stderr.
mapfile -t bad < <(printf '%s\0' "${files[@]}" |
  xargs -0 -n 50 "$cf" --dry-run -Werror --style=file 2>&1 >/dev/null |
  sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error:.*/\1/p' | sort -u)
if [ "${#bad[@]}" -gt 0 ]; then
  printf '  %s\n' "${bad[@]}" >&2
  echo "check-format: ${#bad[@]} of ${#files[@]} files differ from .clang-format" \
    "(scripts/check-format.sh --fix formats them)" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
