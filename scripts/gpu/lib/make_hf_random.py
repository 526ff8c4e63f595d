#!/usr/bin/env python3
"""Writes a random-weight Hugging Face Llama folder as the Hub ships one:
config.json, bf16 model-0000k-of-0000n.safetensors files of at most
--max-shard-bytes each (the Hub's 5 GB), model.safetensors.index.json
(metadata.total_size, weight_map) and generation_config.json.

    python3 scripts/gpu/lib/make_hf_random.py OUT --shape llama3.1-70b [--jobs 32]
    python3 scripts/gpu/lib/make_hf_random.py OUT --shape tiny --max-shard-bytes 200000

Memory is bounded whatever the model's size: tensors are generated and
written in chunks of --chunk elements (default 32 M: about 0.5 GB of
temporaries per job), and each job writes whole shard files, one tensor
after the other. Weights are N(0, --std) (norms 1.0), from a generator
seeded by the tensor's name, so the same command writes the same bytes with
any --jobs. Needs only numpy (no torch, no safetensors package): the
safetensors layout is an 8-byte header length, a JSON header and the raw
little-endian data. Files are written as NAME.tmp and renamed when complete.
Prints the time and GB/s of the whole write."""
import argparse
import hashlib
import json
import os
import sys
import time
from multiprocessing import Pool

import numpy as np

SHAPES = {
    # Llama-3.1-70B (meta-llama/Llama-3.1-70B config.json)
    "llama3.1-70b": dict(hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
                         num_attention_heads=64, num_key_value_heads=8, vocab_size=128256),
    "llama3.1-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                        num_attention_heads=32, num_key_value_heads=8, vocab_size=128256),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                 num_attention_heads=4, num_key_value_heads=2, vocab_size=259),
}


def hf_config(shape, layers):
    c = dict(shape)
    if layers:
        c["num_hidden_layers"] = layers
    big = c["vocab_size"] > 100000
    c.update({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
        "attention_bias": False, "attention_dropout": 0.0, "mlp_bias": False,
        "initializer_range": 0.02, "rms_norm_eps": 1e-05, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "use_cache": True,
        "head_dim": c["hidden_size"] // c["num_attention_heads"],
        "max_position_embeddings": 131072 if big else 256,
        "rope_theta": 500000.0,
        "bos_token_id": 128000 if big else 1, "eos_token_id": [128001, 128008, 128009] if big else 2,
    })
    if big:
        c["rope_scaling"] = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 8192, "rope_type": "llama3"}
    return c


def tensors(c):
    """(name, shape) in the Hub's order."""
    h, i, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    hd = c["head_dim"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    out = [("model.embed_tokens.weight", (v, h))]
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        out += [(p + "input_layernorm.weight", (h,)), (p + "mlp.down_proj.weight", (h, i)),
                (p + "mlp.gate_proj.weight", (i, h)), (p + "mlp.up_proj.weight", (i, h)),
                (p + "post_attention_layernorm.weight", (h,)),
                (p + "self_attn.k_proj.weight", (kv, h)), (p + "self_attn.o_proj.weight", (h, q)),
                (p + "self_attn.q_proj.weight", (q, h)), (p + "self_attn.v_proj.weight", (kv, h))]
    out += [("model.norm.weight", (h,)), ("lm_head.weight", (v, h))]
    return out


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def plan_shards(ts, max_bytes):
    """Tensors in order into files of at most max_bytes (a larger tensor gets a file of its own)."""
    shards, cur, cur_bytes = [], [], 0
    for name, shape in ts:
        b = numel(shape) * 2
        if cur and cur_bytes + b > max_bytes:
            shards.append(cur)
            cur, cur_bytes = [], 0
        cur.append((name, shape))
        cur_bytes += b
    if cur:
        shards.append(cur)
    return shards


def to_bf16(x):
    """float32 array -> uint16 bf16 bits, round to nearest even."""
    u = x.view(np.uint32)
    u = u + (np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))
    return (u >> np.uint32(16)).astype(np.uint16)


