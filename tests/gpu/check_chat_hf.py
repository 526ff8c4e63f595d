#!/usr/bin/env python3
"""Chat data with tools and reasoning: `fsdpc data prepare` against Hugging
Face transformers, on the chat template corpus (tests/fixtures/chat_corpus)
for every template whose tokenizer the fixtures have
(tests/fixtures/tokenizers/make_hub.py folders).

Two steps, so that the fsdpc side runs wherever fsdpc is built and the
reference side wherever transformers is installed (the GPU host):

  1. make: fsdpc's output files, into OUT:
       python3 tests/gpu/check_chat_hf.py make --fsdpc build/bin/fsdpc \\
           --corpus-render build/bin/fsdpc_corpus_render --out OUT
     For each (template, tokenizer) pair: OUT/<pair>.jsonl (the corpus
     conversations fsdpc renders with a mask: messages, tools, documents,
     chat_template_kwargs as columns) and OUT/<pair>.tok (`fsdpc data
     prepare --tokenizer TOK --chat-template TEMPLATE`: token ids and the
     assistant mask); OUT/pairs.json and the clock used (strftime_now).
  2. check: the reference, from those files:
       python3 tests/gpu/check_chat_hf.py check --out OUT
     For every conversation of every pair, with the fixture tokenizer
     (AutoTokenizer) carrying the corpus template:
       - ids: tokenizer.apply_chat_template(messages, tools=..., documents=...,
         **chat_template_kwargs, tokenize=False) tokenized with
         add_special_tokens=False equals fsdpc's ids exactly;
       - masks, templates with {% generation %} blocks (TRL's training twins
         in chat_corpus/oracles, SmolLM3): apply_chat_template(...,
         return_assistant_tokens_mask=True)'s assistant_masks equal fsdpc's;
       - masks, every template: each run of target tokens decodes to one
         trained assistant turn: it holds the turn's content (stripped),
         reasoning (when the template renders it) and tool-call names and
         arguments as the text renders them, no text of another message,
         and ends with the end-of-turn token(s) the template writes (the
         run ends exactly where the text after the turn's fields stops
         being end-of-turn: eos / <|im_end|> / <|eot_id|> / </s> ...).
     Templates that quote the conversation in a prompt (REFUSED: Llama
     Guard 3) must be refused: `make` runs prepare on each conversation
     fsdpc renders and keeps its one-line refusal; `check` wants every one
     refused naming the template and the turn, and confirms with
     transformers' text that no end-of-turn token follows the assistant's
     content there (the trained turn could not end).
Exit status 0 when everything agrees; the report lists each pair's
conversations, tokens, targets and differences. Standard library plus
transformers (tokenizers) for step 2."""
import argparse
import datetime
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # check_prepare_targets.py beside it
from check_prepare_targets import read_tokfile  # noqa: E402  (token files, docs/data.md)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(ROOT, "tests", "fixtures", "chat_corpus")
MAKE_HUB = os.path.join(ROOT, "tests", "fixtures", "tokenizers", "make_hub.py")

