#!/usr/bin/env bash
# Issue 36: a tiny gemma3_text (q/k norms with (1 + w), two sliding_attention
# layers with their own RoPE base and a window shorter than the sequence, a
# full layer with rope_theta and linear scaling, tied embeddings, head_dim
# apart from hidden / heads) trains on the CPU: the loss falls over 10
# steps, world 2 (FULL_SHARD) gives world 1's losses and final weights
# within 1e-5, the exported config.json says what was computed, and the
# exported Hugging Face folder evaluates to the fsdpc checkpoint's loss
# (names, layer types and both RoPEs read back); LoRA on its seven
# projections changes it and its adapter folder evaluates as its merged one;
# generation from the exported folder equals the checkpoint's.
source "$(dirname "$0")/../train/common.sh"
CMP="python3 $(dirname "$0")/../train/compare_runs.py"
G=(model.model_type=gemma3_text model.head_dim=32 model.sliding_window=8
  model.sliding_window_pattern=3 model.rope_local_base_freq=100 model.rope_scaling.type=linear
  model.rope_scaling.factor=2 model.query_pre_attn_scalar=32 model.tie_word_embeddings=true
  model.rms_norm_eps=1e-6)
# eval_loss MODEL BATCHES: fsdpc eval's loss of MODEL on qa.tok, appended to $TMP/losses
eval_loss() {
  "$FSDPC" eval "$1" --data "$TMP/qa.tok" --seq-len 32 --batches "$2" >"$TMP/eval.json" \
    2>"$TMP/eval.log" || fail "eval $1: $(tail -1 "$TMP/eval.log")"
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["loss"])' "$TMP/eval.json" \
    >>"$TMP/losses"
}

run ref "${G[@]}" || fail "gemma3_text at world 1 failed"
run w2 "${G[@]}" fsdp.sharding_strategy=FULL_SHARD -- --nproc-per-node 2 ||
  fail "gemma3_text at world 2 failed"
$CMP "$TMP/ref" "$TMP/w2" --weights || fail "gemma3_text world 2 diverged from world 1"
python3 "$(dirname "$0")/check_family_run.py" "$TMP/ref" '{"model_type": "gemma3_text",
  "architectures": ["Gemma3ForCausalLM"], "head_dim": 32, "query_pre_attn_scalar": 32,
  "attn_logit_softcapping": null, "final_logit_softcapping": null,
  "hidden_activation": "gelu_pytorch_tanh", "sliding_window": 8, "tie_word_embeddings": true,
  "rope_theta": 1000000, "rope_local_base_freq": 100,
  "rope_scaling": {"rope_type": "linear", "factor": 2, "original_max_position_embeddings": 8192},
  "layer_types": ["sliding_attention", "sliding_attention", "full_attention"]}' ||
  fail "gemma3_text run: see above"
# the same run with an fsdpc (sharded) final checkpoint: the same weights
run sh "${G[@]}" checkpoint.final_format=sharded || fail "gemma3_text, sharded final, failed"
eval_loss "$TMP/sh/ck/final" 2
eval_loss "$TMP/ref/ck/final" 2
python3 - "$TMP/losses" <<'PY' || fail "the exported folder evaluates otherwise than the checkpoint"
import sys
a, b = (float(x) for x in open(sys.argv[1]).read().split())
assert abs(a - b) <= 1e-6 * abs(a), f"checkpoint {a!r}, exported folder {b!r}"
print(f"eval loss {a:.6f} (checkpoint) = {b:.6f} (exported folder)")
PY
# LoRA on the family's seven projections over the exported folder: the
# adapters change the model, and the adapter folder (over its base)
# evaluates as the merged folder
run lora "${G[@]}" model.from="$TMP/ref/ck/final" peft.method=lora peft.r=4 peft.alpha=8 peft.merge_on_save=true optim.lr=1e-2 \
  "peft.target_modules=[q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]" ||
  fail "gemma3_text LoRA run failed"
: >"$TMP/losses"
for m in "$TMP/ref/ck/final" "$TMP/lora/ck/final" "$TMP/lora/ck/final-merged"; do
  eval_loss "$m" all # every batch: each folder batches the file its own way
done
python3 - "$TMP/losses" <<'PY' || fail "gemma3_text LoRA: see above"
import sys
base, a, b = (float(x) for x in open(sys.argv[1]).read().split())
assert abs(a - b) <= 1e-5 * abs(a), f"adapter folder {a!r}, merged folder {b!r}"
assert abs(a - base) > 1e-4, f"the adapters changed nothing: {a!r}, base {base!r}"
print(f"LoRA eval {a:.6f} (adapters) = {b:.6f} (merged), base {base:.6f}")
PY
# generation: the KV-cache decoder turns each sliding_attention layer by the
# local RoPE (its logits against transformers': test_infer_decode); greedy
# tokens from the exported folder and from the sharded checkpoint agree
for m in ref sh; do
  "$FSDPC" generate "$TMP/$m/ck/final" --prompt "Q: 1" --max-new-tokens 6 >"$TMP/gen_$m.out" \
    2>"$TMP/gen_$m.log" || fail "generate $m: $(tail -1 "$TMP/gen_$m.log")"
  [ -s "$TMP/gen_$m.out" ] || fail "generate $m printed nothing"
done
cmp -s "$TMP/gen_ref.out" "$TMP/gen_sh.out" ||
  fail "generate: the exported folder and the checkpoint differ: $(cat "$TMP/gen_ref.out") / $(cat "$TMP/gen_sh.out")"
echo "PASS: gemma3_text trains on the CPU; world 2 = world 1 within 1e-5; its export reads back; LoRA adapters = merged; generate"
