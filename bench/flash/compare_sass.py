"""Machine code of the flash plugin's kernels, old against new, without a GPU.

  python3 bench/flash/compare_sass.py OLD_REV [--new DIR] [--old-patch FILE] [--md FILE] [--keep DIR]
  python3 compare_sass.py --so OLD.so NEW.so     (where cuobjdump is: the GPU host)

Compiles every production source (plugins/attention/flash/*.cu) of commit
OLD_REV (git archive into a scratch folder) and of the work tree (or DIR)
with the same nvcc flags as the plugin's CMake build for its one target
(-gencode=arch=compute_90a,code=sm_90a), each to a cubin, and compares, per
kernel:
  - the .text section, byte for byte (Hopper instructions are 16 bytes:
    equal bytes are equal SASS, addresses included), its instruction count,
    and where it differs, how many 16-byte words and which bit fields;
  - ptxas -v: registers, stack, spill stores / loads, barriers;
  - with cuobjdump on the PATH (the GPU host has it; this machine does not):
    the SASS text, addresses stripped, and the first differing lines.
--old-patch applies a patch to the old sources first (old_minus_dead_code.patch:
what the new code left out, so that what remains is the refactoring alone).
--so compares two built plugins instead (their cubins extracted by cuobjdump
-xelf, resources by cuobjdump -res-usage). Kernels are matched by name and
head dim (the template arguments changed from <HD, BN, NC, ST> to a
tile-table type). Prints a Markdown report (and writes it to --md). Exit 0
when every kernel of the old build has a byte-identical counterpart or none
(listed), 1 otherwise."""
import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NVCC = os.environ.get("NVCC", "/usr/local/cuda/bin/nvcc")
# The plugin's CUDA flags (build.ninja of a RelWithDebInfo build: -O2 -g
# touch host code only) with the one real architecture.
FLAGS = ["-O2", "-DNDEBUG", "-DFSDPC_WITH_CUDA=1", "-Icore/include",
         "-gencode=arch=compute_90a,code=sm_90a", "--use_fast_math", "-std=c++17", "-Xptxas=-v"]
SRC = "plugins/attention/flash"


def compile_tree(tree, out):
    """Every .cu of the plugin folder of tree to out/<name>.cubin; returns
    {kernel: ptxas figures} from -Xptxas -v."""
    os.makedirs(out, exist_ok=True)
    srcs = sorted(f for f in os.listdir(os.path.join(tree, SRC)) if f.endswith(".cu"))

    def one(f):
        cub = os.path.join(out, f[:-3] + ".cubin")
        r = subprocess.run([NVCC, *FLAGS, "-cubin", os.path.join(SRC, f), "-o", cub], cwd=tree,
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"{tree}/{SRC}/{f}: nvcc failed:\n{r.stderr}")
        return r.stderr

    with ThreadPoolExecutor(int(os.environ.get("JOBS", "2"))) as ex:
        logs = list(ex.map(one, srcs))
    res = {}
    for log in logs:
        fn = None
        for line in log.splitlines():
            m = re.search(r"Function properties for (\S+)", line)
            if m:
                fn = m.group(1)
                res[fn] = {}
            m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
                          line)
            if fn and m:
                res[fn].update(stack=int(m.group(1)), spill_st=int(m.group(2)),
                               spill_ld=int(m.group(3)))
            m = re.search(r"Used (\d+) registers(?:, used (\d+) barriers)?", line)
            if fn and m:
                res[fn].update(regs=int(m.group(1)), bars=int(m.group(2) or 0))
    return res


def text_sections(path):
    """{function symbol: bytes of its .text.<symbol> section} of an ELF64 cubin."""
    data = open(path, "rb").read()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = secs[shstrndx]
    name = lambda off, tab: data[tab[4] + off:data.index(b"\0", tab[4] + off)].decode()
    out = {}
    for s in secs:
        n = name(s[0], names)
        if n.startswith(".text."):
            out[n[len(".text."):]] = data[s[4]:s[4] + s[5]]
    return out


