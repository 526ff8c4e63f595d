# PyTorch + Hugging Face PEFT LoRA reference run on one GPU: the baseline of
# issue 14's speed/memory point, beside `fsdpc train configs/llama3-8b-lora.yaml`
# (scripts/gpu/speed.sh lora runs both).
#
#   python3 bench/torch_peft_lora_baseline.py --mode plain|fsdp2 [--compile]
#       [--ac hf|wrap|off] [--micro-batch 2] [--seq 2048] [--steps 12]
#
# Random-weight Llama-3.1-8B shape (transformers LlamaForCausalLM from a config),
# base weights bf16 and frozen, PEFT LoRA (r 16, alpha 32, dropout 0.05 by
# default: issue 14's peft example, meant for configs/llama3-8b-lora.yaml; set
# --dropout to the config's value if it differs) on q,k,v,o,gate,up,down with
# adapters in fp32 (PEFT's default autocast_adapter_dtype), SDPA attention,
# activation checkpointing per decoder layer (--ac hf, transformers'
# gradient_checkpointing_enable, and --ac wrap, torch's checkpoint_wrapper,
# measured the same: 6,030 and 6,047 tokens/s on one H200), fused AdamW over
# the adapters.
# --mode plain: the module as it is; --mode fsdp2: fully_shard per decoder layer
# and at the root, world 1 unless started under torchrun (no mixed-precision
# cast, so the adapters stay fp32 as in plain). --compile: each decoder layer
# under torch.compile (after checkpoint wrapping, before fully_shard), as
# bench/torch_fsdp2_baseline.py does. --autocast: forward under
# torch.autocast(bf16), so the adapter GEMMs run in bf16 off fp32 masters.
#
# Prints the same "RESULT {json}" line as bench/torch_fsdp2_baseline.py
# (--out FILE appends the JSON), which `fsdpc bench --baseline` reads.
# tflops_gpu counts model FLOPs of a frozen base: 4 x (frozen params - token
# embedding) + 6 x adapter params + 12 x layers x hidden x seq per token (no
# weight-gradient GEMMs for the base; recomputation not counted).
import argparse, contextlib, json, os, sys, time
import torch

MODELS = {
    "8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
               num_attention_heads=32, num_key_value_heads=8, vocab_size=128256),
    "1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
               num_attention_heads=32, num_key_value_heads=8, vocab_size=128256),
    "tiny": dict(hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                 num_attention_heads=8, num_key_value_heads=4, vocab_size=32000),
}
TARGETS = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"


