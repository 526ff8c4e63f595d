#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_jsonl (whole dataset files) into
tests/fuzz/corpus_jsonl/: JSONL with LF, CRLF and CR line ends, JSON arrays
(pretty-printed and on one line), gzip, duplicate keys, text after a value,
and chat files with conversations of thousands of turns.

Usage: make_jsonl_corpus.py   (run from anywhere; deterministic)
"""
import gzip
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus_jsonl")


def write(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def conversation(turns, rng):
    msgs = [{"role": "system", "content": "Be brief."}]
    for i in range(turns):
        role = "user" if i % 2 == 0 else "assistant"
        text = " ".join(rng.choice(["turn", "ok", "é", "雨", "\\n", "a b", ""]) for _ in range(3))
        msgs.append({"role": role, "content": "%s %d" % (text, i)})
    return {"messages": msgs}


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = random.Random(43)
    chat = [conversation(3, rng) for _ in range(3)]
    lines = [json.dumps(c, ensure_ascii=False) for c in chat]
    write("chat_lf.jsonl", ("\n".join(lines) + "\n").encode())
    write("chat_crlf.jsonl", ("\r\n".join(lines) + "\r\n\r\n").encode())
    write("chat_cr.jsonl", ("\r".join(lines)).encode())
    write("text.jsonl", b'{"text":"hello"}\n\n{"text":"a\\u0000b","weight":2}\n{"text":"x"} y\n')
    write("dup_keys.jsonl", b'{"text":"a","text":"b","o":{"k":1,"k":[1,{"k":2,"k":3}]}}\n')
    write("two_values.jsonl", b'{"text":"a"}{"text":"b"}\n')
    write("numbers.jsonl", b'{"text":"a","n":[0,-0.5e+3,1E2,01,+1,.5,1.]}\n')
    write("sharegpt.jsonl",
          json.dumps({"conversations": [{"from": "human", "value": "q"},
                                        {"from": "gpt", "value": "a"}]}).encode() + b"\n")
    alpaca = [{"instruction": "Add.", "input": "1 2", "output": "3"},
              {"instruction": "Hi.", "input": "", "output": "hi"}]
    write("alpaca.json", json.dumps(alpaca, indent=4).encode())
    write("array_one_line.json", json.dumps(chat[:2]).encode())
    write("array_bad.json", b'[\r\n {"text":"a"},\r\n {"text":"b",}\r\n] x')
    write("chat.jsonl.gz", gzip.compress(("\n".join(lines) + "\n").encode(), 9, mtime=0))
    # conversations of thousands of turns (one a line, and in an array)
    write("long_2000.jsonl", (json.dumps(conversation(2000, rng)) + "\n").encode())
    write("long_3000_array.json", json.dumps([conversation(3000, rng)]).encode())
    write("long_2500.jsonl.gz",
          gzip.compress((json.dumps(conversation(2500, rng)) + "\n").encode(), 9, mtime=0))


if __name__ == "__main__":
    main()
