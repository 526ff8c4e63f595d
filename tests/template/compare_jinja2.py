#!/usr/bin/env python3
"""Renders every fixture chat template with Python's jinja2 the way
transformers' apply_chat_template does, and with fsdpc (fsdpc_chat_render),
over a varied conversation set; checks byte-identical text, identical
template errors, and that the assistant target spans are exactly each
trained assistant turn's content (as the template renders it) plus its
end-of-turn text, starting where the turn's content starts.

Also renders a list of small templates covering every supported construct
through both engines (raw mode).

usage: compare_jinja2.py FSDPC_CHAT_RENDER FIXTURES_DIR
Exits non-zero on any difference."""
import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

EPOCH = 1700000000  # strftime_now's pinned clock (local time)


def hf_env():
    """The environment of transformers' _compile_jinja_template."""
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.fromtimestamp(EPOCH).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def special_tokens(cfg):
    out = {}
    for k in ("bos_token", "eos_token", "unk_token", "pad_token"):
        v = cfg.get(k)
        if isinstance(v, dict):
            v = v.get("content")
        if isinstance(v, str):
            out[k] = v
    return out


def hf_render(tmpl, toks, messages, agp):
    return tmpl.render(messages=messages, tools=None, documents=None,
                       add_generation_prompt=agp, **toks)


LONG = ("The quick brown fox jumps over the lazy dog. " * 120).strip()
UNI = "héllo wörld — 你好, Привет 🙂 \u00a0nbsp"


def conversations():
    u = lambda c: {"role": "user", "content": c}
    a = lambda c, **k: dict({"role": "assistant", "content": c}, **k)
    s = lambda c: {"role": "system", "content": c}
    base = [
        [u("Hello")],
        [s("You are terse."), u("Hello")],
        [u("What is 2+2?"), a("4")],
        [s("Be kind."), u("Hi"), a("Hello! How can I help?"), u("Tell me a joke"),
         a("Why did the chicken cross the road?")],
        [u(UNI), a("ça va? Ünïcödé ✓ 日本語 \U0001F600")],
        [u(""), a("")],
        [s(""), u(""), a("")],
        [u("  padded user  \n"), a("\n  padded answer \t\n")],
        [u(LONG), a(LONG + " end")],
        [u("{{ not a tag }} {% if %} <|eot_id|> </s> [INST]"), a("{# x #} <|im_end|> {{ y }}")],
        [u("q1"), a("a1", train=False), u("q2"), a("a2")],
        [u("q1"), a("a1"), u("q2"), a("a2"), u("q3"), a("a3")],
        [s("sys"), u("q1"), a("a1"), u("q2")],
        [u("q1"), u("q2")],  # not alternating: several templates refuse it
        [a("assistant first")],
        [u("line\nbreaks\r\nand\ttabs"), a("multi\nline\n\nanswer")],
        [u("quotes ' \" \\ backslash"), a("'single' \"double\" \\n literal")],
        [u("\u3000\u00a0unicode spaces\u2003 "), a("\u00a0\u2028 answer\u3000\x1f")],
    ]
    out = []
    for msgs in base:
        for agp in (False, True):
            out.append({"messages": msgs, "add_generation_prompt": agp})
    return out


# How each fixture renders an assistant turn: the content transform, the
# end-of-turn text the mask must include, and the text between the end of
# a generation-prompt prefix and the content (the turn's target starts where
# the generation prompt ends, so that text is a target too).
RULES = {
    "llama2-chat": (str.strip, " </s>", " "),
    "llama3-instruct": (str.strip, "<|eot_id|>", ""),
    "llama3.1-instruct": (str.strip, "<|eot_id|>", ""),
    "llama3.2-instruct": (str.strip, "<|eot_id|>", ""),
    "mistral-instruct-v0.1": (lambda c: c, "</s>", ""),
    "mistral-instruct-v0.3": (lambda c: c, " </s>", " "),
    "qwen2.5-instruct": (lambda c: c, "<|im_end|>", ""),
    "zephyr-7b-beta": (lambda c: c, "</s>", ""),
    "gemma3-it": (str.strip, "<end_of_turn>", ""),
}


