# Sourced by the CLI script tests:
#   . "$(dirname "$0")/../common/cli_expect.sh" NAME
# Makes the scratch folder $dir (NAME-XXXXXX under FSDPC_BINARY_DIR, removed
# on exit) and defines
#   fail MSG...            prints FAIL: MSG and counts it in $fails
#   expect CODE PAT CMD... runs CMD: its exit code must be CODE and its
#                          stdout+stderr hold PAT (fixed string); a failure
#                          (CODE != 0) must be one line on stderr. Leaves
#                          $out, $err and $rc for the caller.
set -u
: "${FSDPC:?FSDPC must point at the fsdpc executable}"
dir=$(mktemp -d "${FSDPC_BINARY_DIR:-/tmp}/$1-XXXXXX")
trap 'rm -rf "$dir"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

expect() {
  local code=$1 pat=$2; shift 2
  out=$("$@" 2>"$dir/err"); rc=$?
  err=$(cat "$dir/err")
  [ "$rc" -eq "$code" ] || fail "'$*' exited $rc, expected $code: $err"
  printf '%s\n%s\n' "$out" "$err" | grep -qF -- "$pat" || fail "'$*' output lacks '$pat': $out $err"
  if [ "$code" -ne 0 ]; then
    [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "'$*' error is not one line: $err"
  fi
}
