#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_tokenizer (tests/fuzz/corpus_tokenizer/):
the repository's small tokenizer.json fixtures and variants of them (the
Metaspace and NFC pipelines, issue 19's three malformed files, hostile
strings), each followed by a NUL byte and a text to encode.
Usage: make_tokenizer_corpus.py (run from anywhere; rewrites the folder)."""
import json
import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "fixtures", "tokenizers")
OUT = os.path.join(HERE, "corpus_tokenizer")
TEXT = "Hello  world! caf\u00e9 \U0001F600 1234567\n<s>x</s><|eot_id|> \u2581a e\u0301".encode()


def load(name):
    with open(os.path.join(FIX, name, "tokenizer.json"), encoding="utf-8") as f:
        return json.load(f)


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    seeds = {}
    l3, l2 = load("llama3-tiny"), load("llama2-tiny")
    seeds["llama3"] = l3
    seeds["llama2"] = l2
    ms = json.loads(json.dumps(l2))
    ms["normalizer"] = None
    ms["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581",
                           "prepend_scheme": "first", "split": True}
    ms["decoder"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first"}
    seeds["metaspace"] = ms
    nfc = json.loads(json.dumps(l3))
    nfc["normalizer"] = {"type": "NFC"}
    seeds["nfc"] = nfc
    base = {"pre_tokenizer": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"}}
    seeds["i19_empty_vocab"] = dict(base, model={"type": "BPE", "vocab": {}, "merges": []},
                                    added_tokens=[{"id": 0, "content": "<s>", "special": True}])
    seeds["i19_no_content"] = dict(base, model={"type": "BPE", "vocab": {"a": 0}, "merges": []},
                                   added_tokens=[{"id": 1, "content": "<s>"}, {"id": 2}])
    seeds["i19_bad_id"] = dict(base, model={"type": "BPE", "vocab": {"a": 0}, "merges": []},
                               added_tokens=[{"id": 1, "content": "<s>"},
                                             {"id": -5, "content": "</s>"}])
    seeds["escape"] = {"model": {"type": "Uni\u001b[31m\ngram", "vocab": []}}
    for name, tj in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(json.dumps(tj, ensure_ascii=False).encode() + b"\0" + TEXT)


if __name__ == "__main__":
    main()
