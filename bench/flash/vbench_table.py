"""Forward (or with --bwd, backward) TFLOP/s of every build in one or more bench_variants.py bench logs
(the same shapes in each), as a markdown table: one row per build, each cell
the figures of the logs joined by '/', and the geometric mean over the
shapes of the build's mean over the logs divided by the first build's.

  python3 vbench_table.py [--bwd] vbench.log [vbench2.log ...]"""
import collections
import math
import re
import sys


KIND = "fwd"


def parse(path):
    rows = collections.OrderedDict()
    for line in open(path):
        if not line.startswith("B="):
            continue
        parts = line.split("|")
        cells = {}
        for p in parts[1:]:
            m = re.match(r"\s*(\S+)(?: \(\w+\))?.*?" + KIND + r"\s+([\d.]+)", p)
            if m:
                cells[m.group(1)] = float(m.group(2))
        rows[parts[0].strip().rstrip(":")] = cells
    return rows


def main(paths):
    runs = [parse(p) for p in paths]
    shapes = list(runs[0])
    names = list(runs[0][shapes[0]])
    short = [re.sub(r"[A-Z]+=", "", s).replace(" ", ",") for s in shapes]
    print("| build | " + " | ".join(short) + f" | vs {names[0]} |")
    print("|---" * (len(shapes) + 2) + "|")
    mean = lambda n, s: sum(r[s][n] for r in runs) / len(runs)
    for n in names:
        cells = ["/".join(f"{r[s][n]:.0f}" for r in runs) for s in shapes]
        g = math.exp(sum(math.log(mean(n, s) / mean(names[0], s)) for s in shapes) / len(shapes))
        print(f"| {n} | " + " | ".join(cells) + f" | {g:.3f} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    args = sys.argv[1:]
    if args[0] == "--bwd":
        KIND = "bwd"
        args = args[1:]
    main(args)
