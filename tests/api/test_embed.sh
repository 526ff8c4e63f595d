#!/usr/bin/env bash
# The embedding API as a third party sees it: install fsdpc to a temporary
# prefix; libfsdpc.so exports only the API; examples/embed builds against
# the INSTALLED header through pkg-config and trains the tiny model
# in-process (loss goes down, library lines reach its log sink).
set -eu
: "${FSDPC:?}" "${FSDPC_SOURCE_DIR:?}" "${FSDPC_BINARY_DIR:?}"
tmp=$(mktemp -d /tmp/fsdpc-embed-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$FSDPC_BINARY_DIR" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; fail "cmake --install"; }
pc=$(find "$tmp/prefix" -name fsdpc.pc | head -n 1)
export PKG_CONFIG_PATH=$(dirname "$pc")
lib=$(find "$tmp/prefix" -name 'libfsdpc.so.*' -type f | head -n 1)
[ -n "$lib" ] || fail "libfsdpc.so not installed"
syms=$(nm -D --defined-only "$lib" | awk '{print $3}')
bad=$(grep -v '^fsdpc_[a-z]' <<<"$syms" || true)
[ -z "$bad" ] || fail "libfsdpc.so exports more than the API: $(head -5 <<<"$bad" | xargs)"
for f in fsdpc_config_load fsdpc_plan_create fsdpc_trainer_create fsdpc_trainer_run \
  fsdpc_set_log_sink fsdpc_generate fsdpc_evaluate fsdpc_memplan_create fsdpc_launch; do
  grep -qx "$f" <<<"$syms" || fail "libfsdpc.so does not export $f"
done

# The installed command line runs on the installed libfsdpc.so (it links it),
# with its man page and shell completions beside it.
"$tmp/prefix/bin/fsdpc" --version >/dev/null || fail "the installed fsdpc does not run"
ldd "$tmp/prefix/bin/fsdpc" | grep -q "$tmp/prefix/.*libfsdpc.so" ||
  fail "the installed fsdpc does not use the installed libfsdpc.so: $(ldd "$tmp/prefix/bin/fsdpc" | grep fsdpc)"
for f in share/man/man1/fsdpc.1 share/bash-completion/completions/fsdpc share/zsh/site-functions/_fsdpc; do
  [ -s "$tmp/prefix/$f" ] || fail "cmake --install did not install $f"
done
grep -q "^\.SS \"fsdpc train\"" "$tmp/prefix/share/man/man1/fsdpc.1" || fail "the man page lacks fsdpc train"

cp -r "$FSDPC_SOURCE_DIR/examples/embed" "$tmp/embed"
make -C "$tmp/embed" >"$tmp/make.log" 2>&1 || { cat "$tmp/make.log"; fail "make"; }
grep -q "core/include\|core/src" "$tmp/make.log" && fail "the example used the source tree"
"$FSDPC" data synth --task qa --out "$tmp/qa.tok" >/dev/null 2>&1 || fail "data synth"
TMPDIR=$tmp FSDPC_PLUGIN_PATH= "$tmp/embed/train_tiny" "$tmp/qa.tok" 25 >"$tmp/out.txt" 2>"$tmp/err.txt" ||
  { cat "$tmp/out.txt" "$tmp/err.txt"; fail "train_tiny exited $?"; }
cat "$tmp/out.txt" | tail -3
grep -q "^trained 25 steps in-process" "$tmp/out.txt" || fail "no summary line"
[ "$(grep -c '^step ' "$tmp/out.txt")" -eq 25 ] || fail "not one callback per step"
grep -q '^\[fsdpc info\] fsdp: FULL_SHARD' "$tmp/out.txt" || fail "library lines did not reach the sink"
[ -s "$tmp/err.txt" ] && fail "the library wrote to stderr: $(head -3 "$tmp/err.txt")"
echo "embed: all checks passed"
