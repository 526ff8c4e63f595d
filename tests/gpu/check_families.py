#!/usr/bin/env python3
"""Hugging Face in and out for each decoder family (issue 35); runs where
torch, transformers and peft are installed (the GPU host, CPU fp32 only):

  check_families.py FIXTURES --fsdpc BIN --dump BIN --work DIR [NAME...]

FIXTURES is the folder of tests/gpu/make_hf_families.py (its manifest.json
names the families). For each family, on the CPU in fp32, from a folder of
the fixture's config with a 259-token vocabulary (fsdpc's byte tokenizer
must fit it; made here by transformers, random weights as the fixture's):
- export: `fsdpc train` fine-tunes the folder fully for 3 steps; transformers
  loads the final folder with no warning about missing, unexpected or newly
  initialised weights, with the source's tensor names (fused qkv_proj and
  gate_up_proj stay fused) and shapes, the source's config.json (but for
  the dtype) and its generation_config.json, and gives fsdpc's logits (fsdpc_dump_logits) within 1e-5 of
  the largest;
- peft: `fsdpc train` with LoRA on every projection under the family's own
  names (Phi-3: qkv_proj, o_proj, gate_up_proj, down_proj) for 3 steps;
  PeftModel.from_pretrained loads the adapter folder onto the source with no
  such warning, its target_modules are the family's names, and its logits
  equal fsdpc's of the merged folder within 1e-5.
Prints "PASS export NAME ..." or "FAIL ..." per check, and exits 1 when one
fails.
"""
import argparse
import json
import os
import subprocess
import sys
import types
import warnings

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_lora_peft as clp  # noqa: E402
import make_hf_families as mhf  # noqa: E402
from check_export import Grab  # noqa: E402

T, G, STEPS, TOL, V = 12, 2, 3, 1e-5, 259
BAD = ("missing", "unexpected", "newly initialized", "not initialized", "were not used")
FAILS = []


def say(ok, what, name, detail):
    print(f"{'PASS' if ok else 'FAIL'} {what} {name}: {detail}", flush=True)
    if not ok:
        FAILS.append(f"{what} {name}")


def loading(fn):
    """fn() with transformers' and Python's warnings caught: (result, bad ones)."""
    grab = Grab()
    transformers.logging.set_verbosity_warning()
    transformers.logging.get_logger().addHandler(grab)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = fn()
    transformers.logging.get_logger().removeHandler(grab)
    msgs = grab.lines + [str(x.message) for x in w]
    return out, [m for m in msgs if any(k in m.lower() for k in BAD)]


def tensors(folder):
    out = {}
    for f in sorted(os.listdir(folder)):
        if f.endswith(".safetensors"):
            with safe_open(os.path.join(folder, f), "pt") as st:
                for k in st.keys():
                    out[k] = tuple(st.get_slice(k).get_shape())
    return out


def fsdpc_logits(a, folder, work):
    path = os.path.join(work, "logits.safetensors")
    r = subprocess.run([a.dump, folder, path, str(T)], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"fsdpc_dump_logits {folder}: {r.stderr.strip()[-300:]}")
    ref = load_file(path)
    return ref["input_ids"].to(torch.long), ref["logits"].to(torch.float64)


def rel(got, ours):
    return ((got - ours).abs().max() / ours.abs().max()).item()


def train(a, src, work, run, extra):
    """fsdpc train of src for STEPS steps on work/data.tok: run's final folder."""
    d = os.path.join(work, run)
    yaml = os.path.join(work, run + ".yaml")
    with open(yaml, "w") as f:
        f.write(f"model: {{config: {src}, init: {{from: {src}}}}}\n"
                f"data: {{train: {work}/data.tok, seq_len: {T}, shuffle: false, "
                f"eval_fraction: 0.0}}\n"
                "attention: {impl: naive}\n"
                "optim: {name: adamw, lr: 1.0e-2, weight_decay: 0.0}\n"
                "schedule: {name: constant, warmup_steps: 0}\n"
                f"train: {{max_steps: {STEPS}, micro_batch_size: {G}, global_batch_size: {G}, "
                "log_every: 1, eval_every: 0, seed: 7}\n"
                "checkpoint: {final_dtype: fp32}\n" + extra)
    r = subprocess.run([a.fsdpc, "train", yaml, f"log.dir={d}", f"checkpoint.dir={d}/ck"],
                       capture_output=True, text=True)
    with open(os.path.join(work, run + ".log"), "w") as f:
        f.write(r.stdout + r.stderr)
    if r.returncode != 0:
        raise RuntimeError(f"fsdpc train ({run}) exit {r.returncode}: "
                           f"{(r.stderr or r.stdout).strip()[-300:]}")
    return os.path.join(d, "ck", "final")


