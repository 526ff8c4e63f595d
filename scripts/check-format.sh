#!/usr/bin/env bash
# Checks C, C++ and CUDA sources and headers against the root .clang-format
# (clang-format 14, Debian's clang-format package) without changing a file.
# The tree is not formatted as a whole yet, so by default only the paths in
# scripts/format-paths.txt (files or folders, one a line) are checked; once
# the whole tree is formatted in one commit, that list becomes ".".
#   scripts/check-format.sh              the listed paths (scripts/test.sh runs this)
#   scripts/check-format.sh --all        every file of the tree
#   scripts/check-format.sh --base REV   only the lines this branch changed since
#                                        it left REV (committed, staged, unstaged,
#                                        untracked files whole)
#   add --fix to any of them: format in place instead of checking
# Exit 0 when formatted; 1 with the files (or the diff) otherwise; 2 on a
# usage error or without clang-format. Generated code and test fixtures
# that keep their upstream form are never checked.
set -euo pipefail
cd "$(dirname "$0")/.."
fix=0 all=0 base=
while [ $# -gt 0 ]; do
  case $1 in
  --fix) fix=1 ;;
  --all) all=1 ;;
  --base)
    [ $# -ge 2 ] || { echo "check-format: --base needs a revision" >&2; exit 2; }
    base=$2
    shift
    ;;
  --base=*) base=${1#--base=} ;;
  -h | --help)
    sed -n '2,15s/^# \{0,1\}//p' "$0"
    exit 0
    ;;
  *) echo "check-format: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
  shift
done
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
src='\.(c|h|cc|cpp|cu|cuh)$'
skip='(^|/)fixtures/|\.pb-c\.[ch]$'

if [ -n "$base" ]; then
  git rev-parse --verify -q "$base^{commit}" >/dev/null ||
    { echo "check-format: --base '$base' is not a commit" >&2; exit 2; }
  # Where this branch left REV: its own lines, not REV's newer ones.
  from=$(git merge-base "$base" HEAD)
  cfd=
  for c in clang-format-diff-14 clang-format-diff; do
    command -v "$c" >/dev/null && { cfd=$c; break; }
  done
  [ -n "$cfd" ] || { echo "check-format: clang-format-diff not found (package clang-format)" >&2; exit 2; }
  # The changed lines of tracked files; an untracked file is changed throughout.
  inplace=()
  [ "$fix" = 0 ] || inplace=(-i)
  diff=$(git diff -U0 --no-color --no-ext-diff "$from" -- . |
    "$cfd" -p1 -regex "^(?!.*($skip)).*$src" -binary "$cf" "${inplace[@]}")
  mapfile -t new < <(git ls-files --others --exclude-standard | grep -E "$src" | grep -v -E "$skip" || true)
  if [ "$fix" = 1 ]; then
    [ ${#new[@]} -eq 0 ] || "$cf" -i --style=file "${new[@]}"
    echo "check-format: formatted the lines changed since $base"
    exit 0
  fi
  bad_new=()
  for f in "${new[@]}"; do
    "$cf" --dry-run -Werror --style=file "$f" >/dev/null 2>&1 || bad_new+=("$f")
  done
  if [ -n "$diff" ] || [ ${#bad_new[@]} -gt 0 ]; then
    [ -z "$diff" ] || printf '%s\n' "$diff" >&2
    [ ${#bad_new[@]} -eq 0 ] || printf '  %s (untracked)\n' "${bad_new[@]}" >&2
    echo "check-format: lines changed since $base differ from .clang-format" \
      "(scripts/check-format.sh --base $base --fix formats them)" >&2
    exit 1
  fi
  echo "check-format: the lines changed since $base are formatted"
  exit 0
fi

if [ "$all" = 1 ]; then
  paths=(.)
else
  mapfile -t paths < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' scripts/format-paths.txt | grep -v '^$')
fi
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- "${paths[@]}" |
  grep -E "$src" | grep -v -E "$skip" |
  while read -r f; do [ -f "$f" ] && echo "$f"; done)
if [ "$fix" = 1 ]; then
  [ ${#files[@]} -eq 0 ] || printf '%s\0' "${files[@]}" | xargs -0 -n 50 "$cf" -i --style=file
  echo "check-format: formatted ${#files[@]} files"
  exit 0
fi
# One clang-format per 50 files; each difference is a "FILE:LINE:COL:
# error:" line on stderr.
mapfile -t bad < <(printf '%s\0' "${files[@]}" |
  xargs -0 -r -n 50 "$cf" --dry-run -Werror --style=file 2>&1 >/dev/null |
  sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error:.*/\1/p' | sort -u)
if [ "${#bad[@]}" -gt 0 ]; then
  printf '  %s\n' "${bad[@]}" >&2
  echo "check-format: ${#bad[@]} of ${#files[@]} files differ from .clang-format" \
    "(scripts/check-format.sh --fix formats them)" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
