#!/usr/bin/env python3
"""Holds a GPU's memory as another job would, so that only FREE bytes stay
free: a torch tensor in a process of its own (the fsdpc run beside it sees
the device's free memory shrink, not a smaller card).

    python3 hold_free.py FREE_BYTES [DEVICE]

Prints "HOLD device D free F target T (+x%)" once the target is reached
(the CUDA context takes some memory itself: it measures, holds, measures
again), then sleeps until killed. Exits 1 when the device has less than
FREE_BYTES free to begin with (nothing to hold: the check would be void)."""
import sys
import time

import torch


def main():
    target = int(sys.argv[1])
    dev = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    torch.cuda.set_device(dev)
    held = []
    for _ in range(4):
        free, _total = torch.cuda.mem_get_info(dev)
        if free <= target + (16 << 20):
            break
        held.append(torch.empty(free - target, dtype=torch.uint8, device=f"cuda:{dev}"))
    free, _total = torch.cuda.mem_get_info(dev)
    print(f"HOLD device {dev} free {free} target {target} ({free / target - 1:+.3%})", flush=True)
    if free > target + (64 << 20) or not held:
        print(f"HOLD device {dev}: could not hold the card down to {target} bytes", flush=True)
        sys.exit(1)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
