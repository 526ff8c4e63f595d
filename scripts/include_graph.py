#!/usr/bin/env python3
"""The include graph of core/ (src/ and cli/): what runs against the layers.

Prints three lists, each with a count:
  upward    includes from a folder into a folder above it in LAYERS (a lower
            layer must not know a higher one), and includes of train/ from
            outside train/, api/ and cli/
  folder circles   cycles between folders (strongly connected folders)
  module circles   cycles between modules, a module being a .c with its .h
                   (a.c includes b.h and b.c includes a.h)
Exit 0 always unless --check is given: then exit 1 when an upward include or
a folder circle exists (module circles inside one folder are reported only).

Usage: scripts/include_graph.py [--check] [ROOT]   (ROOT: the repository)
"""
import os
import re
import sys
from collections import defaultdict

# Bottom to top: a folder may include its own and lower folders only. Folders
# on one line are peers (neither includes the other).
LAYERS = [
    ["util"],
    ["template", "io", "quant"],
    ["config"],
    ["plugin"],
    ["dist", "data", "obs"],
    ["ops"],
    ["model"],
    ["runplan"],
    ["fsdp"],
    ["ckpt", "plan"],
    ["infer"],
    ["train"],
    ["bench"],
    ["api"],
    ["cli"],
]
# Upward includes the check lets pass: none. (The two of session 14 are
# gone: the families' table moved from model/ into config/family.c, which
# the config reads; the wrap plan, the optimizer's state format and
# FSDPC_KEEP_* moved from fsdp/ into runplan/, which the engine reads.)
ALLOWED_UP = set()

# train/ is the session: only these may include it.
TRAIN_USERS = {"train", "api", "cli"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
EXTS = (".c", ".h", ".cu", ".cuh", ".cc")


def folder_of(rel):
    """core/src/ops/cuda/x.cu -> ops; core/cli/x.c -> cli."""
    parts = rel.split("/")
    if parts[1] == "cli":
        return "cli"
    return parts[2]


def collect(root):
    files = {}
    for base in ("core/src", "core/cli"):
        for dirpath, _, names in os.walk(os.path.join(root, base)):
            for n in names:
                if n.endswith(EXTS):
                    p = os.path.join(dirpath, n)
                    files[os.path.relpath(p, root)] = p
    edges = defaultdict(set)
    for rel, path in files.items():
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for inc in INCLUDE.findall(text):
            here = os.path.normpath(os.path.join(os.path.dirname(rel), inc))
            for cand in (here, "core/src/" + inc, "core/cli/" + inc):
                if cand in files:
                    edges[rel].add(cand)
                    break
    return files, edges


def sccs(nodes, edges):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in edges.get(v, ()):
                    out.append(sorted(comp))
    return out


def main(argv):
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    root = args[0] if args else os.path.join(os.path.dirname(__file__), "..")
    files, edges = collect(root)
    rank = {f: i for i, layer in enumerate(LAYERS) for f in layer}

    upward, allowed = [], []
    for src in sorted(edges):
        fs = folder_of(src)
        for dst in sorted(edges[src]):
            fd = folder_of(dst)
            if fs == fd:
                continue
            bad = rank.get(fd, -1) > rank.get(fs, -1) or (fd == "train" and fs not in TRAIN_USERS)
            if bad:
                (allowed if (fs, fd) in ALLOWED_UP else upward).append(f"{src} -> {dst}")
    print(f"upward includes: {len(upward)}")
    for u in upward:
        print("  " + u)
    if allowed:
        print(f"known upward includes (ALLOWED_UP): {len(allowed)}")
        for u in allowed:
            print("  " + u)

    fedges = defaultdict(set)
    for src, dsts in edges.items():
        for dst in dsts:
            fs, fd = folder_of(src), folder_of(dst)
            if fs != fd and (fs, fd) not in ALLOWED_UP:
                fedges[fs].add(fd)
    folders = {folder_of(f) for f in files}
    fcirc = sccs(folders, fedges)
    print(f"folder circles: {len(fcirc)}")
    for c in fcirc:
        print("  " + " <-> ".join(c))

    def module(f):
        return os.path.splitext(f)[0]

    medges = defaultdict(set)
    for src, dsts in edges.items():
        for dst in dsts:
            if module(src) != module(dst):
                medges[module(src)].add(module(dst))
    circ = sccs({module(f) for f in files}, medges)
    print(f"module circles: {len(circ)}")
    for c in circ:
        print("  " + " <-> ".join(c))
    return 1 if check and (upward or fcirc) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
