#!/usr/bin/env python3
"""peak_run.py OUT.txt CMD...: runs CMD (its stdout to OUT.txt) while polling
the device's used memory every 5 ms; prints the peak less the used memory
at the start, in MiB (whole device: run nothing else on it meanwhile)."""
import subprocess
import sys
import threading
import time

import torch

free, total = torch.cuda.mem_get_info()
base = peak = total - free
stop = False


def poll():
    global peak
    while not stop:
        f, t = torch.cuda.mem_get_info()
        peak = max(peak, t - f)
        time.sleep(0.005)


th = threading.Thread(target=poll, daemon=True)
th.start()
with open(sys.argv[1], "w") as out:
    r = subprocess.run(sys.argv[2:], stdout=out)
stop = True
th.join()
print(f"peak device memory (polled) of {' '.join(sys.argv[2:4])}...: {(peak - base) / 2**20:.0f} MiB "
      f"(exit {r.returncode})")
sys.exit(r.returncode)