def run_fsdpc(binary, model_dir, convs, train_on="assistant"):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(convs, f, ensure_ascii=False)
        path = f.name
    try:
        p = subprocess.run([binary, "chat", model_dir, path, str(EPOCH), train_on],
                           capture_output=True, timeout=120)
    finally:
        os.unlink(path)
    if p.returncode != 0:
        raise SystemExit(f"{model_dir}: fsdpc_chat_render failed: {p.stderr.decode()}")
    return json.loads(p.stdout.decode("utf-8"))


def check_fixture(binary, env, model_dir, name):
    cfg = json.load(open(os.path.join(model_dir, "tokenizer_config.json"), encoding="utf-8"))
    tmpl = env.from_string(cfg["chat_template"])
    toks = special_tokens(cfg)
    convs = conversations()
    got = run_fsdpc(binary, model_dir, convs)
    bad = 0
    counts = {"same": 0, "same_error": 0, "spans": 0}
    for k, (conv, res) in enumerate(zip(convs, got)):
        msgs, agp = conv["messages"], conv["add_generation_prompt"]
        try:
            want = hf_render(tmpl, toks, msgs, agp)
            want_err = None
        except jinja2.exceptions.TemplateError as e:
            want, want_err = None, str(e)
        if want_err is not None:
            if "error" not in res or want_err not in res["error"]:
                print(f"FAIL {name} conv {k}: jinja2 raised {want_err!r}, fsdpc gave {res}")
                bad += 1
            else:
                counts["same_error"] += 1
            continue
        if "error" in res:
            print(f"FAIL {name} conv {k}: fsdpc error {res['error']!r}, jinja2 rendered")
            bad += 1
            continue
        if res["text"] != want:
            print(f"FAIL {name} conv {k} agp={agp}: text differs\n jinja2: {want!r}\n fsdpc:  {res['text']!r}")
            bad += 1
            continue
        counts["same"] += 1
        # The mask: spans are byte offsets of the UTF-8 text.
        raw = want.encode("utf-8")
        transform, eot, lead = RULES[name]
        expected = []
        for i, m in enumerate(msgs):
            if m["role"] != "assistant" or m.get("train") is False:
                continue
            prefix = hf_render(tmpl, toks, msgs[:i], True).encode("utf-8") if i else None
            if prefix is None:
                # An assistant message first: the turn starts at its content.
                body = (transform(m["content"]) + eot).encode("utf-8")
                start = raw.find(body)
            else:
                body = (lead + transform(m["content"]) + eot).encode("utf-8")
                start = len(prefix)
            expected.append([start, start + len(body)])
            if raw[start:start + len(body)] != body:
                print(f"FAIL {name} conv {k}: oracle misplaced {body!r} at {start}")
                bad += 1
        if res["spans"] != expected:
            print(f"FAIL {name} conv {k} agp={agp}: spans {res['spans']} want {expected}\n text {want!r}")
            bad += 1
        else:
            counts["spans"] += len(expected)
    # train_on all / last on the multi-turn conversation
    conv = {"messages": convs[22]["messages"], "add_generation_prompt": False}
    all_res = run_fsdpc(binary, model_dir, [conv], "all")[0]
    last_res = run_fsdpc(binary, model_dir, [conv], "last")[0]
    if "error" not in all_res:
        if all_res["spans"] != [[0, len(all_res["text"].encode("utf-8"))]]:
            print(f"FAIL {name}: train_on all spans {all_res['spans']}")
            bad += 1
        full = run_fsdpc(binary, model_dir, [conv])[0]
        if last_res["spans"] != full["spans"][-1:]:
            print(f"FAIL {name}: train_on last {last_res['spans']} vs {full['spans']}")
            bad += 1
    print(f"{name}: {counts['same']} identical renders, {counts['same_error']} identical "
          f"template errors, {counts['spans']} assistant spans exact")
    return bad


