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
refused gemma "model_type': model.model_type: 'gemma' is not one of" model_type='"gemma"'
refused qwen_moe "model_type': model.model_type: 'qwen2_moe' is not one of" model_type='"qwen2_moe"'
refused gelu "hidden_act 'gelu'" hidden_act='"gelu"'
# a family switch whose tensors the folder lacks
refused abias "tensor 'model.layers.0.self_attn.q_proj.bias' is missing" attention_bias=true
refused mbias "tensor 'model.layers.0.mlp.gate_proj.bias' is missing" mlp_bias=true
refused qwen2 "tensor 'model.layers.0.self_attn.q_proj.bias' is missing" model_type='"qwen2"'
refused qwen3 "tensor 'model.layers.0.self_attn.q_norm.weight' is missing" model_type='"qwen3"'
refused phi3 "tensor 'model.layers.0.self_attn.qkv_proj.weight' is missing" model_type='"phi3"'
refused sliding "'sliding_window' is set" sliding_window=8
refused partial "'partial_rotary_factor' is 0.5" partial_rotary_factor=0.5
refused rope_mrope "'mrope' is not one of" 'rope_scaling={"type": "mrope", "factor": 2.0}'
refused rope_layers "RoPE per layer type" \
  'rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 10000.0}, "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}'
refused layer_types "layer_types has 'chunked_attention'" \
  'layer_types=["chunked_attention", "full_attention"]'
refused moe "'num_experts' is set" num_experts=8
refused vision "'vision_config' is set" 'vision_config={"hidden_size": 8}'
refused quant "'quantization_config' is set" 'quantization_config={"quant_method": "bitsandbytes"}'
refused dropout "'attention_dropout' is set" attention_dropout=0.1
refused extra "unexpected tensor 'model.layers.0.self_attn.q_proj.bias'" \
  +tensor:model.layers.0.self_attn.q_proj.bias:64
refused extra_mlp "unexpected tensor 'model.layers.1.mlp.down_proj.bias'" \
  +tensor:model.layers.1.mlp.down_proj.bias:64
refused missing "tensor 'model.layers.1.mlp.up_proj.weight' is missing" \
  -tensor:model.layers.1.mlp.up_proj.weight
refused no_head "tensor 'lm_head.weight' is missing" -tensor:lm_head.weight
# The same folder unedited, mistral with a window inside the sequence, and
# the folder made a Qwen2 one (its q/k/v biases added) are accepted.
$VARIANT "$FIX/hf_tiny_untied" ok model_type='"mistral"' sliding_window=4 || fail "variant ok"
"$FSDPC" convert ok ok.out --to hf >c.log 2>&1 || fail "ok: $(cat c.log)"
biases=""
for l in 0 1; do
  for p in q:64 k:32 v:32; do
    biases="$biases +tensor:model.layers.$l.self_attn.${p%%:*}_proj.bias:${p##*:}"
  done
done
# shellcheck disable=SC2086
$VARIANT "$FIX/hf_tiny_untied" q2 model_type='"qwen2"' $biases || fail "variant q2"
"$FSDPC" convert q2 q2.out --to hf >c.log 2>&1 || fail "q2: $(cat c.log)"
echo "PASS ($n refusals)"
