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
from hf_chat import EPOCH, hf_env, render, render_with_spans  # noqa: E402

# Templates fsdpc refuses to render (a construct it does not support): name -> construct.
REFUSED = {}

# Templates whose TRL twin marks a different turn end, for a documented reason
# (docs/data.md, "The mask rule"): name -> why.
MASK_KNOWN = {
    "trl-glm4moe": "GLM-4 turns have no end-of-turn text of their own: the model stops by "
                   "writing the next role token (<|observation|>, <|user|>), which TRL's twin "
                   "puts in the assistant's block and fsdpc's rule leaves to the next message",
    "trl-diffusion_gemma": "it writes tool results inside the model's turn and a new model header "
                           "after them, which the generation prompt before the next assistant "
                           "message does not hold; TRL's twin splits such a turn into blocks that "
                           "are not one per assistant message",
}

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
    bad = counts["different"]
    if not only or only in ORACLE_NAMES(corpus):
        bad += check_masks(binary, corpus, manifest, convs, env, only)
    return 1 if bad else 0


def ORACLE_NAMES(corpus):
    return {o["template"] for o in json.load(open(os.path.join(corpus, "oracles", "oracles.json")))}


WS = b" \t\n\r\x0b\x0c"


def strip_span(raw, b, e):
    while b < e and raw[b] in WS:
        b += 1
    while e > b and raw[e - 1] in WS:
        e -= 1
    return (b, e)


def oracle_spans(tmpl, entry, conv, agp, raw, otext, ospans):
    """TRL's generation blocks as fsdpc's rule reads them: block k is
    assistant message k; blocks of one turn that only whitespace separates
    are one; a block starts no earlier than where the generation prompt of
    the conversation before its turn ends, when that prompt is a prefix of
    the text (TRL's twins also train the header the prompt already holds:
    '<|start|>assistant', '<think>'); whitespace at both ends aside."""
    to_b = lambda c: len(otext[:c].encode("utf-8"))
    spans = [[to_b(b), to_b(e)] for b, e in ospans]
    merged = []
    for b, e in spans:
        if merged and not raw[merged[-1][1]:b].strip():
            merged[-1][1] = e
        else:
            merged.append([b, e])
    msgs = conv["messages"]
    asst = [i for i, m in enumerate(msgs) if m["role"] == "assistant"]
    out = []
    for k, (b, e) in enumerate(merged):
        if k < len(asst) and len(merged) == len(asst):
            i = asst[k]
            p = render(tmpl, entry["tokens"], msgs[:i], True, conv.get("tools"),
                       conv.get("documents"), conv.get("kwargs")).encode("utf-8") if i else None
            if p is not None and raw.startswith(p) and len(p) <= e:
                b = len(p)
            else:  # no prompt before it, or one that is not a prefix: its first field
                b = first_field(msgs[i], raw, b, e)
                if b is None:
                    return None  # an empty turn: nothing to tell the start by
        s = strip_span(raw, b, e)
        if s[1] > s[0]:
            out.append(s)
    return out


def first_field(m, raw, b, e):
    """Where the first of message m's texts (reasoning, content, tool call
    names and string arguments) shows in raw[b, e)."""
    texts = [m.get(k) for k in ("reasoning_content", "reasoning", "thinking")]
    c = m.get("content")
    texts += [c] if isinstance(c, str) else [p.get("text") for p in c or [] if isinstance(p, dict)]
    for tc in m.get("tool_calls") or []:
        f = tc.get("function", tc)
        texts += [f.get("name"), f.get("arguments") if isinstance(f.get("arguments"), str) else None]
    hits = [raw.rfind(t.strip().encode("utf-8"), b, e) for t in texts if isinstance(t, str) and t.strip()]
    hits = [h for h in hits if h >= 0]
    return min(hits) if hits else None


def check_masks(binary, corpus, manifest, convs, env, only):
    """fsdpc's assistant masks (train_on assistant) over the corpus: every
    span holds assistant text only (never a user message or a tool
    result), every assistant content the text shows is inside a span, and,
    for the templates TRL ships a {% generation %} twin of (oracles/), the
    spans are the twin's generation blocks (whitespace at their ends aside)
    wherever the twin renders the same text. A refused mask is counted."""
    args = [binary, corpus, str(EPOCH), "masks"] + ([only] if only else [])
    p = subprocess.run(args, capture_output=True, timeout=900)
    if p.returncode != 0:
        print(f"FAIL: fsdpc_corpus_render masks exited {p.returncode}: {p.stderr.decode()[-2000:]}")
        return 1
    got = json.loads(p.stdout.decode("utf-8"))
    oracles = {o["template"]: o["oracle"] for o in
               json.load(open(os.path.join(corpus, "oracles", "oracles.json")))}
    otmpl = {}
    n = dict(masks=0, refused=0, bad=0, oracle_same=0, oracle_skipped=0)
    for r in got:
        if "parse_error" in r or "text" not in r:
            if "error" in r and "assistant mask" in r["error"]:
                n["refused"] += 1
            continue
        name, conv = r["template"], convs[r["conv"]]
        raw = r["text"].encode("utf-8")
        texts = [raw[b:e] for b, e in r["spans"]]
        n["masks"] += 1
        problems = []
        for m in conv["messages"]:
            c = m.get("content")
            if not isinstance(c, str) or not c.strip():
                continue
            cb = c.strip().encode("utf-8")
            if m["role"] == "assistant":
                if cb in raw and raw.count(cb) == 1 and not any(cb in t for t in texts):
                    problems.append(f"assistant content {c.strip()[:40]!r} is not a target")
            elif len(cb) >= 6 and any(cb in t for t in texts):
                problems.append(f"{m['role']} content {c.strip()[:40]!r} is a target")
        if name in oracles:
            if name not in otmpl:
                src = open(os.path.join(corpus, "oracles", oracles[name] + ".jinja"),
                           encoding="utf-8").read()
                otmpl[name] = env.from_string(src)
            entry = next(e for e in manifest if e["name"] == name)
            try:
                otext, ospans = render_with_spans(otmpl[name], entry["tokens"], conv["messages"],
                                                  r["agp"], conv.get("tools"), conv.get("documents"),
                                                  conv.get("kwargs"))
            except Exception:  # noqa: BLE001 -- the twin refuses what the original renders
                otext = None
            want = None
            if otext == r["text"]:
                want = oracle_spans(otmpl[name], entry, conv, r["agp"], raw, otext, ospans)
            if want is None:
                n["oracle_skipped"] += 1
            else:
                have = [strip_span(raw, b, e) for b, e in r["spans"]]
                have = [s for s in have if s[1] > s[0]]
                if want != have:
                    problems.append(f"spans {[raw[b:e][:50] for b, e in have]} but TRL's twin "
                                    f"{oracles[name]} has {[raw[b:e][:50] for b, e in want]}")
                else:
                    n["oracle_same"] += 1
        if problems and name in MASK_KNOWN and all("TRL's twin" in q for q in problems):
            n["oracle_skipped"] += 1
            problems = []
        if problems:
            n["bad"] += 1
            print(f"FAIL mask {name} / {r['conv']} agp={r['agp']}: " + "; ".join(problems))
    print(f"masks: {n['masks']} derived ({n['oracle_same']} equal to TRL's generation blocks, "
          f"{n['oracle_skipped']} where the twin renders other text), {n['refused']} refused, "
          f"{n['bad']} wrong")
    return n["bad"]


if __name__ == "__main__":
    sys.exit(main())