# Constructs of the engine: (template, variables). Rendered by both engines.
RAW_CASES = [
    ("{{ 'a' ~ 1 ~ none ~ true }}|{{ 1 + 2 * 3 - 4 / 2 }}|{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 % -3 }}", {}),
    ("{{ 1.5 }} {{ 2.0 }} {{ 1e16 }} {{ 1/3 }} {{ 0.0001 }} {{ 1e-05 }} {{ -0.0 }} {{ 123456789.125 }}", {}),
    ("{% for x in xs %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }};{% endfor %}", {"xs": ["a", "b", "c"]}),
    ("{% for x in xs if x != 'b' %}{{ x }}{{ loop.length }}{% else %}none{% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %}", {"xs": ["a", "b", "c"]}),
    ("{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}|{% for k, v in d | items %}{{ k }}{% endfor %}|{% for k in d %}{{ k }}{% endfor %}", {"d": {"z": 1, "a": [1, 2]}}),
    ("{% for x in xs %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}", {"xs": [1, 2, 3, 4, 5]}),
    ("{% if a %}A{% elif b %}B{% else %}C{% endif %}{% if not a and not b %}N{% endif %}", {"a": 0, "b": ""}),
    ("{% set x = 1 %}{% for i in [1,2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}{{ x }}", {}),
    ("{% set ns = namespace(n=0, s='') %}{% for i in range(5) %}{% set ns.n = ns.n + i %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }}", {}),
    ("{% set blk %}inside {{ 1 + 1 }}{% endset %}[{{ blk }}]{{ blk | length }}", {}),
    ("{% macro f(a, b='B', c=none) %}<{{ a }}|{{ b }}|{{ c }}>{% endmacro %}{{ f(1) }}{{ f(1, 2) }}{{ f('x', c=3) }}{{ f(a='k') }}", {}),
    ("{% macro wrap(t) %}[{{ t }}:{{ caller() }}]{% endmacro %}{% call wrap('w') %}body {{ 1 }}{% endcall %}", {}),
    ("{{ '  x y  ' | trim }}|{{ 'abc' | length }}|{{ [1,2] | length }}|{{ 'hello world' | capitalize }}|{{ 'Hi' | upper }}{{ 'Hi' | lower }}|{{ 'a b-c' | title }}", {}),
    ("{{ x | tojson }}|{{ x | tojson(indent=2) }}|{{ 'é\"\\n' | tojson }}|{{ [] | tojson(indent=4) }}|{{ {} | tojson }}|{{ none | tojson }}", {"x": {"a": [1, 2.5, "é"], "b": None, "c": True, "d": {"e": []}}}),
    ("{{ x | tojson(separators=(',', ':')) }}|{{ 'ü' | tojson(ensure_ascii=true) }}", {"x": {"a": [1, 2]}}),
    ("{{ y | default('dflt') }}|{{ '' | default('e', true) }}|{{ 0 | d('z') }}|{{ xs | join(', ') }}|{{ xs | join }}|{{ 'aXbX' | replace('X', '-') }}", {"xs": [1, "b", None]}),
    ("{{ xs | first }}{{ xs | last }}|{{ 'abc' | first }}|{{ xs | list }}|{{ 'ab' | list }}|{{ xs | reverse | list }}|{{ 'abc' | reverse }}|{{ 5 | string }}{{ '7' | int + 1 }}{{ '2.5' | float }}", {"xs": [3, 1, 2]}),
    ("{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(',') }}|{{ ms | rejectattr('role', 'eq', 'user') | list | length }}|{{ ms | map(attribute='role') | unique | list }}", {"ms": [{"role": "user", "content": "u1"}, {"role": "assistant", "content": "a1"}, {"role": "user", "content": "u2"}]}),
    ("{{ xs | select('odd') | list }}{{ xs | reject('even') | list }}{{ xs | map('string') | join }}{{ [-1, 2] | map('abs') | list }}", {"xs": [1, 2, 3, 4]}),
    ("{{ u is defined }}{{ x is defined }}{{ x is none }}{{ 's' is string }}{{ 1 is number }}{{ 1 is integer }}{{ 1.0 is float }}{{ {} is mapping }}{{ [] is iterable }}{{ 's' is iterable }}{{ true is boolean }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ x is sameas none }}{{ 'a' is in 'cat' }}{{ 2 is gt 1 }}{{ 'ab' is lower }}{{ 1 is not string }}", {"x": None}),
    ("{{ 'a' in 'cat' }}{{ 2 in [1,2] }}{{ 'k' in d }}{{ 'z' not in d }}{{ 1 == 1.0 }}{{ 1 == true }}{{ [1,2] == [1,2] }}{{ 'a' < 'b' }}{{ 1 < 2 < 3 }}{{ 3 < 2 < 4 }}{{ (1, 2) == [1, 2] }}", {"d": {"k": 1}}),
    ("{{ s[1:] }}|{{ s[::-1] }}|{{ s[-2:] }}|{{ s[:2] }}|{{ s[1:5:2] }}|{{ xs[1:] }}|{{ xs[::-1] }}|{{ xs[-1] }}|{{ s[0] }}|{{ s[-1] }}|{{ 'héllo'[1] }}{{ 'héllo'[:2] }}", {"s": "abcdef", "xs": [1, 2, 3]}),
    ("{{ '  ab  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ ' a'.lstrip() }}|{{ 'a '.rstrip() }}|{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}|{{ 'a b  c'.split() }}|{{ 'a,b,,c'.split(',') }}|{{ 'a b c'.split(' ', 1) }}|{{ 'ab'.upper() }}{{ 'AB'.lower() }}|{{ 'user'.title() }}{{ 'hello world'.capitalize() }}|{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'abcb'.find('b') }}{{ 'abcb'.count('b') }}|{{ '-'.join(['x', 'y']) }}", {}),
    ("{{ d.get('a') }}{{ d.get('zz', 'dflt') }}{{ d.get('zz') }}|{{ d.keys() | list }}{{ d.values() | list }}|{{ d.items() | list }}|{{ d['a'] }}{{ d.a }}{{ d.missing }}|{{ d.missing is defined }}", {"d": {"a": 1, "b": "two"}}),
    ("{{ [1, 'a', none, true, 1.5, [2], {'k': 'v'}] }}|{{ (1,) }}{{ (1, 2) }}|{{ {'a': 'it\\'s'} }}|{{ \"x\" ~ 'y' }}|{{ 'a' 'b' }}", {}),
    ("{{ 'yes' if x else 'no' }}|{{ 'a' if false }}|{{ x or 'fallback' }}|{{ x and 'and' }}|{{ [] or 'empty' }}", {"x": 0}),
    ("{{ '\\u00e9\\x41\\t|\\q' }}|{{ \"it's\" }}|{{ 'say \"hi\"' }}", {}),
    ("  {% if true %}\n  x\n  {% endif %}\nend\n", {}),
    ("a  {%- if true -%}  b  {%- endif -%}  c\n{{- ' d ' -}}\n e {#- comment -#} f {# c2 #}\ng", {}),
    ("line1\n    {% for i in [1, 2] %}\n    item {{ i }}\n    {% endfor %}\ndone\n\n", {}),
    ("{%+ if true %}kept{% endif %}|\n  {%+ if true %}x{% endif %}", {}),
    ("{{ x.y.z if x.y is defined else 'nope' }}|{{ messages[0]['content'] | trim }}|{{ messages[-1].role }}", {"x": {}, "messages": [{"role": "user", "content": " c "}, {"role": "assistant", "content": "d"}]}),
    ("{{ range(3) | list }}{{ range(1, 7, 2) | list }}{{ range(5, 0, -2) | list }}|{{ dict(a=1, b=2) | tojson }}", {}),
    ("{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%Y-%m-%d %H:%M') }}", {}),
    ("{% set x = [1, 2] + [3] %}{{ x }}{% set y = (1, 2) %}{{ y + (3,) }}|{{ 'ab' * 3 }}|{{ 10 - 2 - 3 }}{{ 2 ** 3 ** 2 }}|{{ -2 ** 2 }}|{{ (-2) ** 2 }}", {}),
    ("a   \n  {%- if true %}\n   x  {% endif %}  \n  {# c #}\n  y\n", {}),
    ("  {%- if true %}A{% endif +%}\nB\n{% if true +%}\nC{% endif %}", {}),
    ("{% for m in ms %}\n  {{ m }}\n{% endfor %}\n", {"ms": [1, 2]}),
    ("{% if true %}\r\n  x\r\n{% endif %}\r\n", {}),
    ("x {%- set y = 1 -%} {{ y }}|{% macro f() -%}\n  body\n{%- endmacro %}[{{ f() }}]", {}),
    ("{{ none }}|{{ [none] }}|{{ {'a': none} }}|{{ 1.0 }}|{{ [1.0, 'x\\'y'] }}", {}),
    ("{{ m.content is string }}{{ m.content is iterable }}{{ m.x is mapping }}{{ m | length }}", {"m": {"content": "hi", "x": {"a": 1}}}),
    ("{{ messages[0]['content'] if messages else 'none' }}", {"messages": []}),
    ("{{ '\\n'.join(['a','b']) }}|{{ 'a-b'.split('-')[1] }}|{{ ('x' ~ 1)|length }}", {}),
    ("{% set ns = namespace(a=[]) %}{% set ns.a = ns.a + [1] %}{{ ns.a }}", {}),
    ("{{ 10 / 4 }}|{{ 10 // 4 }}|{{ 2 ** -1 }}|{{ 3 * 1.5 }}|{{ -3 % 5 }}|{{ 7.5 % 2 }}|{{ 1e300 * 1e10 }}", {}),
    ("{{ 'Hello'[1:3] }}|{{ 'héllo wörld'[::-1] }}|{{ 'héllo'|length }}|{{ [1,2,3][::2] }}|{{ [1,2,3][5:] }}", {}),
    ("{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}|{% for x in 'ab' %}{{ loop.index }}{{ x }}{% endfor %}", {}),
    ("{{ x | default('d', true) }}|{{ y | default }}|{{ x is none }}", {"x": None}),
    ("{% for i in range(3) %}{{ loop.previtem }}-{{ loop.nextitem }};{% endfor %}", {}),
    ("{{ d | tojson(indent=4) }}", {"d": {"a": {"b": [1, {"c": None}], "e": []}, "f": "ü\u2028"}}),
    ("{{ 0.1 }} {{ 100.0 }} {{ 1e22 }} {{ 1.5e-7 }} {{ 123456789012345678 }} {{ 2.5e15 }}", {}),
    ("{{ s | indent }}|{{ s | indent(2, true) }}|{{ s | indent(width=3, blank=true) }}|{{ s | indent('> ', first=true) }}", {"s": "a\nb\n\nc\r\nd\n"}),
    ("{% macro f(a, b, c='C') %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ f(*[1, 2]) }}{{ f(0, *xs) }}{% set fs = [f] %}{{ fs[0](*xs, c=9) }}", {"xs": ["x", "y"]}),
    ("[{{ '' | indent(first=true) }}][{{ 'one' | indent }}][{{ '\\n' | indent(blank=true) }}][{{ 'a\\n\\n' | indent }}]", {}),
    # issue 34: subscripts prefer keys, attributes prefer methods (jinja2's sandbox)
    ("{{ d['items'] }}|{{ d.items() | list }}|{{ d.get('items') }}|{{ d['keys'] }}|{{ d.values is defined }}|{{ d.pop is defined }}|{{ d['pop'] }}", {"d": {"items": [1], "keys": "k", "pop": 3}}),
    ("{% for k, v in s.properties.items() %}{{ k }}: {{ v['items']['type'] if v['items'] is defined else v.type }};{% endfor %}", {"s": {"properties": {"filters": {"type": "array", "items": {"type": "string"}}, "n": {"type": "integer"}}}}),
    ("{{ none.x }}|{{ none['x'] }}|{{ 5['real'] }}|{{ 2.5.real }}|{{ (7).numerator }}|{{ {'a': 1}[u] is defined }}|{{ [1][u] is defined }}", {}),
    # Python's numbers, as JSON gives them
    ("{{ x }} {{ y }} {{ z }} {{ w }} {{ big }} {{ [x, y, big, w] | tojson }} {{ x is float }} {{ big is integer }} {{ big > z }} {{ -big }} {{ big|string|length }}", {"x": 20.0, "y": -0.0, "z": 123456789012345678, "w": 9007199254740993, "big": 123456789012345678901234567890}),
    # markupsafe: safe / escape
    ("{{ ('<b>'|safe) + '<i>' }}|{{ '<i>' + ('<b>'|safe) }}|{{ ('<b>'|safe) ~ '<i>' }}|{{ '<x>'|e }}|{{ ('<x>'|e)|e }}|{{ ['<'|safe] }}|{{ ('a<'|safe)[1] }}|{{ ('<%s>'|safe) % '&' }}|{{ ('<b>'|safe).join(['<', '>']) }}|{{ ('x'|safe) * 2 }}|{{ ('<a>'|safe)|upper }}|{{ ('&'|safe)|forceescape }}|{{ '<'|e is escaped }}", {}),
    # none and undefined in filters and tests
    ("{{ none|selectattr('x')|list }}|{{ none|map('upper')|list }}|{{ u|list }}|{{ u|join(',') }}|{{ u|length }}|{{ u|first }}|{{ none|default(1) }}|{{ none|string }}|{{ u|sum }}|{{ u is sequence }}|{{ u is callable }}|{{ none|lower }}|{{ u|items|list }}|{{ u|unique|list }}", {}),
    # generators: single pass, always true, no len
    ("{% set g = xs|select %}{{ g|list }}{{ g|list }}|{{ (xs|select) is iterable }}|{{ 'yes' if [] | select else 'no' }}|{{ xs|map('string')|first }}|{{ xs|reverse|list }}|{{ (xs|map('abs'))[0] is defined }}", {"xs": [3, 0, -2]}),
    # dictsort, sort, min, max, sum, unique
    ("{{ d|dictsort }}|{{ d|dictsort(reverse=true) }}|{{ d|dictsort(false, 'value') }}|{{ e|dictsort }}|{{ e|dictsort(true) }}", {"d": {"b": 2, "a": 3, "c": 1}, "e": {"b": 1, "A": 2, "a": 3}}),
    ("{{ ['b', 'A', 'a', 'B']|sort }}|{{ ['b', 'A', 'a']|sort(case_sensitive=true) }}|{{ ['b', 'A', 'a']|unique|list }}|{{ [3, 1, 2]|min }}{{ [3, 1, 2]|max }}{{ [1, 2.5]|sum }}|{{ ms|sort(attribute='n')|map(attribute='n')|join }}|{{ [1, true, 1.0]|unique|list }}|{{ ms|sort(attribute='n', reverse=true)|map(attribute='k')|join }}|{{ ms|sum(attribute='n') }}|{{ ms|max(attribute='n') }}", {"ms": [{"n": 2, "k": "x"}, {"n": 1, "k": "y"}, {"n": 2, "k": "z"}]}),
    # {% filter %} blocks and filtered set blocks
    ("{% filter upper %}abc {{ x }}{% endfilter %}|{% filter indent(2, true) | trim %} a\nb {% endfilter %}|{% set y | upper %}q{% endset %}{{ y }}|{% set a, b = 1, 'two' %}{{ b }}{{ a }}", {"x": "y"}),
    # printf-style and str.format
    ("{{ '%s-%05.1f-%x-%r-%-4d|' % ('a', 3.14159, 255, 'q', 7) }}|{{ '{} {:>5} {name}'.format(1, 'ab', name='n') }}|{{ '%d%%'|format(5) }}|{{ '{:.2f}'.format(2.5) }}|{{ '{0:,}'.format(1234567) }}|{{ '%(a)s=%(b)03d' % {'a': 'k', 'b': 7} }}|{{ '{0[x]} {1.real}'.format({'x': 'X'}, 3) }}", {}),
    # NUL and control characters are carried
    ("{{ 'a\\x00b'|length }}|{{ 'a\\x00b' }}|{{ ['\\x00', '\\x1b'] }}|{{ 'x\\x00'|tojson }}", {}),
    # string methods (Unicode case mapping included)
    ("{{ 'a,b,c'.rsplit(',', 1) }}|{{ 'ab'.removeprefix('a') }}|{{ 'x=y=z'.partition('=') }}|{{ 'x=y=z'.rpartition('=') }}|{{ 'Straße'.upper() }}|{{ 'ÉCOLE'.lower() }}|{{ 'hello wörld'.title() }}|{{ 'ǆemal'|capitalize }}|{{ '12'.isdigit() }}{{ 'a1'.isalnum() }}{{ ' '.isspace() }}|{{ 'abc'.rfind('c') }}{{ 'abcabc'.index('c') }}|{{ '  a b  '.split(' ') }}|{{ 'a  b'.rsplit() }}", {}),
    ("{% for x in [1, 1, 2] %}{{ loop.cycle('a', 'b') }}{{ loop.changed(x) }}{% endfor %}|{% macro f(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ f(1, 2, 3, k=4) }}", {}),
    ("{% set d = {0: 'z', 512: 'a', 1.5: 'f', none: 'n'} %}{{ d[512] }}{{ d[0] }}{{ d[0.0] }}|{{ d }}|{{ d|tojson }}|{{ 0 in d }}{{ 2 in d }}|{% for k in d %}{{ k }},{% endfor %}", {}),
    ("{{ range(3) }}|{{ range(1, 9, 3) }}|{{ d.items() }}|{{ d.keys() }}|{{ d.values() }}|{{ d.items()|length }}|{{ d.items() is sequence }}|{{ ['\\u00e9', '\\u200b', '\\x7f', '\\U0001F600', 'a\\'b\\\"c'] }}", {"d": {"a": 1}}),
]


