"""Chat template rendering as transformers' apply_chat_template does it,
for the tests that compare fsdpc with Python's jinja2 (python3-jinja2).

The environment follows transformers' chat_template_utils
(_compile_jinja_template / render_jinja_template, transformers 4.4x-5.x):
ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and the
loopcontrols extension, a {% generation %} tag that renders its body and
records where (transformers' AssistantTracker), its tojson override
(json.dumps with ensure_ascii=False), raise_exception, and strftime_now
with the clock pinned. The render gets messages, tools, documents,
add_generation_prompt, the special tokens and any template kwargs (which
win over the special tokens), as apply_chat_template passes them."""
import json
from datetime import datetime

import jinja2
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

EPOCH = 1700000000  # strftime_now's pinned clock (local time)
GEN_OPEN, GEN_CLOSE = "\U0010fffe", "\U0010ffff"  # around generation blocks when marking


class Generation(Extension):
    """{% generation %}...{% endgeneration %}: renders the body; with
    environment.mark_generation set, between GEN_OPEN and GEN_CLOSE, so
    that render_with_spans can tell where each block is."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_mark"), [], [], body).set_lineno(lineno)

    def _mark(self, caller):
        text = caller()
        if getattr(self.environment, "mark_generation", False):
            return GEN_OPEN + text + GEN_CLOSE
        return text


def hf_env(epoch=EPOCH):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.fromtimestamp(epoch).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, "jinja2.ext.loopcontrols"])
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


def render(tmpl, tokens, messages, add_generation_prompt=False, tools=None, documents=None,
           kwargs=None):
    variables = dict(tokens)
    variables.update(kwargs or {})
    return tmpl.render(messages=messages, tools=tools, documents=documents,
                       add_generation_prompt=add_generation_prompt, **variables)


def render_with_spans(tmpl, tokens, messages, add_generation_prompt=False, tools=None,
                      documents=None, kwargs=None):
    """The text and the [begin, end) character ranges of its generation
    blocks (transformers' return_assistant_tokens_mask, in characters)."""
    tmpl.environment.mark_generation = True
    try:
        marked = render(tmpl, tokens, messages, add_generation_prompt, tools, documents, kwargs)
    finally:
        tmpl.environment.mark_generation = False
    text, spans, start = [], [], None
    for ch in marked:
        if ch == GEN_OPEN:
            start = len(text)
        elif ch == GEN_CLOSE:
            spans.append((start, len(text)))
        else:
            text.append(ch)
    return "".join(text), spans
