#!/usr/bin/env python3
"""fsdpc generate against transformers' generate (run on the GPU host).

  check_generate.py --fsdpc BIN --fixtures DIR --work DIR [--skip-1b] [--bench-prompts N]

1. CPU, fp32: greedy tokens of `fsdpc generate --device cpu` equal
   transformers' greedy generate on the HF fixtures (hf_tiny_*), token for
   token, and `--device cuda` (bf16) equals them up to the first position
   where transformers' top-2 logits are within bf16 rounding.
2. GPU, bf16, a randomly initialised model of the Llama 3.2 1B shape (made
   here by transformers, eos list [128001, 128008, 128009]): greedy tokens
   of fsdpc (batch 1) vs transformers (batch 1) for every prompt; the first
   divergence is allowed only where transformers' top-2 logits at that
   position are within bf16 rounding of each other and fsdpc picked one of
   the two.
   At a divergence, fsdpc's own logits there (--top-logits) are set beside
   transformers' bf16 logits and an fp32 reference (transformers, the same
   weights in fp32): the divergence is accepted when the reference's gap
   between the two tokens is within the bf16 noise of that position (the
   largest |bf16 - fp32| of transformers' logits over fsdpc's top tokens,
   and at least 2 bf16 ulps) and fsdpc's own error there is no larger than
   1.5x transformers'.
3. Speed, side by side in this one process: 256 new tokens per prompt,
   batch 1 and batch 16, fsdpc (its own timing of the generation, model
   load excluded; with and without the CUDA graph of the step; and --base,
   an older fsdpc, for before/after) vs transformers generate in bf16
   (--impls: eager and/or sdpa; static shapes, no compile), as tokens/s,
   with each fsdpc run's peak device memory (the device's used memory,
   polled, less what was used before it started; and fsdpc's own tracked
   peak where it reports one).
Prints one line per check ("OK ..."/"FAIL ...") and a table; writes
results.json into --work. Exit 1 when a check fails.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import threading
import time

import torch
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

FAILS = []


def say(ok, what):
    print(("OK   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILS.append(what)


class GpuPeak:
    """Peak of the device's used memory while the block runs, less the used
    memory at its start (polled every 5 ms from this process)."""

    def __enter__(self):
        self.on = torch.cuda.is_available()
        if not self.on:
            return self
        free, total = torch.cuda.mem_get_info()
        self.base = self.peak = total - free
        self.stop = False

        def poll():
            while not self.stop:
                f, t = torch.cuda.mem_get_info()
                self.peak = max(self.peak, t - f)
                time.sleep(0.005)

        self.t = threading.Thread(target=poll, daemon=True)
        self.t.start()
        return self

    def __exit__(self, *exc):
        if self.on:
            self.stop = True
            self.t.join()

    def mib(self):
        return (self.peak - self.base) / 2**20 if self.on else float("nan")


def fsdpc_generate(a, model, prompts, new, device, batch, extra=(), exe=None, full=False):
    path = os.path.join(a.work, "prompts.jsonl")
    with open(path, "w") as f:
        for p in prompts:
            f.write(json.dumps({"ids": p}) + "\n")
    cmd = [exe or a.fsdpc, "generate", model, "--file", path, "--json", "--no-bos", "--device",
           device, "--max-new-tokens", str(new), "--batch-size", str(batch), *extra]
    t0 = time.time()
    with GpuPeak() as gp:
        r = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    wall = time.time() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    rows = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    gen_s = sum({(i // batch): row["batch_seconds"] for i, row in enumerate(rows)}.values())
    if full:
        own = max((row.get("peak_device_bytes", -1) for row in rows), default=-1)
        return rows, gen_s, wall, gp.mib(), own / 2**20 if own >= 0 else float("nan")
    return [row["ids"] for row in rows], gen_s, wall


def hf_greedy(model, prompt, new, eos):
    ids = torch.tensor([prompt], device=model.device)
    out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                         max_new_tokens=new, eos_token_id=eos, pad_token_id=0,
                         temperature=None, top_p=None, top_k=None)
    gen = out[0, len(prompt):].tolist()
    if eos is not None:  # transformers keeps the EOS token; fsdpc does not
        for i, t in enumerate(gen):
            if t in (eos if isinstance(eos, list) else [eos]):
                return gen[:i]
    return gen


def bf16_close(l1, l2):
    """Two logits within bf16 rounding of each other (two ulps of the larger)."""
    m = max(abs(l1), abs(l2), 1e-30)
    ulp = 2.0 ** (math.floor(math.log2(m)) - 7)
    return abs(l1 - l2) <= 2 * ulp


def compare(model, prompt, ours, theirs, what, model32=None, top=None):
    """top: fsdpc's --top-logits list for this prompt (per generated token)."""
    n = min(len(ours), len(theirs))
    k = next((i for i in range(n) if ours[i] != theirs[i]), None)
    if k is None:
        ok = len(ours) == len(theirs)
        say(ok, f"{what}: {len(ours)} tokens equal" if ok else
            f"{what}: equal prefix but lengths {len(ours)} vs {len(theirs)}")
        return None
    with torch.no_grad():
        ids = torch.tensor([prompt + theirs[:k]], device=model.device)
        logits = model(ids).logits[0, -1].float()
    top2 = torch.topk(logits, 2)
    t1, t2 = top2.indices.tolist()
    l1, l2 = top2.values.tolist()
    lo = logits[ours[k]].item()  # transformers' logit of fsdpc's pick
    ok = bf16_close(l1, l2) and bf16_close(l1, lo)
    info = {"what": what, "k": k, "fsdpc_pick": ours[k], "transformers_pick": theirs[k],
            "transformers_bf16": {ours[k]: lo, theirs[k]: logits[theirs[k]].item()}}
    extra = ""
    if model32 is not None:  # the same weights in fp32: which token is really ahead, by how much
        with torch.no_grad():
            l32 = model32(ids).logits[0, -1].float()
        a_, b_ = ours[k], theirs[k]
        gap32 = abs(l32[a_].item() - l32[b_].item())
        info["fp32"] = {a_: l32[a_].item(), b_: l32[b_].item(), "top1": int(l32.argmax())}
        extra = (f"; fp32 reference: fsdpc's {l32[a_].item():.4f}, transformers' "
                 f"{l32[b_].item():.4f} (gap {gap32:.4f}), fp32 top-1 {int(l32.argmax())}")
        if top is not None and k < len(top):
            mine = {int(i): v for i, v in top[k]}
            toks = list(mine)
            err_f = max(abs(mine[v] - l32[v].item()) for v in toks)
            err_t = max(abs(logits[v].item() - l32[v].item()) for v in toks)
            m = max(abs(l32[a_].item()), abs(l32[b_].item()), 1e-30)
            ulp2 = 2 * 2.0 ** (math.floor(math.log2(m)) - 7)
            noise = max(err_t, ulp2)
            info.update({"fsdpc_logits": mine, "fsdpc_err_vs_fp32": err_f,
                         "transformers_err_vs_fp32": err_t, "fp32_gap": gap32,
                         "noise": noise})
            extra += (f"; fsdpc's own logits: {a_}:{mine.get(a_, float('nan')):.4f} "
                      f"{b_}:{mine.get(b_, float('nan')):.4f}; over fsdpc's top {len(toks)} "
                      f"tokens max |logit - fp32|: fsdpc {err_f:.4f}, transformers bf16 "
                      f"{err_t:.4f}")
            rule = gap32 <= noise and err_f <= 1.5 * err_t + 1e-6
            extra += (f"; rule (fp32 gap {gap32:.4f} <= bf16 noise {noise:.4f} and fsdpc's "
                      f"error <= 1.5x transformers'): {'met' if rule else 'NOT met'}")
            ok = ok or rule
    say(ok, f"{what}: first divergence at token {k} of {n}: fsdpc {ours[k]} (logit {lo:.4f}), "
            f"transformers {theirs[k]}; transformers' top-2 {t1}:{l1:.4f} {t2}:{l2:.4f} "
            f"({'within' if bf16_close(l1, l2) and bf16_close(l1, lo) else 'NOT within'} "
            f"bf16 rounding){extra}")
    return info


