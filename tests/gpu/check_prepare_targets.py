#!/usr/bin/env python3
"""Checks `fsdpc data prepare` against Hugging Face transformers on a chat
JSONL: the token ids of every conversation and its assistant-only loss mask.

For each conversation (OpenAI `messages` or ShareGPT `conversations`), the
reference renders it with `tokenizer.apply_chat_template` and derives the
target spans of the text:
  * with --method generation (templates with {% generation %} blocks):
    `return_assistant_tokens_mask=True`;
  * with --method prefix (default; any template): for each assistant message
    i, render messages[:i] with add_generation_prompt=True and messages[:i+1]
    without; the text added is that turn. Its span starts where the message's
    content starts in it and ends at the end of the added text without
    trailing whitespace: the content and the end-of-turn marker the template
    writes after it (e.g. "Paris<|im_end|>", "Paris<|eot_id|>", "Paris </s>"),
    the rule of docs/data.md "The mask rule" (found there without prefix
    renders, so the two derivations check each other).
The full text is tokenized with add_special_tokens=False and offsets; a token
is a target when its character range overlaps a span (fsdpc's rule, in
bytes). Then `fsdpc data prepare` runs on the same file and its token file is
read back (format: docs/data.md) and compared example by example.

Usage (on a host with transformers; fsdpc built there or carried):
  python3 tests/gpu/check_prepare_targets.py --jsonl chat.jsonl \
      --model tests/fixtures/chat/llama3 --fsdpc build/bin/fsdpc [--method prefix]
Prints the reference and fsdpc target counts (the number to compare with the
"target tokens" a training run on this data logs before its first step) and
exits 1 on any difference."""
import argparse, json, os, struct, subprocess, sys, tempfile

ROLE = {"system": "system", "user": "user", "assistant": "assistant", "human": "user",
        "gpt": "assistant"}


def conversations(path):
    opener = open
    if path.endswith(".gz"):
        import gzip
        opener = gzip.open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            obj = json.loads(line)
            msgs = obj.get("messages", obj.get("conversations"))
            out = []
            for m in msgs:
                role = m.get("role", m.get("from"))
                content = m.get("content", m.get("value"))
                out.append({"role": ROLE[role], "content": content,
                            "train": m.get("train", None if "weight" not in m else m["weight"] == 1)})
            yield out


def spans_prefix(tok, msgs, train_on):
    plain = [{"role": m["role"], "content": m["content"]} for m in msgs]
    if train_on == "all":  # fsdpc: the whole rendered text is one span
        full = tok.apply_chat_template(plain, tokenize=False)
        return full, [(0, len(full))]
    last = max((i for i, m in enumerate(msgs) if m["role"] == "assistant"), default=-1)
    spans = []
    for i, m in enumerate(msgs):
        want = ((train_on == "assistant" and m["role"] == "assistant")
                or (train_on == "last_assistant" and i == last))
        if m["train"] is False:  # "train": false / "weight": 0 removes a turn
            want = False
        if not want:
            continue
        if m["role"] == "assistant":
            a = tok.apply_chat_template(plain[:i], tokenize=False, add_generation_prompt=True)
        else:
            a = tok.apply_chat_template(plain[:i], tokenize=False) if i else ""
        b = tok.apply_chat_template(plain[:i + 1], tokenize=False)
        if not b.startswith(a):
            raise SystemExit(f"prefix rendering does not extend: {a!r} vs {b!r}")
        added = b[len(a):]
        at = added.find(m["content"]) if m["content"] else 0
        if at < 0:  # templates that trim the content (Llama 3's |trim, Llama 2's strip())
            at = added.find(m["content"].strip()) if m["content"].strip() else 0
        if at < 0:
            raise SystemExit(f"content {m['content']!r} not found in the rendered turn {added!r}")
        spans.append((len(a) + at, len(a) + len(added.rstrip())))
    full = tok.apply_chat_template(plain, tokenize=False)
    return full, spans


