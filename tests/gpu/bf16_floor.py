#!/usr/bin/env python3
"""How far transformers itself lands from a family fixture's float64
reference when it runs in bf16: the noise floor that fsdpc's CUDA (bf16)
errors in test_cuda_hf_families are read against (issue 36).

    python3 tests/gpu/bf16_floor.py tests/fixtures/hf_families [NAME...] [-v] [--json FILE]

For each fixture (tests/gpu/make_hf_families.py), the saved fp32 folder is
loaded with eager attention and cast to DTYPE (bf16 by default; fp32 as a
self-check of the script, which should give ~1e-7), run on the fixture's
batch (reference.safetensors: input_ids, fsdpc's shifted labels) on the GPU
when there is one, and compared with the reference as test_hf_fixture.c
compares fsdpc: norm-wise relative errors ||x - ref|| / ||ref|| of the
logits and of every parameter's gradient of the mean loss. Prints one line
per fixture:
    FLOOR name dtype logits E worst_grad E (param)
and with -v one line per parameter; --json FILE writes the same numbers as
{"fixtures": {name: {"logits", "worst_grad", "param"}}, versions}, which is
what tests/fixtures/hf_families/bf16_floor.json holds (test_cuda_hf_families
reads its gradient and logits bounds from it). Needs torch, transformers,
safetensors (the GPU host).
"""
import json
import os
import sys

import torch
import transformers
from safetensors.torch import load_file


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / (b.norm() + 1e-30)).item()


def floor(fix_dir, name, dtype, verbose, dev):
    d = os.path.join(fix_dir, name)
    meta = json.load(open(os.path.join(d, "reference.json")))
    ref = load_file(os.path.join(d, "reference.safetensors"))
    cls = getattr(transformers, meta["class"])
    try:
        model = cls.from_pretrained(d, dtype=torch.float32, attn_implementation="eager")
    except TypeError:
        model = cls.from_pretrained(d, torch_dtype=torch.float32, attn_implementation="eager")
    model = model.to(device=dev, dtype=dtype)
    model.config._attn_implementation = "eager"
    ids = ref["input_ids"].long().to(dev)
    labels = ref["labels"].long()  # label t = target of position t
    hf_labels = torch.full_like(labels, -100)
    hf_labels[:, 1:] = labels[:, :-1]
    out = model(input_ids=ids, labels=hf_labels.to(dev))
    out.loss.backward()
    le = rel(out.logits.float().cpu(), ref["logits"])
    worst, worst_name = 0.0, "-"
    for n, p in model.named_parameters():
        e = rel(p.grad.float().cpu(), ref["grad." + n])
        if verbose:
            print(f"  {name} {n} {e:.3e}")
        if not e <= worst:
            worst, worst_name = e, n
    print(f"FLOOR {name} {str(dtype).replace('torch.', '')} logits {le:.3e} "
          f"worst_grad {worst:.3e} ({worst_name})", flush=True)
    return {"logits": float(f"{le:.3e}"), "worst_grad": float(f"{worst:.3e}"), "param": worst_name}


def main():
    argv = sys.argv[1:]
    json_out = None
    if "--json" in argv:
        i = argv.index("--json")
        json_out = argv[i + 1]
        del argv[i:i + 2]
    args = [a for a in argv if not a.startswith("-")]
    verbose = "-v" in argv
    if not args:
        print(__doc__)
        sys.exit(2)
    fix_dir, names = args[0], args[1:]
    if not names:
        names = json.load(open(os.path.join(fix_dir, "manifest.json")))["fixtures"]
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = getattr(torch, os.environ.get("DTYPE", "bfloat16"))
    print(f"torch {torch.__version__} transformers {transformers.__version__} on {dev}")
    res = {name: floor(fix_dir, name, dtype, verbose, dev) for name in names}
    if json_out:
        with open(json_out, "w") as f:
            json.dump({"dtype": str(dtype).replace("torch.", ""), "device": dev,
                       "torch": torch.__version__, "transformers": transformers.__version__,
                       "fixtures": res}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
