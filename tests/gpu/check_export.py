#!/usr/bin/env python3
"""The folder a fsdpc fine-tune wrote is deployable (run on the GPU host).

  check_export.py FINAL SRC --fsdpc BIN --work DIR

- transformers' AutoConfig, AutoModelForCausalLM, AutoTokenizer and
  GenerationConfig load FINAL with no warning about missing, unexpected or
  newly initialised weights or files;
- FINAL/config.json equals SRC/config.json as JSON except torch_dtype/dtype
  (fsdpc writes what it saved), the eos_token_id list included;
- generation_config.json and the tokenizer files are there;
- greedy tokens of `fsdpc generate FINAL` equal transformers' generate on
  FINAL (bf16, first divergence allowed only within bf16 rounding).
Exit 1 when a check fails.
"""
import argparse
import json
import logging
import os
import sys
import warnings

import torch
import transformers
from transformers import (AutoConfig, AutoModelForCausalLM, AutoTokenizer,
                          GenerationConfig)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_generate as cg  # noqa: E402


class Grab(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("final")
    ap.add_argument("src")
    ap.add_argument("--fsdpc", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    grab = Grab()
    transformers.logging.set_verbosity_warning()
    transformers.logging.get_logger().addHandler(grab)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        AutoConfig.from_pretrained(a.final)
        model = AutoModelForCausalLM.from_pretrained(a.final, dtype=torch.bfloat16).cuda().eval()
        tok = AutoTokenizer.from_pretrained(a.final)
        gen = GenerationConfig.from_pretrained(a.final)
    msgs = grab.lines + [str(x.message) for x in w]
    bad = [m for m in msgs if any(k in m.lower() for k in
                                  ("missing", "unexpected", "newly initialized",
                                   "not initialized", "not found", "were not used"))]
    cg.say(not bad, f"transformers loads {a.final} (model, tokenizer {type(tok).__name__}, "
                    f"generation config eos {gen.eos_token_id}); warnings: {bad or 'none'}")
    if msgs and not bad:
        print("     (other messages: " + " | ".join(m[:120] for m in msgs) + ")")
    out = json.load(open(os.path.join(a.final, "config.json")))
    src = json.load(open(os.path.join(a.src, "config.json")))
    dt = {k: out.pop(k, None) for k in ("torch_dtype", "dtype")}
    for k in ("torch_dtype", "dtype"):
        src.pop(k, None)
    diff = {k: (src.get(k), out.get(k)) for k in set(src) | set(out) if src.get(k) != out.get(k)}
    cg.say(not diff, f"config.json equals the source's except dtype ({dt}); differences: "
                     f"{diff or 'none'}")
    cg.say(out.get("eos_token_id") == src.get("eos_token_id") and
           gen.eos_token_id == src.get("eos_token_id"),
           f"eos_token_id list kept: config {out.get('eos_token_id')}, generation config "
           f"{gen.eos_token_id}")
    files = sorted(os.listdir(a.final))
    need = ["generation_config.json", "tokenizer.json", "tokenizer_config.json"]
    cg.say(all(f in files for f in need), f"files: {files}")
    g = torch.Generator().manual_seed(3)
    prompts = [torch.randint(1000, 120000, (n,), generator=g).tolist() for n in (8, 21, 40)]
    ours, _, _ = cg.fsdpc_generate(a, a.final, prompts, 32, "cuda", 1, ["--ignore-eos"])
    for i, p in enumerate(prompts):
        cg.compare(model, p, ours[i], cg.hf_greedy(model, p, 32, None),
                   f"fine-tuned prompt {i} (cuda, bf16, 32 tokens)")
    print(f"{'PASS' if not cg.FAILS else 'FAIL'}: export, {len(cg.FAILS)} failed checks")
    return 1 if cg.FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
