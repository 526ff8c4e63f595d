"""Compares adamw8bit's quantization maps (written by test_cuda_adamw8bit
with FSDPC_Q8_MAPS=FILE: 256 signed then 256 unsigned values, one hex float
per line) with the same maps formed by torch in fp32 the way bitsandbytes'
create_dynamic_map documents them: for i = 0..6 the midpoints of
torch.linspace(0.1, 1, n_i) times 10**(i - 6) (n_i = 2**i + 1 signed, with
the negatives too, 2**(i + 1) + 1 unsigned), then 0 and 1, sorted.
Usage: python3 check_q8_maps.py FILE. Prints the count of values that differ
in any bit and the largest difference in fp32 ulps; exits 1 on any miss."""
import sys

import torch


def dynamic_map(signed):
    vals = []
    for i in range(7):
        n = 2**i + 1 if signed else 2 ** (i + 1) + 1
        edges = torch.linspace(0.1, 1, n)
        mids = (edges[:-1] + edges[1:]) / 2.0
        scale = 10 ** (i - 6)
        vals += (scale * mids).tolist()
        if signed:
            vals += (-scale * mids).tolist()
    vals += [0.0, 1.0]
    assert len(vals) == 256
    return torch.tensor(sorted(vals), dtype=torch.float32)


got = [float.fromhex(line.strip()) for line in open(sys.argv[1]) if line.strip()]
assert len(got) == 512, len(got)
bad = 0
for name, signed, part in (("signed", True, got[:256]), ("unsigned", False, got[256:])):
    ref = dynamic_map(signed)
    mine = torch.tensor(part, dtype=torch.float32)
    a, b = mine.view(torch.int32).long(), ref.view(torch.int32).long()
    diff = int((a != b).sum())
    ulps = int((a - b).abs().max())
    print(f"{name} map: {diff} of 256 values differ from torch's fp32 construction "
          f"(largest difference {ulps} ulp)")
    for k in (a != b).nonzero().flatten().tolist()[:5]:
        print(f"  [{k}] plugin {mine[k].item()!r} torch {ref[k].item()!r}")
    bad += diff
sys.exit(1 if bad else 0)