# Corpus templates -> the fixture tokenizer of their model family (the
# vocabulary and special tokens the template writes).
TOKENIZER_OF = {
    "ollama-llama2-7b": "llama2-chat",
    "transformers-default-llama": "llama2-chat",
    "thebloke--mistral-7b-instruct-v0.1-gptq": "mistral-v0.1-instruct",
    "mistralai--mixtral-8x7b-instruct-v0.1": "mistral-v0.1-instruct",
    "ollama-mixtral-8x7b": "mistral-v0.1-instruct",
    "huggingfaceh4--zephyr-7b-beta": "zephyr-7b-beta",
    "mistralai--mistral-7b-instruct-v0.3": "mistral-v0.3-instruct",
    "ciscai--mistral-7b-instruct-v0.3-sota-gguf": "mistral-v0.3-instruct",
    "ollama-llama3-8b": "llama3-instruct",
    "ollama-dolphin-llama3-8b": "llama3-instruct",
    "ollama-llama-guard3-8b": "llama3-instruct",
    "meta-llama--llama-3.1-8b-instruct": "llama3.1-instruct",
    "ollama-nemotron-70b": "llama3.1-instruct",
    "ollama-tulu3-70b": "llama3.1-instruct",
    "meta-llama--llama-3.2-11b-vision-instruct": "llama3.2-instruct",
    "meta-llama--llama-guard-3-11b-vision": "llama3.2-instruct",
    "ollama-llama3.2-3b": "llama3.2-instruct",
    "qwen--qwen2.5-7b-instruct": "qwen2.5-instruct",
    "qwen--qwen2.5-vl-7b-instruct": "qwen2.5-instruct",
    "ollama-qwen2.5-0.5b": "qwen2.5-instruct",
    "ollama-qwen2-0.5b": "qwen2.5-instruct",
    "qwen--qwen3-0.6b": "qwen2.5-instruct",
    "trl-qwen3": "qwen2.5-instruct",
    "trl-qwen3_instruct_2507": "qwen2.5-instruct",
    "qwen-qwq-32b": "qwen2.5-instruct",
    "ollama-qwq-32b": "qwen2.5-instruct",
    "qwen3-coder": "qwen2.5-instruct",
}

# Corpus templates fsdpc refuses for training (docs/data.md, "The mask
# rule", 5): a classifier prompt quotes the conversation, so no text of the
# template marks an assistant turn. name -> why.
REFUSED = {
    "ollama-llama-guard3-8b": "Llama Guard 3 8B: the agent's message inside the user's prompt",
    "meta-llama--llama-guard-3-11b-vision": "Llama Guard 3 11B Vision: likewise",
}
REFUSAL = "no text of the template marks it as a turn"


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def pairs():
    """(pair name, template file, tokenizer name, has generation blocks)."""
    out = []
    for name, tok in sorted(TOKENIZER_OF.items()):
        out.append((name, os.path.join(CORPUS, "templates", name + ".jinja"), tok))
    for o in load_json(os.path.join(CORPUS, "oracles", "oracles.json")):
        tok = TOKENIZER_OF.get(o["template"])
        if tok:
            out.append(("oracle-" + o["oracle"],
                        os.path.join(CORPUS, "oracles", o["oracle"] + ".jinja"), tok))
    return out


def jsonl_line(conv):
    row = {"messages": conv["messages"]}
    for k, col in (("tools", "tools"), ("documents", "documents"), ("kwargs", "chat_template_kwargs")):
        if conv.get(k) is not None:
            row[col] = conv[k]
    return json.dumps(row, ensure_ascii=False)


def prepare(fsdpc, jsonl, tok_dir, template, out):
    r = subprocess.run([fsdpc, "data", "prepare", "--in", jsonl, "--format", "chat",
                        "--tokenizer", tok_dir, "--chat-template", template, "--threads", "1",
                        "--out", out], capture_output=True, text=True)
    return r.returncode, (r.stderr or r.stdout).strip()


