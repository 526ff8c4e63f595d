"""One shape's attention, forward and backward three times each, by the flash
plugin and by SDPA's cuDNN backend, for ncu to profile on the GPU machine:
  ncu --kernel-name regex:... python3 ncu_case.py PLUGIN_DIR B T NH KVH HD
(bench/flash/run_ncu.sh runs it with the counters the results quote)."""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from bench_flash import make, to_sdpa
from flash_ctypes import Flash

d = sys.argv[1]
B, T, NH, KVH, HD = (int(x) for x in sys.argv[2:7])
q, k, v, do = make(B, T, NH, KVH, HD, 11)
fl = Flash(d)
st = fl.setup(q, k, True, None)
out, dq = torch.empty_like(q), torch.empty_like(q)
dk, dv = torch.empty_like(k), torch.empty_like(k)
for _ in range(3):
    fl.fwd(st, q, k, v, out)
    fl.bwd(st, q, k, v, out, do, dq, dk, dv)
torch.cuda.synchronize()
qs, ks, vs = (to_sdpa(t).detach().requires_grad_() for t in (q, k, v))
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    for _ in range(3):
        o = F.scaled_dot_product_attention(qs, ks, vs, is_causal=True, enable_gqa=NH != KVH)
        torch.autograd.grad(o, (qs, ks, vs), to_sdpa(do))
torch.cuda.synchronize()
print("done", flush=True)
