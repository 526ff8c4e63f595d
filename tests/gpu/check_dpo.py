#!/usr/bin/env python3
"""fsdpc's preference objectives against a PyTorch reference written from
TRL's definitions (issue 38); runs where torch, transformers and peft are
installed (the GPU host): the reference runs on its CPU in fp32; fsdpc
trains each run twice, on the CPU (fp32) and on CUDA (bf16 compute).

  python3 tests/gpu/check_dpo.py --fsdpc BUILD/bin/fsdpc [--plugins BUILD/plugins] [--no-cuda]

1. A tiny random fp32 Llama (transformers) in a temporary folder, and 80
   plain preference rows (prompt, chosen, rejected) prepared by `fsdpc data
   prepare --format preference --tokenizer byte`; the script reads the token
   file back, so both sides train on the same ids and completion masks.
2. Three fsdpc runs of 20 steps (CPU, fp32; 4 pairs a step in 2
   micro-batches, AdamW lr 1e-3 constant, clip 1.0, data.shuffle false, so
   step s trains pairs 4s..4s+3 in file order):
   dpo-lora  LoRA r 4 on the seven projections; the reference is the base
             with the adapters off (TRL's PEFT path: model.disable_adapter())
   dpo-full  a full fine-tune, objective.reference precompute (TRL's
             ref_model: a frozen copy of the initial model)
   simpo     a full fine-tune, reference-free (TRL's CPOTrainer with
             loss_type simpo and cpo_alpha 0: pure SimPO)
3. For each run, the same 20 steps in PyTorch: transformers' model (+ PEFT
   from the adapters fsdpc starts with: a 1-step run at lr 0), TRL's
   concatenated_forward (sum of log p(label) over completion tokens; SimPO
   the mean), dpo_loss / simpo loss with beta 0.1 (SimPO gamma 0.5), the
   metrics rewards/chosen, rewards/rejected, rewards/accuracies,
   rewards/margins, logps/chosen, logps/rejected (means over the step's
   pairs), AdamW and clip_grad_norm_. Every step's loss, grad_norm and
   metric must agree with fsdpc's metrics.jsonl within 1e-4 (absolute, or
   relative above 1).
4. The same three runs with train.device cuda (bf16 parameters and
   activations, fp32 master weights and logits; LoRA from the adapters of a
   CUDA 1-step run) against the same fp32 reference, within bf16 tolerance:
   loss, grad_norm, logps/* and rewards/chosen|rejected|margins within
   3e-2 (absolute, or relative above 1: the tolerance of agree.sh train for
   bf16 GPU vs fp32 CPU losses); rewards/accuracies within 0.25 (one pair of
   a step's four may flip where its margin is inside the bf16 noise).
Prints one PASS/FAIL line per run and exits 1 on any FAIL; about two minutes.
"""
import argparse
import json
import math
import os
import random
import struct
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
STEPS, G, MB, T = 20, 4, 2, 64
BETA, GAMMA, LR, TOL = 0.1, 0.5, 1e-3, 1e-4
TOL_BF16, TOL_ACC = 3e-2, 1.0 / G  # CUDA (bf16) vs the fp32 reference
METRICS = ["rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins",
           "logps/chosen", "logps/rejected"]


