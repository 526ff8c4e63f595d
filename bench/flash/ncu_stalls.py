"""Where a kernel's warps wait, from ncu's sampled warp stalls per SASS
instruction: the source page that `SOURCE=1 bash run_ncu.sh` writes
(ncu -i src.ncu-rep --page source --csv --print-source sass), one block per
kernel. Prints, per kernel, the stall reasons' shares of all samples, the
shares by opcode, and the N instructions with the most samples (index in
the listing, share, times executed, the instruction, its three largest
reasons).

  python3 ncu_stalls.py src_sass.csv [N]"""
import collections
import csv
import sys

ALL = "Warp Stall Sampling (All Samples)"


def kernels(path):
    out, cur, hdr = [], None, None
    for r in csv.reader(open(path)):
        if not r:
            continue
        if r[0] == "Kernel Name":
            cur = {"name": r[1], "ins": []}
            out.append(cur)
        elif r[0] == "Address":
            hdr = r
        elif cur is not None and hdr:
            cur["ins"].append(dict(zip(hdr, r)))
    return out, hdr


def opcode(sass):
    words = sass.split()
    if not words:
        return "?"
    w = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
    return w.split(".")[0]


def main(path, top):
    ks, hdr = kernels(path)
    reasons = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    for k in ks:
        ins = k["ins"]
        tot = sum(int(i[ALL]) for i in ins) or 1
        print(f"== {k['name'][:70]}: {len(ins)} instructions, {tot} samples")
        rs = {r: sum(int(i[r]) for i in ins) for r in reasons}
        print("   reasons: " + ", ".join(f"{r[6:]} {v / tot * 100:.1f}%" for r, v in
                                         sorted(rs.items(), key=lambda x: -x[1]) if v / tot > 0.005))
        ops = collections.Counter()
        for i in ins:
            ops[opcode(i["Source"].strip())] += int(i[ALL])
        print("   opcodes: " + ", ".join(f"{o} {v / tot * 100:.1f}%" for o, v in ops.most_common(14)))
        for idx, i in sorted(enumerate(ins), key=lambda x: -int(x[1][ALL]))[:top]:
            main3 = sorted(((int(i[r]), r[6:]) for r in reasons), reverse=True)[:3]
            print(f"   {idx:5d} {int(i[ALL]) / tot * 100:5.2f}% x{i['Instructions Executed']:>9} "
                  f"{i['Source'].strip()[:58]:58s} " + " ".join(f"{n}:{v}" for v, n in main3 if v))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 30)
