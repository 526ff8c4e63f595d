# What fsdpc cannot model is refused by rule: each unsupported config.json
# key and an extra or a missing tensor make train, convert, generate and
# eval exit 1 with one line naming the key or tensor.
. "$(dirname "$0")/common.sh"
"$FSDPC" data synth --task copy --out d.tok >/dev/null 2>&1 || fail "data synth"
echo 'train: {}' >run.yaml
n=0
# refused NAME WANT EDIT...: every command refuses the variant with WANT
refused() {
  local name=$1 want=$2
  shift 2
  $VARIANT "$FIX/hf_tiny_untied" "$name" "$@" || fail "$name: variant"
  local cmds=(
    "train run.yaml model.config=$name model.init.from=$name data.train=d.tok data.seq_len=16 train.max_steps=1 train.micro_batch_size=1 train.global_batch_size=1 log.progress=off"
    "convert $name $name.out --to hf"
    "generate $name --prompt hi --max-new-tokens 2"
    "eval $name --data d.tok --seq-len 16 --batches 1"
  )
  for c in "${cmds[@]}"; do
    timeout 60 $FSDPC $c >out.log 2>&1
    local rc=$?
    [ $rc = 1 ] || fail "$name: '${c%% *}' exit $rc (want 1): $(tail -2 out.log)"
    local lines
    lines=$(grep -c -E '^(error:|fsdpc [a-z]+:)' out.log)
    [ "$lines" = 1 ] || fail "$name: '${c%% *}': $lines error lines: $(cat out.log)"
    grep -E '^(error:|fsdpc [a-z]+:)' out.log | grep -qF -- "$want" ||
      fail "$name: '${c%% *}' does not name '$want': $(grep -E '^(error:|fsdpc)' out.log)"
    n=$((n + 1))
  done
}
refused qwen "model_type 'qwen2'" model_type='"qwen2"'
refused gelu "hidden_act 'gelu'" hidden_act='"gelu"'
refused abias "'attention_bias' is set" attention_bias=true
refused mbias "'mlp_bias' is set" mlp_bias=true
refused sliding "'sliding_window' is set" sliding_window=8
refused mistral_sw "sliding_window 8 lies inside" model_type='"mistral"' sliding_window=8
# A rope type the config schema does not know is refused by the config
# loader (naming the value and the accepted ones) before the run plan's HF
# rules would say "type 'linear' is not supported".
refused rope_lin "'linear'" 'rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}'
refused rope_yarn "'yarn'" 'rope_scaling={"type": "yarn", "factor": 2.0}'
refused quant "'quantization_config' is set" 'quantization_config={"quant_method": "bitsandbytes"}'
refused dropout "attention_dropout must be 0" attention_dropout=0.1
refused extra "unexpected tensor 'model.layers.0.self_attn.q_proj.bias'" \
  +tensor:model.layers.0.self_attn.q_proj.bias:64
refused extra_mlp "unexpected tensor 'model.layers.1.mlp.down_proj.bias'" \
  +tensor:model.layers.1.mlp.down_proj.bias:64
refused missing "tensor 'model.layers.1.mlp.up_proj.weight' is missing" \
  -tensor:model.layers.1.mlp.up_proj.weight
refused no_head "tensor 'lm_head.weight' is missing" -tensor:lm_head.weight
# The same folder unedited, and mistral with a window beyond the sequence,
# are accepted.
$VARIANT "$FIX/hf_tiny_untied" ok model_type='"mistral"' sliding_window=64 || fail "variant ok"
"$FSDPC" convert ok ok.out --to hf >c.log 2>&1 || fail "ok: $(cat c.log)"
echo "PASS ($n refusals)"
