#!/usr/bin/env python3
"""Chat templates: fsdpc against Hugging Face transformers.

Renders every fixture template in tests/fixtures/chat_templates/ with
transformers' own tokenizer.apply_chat_template(tokenize=False) and with
fsdpc (the fsdpc_chat_render test binary), over the conversation set of
tests/template/compare_jinja2.py (system prompt or none, several turns,
unicode, empty strings, long contents, add_generation_prompt both ways,
train: false), and checks:
  - the rendered text is byte-identical, or both refuse with the template's
    raise_exception message;
  - fsdpc's assistant target spans are exactly each trained assistant
    turn's content as the template renders it plus its end-of-turn text,
    starting where transformers' generation-prompt render of the preceding
    messages ends.
Text only: token ids are checked by the tokenizer comparison. The
tokenizer object here is a stand-in built in memory (no files, no network)
that carries the fixture's chat_template and special tokens; apply_chat_template
renders the template exactly as it does for the real model.

usage: python3 tests/gpu/check_chat_templates.py --render build/bin/fsdpc_chat_render
       [--fixtures tests/fixtures/chat_templates] [--log FILE]
Exit status: 0 when everything agrees."""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "template"))
import compare_jinja2 as cj  # noqa: E402  (conversations, mask rules, fsdpc runner)


def stand_in_tokenizer(cfg):
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    toks = cj.special_tokens(cfg)
    vocab = {"[UNK]": 0}
    for v in toks.values():
        vocab.setdefault(v, len(vocab))
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="[UNK]")),
                                  **toks)
    tok.chat_template = cfg["chat_template"]
    return tok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--render", required=True, help="path of the fsdpc_chat_render binary")
    ap.add_argument("--fixtures", default=os.path.join(ROOT, "tests", "fixtures", "chat_templates"))
    ap.add_argument("--log", help="also write the report here")
    args = ap.parse_args()
    import jinja2
    import transformers

    # strftime_now: transformers reads the clock; give fsdpc the same second.
    cj.EPOCH = int(time.time())
    lines = [f"transformers {transformers.__version__}, jinja2 {jinja2.__version__}, "
             f"clock {cj.EPOCH}"]
    bad = 0
    names = sorted(n for n in os.listdir(args.fixtures)
                   if os.path.isfile(os.path.join(args.fixtures, n, "tokenizer_config.json")))
    for name in names:
        d = os.path.join(args.fixtures, name)
        cfg = json.load(open(os.path.join(d, "tokenizer_config.json"), encoding="utf-8"))
        tok = stand_in_tokenizer(cfg)

        def hf(msgs, agp):
            return tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=agp)

        convs = cj.conversations()
        got = cj.run_fsdpc(args.render, d, convs)
        same = errs = spans = 0
        for k, (conv, res) in enumerate(zip(convs, got)):
            msgs, agp = conv["messages"], conv["add_generation_prompt"]
            try:
                want, want_err = hf(msgs, agp), None
            except jinja2.exceptions.TemplateError as e:
                want, want_err = None, str(e)
            if want_err is not None:
                if "error" in res and want_err in res["error"]:
                    errs += 1
                else:
                    lines.append(f"FAIL {name} conv {k}: transformers raised {want_err!r}, fsdpc {res}")
                    bad += 1
                continue
            if res.get("text") != want:
                lines.append(f"FAIL {name} conv {k} agp={agp}: text differs\n  transformers {want!r}\n"
                             f"  fsdpc        {res.get('text', res.get('error'))!r}")
                bad += 1
                continue
            same += 1
            raw = want.encode("utf-8")
            transform, eot, lead = cj.RULES[name]
            expected = []
            for i, m in enumerate(msgs):
                if m["role"] != "assistant" or m.get("train") is False:
                    continue
                body = (transform(m["content"]) + eot).encode("utf-8")
                start = (len(hf(msgs[:i], True).encode("utf-8")) + len(lead.encode())) if i else raw.find(body)
                expected.append([start, start + len(body)])
            if res["spans"] != expected:
                lines.append(f"FAIL {name} conv {k}: spans {res['spans']} want {expected}")
                bad += 1
            else:
                spans += len(expected)
        lines.append(f"{name}: {same} identical renders, {errs} identical refusals, "
                     f"{spans} assistant spans exact")
    lines.append("OK: fsdpc renders every fixture template as transformers does" if not bad
                 else f"{bad} differences")
    report = "\n".join(lines)
    print(report)
    if args.log:
        with open(args.log, "w", encoding="utf-8") as f:
            f.write(report + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
