# PyTorch + Hugging Face PEFT DPO reference step on one GPU: the baseline of
# issue 38's speed row, beside `fsdpc train configs/bench/llama3-8b-dpo-lora.yaml`
# (scripts/gpu/speed.sh dpo runs both).
#
#   python3 bench/torch_peft_dpo_baseline.py [--model 8b] [--seq 2048] [--prompt 48]
#       [--steps 12] [--warmup 4] [--compile] [--out FILE]
#
# The model is bench/torch_peft_lora_baseline.py's (random-weight Llama-3.1-8B
# shape, bf16 frozen base, PEFT LoRA r 16 / alpha 32 on the seven projections,
# adapters fp32, SDPA, transformers' activation checkpointing per decoder
# layer, fused AdamW over the adapters), with --dropout 0 as the config.
# One step is TRL 0.16's DPOTrainer step for one pair with a PEFT model and
# no ref_model, written here in plain torch (TRL is not installed on the GPU
# host):
#   - the pair as one batch of two sequences (chosen, rejected), each --seq
#     tokens: --prompt tokens of prompt, then the completion; the loss mask
#     covers the completion (concatenated_inputs; no padding is needed, both
#     have the same length);
#   - reference log-probs under torch.no_grad() with the adapters disabled
#     (compute_ref_log_probs: model.disable_adapter());
#   - concatenated_forward: the logits of both sequences, labels rolled by
#     one, per-token log-probs of the labels by a log-softmax row by row in
#     the logits' dtype (selective_log_softmax's path for bf16), zeroed off
#     the mask, summed per sequence; the chosen / rejected mean logits for
#     the logits/* metrics;
#   - dpo_loss with loss_type sigmoid, beta 0.1, label_smoothing 0:
#     -logsigmoid(beta * ((pc - pr) - (rc - rr))); rewards beta * (p - r);
#   - backward, clip_grad_norm_ 1.0, AdamW step.
# Tokens a step: 2 x --seq (both sequences), as fsdpc counts its row.
# Prints a "RESULT {json}" line (--out FILE appends the JSON).
import argparse, json, os, sys, time
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_peft_lora_baseline import MODELS, TARGETS, build  # noqa: E402


def seq_logps(model, ids, mask):
    """Per sequence: the sum of log p(label) over the mask, and the mean
    logit over the mask (TRL's concatenated_forward with a causal LM)."""
    logits = model(input_ids=ids).logits  # (2, T, V)
    labels = torch.roll(ids, shifts=-1, dims=1)
    m = torch.roll(mask, shifts=-1, dims=1)
    m[:, -1] = False  # the last position has no label
    labels = labels.masked_fill(~m, 0)
    rows = [torch.gather(F.log_softmax(lg, dim=-1), 1, lb[:, None]).squeeze(1)
            for lg, lb in zip(logits, labels)]
    lp = torch.stack(rows).masked_fill(~m, 0.0)
    with torch.no_grad():
        mean_logits = [logits[i][m[i]].float().mean() for i in range(2)]
    return lp.sum(-1), mean_logits


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="8b", choices=sorted(MODELS))
    p.add_argument("--seq", type=int, default=2048, help="tokens per sequence")
    p.add_argument("--prompt", type=int, default=48, help="prompt tokens per sequence")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--beta", type=float, default=0.1)
    p.add_argument("--r", type=int, default=16)
    p.add_argument("--alpha", type=float, default=32)
    p.add_argument("--compile", action="store_true", help="each decoder layer under torch.compile")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    if a.steps <= a.warmup or not 0 < a.prompt < a.seq:
        sys.exit("torch_peft_dpo_baseline: need --steps > --warmup and 0 < --prompt < --seq")
    # the LoRA baseline's builder, with this script's settings
    a.ac, a.dropout, a.targets = "hf", 0.0, TARGETS
    torch.cuda.set_device(0)
    cfg, model = build(a)
    if a.compile:
        layers = model.get_base_model().model.layers
        for i, layer in enumerate(layers):
            layers[i] = torch.compile(layer)
    model.train()
    trainable = [q for q in model.parameters() if q.requires_grad]
    n_train = sum(q.numel() for q in trainable)
    n_all = sum(q.numel() for q in model.parameters())
    opt = torch.optim.AdamW(trainable, lr=5e-6, weight_decay=0.0, fused=True)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    g = torch.Generator(device="cuda").manual_seed(1000)
    mask = torch.zeros(2, a.seq, dtype=torch.bool, device="cuda")
    mask[:, a.prompt:] = True
    times, last = [], None
    for step in range(a.steps):
        ids = torch.randint(0, cfg.vocab_size, (2, a.seq), device="cuda", generator=g)
        ids[1, :a.prompt] = ids[0, :a.prompt]  # one prompt, two completions
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.no_grad(), model.disable_adapter():
            ref, _ = seq_logps(model, ids, mask.clone())
        pol, mean_logits = seq_logps(model, ids, mask.clone())
        z = (pol[0] - pol[1]) - (ref[0] - ref[1])
        loss = -F.logsigmoid(a.beta * z)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        rc, rr = a.beta * (pol[0] - ref[0]).item(), a.beta * (pol[1] - ref[1]).item()
        last = dict(loss=loss.item(), grad_norm=gn.item(), rewards_chosen=rc, rewards_rejected=rr,
                    logps_chosen=pol[0].item(), logps_rejected=pol[1].item(),
                    logits_chosen=mean_logits[0].item(), logits_rejected=mean_logits[1].item())
        print(f"step {step + 1}/{a.steps} loss {last['loss']:.4f} logps/chosen "
              f"{last['logps_chosen']:.1f} step {times[-1]:.3f}s peak "
              f"{torch.cuda.max_memory_allocated() / 2**30:.2f} GiB", file=sys.stderr, flush=True)
    steady = sorted(times[a.warmup:])
    med = steady[len(steady) // 2]
    tok_s = 2 * a.seq / med
    import peft, transformers
    res = dict(model=a.model, strategy="dpo-lora-plain" + ("-compile" if a.compile else ""),
               compile=int(a.compile), pairs=1, seq_per_sequence=a.seq, prompt=a.prompt,
               r=a.r, alpha=a.alpha, beta=a.beta, reference="adapters-disabled",
               adapter_dtype="fp32", base_dtype="bf16", attn="sdpa", ac="hf",
               step_s=med, tok_s_gpu=tok_s, params=n_all, trainable_params=n_train,
               peak_alloc_gib=torch.cuda.max_memory_allocated() / 2**30,
               peak_reserved_gib=torch.cuda.max_memory_reserved() / 2**30, **last,
               gpu=torch.cuda.get_device_name(), torch=torch.__version__,
               transformers=transformers.__version__, peft=peft.__version__)
    print("RESULT " + json.dumps(res), flush=True)
    if a.out:
        with open(a.out, "a") as f:
            f.write(json.dumps(res) + "\n")


if __name__ == "__main__":
    main()