def make(a):
    os.makedirs(a.out, exist_ok=True)
    toks = os.path.join(a.out, "tokenizers")
    if not os.path.isdir(toks):
        subprocess.run([sys.executable, MAKE_HUB, toks], check=True, stdout=subprocess.DEVNULL)
    epoch = int(time.time())
    convs = load_json(os.path.join(CORPUS, "conversations.json"))
    renders = {}
    for name, template, _tok in pairs():
        # fsdpc's own renders of the corpus template (or the oracle) with masks
        src = name if not name.startswith("oracle-") else None
        if src:
            r = subprocess.run([a.corpus_render, CORPUS, str(epoch), "masks", src],
                               capture_output=True, text=True, check=True)
            renders[name] = {(x["conv"], x["agp"]): x for x in json.loads(r.stdout)}
    report = []
    for name, template, tok in pairs():
        if name in REFUSED:
            report.append(make_refused(a, name, template, tok, convs, renders[name], toks))
            continue
        base = name[len("oracle-"):] if name.startswith("oracle-") else None
        # the conversations with a mask: from the corpus template's renders
        # (an oracle: those of its corpus template)
        key = name if not base else next(
            o["template"] for o in load_json(os.path.join(CORPUS, "oracles", "oracles.json"))
            if o["oracle"] == base)
        rows = [c for c in convs
                if "spans" in renders.get(key, {}).get((c["name"], False), {})]
        jsonl = os.path.join(a.out, name + ".jsonl")
        out = os.path.join(a.out, name + ".tok")
        kept = []
        with open(jsonl, "w", encoding="utf-8") as f:
            for c in rows:
                f.write(jsonl_line(c) + "\n")
        if not rows:
            print(f"{name}: no conversation with a mask")
            continue
        rc, msg = prepare(a.fsdpc, jsonl, os.path.join(toks, tok), template, out)
        if rc != 0:  # keep the conversations prepare takes one by one
            one = os.path.join(a.out, "one.jsonl")
            for c in rows:
                with open(one, "w", encoding="utf-8") as f:
                    f.write(jsonl_line(c) + "\n")
                if prepare(a.fsdpc, one, os.path.join(toks, tok), template, out + ".one")[0] == 0:
                    kept.append(c)
            for q in (one, out + ".one"):
                if os.path.exists(q):
                    os.remove(q)
            with open(jsonl, "w", encoding="utf-8") as f:
                for c in kept:
                    f.write(jsonl_line(c) + "\n")
            rc, msg = prepare(a.fsdpc, jsonl, os.path.join(toks, tok), template, out)
        else:
            kept = rows
        report.append({"pair": name, "template": os.path.relpath(template, ROOT),
                       "tokenizer": tok, "convs": [c["name"] for c in kept],
                       "refused_by_prepare": len(rows) - len(kept), "rc": rc, "msg": msg})
        print(f"{name}: {len(kept)} conversations ({tok}){'' if rc == 0 else ': ' + msg}")
    with open(os.path.join(a.out, "pairs.json"), "w", encoding="utf-8") as f:
        json.dump({"epoch": epoch, "pairs": report}, f, indent=1)
    return 0


def make_refused(a, name, template, tok, convs, renders, toks):
    """A REFUSED template: prepare each conversation fsdpc renders (a mask
    or a refusal of one) on its own and keep what it says."""
    rows = [c for c in convs  # the conversations with a trained turn: a mask, or refused
            if renders.get((c["name"], False), {}).get("spans") or
            REFUSAL in renders.get((c["name"], False), {}).get("error", "")]
    one = os.path.join(a.out, name + ".jsonl")
    msgs = []
    for c in rows:
        with open(one, "w", encoding="utf-8") as f:
            f.write(jsonl_line(c) + "\n")
        rc, msg = prepare(a.fsdpc, one, os.path.join(toks, tok), template, one + ".tok")
        msgs.append(msg if rc != 0 else "")
    print(f"{name}: {sum(1 for m in msgs if m)} of {len(rows)} conversations refused ({tok})")
    return {"pair": name, "template": os.path.relpath(template, ROOT), "tokenizer": tok,
            "convs": [c["name"] for c in rows], "refused": msgs, "rc": 0, "msg": "",
            "refused_by_prepare": 0}


