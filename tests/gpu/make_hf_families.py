#!/usr/bin/env python3
"""Makes the Hugging Face fixtures of the decoder families (issue 35) that
fsdpc's CPU model is tested against: small random configs of Qwen2, Qwen3,
Phi-3, OLMo 2, Granite, Mistral, Llama and Gemma 2 covering the switches
(q/k/v(/o/MLP) biases, tied and untied heads, q/k norms per head and per
projection, post-norms, fused qkv_proj/gate_up_proj, partial rotary, each
RoPE type, sliding windows shorter than the sequence, GQA and MQA, Granite's
multipliers, Gemma 2's (1 + w) norms, GeGLU and soft-capping on and off,
Gemma 3's (1 + w) q/k norms and the local layers' own RoPE). Runs where torch and transformers are installed (the GPU host;
CPU only, seconds; scripts/gpu/agree.sh families runs it):

    python3 tests/gpu/make_hf_families.py OUT

and writes everything into OUT (commit it as tests/fixtures/hf_families; the
ctests test_hf_families and test_cuda_hf_families read it):
  OUT/<name>/config.json, model.safetensors, generation_config.json
                                  the folder as save_pretrained writes it (fp32)
  OUT/<name>/reference.safetensors
                                  input_ids, labels (shifted: label t is the
                                  target of position t, -100 ignored), logits
                                  of the float64 model, grad.<param> of the
                                  mean loss, final.<param> after the AdamW steps
  OUT/<name>/reference.json       loss, the losses of STEPS AdamW steps on the
                                  same batch (torch.optim.AdamW, float64), the
                                  hyperparameters, parameter names in
                                  named_parameters() order, versions
  OUT/manifest.json               the fixture names and versions
The reference is computed in float64 from the fp32 weights (eager attention),
so fsdpc's fp32 result is compared with something more exact than itself.
Prints one RESULT line per fixture; exits non-zero if a model fails to build.
"""
import json
import os
import sys

import torch
import transformers
from safetensors.torch import save_file

B, T, STEPS = 2, 12, 20
ADAMW = dict(lr=2e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)


def tiny(**kw):
    """A config small enough that the thirteen fixtures stay a few hundred KB in
    all (CI keeps them): 2 layers, hidden 16, 4 heads of 4, kv heads 2 unless
    kw says otherwise."""
    base = dict(vocab_size=32, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                rms_norm_eps=1e-6, tie_word_embeddings=False)
    base.update(kw)
    return base


# name: (class, config kwargs, rope dict). Every config keeps
# max_position_embeddings a multiple of what yarn/longrope divide it by, so
# transformers versions that derive the factor from it agree with those that
# read it. Phi-3's fixtures turn 4 of their head's 8 dims (partial rotary
# 0.5): longrope has 2 factors.
LONG_SHORT = [1.0, 1.7]
LONG_LONG = [1.5, 6.0]
PHI3 = dict(hidden_size=32, partial_rotary_factor=0.5, rms_norm_eps=1e-5, resid_pdrop=0.0,
            embd_pdrop=0.0, attention_dropout=0.0)