def check_export(a, name, src, work):
    final = train(a, src, work, "full", "")
    model, bad = loading(lambda: transformers.AutoModelForCausalLM.from_pretrained(
        final, dtype=torch.float32, attn_implementation="eager"))
    ts, tf = tensors(src), tensors(final)
    out = json.load(open(os.path.join(final, "config.json")))
    cfg = json.load(open(os.path.join(src, "config.json")))
    for c in (out, cfg):
        for k in ("torch_dtype", "dtype"):
            c.pop(k, None)
    if cfg.get("model_type") == "gemma3_text" and out.get("attn_logit_softcapping") is None:
        # transformers' Gemma3Attention ignores the key; fsdpc writes what it
        # computes (no attention cap), so a set value comes back as null
        cfg.pop("attn_logit_softcapping", None), out.pop("attn_logit_softcapping", None)
    diff = sorted(k for k in set(out) | set(cfg) if out.get(k) != cfg.get(k))
    keep = {"generation_config.json", "tokenizer.json", "tokenizer_config.json"}
    lost = sorted((set(os.listdir(src)) & keep) - set(os.listdir(final)))
    ids, ours = fsdpc_logits(a, final, work)
    with torch.no_grad():
        got = model.eval()(input_ids=ids).logits.to(torch.float64)
    e = rel(got, ours)
    ok = not bad and ts == tf and not diff and not lost and e <= TOL
    say(ok, "export", name, f"{type(model).__name__} loads it (warnings: {bad or 'none'}); "
        f"tensors {'as the source' if ts == tf else f'differ: {sorted(set(ts) ^ set(tf))}'}; "
        f"config.json {'kept' if not diff else f'differs in {diff}'}; "
        f"{'generation config kept' if not lost else f'lost {lost}'}; logits vs fsdpc {e:.2e}")


def check_peft(a, name, src, work, fused):
    targets = (["qkv_proj", "o_proj", "gate_up_proj", "down_proj"] if fused else clp.TARGETS)
    final = train(a, src, work, "lora",
                  f"peft: {{method: lora, r: 2, alpha: 4, dropout: 0.0, "
                  f"target_modules: [{', '.join(targets)}], merge_on_save: true}}\n")
    from peft import PeftModel

    def load():
        base = transformers.AutoModelForCausalLM.from_pretrained(
            src, dtype=torch.float32, attn_implementation="eager")
        return PeftModel.from_pretrained(base, final)

    model, bad = loading(load)
    got_targets = sorted(json.load(open(os.path.join(final, "adapter_config.json")))
                         ["target_modules"])
    ids, ours = fsdpc_logits(a, final + "-merged", work)
    with torch.no_grad():
        got = model.eval()(input_ids=ids).logits.to(torch.float64)
    e = rel(got, ours)
    ok = not bad and got_targets == sorted(targets) and e <= TOL
    say(ok, "peft", name, f"PeftModel loads the adapters (warnings: {bad or 'none'}); "
        f"target_modules {got_targets}; logits vs fsdpc's merged folder {e:.2e}")


def byte_vocab_folder(fixture, out):
    """The fixture's model with vocab_size V (fsdpc's byte tokenizer), saved
    in out by transformers."""
    cfg = transformers.AutoConfig.from_pretrained(fixture)
    cfg.vocab_size = V
    model = transformers.AutoModelForCausalLM.from_config(cfg).float()
    mhf.fill(model, 4321)
    model.save_pretrained(out, safe_serialization=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fixtures")
    ap.add_argument("names", nargs="*")
    ap.add_argument("--fsdpc", required=True)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    torch.set_num_threads(4)
    names = a.names or json.load(open(os.path.join(a.fixtures, "manifest.json")))["fixtures"]
    for name in names:
        work = os.path.join(a.work, name)
        os.makedirs(work, exist_ok=True)
        try:
            src = byte_vocab_folder(os.path.join(a.fixtures, name), os.path.join(work, "src"))
        except Exception as e:
            say(False, "folder", name, f"{type(e).__name__}: {e}")
            continue
        cfg = json.load(open(os.path.join(src, "config.json")))
        clp.make_data(types.SimpleNamespace(file=os.path.join(work, "data.tok"), V=V, T=T, G=G))
        for what, fn in (("export", lambda: check_export(a, name, src, work)),
                         ("peft", lambda: check_peft(a, name, src, work,
                                                     cfg["model_type"] == "phi3"))):
            try:
                fn()
            except Exception as e:  # report each check, then go on
                say(False, what, name, f"{type(e).__name__}: {e}")
    print(f"{'PASS' if not FAILS else 'FAIL'}: HF in and out, {len(FAILS)} failed: {FAILS}")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