def make_base(d):
    """The tiny random fp32 Llama of check_lora_peft.py (carried beside this one)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from check_lora_peft import make_base as lora_base
    lora_base(argparse.Namespace(dir=d))


def make_rows(path):
    g = random.Random(5)
    word = lambda n: "".join(g.choice("abcdefgh") for _ in range(n))
    with open(path, "w") as f:
        for _ in range(STEPS * G):
            w = word(g.randrange(3, 8))
            f.write(json.dumps({"prompt": f"Q: {w}\nA:", "chosen": " " + w[::-1],
                                "rejected": " " + word(g.randrange(2, 9))}) + "\n")


def read_tokfile(path):
    """Documents (ids, mask) of an fsdpc token file (core/src/data/tokfile.h)."""
    b = open(path, "rb").read()
    magic, ver, tb, vocab, eos, flags, hcrc, n, nd = struct.unpack_from("<8sIIIIIIQQ", b)
    assert magic == b"FSDPCTOK" and flags & 1 and flags & 4, "not a preference token file"
    toks = struct.unpack_from(f"<{n}{'H' if tb == 2 else 'I'}", b, 64)
    at = 64 + ((n * tb + 7) & ~7)
    off = struct.unpack_from(f"<{nd + 1}Q", b, at)
    mb = b[at + 8 * (nd + 1):]
    bit = lambda i: (mb[i >> 3] >> (i & 7)) & 1
    return [(list(toks[off[d]:off[d + 1]]), [bit(i) for i in range(off[d], off[d + 1])])
            for d in range(nd)]


def fsdpc(a, w, name, *over):
    cmd = [a.fsdpc, "train", f"{w}/run.yaml", f"log.dir={w}/{name}",
           f"checkpoint.dir={w}/{name}/ck", *over]
    r = subprocess.run(cmd, capture_output=True, text=True)
    open(f"{w}/{name}.log", "w").write(r.stdout + r.stderr)
    if r.returncode != 0:
        tail = (r.stdout + r.stderr).strip().splitlines()[-1:]
        raise SystemExit(f"FAIL fsdpc {name}: exit {r.returncode}: {tail}")
    rows = [json.loads(x) for x in open(f"{w}/{name}/metrics.jsonl")]
    return {r["step"]: r for r in rows if "step" in r and "loss" in r}


def seq_logps(model, docs):
    """TRL's concatenated_forward: per sequence the sum of log p(label) over
    its completion tokens (labels shifted by one, loss_mask the completion
    mask), and their count; right padding with an attention mask."""
    L = max(len(ids) for ids, _ in docs)
    ids = torch.tensor([d[0] + [0] * (L - len(d[0])) for d in docs])
    att = torch.tensor([[1] * len(d[0]) + [0] * (L - len(d[0])) for d in docs])
    msk = torch.tensor([d[1] + [0] * (L - len(d[1])) for d in docs], dtype=torch.float32)
    logits = model(input_ids=ids, attention_mask=att).logits.float()
    lp = torch.gather(F.log_softmax(logits[:, :-1], -1), 2, ids[:, 1:, None]).squeeze(2)
    m = msk[:, 1:]
    return (lp * m).sum(-1), m.sum(-1)


def dpo_loss(c, r, c0, r0):
    """TRL DPOTrainer.dpo_loss, loss_type sigmoid, label_smoothing 0."""
    z = (c - r) - (c0 - r0)
    loss = -F.logsigmoid(BETA * z)
    return loss.mean(), BETA * (c - c0).detach(), BETA * (r - r0).detach(), c, r


def simpo_loss(c, r, lc, lr_):
    """TRL CPOTrainer.cpo_loss, loss_type simpo (average log-probs), cpo_alpha 0."""
    ca, ra = c / lc, r / lr_
    z = (ca - ra) - GAMMA / BETA
    loss = -F.logsigmoid(BETA * z)
    return loss.mean(), BETA * ca.detach(), BETA * ra.detach(), ca, ra


def reference(kind, base, init, pairs):
    from transformers import LlamaForCausalLM
    torch.use_deterministic_algorithms(True)
    m = LlamaForCausalLM.from_pretrained(base, torch_dtype=torch.float32,
                                         attn_implementation="eager")
    ref_model = None
    if kind == "dpo-lora":
        from peft import PeftModel
        m = PeftModel.from_pretrained(m, init, is_trainable=True)
    elif kind == "dpo-full":
        ref_model = LlamaForCausalLM.from_pretrained(base, torch_dtype=torch.float32,
                                                     attn_implementation="eager").eval()
    m.train()
    params = [p for p in m.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                            foreach=False)
    out = {}
    for step in range(STEPS):
        batch = pairs[step * G:(step + 1) * G]
        docs = [p[0] for p in batch] + [p[1] for p in batch]  # chosen, then rejected
        lp, ln = seq_logps(m, docs)
        c, r, lc, lr_ = lp[:G], lp[G:], ln[:G], ln[G:]
        if kind == "simpo":
            loss, rc, rr, shown_c, shown_r = simpo_loss(c, r, lc, lr_)
        else:
            with torch.no_grad():
                if kind == "dpo-lora":
                    with m.disable_adapter():
                        ref, _ = seq_logps(m, docs)
                else:
                    ref, _ = seq_logps(ref_model, docs)
            loss, rc, rr, shown_c, shown_r = dpo_loss(c, r, ref[:G], ref[G:])
        opt.zero_grad()
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        out[step + 1] = {"loss": loss.item(), "grad_norm": gn.item(),
                         "rewards/chosen": rc.mean().item(), "rewards/rejected": rr.mean().item(),
                         "rewards/accuracies": (rc > rr).float().mean().item(),
                         "rewards/margins": (rc - rr).mean().item(),
                         "logps/chosen": shown_c.detach().mean().item(),
                         "logps/rejected": shown_r.detach().mean().item()}
    return out


def compare(name, ours, ref, tol=TOL, tol_acc=TOL):
    worst, bad, first = 0.0, 0, ""
    for step in range(1, STEPS + 1):
        if step not in ours:
            bad += 1
            first = first or f"step {step} missing in fsdpc's metrics.jsonl"
            continue
        for k in ["loss", "grad_norm"] + METRICS:
            a, b = ours[step].get(k), ref[step][k]
            if a is None:
                bad += 1
                first = first or f"step {step}: no {k} in fsdpc's metrics"
                continue
            d = abs(a - b) / max(1.0, abs(b))
            t = tol_acc if k == "rewards/accuracies" else tol
            worst = max(worst, d) if k != "rewards/accuracies" else worst
            if d > t + 1e-12:
                bad += 1
                first = first or f"step {step} {k}: fsdpc {a!r} reference {b!r}"
    last = ref[STEPS]
    print(f"{'PASS' if not bad else 'FAIL'} {name}: {STEPS} steps, loss, grad_norm and "
          f"{len(METRICS)} metrics, worst difference {worst:.2e} (tol {tol:g}"
          + (f", accuracies {tol_acc:g}" if tol_acc != tol else "") + "); last step loss "
          f"{ours.get(STEPS, {}).get('loss', math.nan):.6f} vs {last['loss']:.6f}"
          + (f"; first mismatch: {first}" if bad else ""))
    return bad == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fsdpc", required=True, help="the fsdpc executable")
    ap.add_argument("--plugins", help="FSDPC_PLUGIN_PATH (default: BIN/../plugins)")
    ap.add_argument("--keep", help="work in this folder and keep it")
    ap.add_argument("--no-cuda", action="store_true", help="the CPU runs only")
    a = ap.parse_args()
    a.fsdpc = os.path.abspath(a.fsdpc)
    os.environ["FSDPC_PLUGIN_PATH"] = a.plugins or os.path.join(
        os.path.dirname(os.path.dirname(a.fsdpc)), "plugins")
    w = a.keep or tempfile.mkdtemp(prefix="check_dpo.")
    os.makedirs(w, exist_ok=True)
    make_base(f"{w}/base")
    make_rows(f"{w}/pairs.jsonl")
    r = subprocess.run([a.fsdpc, "data", "prepare", "--in", f"{w}/pairs.jsonl", "--tokenizer",
                        "byte", "--format", "preference", "--out", f"{w}/pairs.tok"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"FAIL data prepare: {r.stderr.strip()}")
    docs = read_tokfile(f"{w}/pairs.tok")
    pairs = [(docs[2 * k], docs[2 * k + 1]) for k in range(len(docs) // 2)]
    assert len(pairs) == STEPS * G and all(len(c[0]) + len(r[0]) <= T for c, r in pairs)
    with open(f"{w}/run.yaml", "w") as f:
        f.write(f"""model: {{config: {w}/base, init: {{from: {w}/base}}}}
