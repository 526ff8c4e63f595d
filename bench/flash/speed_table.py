"""The old / new speed table of bench_variants.py bench logs (one per
repetition, the same shapes in each; builds named old and new, SDPA's cuDNN
backend beside them): per shape, forward + backward TFLOP/s of old, new and
cuDNN, new / old of the forward, backward and both (time ratios, > 1 is
faster), and new / cuDNN; each cell the mean over the logs. Then one line
PASS or FAIL: every shape's new / old (forward + backward) at least MIN_ROW
and their geometric mean at least MIN_MEAN.

  python3 speed_table.py [--min-row 0.97] [--min-mean 0.99] vbench.log [vbench2.log ...]"""
import argparse
import math
import re
import statistics


def parse(path):
    """{shape: {build: (fwd ms, bwd ms)}}; the TFLOP/s of SDPA's backends are
    turned back into ms from the shape's FLOPs (causal: fwd 2 B NH T^2 HD)."""
    rows = {}
    for line in open(path):
        if not line.startswith("B="):
            continue
        parts = line.split("|")
        shape = parts[0].strip().rstrip(":")
        B, T, NH, KVH, HD = (int(x) for x in re.findall(r"=(\d+)", shape))
        flop = 2.0 * B * NH * T * T * HD
        cells = {}
        for p in parts[1:]:
            m = re.match(r"\s*(\S+)(?: \(\S+\))? fwd\s+([\d.]+) bwd\s+([\d.]+)(?: \(([\d.]+)/([\d.]+) ms\))?",
                         p)
            if not m:
                continue
            if m.group(4):
                cells[m.group(1)] = (float(m.group(4)), float(m.group(5)))
            else:
                cells[m.group(1)] = (flop / float(m.group(2)) / 1e9,
                                     2.5 * flop / float(m.group(3)) / 1e9)
        rows[shape] = (flop, cells)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--min-row", type=float, default=0.97)
    ap.add_argument("--min-mean", type=float, default=0.99)
    ap.add_argument("logs", nargs="+")
    a = ap.parse_args()
    runs = [parse(p) for p in a.logs]
    shapes = [s for s in runs[0] if all(s in r for r in runs)]
    mean = lambda f: statistics.mean(f(r) for r in runs)
    print(f"forward + backward, {len(runs)} run(s): TFLOP/s (fwd+bwd = 3.5 x fwd FLOPs), and time"
          " ratios (> 1: new faster)")
    print("| shape | old | new | cuDNN | new/old fwd | bwd | fwd+bwd | new/cuDNN | old/cuDNN |")
    print("|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for s in shapes:
        flop = runs[0][s][0]
        ms = lambda r, n: sum(r[s][1][n])
        tf = lambda n: mean(lambda r: 3.5 * flop / ms(r, n) / 1e9)
        nf = mean(lambda r: r[s][1]["old"][0] / r[s][1]["new"][0])
        nb = mean(lambda r: r[s][1]["old"][1] / r[s][1]["new"][1])
        nfb = mean(lambda r: ms(r, "old") / ms(r, "new"))
        has_cudnn = all("cudnn" in r[s][1] for r in runs)
        vc = lambda n: f"{mean(lambda r: ms(r, 'cudnn') / ms(r, n)):.3f}" if has_cudnn else "-"
        ratios.append(nfb)
        print(f"| {s} | {tf('old'):.1f} | {tf('new'):.1f} | {tf('cudnn') if has_cudnn else math.nan:.1f}"
              f" | {nf:.3f} | {nb:.3f} | {nfb:.3f} | {vc('new')} | {vc('old')} |")
    g = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
    ok = min(ratios) >= a.min_row and g >= a.min_mean
    print(f"{'PASS' if ok else 'FAIL'} speed: new/old fwd+bwd geometric mean {g:.3f} (>= {a.min_mean}),"
          f" lowest row {min(ratios):.3f} (>= {a.min_row})")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
