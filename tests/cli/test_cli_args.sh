# Every command's options through the one parser (core/cli/cli.c), as the
# option tables list them (`fsdpc completion list`):
#   - `--opt=value` and `--opt value` (and `--opt_name` for `--opt-name`) are
#     read: with --help after them the command prints its help and exits 0
#     (before this parser, `plan`, `generate` and `eval` refused `--opt=v`);
#   - the help text names the option;
#   - a misspelt option exits 2 with one line naming the option meant;
# then commands and subcommands misspelt, and for plan, generate and eval the
# same results from `--opt=v` as from `--opt v` (torchrun's --nproc_per_node
# too), and the completions and man page name every command.
. "$(dirname "$0")/../common/cli_expect.sh" cli-args
FIX=$FSDPC_SOURCE_DIR/tests/fixtures
tiny=$FSDPC_SOURCE_DIR/configs/tiny-cpu.yaml

export OMP_WAIT_POLICY=PASSIVE # no re-exec of fsdpc per call (core/cli/main.c)
"$FSDPC" completion list >"$dir/opts" || fail "completion list"
# check_command PATH: every option of the command at once, as --opt=v, as
# --opt v and as --opt_name=v (then --help: exit 0); its help names each;
# a misspelt option (the first and the last) and a flag given a value exit 2.
check_command() {
  local path=$1 words eq=() sp=() us=() flag= names=() line rest opt arg val v
  words=($path)
  "$FSDPC" "${words[@]}" --help >"$dir/help" || fail "fsdpc $path --help"
  while read -r line; do
    rest=${line#"$path" --}
    opt=${rest%% *}
    arg=
    [ "$rest" = "$opt" ] || arg=${rest#* }
    names+=("$opt")
    grep -qF -- "--$opt" "$dir/help" || fail "'fsdpc $path --help' lacks --$opt"
    if [ -z "$arg" ]; then
      eq+=("--$opt") sp+=("--$opt") us+=("--${opt//-/_}")
      [ -n "$flag" ] || flag=$opt
      continue
    fi
    val=1 # a value the option takes: the first real choice of "a|b", else 1
    if [[ $arg == *"|"* ]]; then
      for v in ${arg//|/ }; do
        [[ $v =~ ^[A-Z]{1,3}$ ]] || { val=$v; break; }
      done
    fi
    eq+=("--$opt=$val") sp+=("--$opt" "$val") us+=("--${opt//-/_}=$val")
  done < <(grep "^$path --" "$dir/opts")
  [ "${#names[@]}" -gt 0 ] || { fail "no options listed for $path"; return; }
  expect 0 "usage: fsdpc ${words[0]}" "$FSDPC" "${words[@]}" "${eq[@]}" --help
  expect 0 "usage: fsdpc ${words[0]}" "$FSDPC" "${words[@]}" "${sp[@]}" --help
  expect 0 "usage: fsdpc ${words[0]}" "$FSDPC" "${words[@]}" "${us[@]}" --help
  [ -z "$flag" ] || expect 2 "--$flag takes no value" "$FSDPC" "${words[@]}" "--$flag=1"
  for opt in "${names[0]}" "${names[-1]}"; do
    if [ "${#opt}" -gt 1 ]; then # a one-letter option is no one's typo
      expect 2 "did you mean '--$opt'?" "$FSDPC" "${words[@]}" "--${opt}q"
    else
      expect 2 "unknown option '--${opt}q'" "$FSDPC" "${words[@]}" "--${opt}q"
    fi
  done
  n=$((n + ${#names[@]}))
}
n=0
for c in train "config check" "config schema" "plugins list" "plugins info" "data prepare" \
  "data synth" "data tokenize" "data info" "data batch" "data encode" "data decode" plan bench \
  convert plot generate eval help; do
  check_command "$c"
done
[ "$n" -gt 100 ] || fail "only $n options listed"

# Commands and subcommands: the closest name, exit 2.
expect 2 "did you mean 'train'?" "$FSDPC" trian x.yaml
expect 2 "did you mean 'generate'?" "$FSDPC" genrate
expect 2 "unknown command 'trian' (did you mean 'train'?" "$FSDPC" help trian
expect 2 "unknown option '--verison' (did you mean '--version'?" "$FSDPC" --verison
expect 2 "unknown option '--tempreature' (did you mean" "$FSDPC" generate m --tempreature=0.5
expect 2 "leave out 'generate'" "$FSDPC" help --man generate
expect 2 "did you mean 'check'?" "$FSDPC" config chek x.yaml
expect 2 "did you mean 'list'?" "$FSDPC" plugins lst
expect 2 "did you mean 'prepare'?" "$FSDPC" data prepar
expect 2 "did you mean 'list'?" "$FSDPC" recipes lst
expect 2 "give NAME and DEST" "$FSDPC" recipes copy tiny-cpu
expect 2 "did you mean 'qa'?" "$FSDPC" data synth --task=qaa --out x
expect 2 "option '--s' is ambiguous" "$FSDPC" data batch x --s 1
expect 2 "--world expects an integer" "$FSDPC" plan "$tiny" --world=x
expect 2 "--nproc-per-node expects an integer" "$FSDPC" train "$tiny" --nproc_per_node=many
expect 2 "--data needs a value" "$FSDPC" eval m --data

# The same results with `=`: plan (torchrun's spelling too), generate, eval.
a=$("$FSDPC" plan "$tiny" --world 4 --nproc-per-node 2 --json) || fail "plan spaced"
b=$("$FSDPC" plan "$tiny" --world=4 --nproc_per_node=2 --json) || fail "plan with ="
[ -n "$a" ] && [ "$a" = "$b" ] || fail "plan: --opt=v differs from --opt v"
H=$FIX/hf_tiny_untied
a=$("$FSDPC" generate "$H" --prompt-ids 5,6 --max-new-tokens 4 --device cpu) || fail "generate spaced"
b=$("$FSDPC" generate "$H" --prompt-ids=5,6 --max-new-tokens=4 --device=cpu) || fail "generate ="
[ -n "$a" ] && [ "$a" = "$b" ] || fail "generate: --opt=v differs: '$a' vs '$b'"
# eval: a two-step model of the tiny config
"$FSDPC" data synth --task copy --n 300 --out "$dir/d.tok" >/dev/null || fail "synth"
cat >"$dir/c.yaml" <<'YAML'
model: {vocab_size: 259, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2,
        num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 64}
data: {train: d.tok, seq_len: 16}
train: {max_steps: 2, micro_batch_size: 2, global_batch_size: 2, threads: 1}
checkpoint: {dir: ck}
log: {dir: lg, progress: off}
YAML
(cd "$dir" && "$FSDPC" train c.yaml >t.log 2>&1) || fail "train: $(tail -2 "$dir/t.log")"
a=$("$FSDPC" eval "$dir/ck/final" --data "$dir/d.tok" --seq-len 16 --batches 2 --device cpu) ||
  fail "eval spaced"
b=$("$FSDPC" eval "$dir/ck/final" --data="$dir/d.tok" --seq-len=16 --batches=2 --device=cpu) ||
  fail "eval ="
strip() { sed 's/"peak[^,}]*[,}]//g'; }
[ "$(echo "$a" | strip)" = "$(echo "$b" | strip)" ] && echo "$a" | grep -q '"loss"' ||
  fail "eval: --opt=v differs: '$a' vs '$b'"

# An empty override: the hint for it, pasted into a shell as printed, works
# (the old hint checkpoint.dir='' reached fsdpc as checkpoint.dir= again).
expect 1 "missing value after '='" "$FSDPC" config check "$dir/c.yaml" checkpoint.dir=
hint=$(printf '%s\n' "$err" | sed -n "s/.*write \(checkpoint.dir=[^ ]*\) in a shell.*/\1/p")
[ -n "$hint" ] || fail "no hint in: $err"
(cd "$dir" && eval "\"\$FSDPC\" config check c.yaml $hint") >"$dir/hint.yaml" 2>&1 ||
  fail "the hint '$hint' does not work in a shell: $(cat "$dir/hint.yaml")"
grep -q '^  dir: ""' "$dir/hint.yaml" || fail "checkpoint.dir is not empty: $(grep -A2 '^checkpoint' "$dir/hint.yaml")"

# The completions and the man page name every command.
for f in bash zsh; do
  "$FSDPC" completion $f >"$dir/c.$f" || fail "completion $f"
done
bash -n "$dir/c.bash" || fail "the bash completion does not parse"
if command -v zsh >/dev/null; then
  zsh -n "$dir/c.zsh" || fail "the zsh completion does not parse"
fi
"$FSDPC" help --man >"$dir/fsdpc.1" || fail "help --man"
for c in train config plugins data plan bench convert metrics plot generate eval recipes; do
  grep -q "\b$c\b" "$dir/c.bash" && grep -q "\b$c\b" "$dir/c.zsh" || fail "completion lacks $c"
  grep -q "^\.SS \"fsdpc $c" "$dir/fsdpc.1" || fail "man page lacks fsdpc $c"
done
# bash: completing `fsdpc plan --wo` offers --world
(. "$dir/c.bash"; COMP_WORDS=(fsdpc plan --wo); COMP_CWORD=2; _fsdpc
 [ "${COMPREPLY[*]}" = "--world" ]) || fail "bash completion of 'fsdpc plan --wo'"
if command -v man >/dev/null; then
  man -l "$dir/fsdpc.1" 2>/dev/null | grep -q "EXIT STATUS" || fail "man -l fsdpc.1"
fi

[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "PASS ($n options)"