def check_refused(p, convs, toks, eot_of):
    """A REFUSED pair: every conversation refused by prepare in one line
    naming the template and a turn, and transformers' text confirms that no
    end-of-turn token follows the assistant's content. Returns the number
    of differences."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(os.path.join(toks, p["tokenizer"]))
    with open(os.path.join(ROOT, p["template"]), encoding="utf-8") as f:
        tok.chat_template = f.read()
    eot = eot_of(tok)
    base = os.path.basename(p["template"])
    bad = confirmed = vacuous = 0
    for cname, msg in zip(p["convs"], p["refused"]):
        c = convs[cname]
        if not msg or "\n" in msg or base not in msg or "messages[" not in msg or REFUSAL not in msg:
            bad += 1
            print(f"{p['pair']} / {cname}: want a one-line refusal naming {base} and the turn, "
                  f"got {msg[:200]!r}")
            continue
        text = tok.apply_chat_template(c["messages"], tools=c.get("tools"),
                                       documents=c.get("documents"), tokenize=False,
                                       **dict(c.get("kwargs") or {}))
        ends = []
        for m in c["messages"]:
            for t in message_texts(m) if m.get("role") == "assistant" else []:
                at = text.find(t)
                if at >= 0:
                    after = text[at + len(t):].lstrip()
                    ends.append(any(after.startswith(e) for e in eot))
        if not ends:  # no assistant text to look for (the `empty` conversation)
            vacuous += 1
            continue
        confirmed += not any(ends)
        if any(ends):
            print(f"{p['pair']} / {cname}: transformers' text has an end-of-turn token after "
                  "the assistant's content (this template would not need a refusal)")
    print(f"{p['pair']} ({p['tokenizer']}, {REFUSED[p['pair']]}): {len(p['convs'])} conversations, "
          f"{len(p['convs']) - bad} refused as expected; transformers' text has no end-of-turn "
          f"token after the assistant's content in {confirmed} "
          f"({vacuous} with no assistant text to look for)")
    if not p["convs"]:
        print(f"{p['pair']}: no conversation to check")
        return 1
    return bad + (len(p["convs"]) - bad - confirmed - vacuous)


def pin_clock(epoch):
    """transformers' strftime_now is datetime.now().strftime(fmt) with the
    module's `from datetime import datetime`: give it the second fsdpc's
    prepare ran at (docs/data.md: Llama 3.2 writes today's date)."""
    import transformers.utils.chat_template_utils as ctu

    class Fixed(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime.datetime.fromtimestamp(epoch, tz)

    ctu.datetime = Fixed


def message_texts(m):
    """The texts of a message as a template writes them (stripped)."""
    out = []
    c = m.get("content")
    if isinstance(c, str):
        out.append(c)
    elif isinstance(c, list):
        out += [p.get("text") for p in c if isinstance(p, dict) and isinstance(p.get("text"), str)]
    for k in ("reasoning_content", "reasoning", "thinking"):
        if isinstance(m.get(k), str):
            out.append(m[k])
    for call in m.get("tool_calls") or []:
        fn = call.get("function", call)
        out.append(fn.get("name") or "")
        if isinstance(fn.get("arguments"), str):
            out.append(fn["arguments"])
    return [t.strip() for t in out if t and t.strip()]


def runs(mask):
    out, i = [], 0
    while i < len(mask):
        if mask[i]:
            j = i
            while j < len(mask) and mask[j]:
                j += 1
            out.append((i, j))
            i = j
        else:
            i += 1
    return out


def check_masks(tok, text, enc, mask, conv, eot_tokens):
    """Each target run: one trained assistant turn, its fields inside, no
    other message's text, ending with end-of-turn text."""
    msgs = conv["messages"]
    trained = [m for m in msgs if m.get("role") == "assistant" and m.get("train", True) is not False]
    rs = runs(mask)
    off = enc["offset_mapping"]
    pieces = [text[off[a][0]:off[b - 1][1]] for a, b in rs]
    if len(pieces) != len(trained):
        return f"{len(pieces)} target runs for {len(trained)} assistant turns"
    for k, (piece, m) in enumerate(zip(pieces, trained)):
        for t in message_texts(m):
            if t in text and t not in piece and t.split("\n")[0] not in piece:
                return f"turn {k}: its text {t[:40]!r} is in the text but not in its target {piece[:80]!r}"
        for other in msgs:
            if other is m or other.get("role") == "assistant":
                continue
            for t in message_texts(other):
                if len(t) > 3 and t in piece and not any(t in x for x in message_texts(m)):
                    return f"turn {k}: its target holds another message's text {t[:40]!r}"
        tail = piece.rstrip()
        if eot_tokens and not any(tail.endswith(e) for e in eot_tokens):
            return f"turn {k}: its target {piece[-60:]!r} does not end with an end-of-turn token"
    return None


def eot_tokens(tok):
    """The end-of-turn tokens of the tokenizer's vocabulary."""
    return [t for t in (tok.eos_token, "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "</s>",
                        "<|end|>", "<|endoftext|>", "<end_of_turn>", "<|end_of_text|>")
            if t and t in tok.get_vocab()]


def check(a):
    from transformers import AutoTokenizer

    meta = load_json(os.path.join(a.out, "pairs.json"))
    pin_clock(meta["epoch"])
    convs = {c["name"]: c for c in load_json(os.path.join(CORPUS, "conversations.json"))}
    toks = os.path.join(a.out, "tokenizers")
    total_bad = 0
    for p in meta["pairs"]:
        name, tok_name = p["pair"], p["tokenizer"]
        if "refused" in p:
            total_bad += check_refused(p, convs, toks, eot_tokens)
            continue
        if p["rc"] != 0:
            print(f"{name}: fsdpc prepare failed: {p['msg']}")
            total_bad += 1
            continue
        tok = AutoTokenizer.from_pretrained(os.path.join(toks, tok_name))
        with open(os.path.join(ROOT, p["template"]), encoding="utf-8") as f:
            tok.chat_template = f.read()
        generation = "{% generation %}" in tok.chat_template or "{%- generation %}" in tok.chat_template
        docs = read_tokfile(os.path.join(a.out, name + ".tok"))
        if len(docs) != len(p["convs"]):
            print(f"{name}: {len(docs)} prepared examples for {len(p['convs'])} conversations")
            total_bad += 1
            continue
        eot = eot_tokens(tok)
        bad = n_tok = n_tgt = 0
        for cname, (ids, mask) in zip(p["convs"], docs):
            c = convs[cname]
            kw = dict(c.get("kwargs") or {})
            text = tok.apply_chat_template(c["messages"], tools=c.get("tools"),
                                           documents=c.get("documents"), tokenize=False, **kw)
            enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
            n_tok += len(ids)
            n_tgt += sum(mask)
            why = None
            if list(enc["input_ids"]) != ids:
                j = next(j for j in range(min(len(ids), len(enc["input_ids"])) + 1)
                         if j >= min(len(ids), len(enc["input_ids"])) or ids[j] != enc["input_ids"][j])
                why = (f"ids differ at token {j}: transformers {enc['input_ids'][j:j + 6]} "
                       f"fsdpc {ids[j:j + 6]}")
            elif generation:
                r = tok.apply_chat_template(c["messages"], tools=c.get("tools"),
                                            documents=c.get("documents"), tokenize=True,
                                            return_dict=True, return_assistant_tokens_mask=True,
                                            **kw)
                if [int(x) for x in r["assistant_masks"]] != mask:
                    why = "mask differs from return_assistant_tokens_mask"
            else:
                why = check_masks(tok, text, enc, mask, c, eot)
            if why:
                bad += 1
                if bad <= a.show:
                    print(f"{name} / {cname}: {why}")
        total_bad += bad
        print(f"{name} ({tok_name}{', generation blocks' if generation else ''}): "
              f"{len(docs)} conversations, {n_tok} tokens, {n_tgt} targets, "
              f"{bad} different{'' if not p['refused_by_prepare'] else ', %d refused by prepare' % p['refused_by_prepare']}")
    print("every pair agrees" if not total_bad else f"{total_bad} differences")
    return 1 if total_bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make", help="fsdpc's outputs (no transformers needed)")
    m.add_argument("--fsdpc", default=os.path.join(ROOT, "build", "bin", "fsdpc"))
    m.add_argument("--corpus-render", default=os.path.join(ROOT, "build", "bin", "fsdpc_corpus_render"))
    m.add_argument("--out", required=True)
    c = sub.add_parser("check", help="compare with transformers")
    c.add_argument("--out", required=True)
    c.add_argument("--show", type=int, default=3, help="differences to print per pair")
    a = ap.parse_args()
    return make(a) if a.cmd == "make" else check(a)


if __name__ == "__main__":
    sys.exit(main())