def key(sym):
    """(kernel name, head dim) of a mangled kernel symbol: the first integer
    template argument, which is the head dim in every template of the
    plugin, old and new."""
    m = re.match(r"_Z(\d+)", sym)
    if not m:
        return (sym, "")
    name = sym[len(m.group(0)):len(m.group(0)) + int(m.group(1))]
    hd = re.search(r"Li(\d+)E", sym)
    return (name, hd.group(1) if hd else "")


def bit_fields(a, b):
    """How two equal-length code sections differ: the count of differing
    16-byte words, the bit ranges where they differ, and the opcode fields
    (bits 0-11) of those words."""
    mask = 0
    n = 0
    ops = set()
    for i in range(0, len(a), 16):
        w = int.from_bytes(a[i:i + 16], "little")
        x = w ^ int.from_bytes(b[i:i + 16], "little")
        if x:
            mask |= x
            n += 1
            ops.add(w & 0xFFF)
    bits = [i for i in range(128) if mask >> i & 1]
    runs = []
    for i in bits:
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    fields = ",".join(f"{lo}-{hi}" if lo != hi else f"{lo}" for lo, hi in runs)
    return n, fields, " ".join(f"{o:#05x}" for o in sorted(ops)[:6]) + (" ..." if len(ops) > 6 else "")


def cuobjdump():
    return shutil.which("cuobjdump") or ("/usr/local/cuda/bin/cuobjdump"
                                         if os.path.exists("/usr/local/cuda/bin/cuobjdump") else None)


def sass(cubin):
    """{function: [instruction text]} by cuobjdump, or None without it."""
    exe = cuobjdump()
    if not exe:
        return None
    out, fn = {}, None
    for line in subprocess.run([exe, "-sass", cubin], capture_output=True, text=True).stdout.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            fn = m.group(1)
            out[fn] = []
            continue
        m = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(.*?);", line)
        if fn and m:
            out[fn].append(re.sub(r"\s+", " ", m.group(1)))
    return out


def extract(so, work):
    """The cubins of a built plugin into work (cuobjdump -xelf), and
    {kernel: figures} from cuobjdump -res-usage."""
    os.makedirs(work, exist_ok=True)
    subprocess.run([cuobjdump(), "-xelf", "all", os.path.abspath(so)], cwd=work, check=True,
                   capture_output=True)
    figs, fn = {}, None
    out = subprocess.run([cuobjdump(), "-res-usage", so], capture_output=True, text=True).stdout
    for line in out.splitlines():
        m = re.search(r"Function (\S+):", line)
        if m:
            fn = m.group(1)
            continue
        m = re.search(r"REG:(\d+) STACK:(\d+).*LOCAL:(\d+)", line)
        if fn and m:
            # LOCAL (bytes of local memory a thread) stands in for the spills.
            figs[fn] = dict(regs=int(m.group(1)), stack=int(m.group(2)), spill_st=int(m.group(3)),
                            spill_ld="local")
    return figs