FIXTURES = {
    # Llama: q/k/v/o and MLP biases, llama3 RoPE, GQA 2, untied
    "llama_biases_llama3": ("LlamaForCausalLM", tiny(
        vocab_size=35, attention_bias=True, mlp_bias=True),
        dict(rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0,
             high_freq_factor=4.0, original_max_position_embeddings=16)),
    # Mistral: sliding window 4 < T on every layer, head_dim 6 != 16/4, MQA
    "mistral_window": ("MistralForCausalLM", tiny(
        vocab_size=37, num_key_value_heads=1, head_dim=6, rms_norm_eps=1e-5, sliding_window=4),
        dict(rope_type="default", rope_theta=10000.0)),
    # Qwen2: q/k/v biases, tied, sliding window 5 on layer 1 only
    "qwen2_tied_window": ("Qwen2ForCausalLM", tiny(
        vocab_size=33, use_sliding_window=True, sliding_window=5, max_window_layers=1,
        tie_word_embeddings=True),
        dict(rope_type="default", rope_theta=1000000.0)),
    # Qwen2 as released (no window, untied), dynamic RoPE (within
    # max_position_embeddings: the default frequencies; fsdpc refuses longer)
    "qwen2_dynamic": ("Qwen2ForCausalLM", tiny(
        vocab_size=31, max_position_embeddings=32, use_sliding_window=False,
        sliding_window=4096, max_window_layers=28),
        dict(rope_type="dynamic", rope_theta=10000.0, factor=2.0)),
    # Qwen3: per-head q/k norms, head_dim 8 != 16/4, o bias, yarn, MQA
    "qwen3_qknorm_yarn": ("Qwen3ForCausalLM", tiny(
        vocab_size=34, num_key_value_heads=1, head_dim=8, max_position_embeddings=32,
        attention_bias=True, use_sliding_window=False),
        dict(rope_type="yarn", rope_theta=10000.0, factor=4.0,
             original_max_position_embeddings=8)),
    # Phi-3: fused qkv_proj/gate_up_proj, partial rotary 0.5, longrope with
    # T > original (long factors), sliding window 5 < T
    "phi3_longrope_long": ("Phi3ForCausalLM", tiny(
        vocab_size=36, max_position_embeddings=32, original_max_position_embeddings=8,
        sliding_window=5, **PHI3),
        dict(rope_type="longrope", rope_theta=10000.0, short_factor=LONG_SHORT,
             long_factor=LONG_LONG, original_max_position_embeddings=8)),
    # Phi-3: longrope with T <= original (short factors), no window, tied, MHA
    "phi3_longrope_short": ("Phi3ForCausalLM", tiny(
        vocab_size=36, num_key_value_heads=4, original_max_position_embeddings=16,
        sliding_window=None, tie_word_embeddings=True, **PHI3),
        dict(rope_type="longrope", rope_theta=10000.0, short_factor=LONG_SHORT,
             long_factor=LONG_LONG, original_max_position_embeddings=16)),
    # OLMo 2: q/k norms over the projections, post-norms, linear RoPE
    "olmo2_postnorm_linear": ("Olmo2ForCausalLM", tiny(vocab_size=38, attention_bias=False),
        dict(rope_type="linear", rope_theta=10000.0, factor=2.0)),
    # Granite: the four multipliers, attention and MLP biases, tied, MHA
    "granite_multipliers": ("GraniteForCausalLM", tiny(
        vocab_size=30, num_key_value_heads=4, embedding_multiplier=3.0,
        residual_multiplier=0.5, attention_multiplier=0.2, logits_scaling=4.0,
        attention_bias=True, mlp_bias=True, tie_word_embeddings=True),
        dict(rope_type="default", rope_theta=10000.0)),
    # Gemma 2 (issue 36): (1 + w) norms, four per layer, GeGLU, sqrt(hidden)
    # embeddings, query_pre_attn_scalar 8, attention and final soft-capping
    # small enough to bend the scores and logits, sliding window 5 < T on
    # the even layers (Gemma2Config's default layer_types), head_dim 8 != 16/4,
    # tied as released
    "gemma2_softcap_window": ("Gemma2ForCausalLM", tiny(
        vocab_size=39, head_dim=8, query_pre_attn_scalar=8, attn_logit_softcapping=2.0,
        final_logit_softcapping=3.0, sliding_window=5, hidden_activation="gelu_pytorch_tanh",
        tie_word_embeddings=True),
        dict(rope_type="default", rope_theta=10000.0)),
    # Gemma 2 without soft-capping (null), untied, biases, layers listed
    # (the window on layer 1 only), MQA
    "gemma2_nocap_untied": ("Gemma2ForCausalLM", tiny(
        vocab_size=40, num_key_value_heads=1, query_pre_attn_scalar=16,
        attn_logit_softcapping=None, final_logit_softcapping=None, attention_bias=True,
        sliding_window=4, layer_types=["full_attention", "sliding_attention"],
        tie_word_embeddings=False),
        dict(rope_type="default", rope_theta=10000.0)),
    # Gemma 3 (issue 36): (1 + w) q/k norms per head, the sliding_attention
    # layers turned by plain RoPE of base rope_local_base_freq 100, the full
    # layer by rope_theta 10000 with linear scaling 4, window 5 < T on the
    # sliding layers (2 local : 1 global), no soft-capping (Gemma3TextConfig's
    # default), head_dim 8, tied as released
    "gemma3_local_rope_window": ("Gemma3ForCausalLM", tiny(
        vocab_size=41, num_hidden_layers=3, head_dim=8, query_pre_attn_scalar=8,
        sliding_window=5, layer_types=["sliding_attention", "sliding_attention",
                                       "full_attention"],
        hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True),
        {"full_attention": dict(rope_type="linear", rope_theta=10000.0, factor=4.0),
         "sliding_attention": dict(rope_type="default", rope_theta=100.0)}),
    # Gemma 3 with attention and final soft-capping set, untied, biases, MQA,
    # the full layer first
    "gemma3_softcap_untied": ("Gemma3ForCausalLM", tiny(
        vocab_size=43, num_key_value_heads=1, query_pre_attn_scalar=16,
        attn_logit_softcapping=2.0, final_logit_softcapping=3.0, attention_bias=True,
        sliding_window=4, layer_types=["full_attention", "sliding_attention"],
        tie_word_embeddings=False),
        {"full_attention": dict(rope_type="default", rope_theta=1000000.0),
         "sliding_attention": dict(rope_type="default", rope_theta=10000.0)}),
}
# The config class where it is not the model class's name with Config
CONFIG_CLASS = {"Gemma3ForCausalLM": "Gemma3TextConfig"}


