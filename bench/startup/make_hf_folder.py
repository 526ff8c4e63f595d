#!/usr/bin/env python3
"""Writes a random-weight BF16 Hugging Face Llama folder of the 1B or 8B bench
shape (configs/bench/llama3-{1b,8b}-base.yaml: untied head): config.json,
model-0000i-of-0000n.safetensors shards of at most --shard-gb GB and
model.safetensors.index.json, for timing `fsdpc train` from an HF folder.
Weights are N(0, 0.02) drawn on the GPU (norms 1), in module order.

  python3 bench/startup/make_hf_folder.py --model 1b --out /tmp/hf1b
"""
import argparse
import json
import os
import time

import torch
from safetensors.torch import save_file

SHAPES = {  # V, C, F, L, NH, KVH
    "1b": (128256, 2048, 8192, 16, 32, 8),
    "8b": (128256, 4096, 14336, 32, 32, 8),
}


def tensors(model):
    V, C, F, L, NH, KVH = SHAPES[model]
    hd = C // NH
    yield "model.embed_tokens.weight", (V, C)
    for l in range(L):
        p = f"model.layers.{l}."
        yield p + "self_attn.q_proj.weight", (NH * hd, C)
        yield p + "self_attn.k_proj.weight", (KVH * hd, C)
        yield p + "self_attn.v_proj.weight", (KVH * hd, C)
        yield p + "self_attn.o_proj.weight", (C, NH * hd)
        yield p + "mlp.gate_proj.weight", (F, C)
        yield p + "mlp.up_proj.weight", (F, C)
        yield p + "mlp.down_proj.weight", (C, F)
        yield p + "input_layernorm.weight", (C,)
        yield p + "post_attention_layernorm.weight", (C,)
    yield "model.norm.weight", (C,)
    yield "lm_head.weight", (V, C)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=sorted(SHAPES), required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--shard-gb", type=float, default=5.0)
    a = ap.parse_args()
    t0 = time.time()
    os.makedirs(a.out, exist_ok=True)
    V, C, F, L, NH, KVH = SHAPES[a.model]
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    g = torch.Generator(device=dev).manual_seed(0)
    limit = int(a.shard_gb * 1e9)
    groups, cur, size = [], [], 0
    for name, shape in tensors(a.model):
        b = 2 * torch.Size(shape).numel()
        if cur and size + b > limit:
            groups.append(cur)
            cur, size = [], 0
        cur.append((name, shape))
        size += b
    groups.append(cur)
    n = len(groups)
    weight_map, total = {}, 0
    for i, grp in enumerate(groups):
        fname = f"model-{i + 1:05d}-of-{n:05d}.safetensors"
        d = {}
        for name, shape in grp:
            if len(shape) == 1:
                t = torch.ones(shape, dtype=torch.bfloat16)
            else:
                t = (torch.randn(shape, generator=g, device=dev) * 0.02).to(torch.bfloat16).cpu()
            d[name] = t
            weight_map[name] = fname
            total += 2 * t.numel()
        save_file(d, os.path.join(a.out, fname), metadata={"format": "pt"})
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": V,
           "hidden_size": C, "intermediate_size": F, "num_hidden_layers": L,
           "num_attention_heads": NH, "num_key_value_heads": KVH, "head_dim": C // NH,
           "max_position_embeddings": 2048, "rope_theta": 500000.0, "rms_norm_eps": 1e-5,
           "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "bfloat16",
           "bos_token_id": 128000, "eos_token_id": 128001}
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    print(f"{a.out}: {a.model} shape, {total / 1e9:.2f} GB in {n} shard(s), "
          f"{time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
