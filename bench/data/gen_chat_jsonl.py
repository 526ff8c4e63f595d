#!/usr/bin/env python3
"""Writes a synthetic chat JSONL of about --mb megabytes for benchmarking
`fsdpc data prepare` (bench/results/2026-11-23-data-prepare.md). Conversations
have an optional system prompt and 1-4 user/assistant exchanges of 5-150
words drawn from a fixed word list (some non-ASCII), seeded. Standard library
only; write it outside the repository (e.g. /tmp)."""
import argparse, json, random

WORDS = ("the of and to in is that it for on with as was at by be this from or "
         "have an they which one you were her all she there would their we him been has "
         "when who will more no if out so said what up its about into than them can only "
         "other new some could time these two may then do first any my now such like our "
         "over man me even most made after also did many before must through back years "
         "where much your way well down should because each just those people how too "
         "model data train token gradient shard layer batch epoch loss answer question "
         "café naïve über straße 東京 数据 модель données ¿qué? — 12 345 6789 3.14").split()

def sentence(r, lo, hi):
    n = r.randint(lo, hi)
    return " ".join(r.choice(WORDS) for _ in range(n)).capitalize() + r.choice(".?!")

def conversation(r):
    msgs = []
    if r.random() < 0.3:
        msgs.append({"role": "system", "content": sentence(r, 5, 20)})
    for _ in range(r.randint(1, 4)):
        msgs.append({"role": "user", "content": sentence(r, 5, 60)})
        msgs.append({"role": "assistant", "content": sentence(r, 10, 150)})
    return {"messages": msgs}

def write_jsonl(make):
    """Parses --out, --mb, --seed and writes make(rng) lines until --mb."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--mb", type=float, default=200)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    r = random.Random(a.seed)
    limit, size, n = int(a.mb * 1e6), 0, 0
    with open(a.out, "w", encoding="utf-8") as f:
        while size < limit:
            line = json.dumps(make(r), ensure_ascii=False) + "\n"
            f.write(line)
            size += len(line.encode("utf-8"))
            n += 1
    print(f"wrote {a.out}: {n} conversations, {size / 1e6:.1f} MB")

if __name__ == "__main__":
    write_jsonl(conversation)
