#!/usr/bin/env python3
"""fsdpc's tokenizers against Hugging Face's, on every fixture tokenizer.

Run on a host with the `tokenizers` (and optionally `transformers`) Python
packages, from the repository root, after building fsdpc (only the CPU
executable is used: on the GPU host, carry it with its runtime libraries,
e.g. scripts/gpu/carry.sh, whose runtime libraries include libsentencepiece and
libunistring, about 3 MB, and pass --fsdpc to it):

    python3 tests/gpu/check_tokenizers.py [--fsdpc build/bin/fsdpc]
        [--lines 3000] [--out DIR] [NAME ...]

For every folder tests/fixtures/tokenizers/make_hub.py writes (Llama 2 chat,
Llama 3 / 3.1 / 3.2 Instruct, Mistral Instruct v0.1 and v0.3, Qwen2.5
Instruct, Zephyr; the *-spm folders hold only tokenizer.model), over a large
varied text (gen_varied.py: unicode, whitespace runs, digits, code, special
tokens in the text, lone spaces) line by line and as one whole text:

  ids      `fsdpc data encode --tokenizer DIR --escaped-lines F --offsets`
           against tokenizers.Tokenizer.from_file(tokenizer.json)
           .encode(text, add_special_tokens=False).ids  (plain `tokenizers`,
           the reference the acceptance names; fsdpc then reads a copy of
           tokenizer.json alone, without tokenizer_config.json, since
           transformers 5 rebuilds a LlamaTokenizer's pipeline from the
           config); for *-spm folders against transformers' AutoTokenizer
           for the folder as shipped, when it loads, else reported as skipped
  offsets  fsdpc's byte ranges against HF's offset_mapping turned into bytes
  folder   fsdpc on the folder (tokenizer_config.json read) against
           AutoTokenizer(text, add_special_tokens=False)
  special  `--add-special` (BOS/EOS as add_bos_token/add_eos_token say)
           against transformers' AutoTokenizer(text) with
           add_special_tokens=True, when transformers is there

Prints one line per tokenizer and check, PASS or FAIL with the first
difference (line number, text, ids around it), and exits 1 if any FAIL.
With --out, writes the same report to DIR/check_tokenizers.txt.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIX = os.path.join(ROOT, "tests", "fixtures", "tokenizers")
sys.path.insert(0, FIX)
import gen_varied  # noqa: E402
import make_hub  # noqa: E402

REPORT = []


def say(line):
    print(line, flush=True)
    REPORT.append(line)


def unescape(line):
    out, i = [], 0
    while i < len(line):
        c = line[i]
        if c == "\\" and i + 1 < len(line):
            out.append({"n": "\n", "r": "\r", "t": "\t", "\\": "\\"}[line[i + 1]])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def fsdpc_encode(fsdpc, folder, path, extra):
    r = subprocess.run([fsdpc, "data", "encode", "--tokenizer", folder, *extra, path],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip())
    rows = []
    for line in r.stdout.rstrip("\n").split("\n"):
        ids, offs = [], []
        for tok in line.split():
            if ":" in tok:
                i, span = tok.split(":")
                a, b = span.split("-")
                ids.append(int(i))
                offs.append((int(a), int(b)))
            else:
                ids.append(int(tok))
        rows.append((ids, offs))
    return rows


def byte_offsets(text, offsets):
    """HF char offsets -> byte offsets."""
    pos = [0]
    for ch in text:
        pos.append(pos[-1] + len(ch.encode("utf-8")))
    return [(pos[a], pos[b]) for a, b in offsets]


def first_diff(a, b):
    for k in range(min(len(a), len(b))):
        if a[k] != b[k]:
            return k
    return min(len(a), len(b)) if len(a) != len(b) else -1


def compare(name, what, texts, got, want):
    """got/want: lists of sequences per text; reports the first difference."""
    bad = [i for i in range(len(texts)) if got[i] != want[i]]
    if not bad:
        say(f"PASS {name:24s} {what:8s} {len(texts)} texts")
        return True
    i = bad[0]
    k = first_diff(got[i], want[i])
    say(f"FAIL {name:24s} {what:8s} {len(bad)} of {len(texts)} texts differ; first: text {i} "
        f"{texts[i][:120]!r} at position {k}: fsdpc {got[i][max(0, k - 3):k + 4]} "
        f"vs HF {want[i][max(0, k - 3):k + 4]}")
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fsdpc", default=os.path.join(ROOT, "build", "bin", "fsdpc"))
    ap.add_argument("--lines", type=int, default=3000)
    ap.add_argument("--out")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    try:
        import tokenizers
    except ImportError:
        raise SystemExit("check_tokenizers.py: needs the `tokenizers` Python package")
    try:
        import transformers
    except ImportError:
        transformers = None
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        hub = os.path.join(tmp, "hub")
        names = args.names or list(make_hub.FOLDERS)
        make_hub.main(["make_hub.py", hub, *names])
        lines_path = os.path.join(tmp, "varied.txt")
        old = sys.stdout
        with open(lines_path, "w", encoding="utf-8") as f:
            sys.stdout = f
            gen_varied.main(["gen_varied.py", str(args.lines), "23"])
        sys.stdout = old
        raw = [ln for ln in open(lines_path, encoding="utf-8").read().split("\n")
               if ln and not ln.startswith("#")]
        texts = [unescape(ln) for ln in raw]
        whole_path = os.path.join(tmp, "whole.txt")
        whole = "\n".join(texts)
        with open(whole_path, "w", encoding="utf-8") as f:
            f.write(whole)
        say(f"tokenizers {tokenizers.__version__}, transformers "
            f"{transformers.__version__ if transformers else 'absent'}; {len(texts)} texts, "
            f"{len(whole.encode())} bytes")
        for name in names:
            folder = os.path.join(hub, name)
            tj = os.path.join(folder, "tokenizer.json")
            try:
                # The tokenizer.json as shipped, without tokenizer_config.json:
                # what plain `tokenizers` reads.
                alone = folder
                if os.path.exists(tj):
                    alone = os.path.join(tmp, name + "-json-only")
                    os.makedirs(alone, exist_ok=True)
                    shutil.copyfile(tj, os.path.join(alone, "tokenizer.json"))
                rows = fsdpc_encode(args.fsdpc, alone, lines_path, ["--offsets",
                                                                    "--escaped-lines"])
                whole_rows = fsdpc_encode(args.fsdpc, alone, whole_path, ["--in"])
                # The folder as transformers reads it (tokenizer_config.json).
                folder_rows = fsdpc_encode(args.fsdpc, folder, lines_path, ["--escaped-lines"])
                special = fsdpc_encode(args.fsdpc, folder, lines_path, ["--add-special",
                                                                        "--escaped-lines"])
            except RuntimeError as e:
                say(f"FAIL {name:24s} fsdpc    {e}")
                ok = False
                continue
            if os.path.exists(tj):
                hf = tokenizers.Tokenizer.from_file(tj)
                encs = [hf.encode(t, add_special_tokens=False) for t in texts]
                ok &= compare(name, "ids", texts, [r[0] for r in rows], [e.ids for e in encs])
                ok &= compare(name, "offsets", texts, [r[1] for r in rows],
                              [byte_offsets(t, e.offsets) for t, e in zip(texts, encs)])
                ok &= compare(name, "whole", ["(whole text)"], [whole_rows[0][0]],
                              [hf.encode(whole, add_special_tokens=False).ids])
            auto = None
            if transformers:
                try:
                    auto = transformers.AutoTokenizer.from_pretrained(
                        folder, use_fast=os.path.exists(tj))
                except Exception as e:  # noqa: BLE001 (report any loader failure)
                    say(f"SKIP {name:24s} special  transformers could not load it: "
                        f"{str(e).splitlines()[0][:160]}")
            if auto is not None:
                # fsdpc on the folder as transformers reads it, no special tokens added.
                ok &= compare(name, "folder", texts, [r[0] for r in folder_rows],
                              [auto(t, add_special_tokens=False)["input_ids"]
                               for t in texts])
                try:
                    want = [auto(t, add_special_tokens=True)["input_ids"] for t in texts]
                except BaseException as e:  # noqa: BLE001 (a Rust panic is a BaseException)
                    say(f"FAIL {name:24s} special  transformers failed on the folder: "
                        f"{str(e).splitlines()[0][:160]}")
                    ok = False
                    continue
                ok &= compare(name, "special", texts, [r[0] for r in special], want)
            elif not os.path.exists(tj):
                say(f"SKIP {name:24s} ids      no tokenizer.json and no transformers slow "
                    "tokenizer to compare with")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "check_tokenizers.txt"), "w") as f:
            f.write("\n".join(REPORT) + "\n")
    say("ALL PASS" if ok else "SOME FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