def build(a):
    """The frozen bf16 base with PEFT LoRA adapters, on the GPU."""
    from transformers import LlamaConfig, LlamaForCausalLM
    from peft import LoraConfig, get_peft_model
    cfg = LlamaConfig(**MODELS[a.model], max_position_embeddings=max(a.seq, 2048),
                      tie_word_embeddings=False, rope_theta=500000.0, use_cache=False)
    cfg._attn_implementation = "sdpa"
    with torch.device("meta"):
        base = LlamaForCausalLM(cfg)
    base.to(torch.bfloat16)
    base.to_empty(device="cuda")
    g = torch.Generator(device="cuda").manual_seed(0)
    with torch.no_grad():
        for p in base.parameters():  # norms 1, matrices N(0, 0.02)
            p.fill_(1.0) if p.dim() == 1 else p.normal_(0, 0.02, generator=g)
    base.model.rotary_emb.__init__(config=cfg, device="cuda")
    if a.ac == "hf":
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    torch.manual_seed(0)  # PEFT's own init: A Kaiming-uniform, B zero
    lcfg = LoraConfig(r=a.r, lora_alpha=a.alpha, lora_dropout=a.dropout, bias="none",
                      target_modules=a.targets.split(","), task_type="CAUSAL_LM")
    model = get_peft_model(base, lcfg)  # autocast_adapter_dtype=True: adapters fp32
    trainable = [p for p in model.parameters() if p.requires_grad]
    dtypes = {p.dtype for p in trainable}
    if dtypes != {torch.float32}:
        sys.exit(f"torch_peft_lora_baseline: adapters are {dtypes}, expected fp32 "
                 "(PEFT's autocast_adapter_dtype)")
    return cfg, model


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="8b", choices=sorted(MODELS))
    p.add_argument("--mode", default="plain", choices=["plain", "fsdp2"])
    p.add_argument("--ac", default="hf", choices=["hf", "wrap", "off"],
                   help="activation checkpointing per decoder layer: transformers' "
                        "gradient_checkpointing_enable, torch's checkpoint_wrapper, or none")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--autocast", action="store_true")
    p.add_argument("--micro-batch", "--bs", dest="bs", type=int, default=2)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--r", type=int, default=16)
    p.add_argument("--alpha", type=float, default=32)
    p.add_argument("--dropout", type=float, default=0.05)
    p.add_argument("--targets", default=TARGETS)
    p.add_argument("--out", default=None)
    a = p.parse_args()
    if a.steps <= a.warmup:
        sys.exit("torch_peft_lora_baseline: --steps must exceed --warmup")

    rank, world = 0, 1
    if a.mode == "fsdp2":
        import torch.distributed as dist
        for k, v in (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29533"), ("RANK", "0"),
                     ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0")):
            os.environ.setdefault(k, v)  # world 1 without torchrun
        dist.init_process_group("nccl")
        rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))

    cfg, model = build(a)
    layers = model.get_base_model().model.layers
    if a.ac == "wrap":
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
        for i, layer in enumerate(layers):
            layers[i] = checkpoint_wrapper(layer)
    if a.compile:
        for i, layer in enumerate(layers):
            layers[i] = torch.compile(layer)
    if a.mode == "fsdp2":
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh("cuda", (world,))
        for layer in layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)  # the root PEFT module: PEFT calls the base's forward()
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    n_train = sum(p.numel() for p in trainable)
    n_all = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(trainable, lr=1e-4, weight_decay=0.0, fused=True)
    ctx = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if a.autocast \
        else contextlib.nullcontext
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    g = torch.Generator(device="cuda").manual_seed(1000 + rank)
    times, loss = [], None
    for step in range(a.steps):
        ids = torch.randint(0, cfg.vocab_size, (a.bs, a.seq), device="cuda", generator=g)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with ctx():
            out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        loss = out.loss.item()
        if rank == 0:
            print(f"step {step + 1}/{a.steps} loss {loss:.4f} step {times[-1]:.3f}s "
                  f"peak {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB", file=sys.stderr,
                  flush=True)
    steady = sorted(times[a.warmup:])
    med = steady[len(steady) // 2]
    tok_s_gpu = a.bs * a.seq / med
    L, H, S = cfg.num_hidden_layers, cfg.hidden_size, a.seq
    flops_tok = 4 * (n_all - n_train - cfg.vocab_size * H) + 6 * n_train + 12 * L * H * S
    res = dict(model=a.model, strategy=f"lora-{a.mode}" + ("-compile" if a.compile else ""),
               mode=a.mode, ac=int(a.ac != "off"), ac_impl=a.ac, compile=int(a.compile),
               autocast=int(a.autocast), bs=a.bs, seq=a.seq, world=world,
               r=a.r, alpha=a.alpha, dropout=a.dropout, targets=a.targets,
               adapter_dtype="fp32", base_dtype="bf16", attn="sdpa",
               step_s=med, tok_s_gpu=tok_s_gpu, params=n_all, trainable_params=n_train,
               tflops_gpu=tok_s_gpu * flops_tok / 1e12,
               peak_alloc_gib=torch.cuda.max_memory_allocated() / 2**30,
               peak_reserved_gib=torch.cuda.max_memory_reserved() / 2**30, loss=loss,
               gpu=torch.cuda.get_device_name(), torch=torch.__version__)
    if rank == 0:
        import peft, transformers
        res.update(transformers=transformers.__version__, peft=peft.__version__)
        print("RESULT " + json.dumps(res), flush=True)
        if a.out:
            with open(a.out, "a") as f:
                f.write(json.dumps(res) + "\n")
    if a.mode == "fsdp2":
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