def legacy_rope(rope):
    """rope as transformers < 5 takes it: rope_theta and rope_scaling (Gemma
    3's per layer type: the full layers', and rope_local_base_freq)."""
    if "full_attention" in rope:
        out = legacy_rope(rope["full_attention"])
        out["rope_local_base_freq"] = rope["sliding_attention"]["rope_theta"]
        return out
    old = {k: v for k, v in rope.items() if k != "rope_theta"}
    return dict(rope_theta=rope["rope_theta"],
                rope_scaling=None if rope["rope_type"] == "default" else old)


def build_config(cls_name, kw, rope):
    """The config class of cls_name with kw and rope: transformers >= 5 takes
    rope_parameters (with rope_theta; Gemma 3's per layer type), older ones
    rope_scaling + rope_theta."""
    cfg_cls = getattr(transformers, CONFIG_CLASS.get(
        cls_name, cls_name.replace("ForCausalLM", "Config")))
    base = dict(kw, bos_token_id=1, eos_token_id=2, pad_token_id=None)
    tries = [dict(base, rope_parameters=json.loads(json.dumps(rope))),
             dict(base, **legacy_rope(rope))]
    err = None
    for t in tries:
        try:
            return cfg_cls(**t)
        except (TypeError, ValueError, KeyError) as e:
            err = e
    raise RuntimeError(f"{cls_name}: no config form works: {err}")


def fill(model, seed):
    torch.manual_seed(seed)
    with torch.no_grad():
        # Gemma's norms scale by (1 + weight): the same spread around 1
        offset = 0.0 if model.config.model_type.startswith("gemma") else 1.0
        for n, p in model.named_parameters():
            if p.ndim == 1 and "norm" in n:
                p.copy_(offset + 0.2 * torch.randn_like(p))
            elif p.ndim == 1:  # biases
                p.copy_(0.1 * torch.randn_like(p))
            else:
                p.copy_(0.08 * torch.randn_like(p))


def make(name, spec, out_dir):
    cls_name, kw, rope = spec
    cfg = build_config(cls_name, kw, rope)
    cfg._attn_implementation = "eager"
    cls = getattr(transformers, cls_name)
    model = cls(cfg).float()
    fill(model, 1234)
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d, safe_serialization=True)

    g = torch.Generator().manual_seed(99)
    ids = torch.randint(0, cfg.vocab_size, (B, T), generator=g)
    hf_labels = ids.clone()
    hf_labels[0, 3:6] = -100  # some ignored targets
    hf_labels[1, 7] = -100
    labels = torch.full_like(ids, -100)  # fsdpc's: label t = target of position t
    labels[:, :-1] = hf_labels[:, 1:]

    try:  # transformers >= 5 says dtype, older ones torch_dtype
        m64 = cls.from_pretrained(d, dtype=torch.float64, attn_implementation="eager")
    except TypeError:
        m64 = cls.from_pretrained(d, torch_dtype=torch.float64, attn_implementation="eager")
    m64.config._attn_implementation = "eager"
    out = m64(input_ids=ids, labels=hf_labels)
    out.loss.backward()
    ref = {"input_ids": ids.float(), "labels": labels.float(),
           "logits": out.logits.detach().float().contiguous()}
    names = []
    for n, p in m64.named_parameters():
        ref["grad." + n] = p.grad.detach().float().contiguous()
        names.append(n)

    opt = torch.optim.AdamW(m64.parameters(), **ADAMW)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        o = m64(input_ids=ids, labels=hf_labels)
        losses.append(o.loss.item())
        o.loss.backward()
        opt.step()
    for n, p in m64.named_parameters():
        ref["final." + n] = p.detach().float().contiguous()
    save_file(ref, os.path.join(d, "reference.safetensors"))
    meta = {"loss": out.loss.item(), "adamw": ADAMW, "adamw_losses": losses, "steps": STEPS,
            "B": B, "T": T, "params": names, "class": cls_name,
            "torch": torch.__version__, "transformers": transformers.__version__}
    with open(os.path.join(d, "reference.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(f"RESULT {name}: {cls_name} loss {meta['loss']:.6f} after {STEPS} AdamW steps "
          f"{losses[-1]:.6f}")


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "hf_families"
    torch.set_num_threads(4)
    os.makedirs(out_dir, exist_ok=True)
    done, failed = [], []
    for name, spec in FIXTURES.items():
        try:
            make(name, spec, out_dir)
            done.append(name)
        except Exception as e:  # report every family, then fail
            print(f"RESULT {name}: FAILED {type(e).__name__}: {e}")
            failed.append(name)
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump({"fixtures": done, "failed": failed, "torch": torch.__version__,
                   "transformers": transformers.__version__}, f, indent=1)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
