#!/usr/bin/env python3
"""Writes the seed corpus for fuzz_jinja into corpus_jinja/: the fixture
chat templates, the construct templates of tests/template/compare_jinja2.py
and one template per refusal class. Rerun only to regenerate the seeds."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(HERE, "corpus_jinja")
sys.path.insert(0, os.path.join(ROOT, "tests", "template"))
import compare_jinja2  # noqa: E402

BAD = [
    "{% if x %}never closed",
    "{{ unclosed",
    "{% include 'x' %}",
    "{% extends 'base' %}",
    "{{ x | nosuchfilter }}",
    "{{ x is nosuchtest }}",
    "{% for x in y recursive %}{% endfor %}",
    "{{ f(*args) }}",
    "{% set a, b = 1, 2 %}",
    "{{ raise_exception('boom') }}",
    "{{ undefined_name.attr }}",
    "{{ 'a' + 1 }}",
    "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
    "{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}",
    "{{ '%s' % 1 }}",
    "{% generation %}{{ messages[2].content }}{{ eos_token }}{% endgeneration %}",
    "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}</s>{% endgeneration %}{% else %}{{ m.content }}{% endif %}{% endfor %}",
    "{# unclosed comment",
    "{{ 'bad escape \\N{DASH}' }}",
    "{{ 99999999999999999999 }}",
]


def main():
    os.makedirs(OUT, exist_ok=True)
    k = 0
    fx = os.path.join(ROOT, "tests", "fixtures", "chat_templates")
    for name in sorted(os.listdir(fx)):
        if not os.path.isdir(os.path.join(fx, name)):
            continue
        cfg = json.load(open(os.path.join(fx, name, "tokenizer_config.json"), encoding="utf-8"))
        with open(os.path.join(OUT, f"fixture_{name}"), "w", encoding="utf-8") as f:
            f.write(cfg["chat_template"])
    for src, _ in compare_jinja2.RAW_CASES:
        with open(os.path.join(OUT, f"construct_{k:02d}"), "w", encoding="utf-8") as f:
            f.write(src)
        k += 1
    for i, src in enumerate(BAD):
        with open(os.path.join(OUT, f"bad_{i:02d}"), "w", encoding="utf-8") as f:
            f.write(src)


if __name__ == "__main__":
    main()