data: {{train: {w}/pairs.tok, tokenizer: byte, seq_len: {T}, shuffle: false, eval_fraction: 0.0}}
attention: {{impl: naive}}
optim: {{name: adamw, lr: {LR}, weight_decay: 0.0, betas: [0.9, 0.999], eps: 1.0e-8}}
schedule: {{name: constant, warmup_steps: 0}}
objective: {{beta: {BETA}, gamma: {GAMMA}, label_smoothing: 0.0}}
train: {{device: cpu, max_steps: {STEPS}, micro_batch_size: {MB}, global_batch_size: {G},
        max_grad_norm: 1.0, log_every: 1, eval_every: 0, seed: 7}}
checkpoint: {{final_dtype: fp32}}
""")
    lora = ["peft.method=lora", "peft.r=4", "peft.alpha=8", "peft.dropout=0.0",
            "peft.target_modules=[all-linear]", "peft.merge_on_save=false"]
    ok = True
    devices = ["cpu"] + ([] if a.no_cuda else ["cuda"])
    runs = {"dpo-lora": ["objective.name=dpo", *lora],
            "dpo-full": ["objective.name=dpo", "objective.reference=precompute"],
            "simpo": ["objective.name=simpo"]}
    n = 0
    for dev in devices:
        sfx = "" if dev == "cpu" else "-cuda"
        # the adapters fsdpc starts from: a 1-step run at lr 0 saves them as they are
        fsdpc(a, w, "init" + sfx, "objective.name=dpo", "optim.lr=0.0", "train.max_steps=1",
              f"train.device={dev}", *lora)
        for name, over in runs.items():
            ours = fsdpc(a, w, name + sfx, f"train.device={dev}", *over)
            ref = reference(name, f"{w}/base", f"{w}/init{sfx}/ck/final", pairs)
            ok &= (compare(name, ours, ref) if dev == "cpu" else
                   compare(name + sfx, ours, ref, TOL_BF16, TOL_ACC))
            n += 1
    print(f"{'PASS' if ok else 'FAIL'} check_dpo: {n} runs (work folder {w})")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
