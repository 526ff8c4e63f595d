#!/usr/bin/env python3
"""fsdpc LoRA against Hugging Face PEFT (issue 14); runs where torch,
transformers and peft are installed (the GPU host). Subcommands:

  base DIR                 a tiny random fp32 Llama (transformers) saved in DIR
  data FILE V T G          an fsdpc token file of one document of G*T tokens
                           below V: with data.shuffle false its G windows of T
                           are every step's batch, in order
  track BASE INIT FSDPC_RUN FILE T G --lr LR --steps N
                           PyTorch + PEFT from BASE with the adapters of the
                           PEFT folder INIT, the same batch, AdamW and
                           clipping as fsdpc; losses vs FSDPC_RUN/metrics.jsonl
                           and final adapters vs FSDPC_RUN/ck/final (rtol)
  nf4base BASE OUT NF4_REF_DIR [--block 64 --no-double-quant]
                           BASE with every projection replaced by its NF4
                           quantize + dequantize by tests/quant/nf4_ref.py
                           (numpy, bitsandbytes' algorithm): QLoRA's base
                           as the reference computes with it (issue 37)
  same A B                 two HF folders' fp32 tensors equal bit for bit
  logits BASE ADAPTER FSDPC_LOGITS [--device cuda --dtype bf16]
                           PeftModel.from_pretrained(BASE, ADAPTER) logits
                           vs fsdpc's (fsdpc_dump_logits output)
Each prints one RESULT line and exits non-zero on a mismatch.
"""
import argparse
import json
import random
import struct
import sys
import zlib

try:
    import torch
except ImportError:  # `data` needs no torch
    torch = None

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def make_base(a):
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(7)
    cfg = LlamaConfig(vocab_size=259, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
                      attention_bias=False, mlp_bias=False, bos_token_id=1, eos_token_id=2)
    m = LlamaForCausalLM(cfg).float()
    with torch.no_grad():
        for n, p in m.named_parameters():
            p.copy_(1.0 + 0.1 * torch.randn_like(p) if "norm" in n else 0.08 * torch.randn_like(p))
    m.save_pretrained(a.dir, safe_serialization=True)
    print(f"RESULT base {a.dir}")


def stream_of(path):
    with open(path, "rb") as f:
        b = f.read()
    magic, ver, tb, vocab, eos, flags, hcrc, n, nd, pcrc = struct.unpack_from("<8sIIIIIIQQI", b)
    toks = list(struct.unpack_from(f"<{n}H", b, 64))
    return toks + [eos]  # one document: the loader appends its EOS


def make_data(a):
    V, T, G = a.V, a.T, a.G
    n = T * G
    g = random.Random(11)
    toks = [g.randrange(3, V - 1) for _ in range(n)]
    payload = struct.pack(f"<{n}H", *toks)
    payload += b"\0" * ((8 - len(payload) % 8) % 8)
    payload += struct.pack("<QQ", 0, n)
    pcrc = zlib.crc32(payload)
    hdr = struct.pack("<8sIIIIIIQQI3I", b"FSDPCTOK", 1, 2, V, V - 1, 0, 0, n, 1, pcrc, 0, 0, 0)
    hcrc = zlib.crc32(hdr)
    hdr = struct.pack("<8sIIIIIIQQI3I", b"FSDPCTOK", 1, 2, V, V - 1, 0, hcrc, n, 1, pcrc, 0, 0, 0)
    with open(a.file, "wb") as f:
        f.write(hdr + payload)
    print(f"RESULT data {a.file}: {n} tokens, {G} windows of {T}")


def peft_model(base, adapter, trainable, device="cpu", dtype=None):
    from peft import PeftModel
    from transformers import LlamaForCausalLM
    m = LlamaForCausalLM.from_pretrained(base, torch_dtype=dtype or torch.float32,
                                         attn_implementation="eager")
    m = PeftModel.from_pretrained(m, adapter, is_trainable=trainable)
    return m.to(device)