def check_raw(binary, env):
    bad = 0
    for k, (src, variables) in enumerate(RAW_CASES):
        want = env.from_string(src).render(**variables)
        with tempfile.TemporaryDirectory() as d:
            tp, vp = os.path.join(d, "t.jinja"), os.path.join(d, "v.json")
            with open(tp, "w", encoding="utf-8") as f:
                f.write(src)
            with open(vp, "w", encoding="utf-8") as f:
                json.dump(variables, f, ensure_ascii=False)
            p = subprocess.run([binary, "raw", tp, vp, str(EPOCH)], capture_output=True, timeout=60)
        got = p.stdout.decode("utf-8")
        if p.returncode != 0 or got != want:
            print(f"FAIL raw case {k}: {src!r}\n jinja2: {want!r}\n fsdpc:  {got!r} {p.stderr.decode().strip()}")
            bad += 1
    print(f"raw constructs: {len(RAW_CASES) - bad}/{len(RAW_CASES)} identical")
    return bad


def main():
    binary, fixtures = sys.argv[1], sys.argv[2]
    env = hf_env()
    bad = check_raw(binary, env)
    names = sorted(n for n in os.listdir(fixtures)
                   if os.path.isfile(os.path.join(fixtures, n, "tokenizer_config.json")))
    for n in names:
        if n not in RULES:
            print(f"FAIL {n}: no masking rule in RULES for this fixture")
            bad += 1
            continue
        bad += check_fixture(binary, env, os.path.join(fixtures, n), n)
    if len(names) < len(RULES):
        print(f"FAIL: {len(RULES) - len(names)} fixtures missing")
        bad += 1
    print("OK" if not bad else f"{bad} failures")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