def write_shard(job):
    path, items, std, chunk = job
    header, off = {}, 0
    for name, shape in items:
        n = numel(shape) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    header["__metadata__"] = {"format": "pt"}
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * ((8 - len(hj) % 8) % 8)  # the data starts 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(len(hj).to_bytes(8, "little"))
        f.write(hj)
        for name, shape in items:
            total = numel(shape)
            if len(shape) == 1 and name.endswith("norm.weight"):
                f.write(to_bf16(np.ones(total, np.float32)).tobytes())
                continue
            seed = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")
            rng = np.random.default_rng(seed)
            done = 0
            while done < total:
                k = min(chunk, total - done)
                x = rng.standard_normal(k, dtype=np.float32)
                x *= np.float32(std)
                f.write(to_bf16(x).tobytes())
                done += k
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return off + 8 + len(hj)


def gen_config(c):
    return {"bos_token_id": c["bos_token_id"], "eos_token_id": c["eos_token_id"]}


def write_json(d, fname, obj):
    with open(os.path.join(d, fname + ".tmp"), "w") as f:
        json.dump(obj, f, indent=2)
    os.replace(os.path.join(d, fname + ".tmp"), os.path.join(d, fname))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--shape", default="llama3.1-70b", choices=sorted(SHAPES))
    ap.add_argument("--layers", type=int, default=0, help="override num_hidden_layers")
    ap.add_argument("--max-shard-bytes", type=int, default=5_000_000_000)
    ap.add_argument("--jobs", type=int, default=max(1, min(32, (os.cpu_count() or 2))))
    ap.add_argument("--chunk", type=int, default=32 << 20, help="elements generated at once")
    ap.add_argument("--std", type=float, default=0.02)
    ap.add_argument("--config-only", action="store_true",
                    help="write config.json and generation_config.json only (for fsdpc plan)")
    a = ap.parse_args()
    c = hf_config(SHAPES[a.shape], a.layers)
    if a.config_only:
        os.makedirs(a.out, exist_ok=True)
        write_json(a.out, "config.json", c)
        write_json(a.out, "generation_config.json", gen_config(c))
        return
    ts = tensors(c)
    shards = plan_shards(ts, a.max_shard_bytes)
    n = len(shards)
    total = sum(numel(s) for _, s in ts) * 2
    os.makedirs(a.out, exist_ok=True)
    st = os.statvfs(a.out)
    free = st.f_bavail * st.f_frsize
    if free < total * 1.01:
        sys.exit(f"make_hf_random: {a.out} has {free / 1e9:.1f} GB free, the model needs "
                 f"{total / 1e9:.1f} GB: pick a bigger disk (or /dev/shm)")
    names = [f"model-{k + 1:05d}-of-{n:05d}.safetensors" for k in range(n)]
    t0 = time.time()
    jobs = [(os.path.join(a.out, names[k]), shards[k], a.std, a.chunk) for k in range(n)]
    with Pool(min(a.jobs, n)) as pool:
        sizes = pool.map(write_shard, jobs, chunksize=1)
    dt = time.time() - t0
    weight_map = {name: names[k] for k in range(n) for name, _ in shards[k]}
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    for fname, obj in (("model.safetensors.index.json", index), ("config.json", c),
                       ("generation_config.json", gen_config(c))):
        write_json(a.out, fname, obj)
    params = total // 2
    print(f"make_hf_random: {a.out}: {a.shape} ({c['num_hidden_layers']} layers), "
          f"{params / 1e9:.2f} B params, {n} files, {sum(sizes) / 1e9:.1f} GB in {dt:.1f} s "
          f"({sum(sizes) / 1e9 / max(dt, 1e-9):.2f} GB/s, {min(a.jobs, n)} jobs)")


if __name__ == "__main__":
    main()