def track(a):
    from safetensors.torch import load_file
    torch.use_deterministic_algorithms(True)
    m = peft_model(a.base, a.init, True)
    m.train()
    s = stream_of(a.file)
    T, G = a.T, a.G
    ids = torch.tensor([s[k * T:k * T + T] for k in range(G)])
    lab = torch.tensor([s[k * T + 1:k * T + T + 1] for k in range(G)])
    params = [p for p in m.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                            foreach=False)
    ours = [json.loads(x) for x in open(f"{a.run}/metrics.jsonl") if '"loss"' in x]
    ours = {r["step"]: r for r in ours if "loss" in r and "step" in r}
    worst, bad = 0.0, 0
    for step in range(1, a.steps + 1):
        logits = m(input_ids=ids).logits.float()
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 lab.reshape(-1))
        opt.zero_grad()
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        r = ours.get(step)
        if r is None:
            print(f"step {step}: missing in fsdpc's metrics")
            bad += 1
            continue
        for k, v in (("loss", loss.item()), ("grad_norm", gn.item())):
            rel = abs(r[k] - v) / max(abs(v), 1e-12)
            worst = max(worst, rel)
            if rel > a.rtol:
                print(f"step {step}: {k} fsdpc {r[k]!r} torch+peft {v!r} (rel {rel:.2e})")
                bad += 1
        print(f"step {step}: loss fsdpc {r['loss']:.7f} torch+peft {loss.item():.7f} grad_norm "
              f"fsdpc {r['grad_norm']:.7f} torch+peft {gn.item():.7f}")
    # the trained adapters themselves
    fa = load_file(f"{a.run}/ck/final/adapter_model.safetensors")
    sd = {k: v for k, v in m.state_dict().items() if "lora_" in k}
    wa = 0.0
    for k, v in fa.items():
        key = k.replace(".weight", ".default.weight")
        t = sd[key]
        wa = max(wa, ((t - v).abs().max() / t.abs().max().clamp_min(1e-12)).item())
    if wa > a.rtol * 10:
        print(f"final adapters differ: worst relative {wa:.2e}")
        bad += 1
    print(f"RESULT track steps {a.steps} worst_rel_loss_gradnorm {worst:.2e} "
          f"worst_rel_adapter {wa:.2e} tensors {len(fa)} {'OK' if not bad else 'FAIL'}")
    sys.exit(1 if bad else 0)


def nf4_base(a):
    import os
    import shutil
    import numpy as np
    from safetensors.numpy import load_file, save_file
    sys.path.insert(0, a.nf4_ref_dir)
    import nf4_ref
    os.makedirs(a.out, exist_ok=True)
    t = load_file(f"{a.base}/model.safetensors")
    n = 0
    for k, v in t.items():
        if any(f"{p}.weight" in k for p in TARGETS):
            x = v.astype(np.float32).reshape(-1)
            q = nf4_ref.quantize(x.copy(), a.block, a.dq)
            t[k] = nf4_ref.dequantize(q, x.shape[0], a.block, a.dq).reshape(v.shape)
            n += 1
    save_file(t, f"{a.out}/model.safetensors", metadata={"format": "pt"})
    for f in os.listdir(a.base):
        if f.endswith(".json"):
            shutil.copy(f"{a.base}/{f}", f"{a.out}/{f}")
    print(f"RESULT nf4base {a.out}: {n} projections quantized + dequantized (block {a.block}, "
          f"double quant {a.dq})")


def same(a):
    import numpy as np
    from safetensors.numpy import load_file
    x, y = load_file(f"{a.a}/model.safetensors"), load_file(f"{a.b}/model.safetensors")
    bad = [k for k in x if k not in y or x[k].dtype != y[k].dtype or
           not np.array_equal(x[k].view(np.uint8), y[k].view(np.uint8))]
    bad += [k for k in y if k not in x]
    print(f"RESULT same {len(x)} tensors, {len(bad)} differ {bad[:3]} {'OK' if not bad else 'FAIL'}")
    sys.exit(1 if bad else 0)


def logits(a):
    from safetensors.torch import load_file
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
    m = peft_model(a.base, a.adapter, False, a.device, dtype)
    m.eval()
    ref = load_file(a.fsdpc_logits)
    ids = ref["input_ids"].to(torch.long).to(a.device)
    ours = ref["logits"].to(torch.float64)
    with torch.no_grad():
        got = m(input_ids=ids).logits.to(torch.float64).cpu()
    rel = ((got - ours).abs().max() / ours.abs().max()).item()
    ok = rel <= a.tol
    print(f"RESULT logits peft {a.device} {a.dtype}: max|peft - fsdpc| / max|fsdpc| = {rel:.2e} "
          f"(tol {a.tol:g}) {'OK' if ok else 'FAIL'}")
    sys.exit(0 if ok else 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("base")
    p.add_argument("dir")
    p = sub.add_parser("data")
    p.add_argument("file")
    for k in ("V", "T", "G"):
        p.add_argument(k, type=int)
    p = sub.add_parser("track")
    for k in ("base", "init", "run", "file"):
        p.add_argument(k)
    p.add_argument("T", type=int)
    p.add_argument("G", type=int)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--rtol", type=float, default=1e-4)
    p = sub.add_parser("logits")
    for k in ("base", "adapter", "fsdpc_logits"):
        p.add_argument(k)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="fp32")
    p.add_argument("--tol", type=float, default=1e-5)
    p = sub.add_parser("nf4base")
    for k in ("base", "out", "nf4_ref_dir"):
        p.add_argument(k)
    p.add_argument("--block", type=int, default=64)
    p.add_argument("--no-double-quant", dest="dq", action="store_false")
    p = sub.add_parser("same")
    p.add_argument("a")
    p.add_argument("b")
    a = ap.parse_args()
    {"base": make_base, "data": make_data, "track": track, "logits": logits, "nf4base": nf4_base,
     "same": same}[a.cmd](a)


if __name__ == "__main__":
    main()