def check_fixtures(a):
    g = torch.Generator().manual_seed(1)
    for fx in ("hf_tiny_untied", "hf_tiny_tied_llama3"):
        d = os.path.join(a.fixtures, fx)
        model = LlamaForCausalLM.from_pretrained(d, torch_dtype=torch.float32).eval()
        V = model.config.vocab_size
        eos = model.config.eos_token_id
        prompts = [torch.randint(3, V, (n,), generator=g).tolist() for n in (3, 7, 12, 20)]
        ours, _, _ = fsdpc_generate(a, d, prompts, 24, "cpu", 4)
        for i, p in enumerate(prompts):
            theirs = hf_greedy(model, p, 24, eos)
            say(ours[i] == theirs, f"{fx} prompt {i} (cpu, fp32): fsdpc {ours[i][:8]}... vs "
                f"transformers {theirs[:8]}... ({len(ours[i])}/{len(theirs)} tokens)")
        if torch.cuda.is_available():
            gpu, _, _ = fsdpc_generate(a, d, prompts, 24, "cuda", 4)
            for i, p in enumerate(prompts):
                compare(model, p, gpu[i], hf_greedy(model, p, 24, eos), f"{fx} prompt {i} (cuda, bf16)")


def make_1b(path):
    if os.path.exists(os.path.join(path, "config.json")):
        return
    cfg = LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192,
                      num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                      head_dim=64, max_position_embeddings=131072, rms_norm_eps=1e-5,
                      rope_theta=500000.0, tie_word_embeddings=True, bos_token_id=128000,
                      eos_token_id=[128001, 128008, 128009],
                      rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0,
                                    "original_max_position_embeddings": 8192})
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(path)
    GenerationConfig(bos_token_id=128000, eos_token_id=[128001, 128008, 128009]).save_pretrained(path)