def collect(tree, work, reuse=False, so=None):
    """{(kernel, HD): (symbol, code, ptxas figures, SASS text)} of a tree's
    cubins; reuse: those already in work (from --keep) instead of compiling."""
    stamp = os.path.join(work, "ptxas.json")
    if so:
        figs = extract(so, work)
    elif reuse and os.path.exists(stamp):
        figs = json.load(open(stamp))
    else:
        figs = compile_tree(tree, work)
        json.dump(figs, open(stamp, "w"))
    code, text = {}, {}
    for f in sorted(os.listdir(work)):
        if f.endswith(".cubin"):
            for sym, b in text_sections(os.path.join(work, f)).items():
                code[sym] = b
            s = sass(os.path.join(work, f))
            if s:
                text.update(s)
    return {key(s): (s, code[s], figs.get(s, {}), text.get(s)) for s in code}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("old_rev", nargs="?")
    ap.add_argument("--so", nargs=2, metavar=("OLD", "NEW"), help="compare two built plugins")
    ap.add_argument("--new", default=ROOT, help="source tree of the new build (default: this one)")
    ap.add_argument("--md", help="also write the report here")
    ap.add_argument("--keep", help="keep the cubins in this folder")
    ap.add_argument("--old-patch", help="apply this patch (-p1) to the old sources first")
    a = ap.parse_args()
    work = a.keep or tempfile.mkdtemp(prefix="flash-sass-")
    if a.so:
        if not cuobjdump():
            sys.exit("compare_sass.py --so: no cuobjdump (on the PATH or in /usr/local/cuda/bin)")
        old = collect(None, os.path.join(work, "old"), so=a.so[0])
        new = collect(None, os.path.join(work, "new"), so=a.so[1])
        return report(a, old, new, f"{a.so[0]} (old) and {a.so[1]} (new), cubins of the plugins", work)
    if not a.old_rev:
        ap.error("OLD_REV or --so")
    old_tree = os.path.join(work, "old-src")
    # --keep: the old build is reused while it is of the same commit.
    rev_file = os.path.join(work, "old", "rev")
    tag = a.old_rev + (" + " + os.path.abspath(a.old_patch) if a.old_patch else "")
    reuse = bool(a.keep) and os.path.exists(rev_file) and open(rev_file).read() == tag
    if not reuse:
        shutil.rmtree(os.path.join(work, "old"), ignore_errors=True)
        shutil.rmtree(old_tree, ignore_errors=True)
        os.makedirs(old_tree)
        arch = subprocess.run(["git", "-C", ROOT, "archive", a.old_rev, SRC, "plugins/common",
                               "core/include"], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", old_tree], input=arch, check=True)
        if a.old_patch:
            subprocess.run(["patch", "-s", "-p1", "-d", old_tree, "-i", os.path.abspath(a.old_patch)],
                           check=True)
    old = collect(old_tree, os.path.join(work, "old"), reuse)
    open(rev_file, "w").write(tag)
    shutil.rmtree(os.path.join(work, "new"), ignore_errors=True)
    new = collect(a.new, os.path.join(work, "new"))
    rev = subprocess.run(["git", "-C", a.new, "describe", "--always", "--dirty"], capture_output=True,
                         text=True).stdout.strip()
    what = f"{tag} (old) and {rev} (new), nvcc {' '.join(FLAGS)}, each .cu to a cubin"
    return report(a, old, new, what, work)


def report(a, old, new, what, work):
    lines = [f"Kernels of {what}.",
             "", "| kernel | HD | instructions old / new | .text | regs | stack | spills st/ld | barriers |",
             "|---|---|---|---|---|---|---|---|"]
    bad = 0
    detail = []
    for k in sorted(set(old) | set(new)):
        o, n = old.get(k), new.get(k)
        if not n:
            lines.append(f"| {k[0]} | {k[1]} | {len(o[1]) // 16} / - | only in old | | | | |")
            continue
        if not o:
            lines.append(f"| {k[0]} | {k[1]} | - / {len(n[1]) // 16} | only in new | | | | |")
            continue
        if o[1] == n[1]:
            verdict = "identical"
        elif len(o[1]) == len(n[1]):
            cnt, fields, ops = bit_fields(o[1], n[1])
            verdict = f"{cnt} words differ (bits {fields}; opcode fields {ops})"
            bad += 1
        else:
            verdict = "differs (length)"
            bad += 1
        def pair(*ks):
            x, y = ("-".join(str(f.get(q, "?")) for q in ks) for f in (o[2], n[2]))
            return x if x == y else f"**{x} -> {y}**"
        lines.append(f"| {k[0]} | {k[1]} | {len(o[1]) // 16} / {len(n[1]) // 16} | {verdict} |"
                     f" {pair('regs')} | {pair('stack')} | {pair('spill_st', 'spill_ld')} |"
                     f" {pair('bars')} |")
        if o[1] != n[1] and o[3] is not None and n[3] is not None:
            strip = lambda xs: [re.sub(r"c\[0x0\]\[0x[0-9a-f]+\]", "c[0x0][P]", x) for x in xs]
            same_mod_params = strip(o[3]) == strip(n[3])
            diff = [f"    {i}: {x}  |  {y}" for i, (x, y) in enumerate(zip(o[3], n[3])) if x != y]
            detail.append(f"- {k[0]} HD {k[1]}: {len(diff)} SASS lines differ"
                          f"{' (only kernel-parameter offsets c[0x0][...])' if same_mod_params else ''}")
            detail += diff[:12]
    text = "\n".join(lines + ([""] + detail if detail else []))
    print(text)
    if a.md:
        with open(a.md, "w") as f:
            f.write(text + "\n")
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
