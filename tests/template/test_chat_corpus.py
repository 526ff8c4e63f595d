#!/usr/bin/env python3
"""The chat template corpus (tests/fixtures/chat_corpus: real templates of
about 200 models, sources in its manifest) over its conversation set
(tools, tool calls, reasoning, documents, template kwargs), rendered by
fsdpc (fsdpc_corpus_render) and by Python's jinja2 as transformers runs it
(hf_chat.py). Every pair must render byte for byte the same, or both must
refuse (a template's raise_exception with the same message); fsdpc may
refuse a construct it does not support only with a one-line message that
names it and the template's line and column, and only for the templates
listed in REFUSED (docs/data.md lists them).

usage: test_chat_corpus.py FSDPC_CORPUS_RENDER CORPUS_DIR [TEMPLATE]
Exits non-zero on any difference, crash or unlisted refusal."""
import json
import os
import re
import subprocess
import sys

import jinja2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_chat import EPOCH, hf_env, render  # noqa: E402

# Templates fsdpc refuses to render (a construct it does not support): name -> construct.
REFUSED = {}

REFUSAL = re.compile(r"^[^:]+\.jinja:\d+:\d+: unsupported construct '[^']+'")


def main():
    binary, corpus = sys.argv[1], sys.argv[2]
    only = sys.argv[3] if len(sys.argv) > 3 else None
    manifest = json.load(open(os.path.join(corpus, "manifest.json"), encoding="utf-8"))
    convs = {c["name"]: c for c in json.load(open(os.path.join(corpus, "conversations.json"),
                                                  encoding="utf-8"))}
    args = [binary, corpus, str(EPOCH), "render"] + ([only] if only else [])
    p = subprocess.run(args, capture_output=True, timeout=600)
    if p.returncode != 0:
        print(f"FAIL: fsdpc_corpus_render exited {p.returncode}: {p.stderr.decode()[-2000:]}")
        return 1
    got = json.loads(p.stdout.decode("utf-8"))
    env = hf_env()
    tmpls = {}
    counts = dict(same=0, same_error=0, refused=0, different=0)
    bad_templates = set()
    for r in got:
        name = r["template"]
        entry = next(e for e in manifest if e["name"] == name)
        if name not in tmpls:
            src = open(os.path.join(corpus, "templates", name + ".jinja"), encoding="utf-8").read()
            try:
                tmpls[name] = env.from_string(src)
            except jinja2.TemplateSyntaxError as e:
                tmpls[name] = e
        if "parse_error" in r:
            if isinstance(tmpls[name], Exception):
                counts["same_error"] += 1
                continue
            ok = REFUSAL.match(r["parse_error"]) and name in REFUSED
            counts["refused" if ok else "different"] += 1
            if not ok:
                bad_templates.add(name)
                print(f"FAIL {name}: fsdpc refuses to parse it: {r['parse_error']}")
            continue
        conv = convs[r["conv"]]
        try:
            want = render(tmpls[name], entry["tokens"], conv["messages"], r["agp"],
                          conv.get("tools"), conv.get("documents"), conv.get("kwargs"))
            want_err = None
        except Exception as e:  # noqa: BLE001 -- any jinja2 failure must be an fsdpc refusal
            want, want_err = None, e
        if want_err is not None:
            if "error" in r and (not isinstance(want_err, jinja2.TemplateError) or
                                 type(want_err) is not jinja2.TemplateError or
                                 str(want_err) in r["error"]):
                counts["same_error"] += 1
            else:
                counts["different"] += 1
                bad_templates.add(name)
                print(f"FAIL {name} / {r['conv']} agp={r['agp']}: jinja2 raised "
                      f"{type(want_err).__name__}: {str(want_err)[:200]!r}; fsdpc: "
                      f"{r.get('error', r.get('text', ''))[:300]!r}")
            continue
        if "error" in r:
            if REFUSAL.match(r["error"]) and name in REFUSED:
                counts["refused"] += 1
            else:
                counts["different"] += 1
                bad_templates.add(name)
                print(f"FAIL {name} / {r['conv']} agp={r['agp']}: fsdpc error {r['error'][:300]!r}; "
                      f"jinja2 rendered {want[:200]!r}")
            continue
        if r["text"] != want:
            counts["different"] += 1
            bad_templates.add(name)
            i = next((k for k in range(min(len(want), len(r["text"])))
                      if want[k] != r["text"][k]), min(len(want), len(r["text"])))
            print(f"FAIL {name} / {r['conv']} agp={r['agp']}: text differs at {i}\n"
                  f"  jinja2: {want[max(0, i - 60):i + 80]!r}\n  fsdpc:  {r['text'][max(0, i - 60):i + 80]!r}")
            continue
        counts["same"] += 1
    n_t = len({r['template'] for r in got})
    print(f"{n_t} templates x {len(convs)} conversations x 2: {counts['same']} identical, "
          f"{counts['same_error']} refused by both, {counts['refused']} refused by fsdpc only "
          f"(listed), {counts['different']} different; templates with differences: "
          f"{len(bad_templates)}")
    return 1 if counts["different"] else 0


if __name__ == "__main__":
    sys.exit(main())
