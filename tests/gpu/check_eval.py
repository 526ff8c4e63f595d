#!/usr/bin/env python3
"""fsdpc eval against transformers on the same tokens (run on the GPU host).

  check_eval.py --model DIR --tok FILE --fsdpc-json FILE [--rtol 5e-3]

DIR is an HF folder (e.g. the final/ of a fine-tune); FILE the token file
`fsdpc data prepare --tokenizer DIR` made of the JSONL that `fsdpc eval DIR
--data X.jsonl --batches all train.micro_batch_size=1
train.global_batch_size=1` evaluated (its JSON is --fsdpc-json). Every
example of the token file is one document: transformers runs it alone (bf16
and fp32, the same weights) and scores the tokens its loss mask marks as
targets that have a token before them in the example (fsdpc's rule: label
of position i-1 is token i). Prints loss, perplexity, token accuracy and
target count of fsdpc, transformers bf16 and transformers fp32; exits 1 when
the target counts differ or fsdpc's loss is further than rtol (relative)
from the fp32 loss.
"""
import argparse
import json
import math
import struct
import sys

import torch
from transformers import LlamaForCausalLM


def read_tokfile(path):
    data = open(path, "rb").read()
    magic, version, width, vocab, eos, flags = struct.unpack_from("<8sIIIII", data, 0)
    n_tokens, n_docs = struct.unpack_from("<QQ", data, 32)
    assert magic == b"FSDPCTOK", magic
    ids = struct.unpack_from("<%d%s" % (n_tokens, "H" if width == 2 else "I"), data, 64)
    at = 64 + ((n_tokens * width + 7) // 8) * 8
    off = struct.unpack_from("<%dQ" % (n_docs + 1), data, at)
    at += 8 * (n_docs + 1)
    mb = data[at:at + (n_tokens + 7) // 8] if flags & 1 else None
    docs = []
    for d in range(n_docs):
        a, b = off[d], off[d + 1]
        docs.append((list(ids[a:b]), [(mb[i >> 3] >> (i & 7)) & 1 if mb else 1 for i in range(a, b)]))
    return docs


def score(model, docs):
    loss, n, ok = 0.0, 0, 0
    with torch.no_grad():
        for ids, mask in docs:
            x = torch.tensor([ids], device="cuda")
            logits = model(x).logits[0].float()
            tgt = [i for i in range(1, len(ids)) if mask[i]]
            if not tgt:
                continue
            rows = logits[[i - 1 for i in tgt]]
            y = torch.tensor([ids[i] for i in tgt], device="cuda")
            loss += torch.nn.functional.cross_entropy(rows, y, reduction="sum").double().item()
            ok += int((rows.argmax(-1) == y).sum().item())
            n += len(tgt)
    return {"loss": loss / n, "perplexity": math.exp(loss / n), "token_accuracy": ok / n,
            "tokens": n}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--tok", required=True)
    ap.add_argument("--fsdpc-json", required=True)
    ap.add_argument("--rtol", type=float, default=5e-3)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    docs = read_tokfile(a.tok)
    f = json.load(open(a.fsdpc_json))
    rows = {"fsdpc (bf16)": f}
    for name, dt in (("transformers bf16", torch.bfloat16), ("transformers fp32", torch.float32)):
        m = LlamaForCausalLM.from_pretrained(a.model, torch_dtype=dt,
                                             attn_implementation="eager").cuda().eval()
        rows[name] = score(m, docs)
        del m
        torch.cuda.empty_cache()
    print(f"{len(docs)} examples, {sum(len(d[0]) for d in docs)} tokens")
    print(f"{'who':20} {'loss':>12} {'perplexity':>12} {'accuracy':>9} {'targets':>8}")
    for k, r in rows.items():
        print(f"{k:20} {r['loss']:12.6f} {r['perplexity']:12.4f} {r['token_accuracy']:9.4f} "
              f"{int(r['tokens']):8d}")
    ref, bf = rows["transformers fp32"], rows["transformers bf16"]
    d_f = abs(f["loss"] - ref["loss"]) / ref["loss"]
    d_b = abs(bf["loss"] - ref["loss"]) / ref["loss"]
    print(f"relative loss difference to transformers fp32: fsdpc {d_f:.2e}, transformers bf16 "
          f"{d_b:.2e}; to transformers bf16: fsdpc {abs(f['loss'] - bf['loss']) / bf['loss']:.2e}")
    fails = []
    if int(f["tokens"]) != ref["tokens"]:
        fails.append(f"target tokens: fsdpc {int(f['tokens'])}, transformers {ref['tokens']}")
    if d_f > a.rtol:
        fails.append(f"loss: fsdpc {f['loss']} vs fp32 {ref['loss']} ({d_f:.2e} > {a.rtol})")
    for x in fails:
        print("FAIL " + x)
    print("PASS" if not fails else "FAIL")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
