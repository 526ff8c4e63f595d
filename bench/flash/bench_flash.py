"""Flash attention plugin vs PyTorch SDPA (and naive), on the GPU machine.

  python3 bench_flash.py check PLUGIN_DIR   accuracy over the issue's grid
  python3 bench_flash.py bench PLUGIN_DIR   forward / backward TFLOP/s

check: random bf16 inputs; the reference is PyTorch attention in fp32 on the
same values (math backend); flash and SDPA in bf16 (flash backend) are both
measured against it by ||x - ref|| / ||ref|| for out, dq, dk, dv. Grid: T in
{1, 17, 128, 1000, 2048, 8192}, head dims 64 and 128, GQA ratios 1, 4, 8
(NH = 8), causal; plus document masking, full attention and head dims 80
and 96. Pass: every error < 1e-2.

bench: CUDA events around each call, warm-up first, median of repeats taken
in rounds that take the contenders in every order in turn (so that clock
drift and the state one leaves the card in fall on all alike); the
plugin and PyTorch SDPA's flash (FlashAttention-2) and cuDNN backends in the
same process on the same inputs, hd 64 and 128, T 2048 and 8192, MHA and GQA. FLOPs count the causal half:
fwd 2 * 2 * B * NH * T^2 * HD / 2, bwd 2.5 times that."""
import itertools
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from flash_ctypes import Flash, Plugin, F32, CPU

TOL = 1e-2
ROUNDS, REPS = 6, 7  # bench: rounds over the contenders, timed calls each


def rel(x, ref):
    """||x - ref|| / ||ref||; where the exact gradient is zero (dq, dk at T = 1:
    one key, so P = 1 whatever the scores) the denominator is the norm of a
    tensor of unit RMS, the scale of the inputs, instead of rounding noise."""
    x, ref = x.float(), ref.float()
    if not torch.isfinite(x).all():
        return math.inf
    den = ref.norm()
    if den < 1e-4 * math.sqrt(ref.numel()):
        den = torch.tensor(math.sqrt(ref.numel()))
    return ((x - ref).norm() / den).item()


def to_sdpa(x):  # (B, T, H, D) -> (B, H, T, D)
    return x.transpose(1, 2)


def doc_mask(doc):  # (B, T) -> (B, 1, T, T) same-document and causal
    T = doc.shape[1]
    same = doc[:, :, None] == doc[:, None, :]
    return (same & torch.ones(T, T, dtype=torch.bool, device=doc.device).tril())[:, None]


def reference(q, k, v, do, causal, doc):
    """fp32 attention and its gradients, on upcast copies."""
    qf, kf, vf = (t.detach().float().requires_grad_() for t in (q, k, v))
    rep = q.shape[2] // k.shape[2]
    kr, vr = kf.repeat_interleave(rep, 2), vf.repeat_interleave(rep, 2)
    with sdpa_kernel(SDPBackend.MATH):
        if doc is None:
            o = F.scaled_dot_product_attention(to_sdpa(qf), to_sdpa(kr), to_sdpa(vr),
                                               is_causal=causal)
        else:
            o = F.scaled_dot_product_attention(to_sdpa(qf), to_sdpa(kr), to_sdpa(vr),
                                               attn_mask=doc_mask(doc))
    o = o.transpose(1, 2)
    o.backward(do.float())
    return o.detach(), qf.grad, kf.grad, vf.grad


def sdpa_bf16(q, k, v, do, causal):
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        o = F.scaled_dot_product_attention(to_sdpa(q), to_sdpa(k), to_sdpa(v), is_causal=causal,
                                           enable_gqa=q.shape[2] != k.shape[2]).transpose(1, 2)
    o.backward(do)
    return o.detach(), q.grad, k.grad, v.grad


def flash_run(fl, q, k, v, do, causal, doc):
    st = fl.setup(q, k, causal, doc)
    out, dq = torch.full_like(q, math.nan), torch.full_like(q, math.nan)
    dk, dv = torch.full_like(k, math.nan), torch.full_like(k, math.nan)
    fl.fwd(st, q, k, v, out)
    fl.bwd(st, q, k, v, out, do, dq, dk, dv)
    torch.cuda.synchronize()
    return out, dq, dk, dv