def reference(tok, msgs, method, train_on):
    if method == "generation":
        plain = [{"role": m["role"], "content": m["content"]} for m in msgs]
        r = tok.apply_chat_template(plain, tokenize=True, return_dict=True,
                                    return_assistant_tokens_mask=True)
        return list(r["input_ids"]), [int(x) for x in r["assistant_masks"]]
    text, spans = spans_prefix(tok, msgs, train_on)
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    mask = []
    for a, b in enc["offset_mapping"]:
        hit = any((s < b and a < e) if b > a else (s <= a < e) for s, e in spans)
        mask.append(int(hit))
    return list(enc["input_ids"]), mask


def read_tokfile(path):
    data = open(path, "rb").read()
    magic, version, width, vocab, eos, flags = struct.unpack_from("<8sIIIII", data, 0)
    n_tokens, n_docs = struct.unpack_from("<QQ", data, 32)
    assert magic == b"FSDPCTOK", magic
    fmt = "<%d%s" % (n_tokens, "H" if width == 2 else "I")
    ids = struct.unpack_from(fmt, data, 64)
    at = 64 + ((n_tokens * width + 7) // 8) * 8
    off = struct.unpack_from("<%dQ" % (n_docs + 1), data, at)
    at += 8 * (n_docs + 1)
    mbytes = data[at:at + (n_tokens + 7) // 8] if flags & 1 else None
    docs = []
    for d in range(n_docs):
        a, b = off[d], off[d + 1]
        m = [(mbytes[i >> 3] >> (i & 7)) & 1 if mbytes else 1 for i in range(a, b)]
        docs.append((list(ids[a:b]), m))
    return docs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jsonl", required=True)
    ap.add_argument("--model", required=True, help="folder with tokenizer.json and the template")
    ap.add_argument("--fsdpc", default="build/bin/fsdpc")
    ap.add_argument("--method", choices=["prefix", "generation"], default="prefix")
    ap.add_argument("--train-on", choices=["assistant", "last_assistant", "all"],
                    default="assistant")
    ap.add_argument("--show", type=int, default=3, help="differences to print")
    a = ap.parse_args()
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(a.model)
    ref = [reference(tok, msgs, a.method, a.train_on) for msgs in conversations(a.jsonl)]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "p.tok")
        r = subprocess.run([a.fsdpc, "data", "prepare", "--in", a.jsonl, "--format", "chat",
                            "--tokenizer", a.model, "--train-on", a.train_on, "--out", out],
                           capture_output=True, text=True)
        print(r.stdout.strip())
        if r.returncode != 0:
            print(r.stderr.strip())
            return 1
        got = read_tokfile(out)
    ref_t = sum(sum(m) for _, m in ref)
    got_t = sum(sum(m) for _, m in got)
    print(f"reference ({a.method}): {len(ref)} conversations, {sum(len(i) for i, _ in ref)} "
          f"tokens, {ref_t} target tokens")
    print(f"fsdpc:                 {len(got)} conversations, {sum(len(i) for i, _ in got)} "
          f"tokens, {got_t} target tokens")
    bad = 0
    if len(ref) != len(got):
        print(f"DIFFER: {len(ref)} conversations vs {len(got)}")
        return 1
    for k, ((ri, rm), (gi, gm)) in enumerate(zip(ref, got)):
        if ri != gi or rm != gm:
            bad += 1
            if bad <= a.show:
                what = "ids" if ri != gi else "mask"
                j = next(j for j in range(min(len(ri), len(gi)) + 1)
                         if j >= min(len(ri), len(gi)) or (ri[j], rm[j]) != (gi[j], gm[j]))
                print(f"DIFFER conversation {k} ({what}) at token {j}: reference "
                      f"{list(zip(ri[j:j + 6], rm[j:j + 6]))} fsdpc {list(zip(gi[j:j + 6], gm[j:j + 6]))}")
    print("identical ids and masks on every conversation" if not bad else
          f"{bad} of {len(ref)} conversations differ")
    print(f"a run trained on this data logs 'data: ... {ref_t} target tokens' before its first "
          "step when no conversation is longer than data.seq_len (else see its truncation line)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