def check_1b(a, results, diverge):
    path = os.path.join(a.work, "llama1b-shape")
    make_1b(path)
    model = LlamaForCausalLM.from_pretrained(path, torch_dtype=torch.bfloat16,
                                             attn_implementation="eager").cuda().eval()
    g = torch.Generator().manual_seed(2)
    prompts = [torch.randint(1000, 120000, (int(n),), generator=g).tolist()
               for n in torch.randint(16, 65, (16,), generator=g)]
    NEW = 256
    # equality, batch 1 (fsdpc) vs batch 1 (transformers), on a few prompts;
    # fsdpc's default path (device argmax, CUDA graph) and its host-logits
    # path (--top-logits) must pick the same tokens
    eq = prompts[: a.eq_prompts]
    ours, _, _ = fsdpc_generate(a, path, eq, 64, "cuda", 1, ["--ignore-eos"])
    rows, _, _, _, _ = fsdpc_generate(a, path, eq, 64, "cuda", 1,
                                      ["--ignore-eos", "--top-logits", "8"], full=True)
    for i, r in enumerate(rows):
        say(r["ids"] == ours[i], f"1B-shape prompt {i}: device-argmax + graph path = host-logits "
            f"path ({len(ours[i])} tokens)")
    model32 = LlamaForCausalLM.from_pretrained(path, torch_dtype=torch.float32).cuda().eval()
    for i, p in enumerate(eq):
        theirs = hf_greedy(model, p, 64, None)
        info = compare(model, p, ours[i], theirs, f"1B-shape prompt {i} (cuda, bf16, 64 tokens)",
                       model32, rows[i].get("top_logits"))
        if info:
            diverge.append(info)
    del model32
    torch.cuda.empty_cache()
    # speed and memory
    bp = prompts[: a.bench_prompts]
    runs = [("fsdpc", a.fsdpc, ["--ignore-eos"]),
            ("fsdpc --no-cuda-graph", a.fsdpc, ["--ignore-eos", "--no-cuda-graph"])]
    if a.base:
        runs.append(("fsdpc base", a.base, ["--ignore-eos"]))
    for who, exe, extra in runs:
        for batch, ps in ((1, bp), (16, prompts)):
            _, gen_s, wall, polled, own = fsdpc_generate(a, path, ps, NEW, "cuda", batch, extra,
                                                         exe=exe, full=True)
            tok = NEW * len(ps)
            results.append({"who": who, "batch": batch, "prompts": len(ps), "new_tokens": NEW,
                            "seconds": gen_s, "tok_s": tok / gen_s, "wall_with_load_s": wall,
                            "peak_polled_mib": polled, "peak_tracked_mib": own})
    del model
    torch.cuda.empty_cache()
    for impl in a.impls.split(","):
        m = LlamaForCausalLM.from_pretrained(path, torch_dtype=torch.bfloat16,
                                             attn_implementation=impl).cuda().eval()
        for batch, ps in ((1, bp), (16, prompts)):
            total = 0.0
            for b0 in range(0, len(ps), batch):
                chunk = ps[b0:b0 + batch]
                T = max(len(p) for p in chunk)
                ids = torch.zeros(len(chunk), T, dtype=torch.long)
                mask = torch.zeros(len(chunk), T, dtype=torch.long)
                for i, p in enumerate(chunk):  # left padding, as transformers wants
                    ids[i, T - len(p):] = torch.tensor(p)
                    mask[i, T - len(p):] = 1
                ids, mask = ids.cuda(), mask.cuda()
                if b0 == 0:  # warm-up
                    m.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=8,
                               pad_token_id=0, eos_token_id=None)
                torch.cuda.synchronize()
                t0 = time.time()
                m.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=NEW,
                           min_new_tokens=NEW, pad_token_id=0, eos_token_id=None)
                torch.cuda.synchronize()
                total += time.time() - t0
            results.append({"who": f"transformers-{impl}", "batch": batch, "prompts": len(ps),
                            "new_tokens": NEW, "seconds": total, "tok_s": NEW * len(ps) / total})
        del m
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fsdpc", required=True)
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--skip-1b", action="store_true")
    ap.add_argument("--bench-prompts", type=int, default=2)
    ap.add_argument("--eq-prompts", type=int, default=4)
    ap.add_argument("--base", help="an older fsdpc for the before/after speed and memory rows")
    ap.add_argument("--impls", default="eager", help="transformers attentions: eager,sdpa")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"torch {torch.__version__}, cuda {torch.cuda.is_available()}", flush=True)
    results, diverge = [], []
    check_fixtures(a)
    if not a.skip_1b and torch.cuda.is_available():
        check_1b(a, results, diverge)
        print(f"\n{'who':24} {'batch':>5} {'prompts':>7} {'new':>4} {'seconds':>8} {'tok/s':>9} "
              f"{'peak MiB (polled)':>17} {'(tracked)':>9}")
        for r in results:
            print(f"{r['who']:24} {r['batch']:5d} {r['prompts']:7d} {r['new_tokens']:4d} "
                  f"{r['seconds']:8.2f} {r['tok_s']:9.1f} {r.get('peak_polled_mib', float('nan')):17.0f} "
                  f"{r.get('peak_tracked_mib', float('nan')):9.0f}")
        for b in (1, 16):
            t = [r for r in results if r["batch"] == b and r["who"] == "transformers-eager"]
            for r in results:
                if r["batch"] == b and r["who"].startswith("fsdpc") and t:
                    print(f"batch {b}: {r['who']} / transformers-eager = "
                          f"{r['tok_s'] / t[0]['tok_s']:.2f}x")
    with open(os.path.join(a.work, "results.json"), "w") as f:
        json.dump({"fails": FAILS, "speed": results, "divergences": diverge}, f, indent=1,
                  default=str)
    print(f"\n{'PASS' if not FAILS else 'FAIL'}: {len(FAILS)} failed checks")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