def make(B, T, NH, KVH, HD, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    r = lambda *s: torch.randn(*s, device="cuda", generator=g, dtype=torch.float32)
    q = r(B, T, NH, HD).bfloat16()
    k = r(B, T, KVH, HD).bfloat16()
    v = r(B, T, KVH, HD).bfloat16()
    do = r(B, T, NH, HD).bfloat16()
    return q, k, v, do


def random_docs(B, T, seed):
    g = torch.Generator().manual_seed(seed)
    doc = torch.zeros(B, T, dtype=torch.int32)
    for b in range(B):
        cuts = sorted(torch.randint(1, max(T, 2), (max(T // 300, 1),), generator=g).tolist())
        for c in cuts:
            doc[b, c:] += 1
    return doc.cuda()


def check(plugin_dir):
    fl = Flash(plugin_dir)
    fails, n, seed = 0, 0, 0
    cases = []
    for T in (1, 17, 128, 1000, 2048, 8192):
        for HD in (64, 128):
            for ratio in (1, 4, 8):
                cases.append((2 if T <= 128 else 1, T, 8, 8 // ratio, HD, True, False))
    cases += [(1, 1000, 8, 2, 128, False, False), (1, 2048, 8, 2, 128, True, True),
              (2, 8192, 8, 1, 64, True, True), (1, 8192, 8, 8, 128, True, True),
              (2, 1000, 8, 2, 80, True, False), (1, 2048, 8, 8, 96, True, False),
              (2, 777, 8, 1, 96, True, True), (1, 1000, 8, 2, 80, False, False)]
    print(f"{'shape':34s} {'mask':7s} {'flash: out':>10s} {'dq':>9s} {'dk':>9s} {'dv':>9s}"
          f"   {'sdpa: out':>9s} {'dq':>9s} {'dk':>9s} {'dv':>9s}")
    for B, T, NH, KVH, HD, causal, docs in cases:
        seed += 1
        q, k, v, do = make(B, T, NH, KVH, HD, seed)
        doc = random_docs(B, T, seed) if docs else None
        ref = reference(q, k, v, do, causal, doc)
        got = flash_run(fl, q, k, v, do, causal, doc)
        ef = [rel(a, b) for a, b in zip(got, ref)]
        es = ["-"] * 4
        if doc is None:
            es = [f"{rel(a, b):9.2e}" for a, b in zip(sdpa_bf16(q, k, v, do, causal), ref)]
        ok = all(e < TOL for e in ef)
        fails += not ok
        n += 1
        mask = "docs" if docs else ("causal" if causal else "full")
        print(f"{'ok  ' if ok else 'FAIL'} B={B} T={T:<5d} NH={NH} KVH={KVH} HD={HD:<3d} {mask:7s} "
              + " ".join(f"{e:9.2e}" for e in ef) + "   " + " ".join(f"{e:>9s}" for e in es),
              flush=True)
        del ref, got
    print(f"check: {n - fails} of {n} cases within {TOL:g} of fp32 attention")
    return fails == 0


def times_ms(fn, reps, warmup, calls=1):
    """ms a call of fn, reps times: events around `calls` calls back to back
    (1: each call alone, the host synchronised before the next)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(calls):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / calls)
    return times


def sdpa_fns(backend, q, k, v, do):
    """The forward and backward calls of F.scaled_dot_product_attention
    (causal) under one backend, and how GQA is served: natively (enable_gqa)
    or, where the backend refuses it, with K/V repeated per query head as
    models do; None where the backend takes neither."""
    NH, KVH = q.shape[2], k.shape[2]
    gqa = NH != KVH
    qs = to_sdpa(q).detach().requires_grad_()
    for native in ((True, False) if gqa else (False,)):
        if native or not gqa:
            ks, vs = (to_sdpa(t).detach().requires_grad_() for t in (k, v))
        else:
            ks, vs = (to_sdpa(t.repeat_interleave(NH // KVH, 2)).detach().requires_grad_()
                      for t in (k, v))
        fwd = lambda ks=ks, vs=vs, native=native: F.scaled_dot_product_attention(
            qs, ks, vs, is_causal=True, enable_gqa=native)
        try:
            with sdpa_kernel(backend):
                o = fwd()
                dos = to_sdpa(do)
                bwd = lambda o=o, ks=ks, vs=vs: torch.autograd.grad(o, (qs, ks, vs), dos,
                                                                    retain_graph=True)
                bwd()
        except RuntimeError:
            continue
        return fwd, bwd, ("gqa" if native else ("rep-kv" if gqa else "mha"))
    return None


def fsdpc_contender(fl, q, k, v, do):
    """The plugin's forward and backward as an interleaved_ms contender
    (None, fwd, bwd), on buffers of its own."""
    st = fl.setup(q, k, True)
    out, dq = torch.empty_like(q), torch.empty_like(q)
    dk, dv = torch.empty_like(k), torch.empty_like(k)
    return (None, lambda: fl.fwd(st, q, k, v, out),
            lambda: fl.bwd(st, q, k, v, out, do, dq, dk, dv))


def sdpa_contenders(q, k, v, do):
    """SDPA's flash and cuDNN backends as interleaved_ms contenders (name ->
    (backend, fwd, bwd)), without a backend that takes neither GQA form, and
    how each served GQA."""
    contenders, how = {}, {}
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION),
                          ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        fns = sdpa_fns(backend, q, k, v, do)
        how[name] = fns[2] if fns else "n/a"
        if fns:
            contenders[name] = (backend, fns[0], fns[1])
    return contenders, how


def interleaved_ms(contenders, rounds=ROUNDS, reps=REPS, warmup=3, fixed=False):
    """Median forward and backward ms of each contender (name -> (backend or
    None, fwd, bwd)), timed in `rounds` rounds that take the contenders in
    turn (reps calls each, after warm-up), so that a drift of the clocks
    (a power-capped H200 moves by several percent within a minute) falls on
    all of them alike. The rounds take the contenders in every order in turn
    (3 contenders, 6 rounds: each order once; more contenders: each rotation
    forwards and backwards, 2 n rounds for all): what ran just before
    matters to a power-capped card (a forward right after SDPA flash's
    backward ran 4-10 % faster than after either other backward,
    2026-11-24-flash-s10.md), and so each contender follows the others
    alike. fixed: every round in the given order (as before 2026-11-24;
    diag_timing.py compares the two)."""
    got = {n: ([], []) for n in contenders}
    names = list(contenders)
    if fixed:
        orders = [tuple(names)]
    elif len(names) <= 3:
        orders = list(itertools.permutations(names))
    else:
        orders = []
        for k in range(len(names)):
            rot = names[k:] + names[:k]
            orders += [tuple(rot), tuple(reversed(rot))]
    for r in range(rounds):
        for n in orders[r % len(orders)]:
            backend, fwd, bwd = contenders[n]
            for i, fn in enumerate((fwd, bwd)):
                if backend is None:
                    got[n][i].extend(times_ms(fn, reps, warmup))
                else:
                    with sdpa_kernel(backend):
                        got[n][i].extend(times_ms(fn, reps, warmup))
    return {n: (statistics.median(f), statistics.median(b)) for n, (f, b) in got.items()}


SHAPES = ((8, 2048, 16, 16, 128), (2, 8192, 16, 16, 128), (8, 2048, 32, 8, 128),
          (2, 8192, 32, 8, 128), (8, 2048, 32, 32, 64), (2, 8192, 32, 32, 64),
          (8, 2048, 32, 8, 64), (2, 8192, 32, 8, 64))


def bench(plugin_dir):
    fl = Flash(plugin_dir)
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"cudnn {torch.backends.cudnn.version()}")
    rows = []
    for B, T, NH, KVH, HD in SHAPES:
        q, k, v, do = make(B, T, NH, KVH, HD, 7)
        fwd_flop = 4 * B * NH * T * T * HD / 2
        contenders = {"fsdpc": fsdpc_contender(fl, q, k, v, do)}
        sdpa, how = sdpa_contenders(q, k, v, do)
        contenders.update(sdpa)
        ms = interleaved_ms(contenders)
        nan = (math.nan, math.nan)
        (f_fwd, f_bwd), (s_fwd, s_bwd) = ms["fsdpc"], ms.get("flash", nan)
        c_fwd, c_bwd = ms.get("cudnn", nan)
        how, chow = how["flash"], how["cudnn"]
        tf = lambda flop, ms: flop / ms / 1e9
        rows.append((B, T, NH, KVH, HD, tf(fwd_flop, f_fwd), tf(2.5 * fwd_flop, f_bwd),
                     tf(3.5 * fwd_flop, f_fwd + f_bwd), tf(fwd_flop, s_fwd),
                     tf(2.5 * fwd_flop, s_bwd), tf(3.5 * fwd_flop, s_fwd + s_bwd),
                     tf(fwd_flop, c_fwd), tf(2.5 * fwd_flop, c_bwd),
                     tf(3.5 * fwd_flop, c_fwd + c_bwd), how, chow))
        del q, k, v, do, contenders, sdpa
        torch.cuda.empty_cache()

    # naive: the CPU fp32 reference plugin (its CUDA path is another branch).
    naive = Plugin(plugin_dir, "naive")
    B, T, NH, KVH, HD = 1, 2048, 8, 8, 128
    q, k, v, do = (t.float().cpu() for t in make(B, T, NH, KVH, HD, 3))
    s = naive.shape(B, T, NH, KVH, HD, True, F32, CPU)
    z = naive.sizes(s)
    saved = torch.empty(z.saved_bytes // 4)
    ws = torch.empty(z.bwd_workspace // 4 + 4)
    out, dq, dk, dv = (torch.empty_like(t) for t in (q, q, k, v))
    t0 = time.perf_counter()
    naive.forward(s, q, k, v, out, saved, None)
    t1 = time.perf_counter()
    naive.backward(s, q, k, v, out, do, saved, dq, dk, dv, ws)
    t2 = time.perf_counter()
    nflop = 4 * B * NH * T * T * HD / 2
    naive_row = (f"naive (CPU fp32, {torch.get_num_threads()} threads) B={B} T={T} NH={NH} HD={HD}:"
                 f" fwd {(t1 - t0) * 1e3:.0f} ms ({nflop / (t1 - t0) / 1e12:.3f} TFLOP/s),"
                 f" bwd {(t2 - t1) * 1e3:.0f} ms ({2.5 * nflop / (t2 - t1) / 1e12:.3f} TFLOP/s)")

    print(f"\ncausal, TFLOP/s (median of {ROUNDS} rounds x {REPS} calls, the contenders taken in"
          " turn, every order once; fwd+bwd = 3.5x fwd FLOPs over the summed time); SDPA flash and"
          " cuDNN backends on the same inputs")
    print(f"{'B':>2s} {'T':>5s} {'NH':>3s} {'KVH':>3s} {'HD':>3s} | {'fsdpc fwd':>9s} {'bwd':>6s}"
          f" {'f+b':>6s} | {'flash fwd':>9s} {'bwd':>6s} {'f+b':>6s} | {'cudnn fwd':>9s}"
          f" {'bwd':>6s} {'f+b':>6s} | {'/flash':>6s} {'/cudnn':>6s} | sdpa GQA as (flash, cudnn)")
    for r in rows:
        print(f"{r[0]:2d} {r[1]:5d} {r[2]:3d} {r[3]:3d} {r[4]:3d} | {r[5]:9.1f} {r[6]:6.1f}"
              f" {r[7]:6.1f} | {r[8]:9.1f} {r[9]:6.1f} {r[10]:6.1f} | {r[11]:9.1f} {r[12]:6.1f}"
              f" {r[13]:6.1f} | {r[7] / r[10]:6.2f} {r[7] / r[13]:6.2f} | {r[14]}, {r[15]}")
    print(naive_row)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("check", "bench"):
        sys.exit(__doc__)
    ok = check(sys.argv[2]) if sys.argv[1] == "check" else (bench(sys.argv[2]) or True)
    sys.exit(0 if ok else 1)
