# Copied from ../shared/bench/torch_fsdp2_baseline.py; `fsdpc bench --baseline` reads its
# JSON lines (--out FILE, or the "RESULT {...}" lines of its stdout).
# PyTorch FSDP2 reference run for Llama-shaped models (anchor for the compass).
# Launch: torchrun --nproc_per_node=N torch_fsdp2_baseline.py --model 1b --strategy full --ac 1 --bs 4
# [--compile]: each decoder layer under torch.compile before fully_shard.
import argparse, json, os, time
import torch
import torch.distributed as dist

MODELS = {
    # Llama-3.2-1B shape (untied head), Llama-3.1-8B shape
    "1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
               num_attention_heads=32, num_key_value_heads=8, vocab_size=128256),
    "8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
               num_attention_heads=32, num_key_value_heads=8, vocab_size=128256),
    "tiny": dict(hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                 num_attention_heads=8, num_key_value_heads=4, vocab_size=32000),
    # Qwen2.5-7B (q/k/v biases) and Qwen3-8B (per-head q/k norms), as
    # configs/bench/qwen2.5-7b-base.yaml and qwen3-8b-base.yaml
    "qwen2.5-7b": dict(family="qwen2", hidden_size=3584, intermediate_size=18944,
                       num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4,
                       vocab_size=152064, rms_norm_eps=1e-6, rope_theta=1000000.0),
    "qwen3-8b": dict(family="qwen3", hidden_size=4096, intermediate_size=12288,
                     num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8,
                     head_dim=128, vocab_size=151936, rms_norm_eps=1e-6, rope_theta=1000000.0),
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="1b")
    p.add_argument("--strategy", default="full", choices=["full", "grad_op", "no_shard", "hybrid"])
    p.add_argument("--ac", type=int, default=0)
    p.add_argument("--bs", type=int, default=1)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--out", default=None)
    p.add_argument("--compile", action="store_true",
                   help="each decoder layer under torch.compile before fully_shard (torchtitan)")
    p.add_argument("--pure-bf16", action="store_true",
                   help="bf16 parameters, gradients and AdamW state, no fp32 master (8 bytes a "
                        "parameter: the nearest PyTorch configuration to an 8B model on one 80 GB GPU)")
    p.add_argument("--accum", type=int, default=1, help="micro-batches per optimizer step")
    a = p.parse_args()

    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    import transformers
    from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy
    from torch.distributed.device_mesh import init_device_mesh

    spec = dict(MODELS[a.model])
    fam = {"llama": "Llama", "qwen2": "Qwen2", "qwen3": "Qwen3"}[spec.pop("family", "llama")]
    spec.setdefault("rope_theta", 500000.0)
    cfg_cls = getattr(transformers, fam + "Config")
    try:  # transformers >= 5: the RoPE base goes into rope_parameters
        cfg = cfg_cls(**{k: v for k, v in spec.items() if k != "rope_theta"},
                      rope_parameters=dict(rope_type="default", rope_theta=spec["rope_theta"]),
                      max_position_embeddings=max(a.seq, 2048), tie_word_embeddings=False)
    except (TypeError, ValueError):
        cfg = cfg_cls(**spec, max_position_embeddings=max(a.seq, 2048), tie_word_embeddings=False)
    cfg._attn_implementation = "sdpa"
    with torch.device("meta"):
        model = getattr(transformers, fam + "ForCausalLM")(cfg)
        if a.pure_bf16:
            model.to(torch.bfloat16)
    if a.ac:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16,
                              reduce_dtype=torch.bfloat16 if a.pure_bf16 else torch.float32)
    if a.strategy == "hybrid":
        mesh = init_device_mesh("cuda", (2, world // 2), mesh_dim_names=("rep", "shard"))
    elif a.strategy == "no_shard":  # DDP semantics: replicate everywhere, shard degree 1
        mesh = init_device_mesh("cuda", (world, 1), mesh_dim_names=("rep", "shard"))
    else:
        mesh = init_device_mesh("cuda", (world,))
    rsf = a.strategy not in ("grad_op", "no_shard")
    if a.compile:  # as torchtitan: compile each block, then shard the compiled blocks
        for i, layer in enumerate(model.model.layers):
            model.model.layers[i] = torch.compile(layer)
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh, mp_policy=mp, reshard_after_forward=rsf)
    fully_shard(model, mesh=mesh, mp_policy=mp, reshard_after_forward=rsf)
    model.to_empty(device="cuda")
    with torch.no_grad():
        for prm in model.parameters():
            prm.normal_(0, 0.02)
    model.model.rotary_emb.__init__(config=cfg, device="cuda")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    torch.cuda.reset_peak_memory_stats()
    g = torch.Generator(device="cuda").manual_seed(rank)
    times = []
    loss = None
    for step in range(a.steps):
        ids = [torch.randint(0, cfg.vocab_size, (a.bs, a.seq), device="cuda", generator=g)
               for _ in range(a.accum)]
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(a.accum):
            out = model(input_ids=ids[i], labels=ids[i])
            (out.loss / a.accum).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        loss = out.loss.item()
    steady = sorted(times[a.warmup:])
    med = steady[len(steady) // 2]
    tok_s_gpu = a.bs * a.seq * a.accum / med
    nparam = sum(p.numel() for p in model.parameters())
    L, H, S = cfg.num_hidden_layers, cfg.hidden_size, a.seq
    # torchtitan's convention: 6 x (params - token embedding) + 12 x layers x hidden x seq
    flops_tok = 6 * (nparam - cfg.vocab_size * H) + 12 * L * H * S
    res = dict(model=a.model, strategy=a.strategy, ac=a.ac, compile=int(a.compile), bs=a.bs,
               accum=a.accum, pure_bf16=int(a.pure_bf16),
               seq=a.seq, world=world,
               step_s=med, tok_s_gpu=tok_s_gpu, params=nparam,
               tflops_gpu=tok_s_gpu * flops_tok / 1e12,
               peak_alloc_gib=torch.cuda.max_memory_allocated() / 2**30,
               peak_reserved_gib=torch.cuda.max_memory_reserved() / 2**30, loss=loss)
    if rank == 0:
        print("RESULT " + json.dumps(res), flush=True)
        if a.out:
            with open(a.out, "a") as f:
                f.write(json.dumps(res) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
