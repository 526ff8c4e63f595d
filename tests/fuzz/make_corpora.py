#!/usr/bin/env python3
"""Writes the seed corpora of the config, token-file and store fuzzers.

Usage: make_corpora.py FSDPC   (FSDPC: the fsdpc executable, for token files)
Run from anywhere; writes tests/fuzz/corpus_{config,tokfile,store}/.
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def write(d, name, data):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def config_seeds():
    d = os.path.join(HERE, "corpus_config")
    base = (b"model: {vocab_size: 64, hidden_size: 16, intermediate_size: 32, "
            b"num_hidden_layers: 2, num_attention_heads: 4}\n")
    write(d, "minimal", base)
    write(d, "overrides", base + b"\0optim.lr=1e-3\nfsdp.sharding_strategy=NO_SHARD\ntrain.threads=2")
    write(d, "narrow", base + b"\0model.vocab_size=4294967555")
    write(d, "opts", base + b"optim: {name: adamw, options: {foo: 1, bar: [1, 2]}}\n"
          b"checkpoint: {dir: ckpt, save_steps: 5, keep: 1}\n")
    write(d, "anchors", b"a: &x {vocab_size: 64}\nmodel: *x\n")
    write(d, "peft", base + b"peft: {method: lora, r: 4, alpha: 8, dropout: 0.1, "
          b"target_modules: [q_proj, v_proj, down_proj], rslora: true}\n")
    for name in ("tiny-cpu.yaml",):
        with open(os.path.join(ROOT, "configs", name), "rb") as f:
            write(d, name, f.read())
    fx = os.path.join(ROOT, "tests", "config", "fixtures")
    for name in sorted(os.listdir(fx)) if os.path.isdir(fx) else []:
        p = os.path.join(fx, name)
        if os.path.isfile(p) and os.path.getsize(p) < 8192:
            with open(p, "rb") as f:
                write(d, "fixture_" + name, f.read())


def tokfile_seeds(fsdpc):
    d = os.path.join(HERE, "corpus_tokfile")
    tmp = tempfile.mkdtemp()
    try:
        for task, n in (("qa", 3), ("copy", 2)):
            out = os.path.join(tmp, task + ".tok")
            subprocess.run([fsdpc, "data", "synth", "--task", task, "--n", str(n), "--seed", "1",
                            "--out", out], check=True, stdout=subprocess.DEVNULL)
            with open(out, "rb") as f:
                img = f.read()
            write(d, task, img + b"\0")           # CRCs kept as written
            write(d, task + "_fix", img + b"\1")  # CRCs recomputed by the harness
            write(d, task + "_trunc", img[: len(img) // 2] + b"\1")
            bad = bytearray(img)
            bad[16:20] = struct.pack("<I", 2)  # vocab_size 2: ids out of range
            write(d, task + "_vocab", bytes(bad) + b"\1")
    finally:
        shutil.rmtree(tmp)
    write(d, "empty", b"")
    write(d, "magic_only", b"FSDPCTOK" + b"\0" * 56 + b"\1")


def frame(op, key, payload, token=b"tok"):
    body = bytes([op, len(token)]) + token + struct.pack("<I", len(key)) + key + payload
    return struct.pack("<I", len(body)) + body


def store_seeds():
    d = os.path.join(HERE, "corpus_store")
    SET, GET, ADD, CHECK, PING = 1, 2, 3, 4, 5
    i64 = lambda v: struct.pack("<q", v)
    write(d, "ping", frame(PING, b"", b""))
    write(d, "set_get", frame(SET, b"a", b"hello") + frame(GET, b"a", i64(100)))
    write(d, "add", frame(ADD, b"n", i64(5)) + frame(ADD, b"n", i64(-7)) + frame(CHECK, b"n", b""))
    write(d, "add_overflow", frame(ADD, b"n", i64(2**63 - 1)) + frame(ADD, b"n", i64(1)))
    write(d, "wait_then_set", frame(GET, b"k", i64(50)) + b"\xff\xfe" + frame(SET, b"k", b"v"))
    write(d, "three", frame(SET, b"x", b"1") + b"\xff\xfe" + frame(GET, b"x", i64(0)) +
          b"\xff\xfe" + frame(SET, b"x", b"2", token=b"bad"))
    write(d, "wrong_token", frame(SET, b"fsdpc/dead", b"forged", token=b"other"))
    write(d, "no_token_old", struct.pack("<I", 16) + bytes([SET]) + struct.pack("<I", 10) +
          b"fsdpc/dead" + b"x")
    write(d, "big_value", frame(SET, b"b", b"y" * 5000))
    write(d, "fill", b"".join(frame(SET, b"k%d" % i, b"z" * 4000) for i in range(20)))
    write(d, "bad_len", struct.pack("<I", 0xFFFFFFF0) + b"\x01")
    write(d, "nul_key", frame(SET, b"a\0b", b"v"))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    config_seeds()
    tokfile_seeds(sys.argv[1])
    store_seeds()
