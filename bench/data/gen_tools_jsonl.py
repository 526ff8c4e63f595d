#!/usr/bin/env python3
"""Writes a synthetic tool-calling chat JSONL of about --mb megabytes for
benchmarking `fsdpc data prepare` (bench/results/2026-11-28-prepare-tools.md).

Every line has a `tools` column (1-4 OpenAI-style function schemas drawn
from a fixed set: strings, numbers, enums, arrays, nested objects) and
`messages`: an optional system prompt, then 1-3 exchanges. In an exchange
the user asks (5-60 words), and the assistant either answers (10-150 words)
or calls one declared tool (`arguments` an object, or in one call of five
a JSON string as OpenAI's API writes it), the tool answers (a JSON result
or text, with `tool_call_id` and `name`) and the assistant answers. One
assistant turn in ten also has `reasoning_content`. The words are those of
gen_chat_jsonl.py (some non-ASCII). Seeded; standard library only; write it
outside the repository (e.g. /tmp)."""
import json

from gen_chat_jsonl import WORDS, sentence, write_jsonl


def prop(kind, desc, **extra):
    return {"type": kind, "description": desc, **extra}


def schema(name, desc, props, required):
    return {"type": "function", "function": {
        "name": name, "description": desc,
        "parameters": {"type": "object", "properties": props, "required": required}}}


TOOLS = [
    schema("get_weather", "Current weather for a location.",
           {"location": prop("string", "City and country, e.g. Paris, France"),
            "unit": prop("string", "Temperature unit", enum=["celsius", "fahrenheit"])},
           ["location"]),
    schema("search_web", "Search the web and return the top results.",
           {"query": prop("string", "The search query"),
            "max_results": prop("integer", "How many results, 1-10")}, ["query"]),
    schema("send_email", "Send an email on the user's behalf.",
           {"to": prop("array", "Recipients", items={"type": "string"}),
            "subject": prop("string", "Subject line"), "body": prop("string", "Plain text body")},
           ["to", "subject", "body"]),
    schema("create_event", "Create a calendar event.",
           {"title": prop("string", "Event title"),
            "start": prop("string", "ISO 8601 start time"),
            "duration_minutes": prop("integer", "Length in minutes"),
            "attendees": prop("array", "Emails of attendees", items={"type": "string"})},
           ["title", "start"]),
    schema("convert_currency", "Convert an amount between currencies.",
           {"amount": prop("number", "Amount to convert"),
            "from": prop("string", "ISO currency code"), "to": prop("string", "ISO currency code")},
           ["amount", "from", "to"]),
    schema("get_stock_price", "Latest price of a stock.",
           {"symbol": prop("string", "Ticker symbol, e.g. AAPL")}, ["symbol"]),
    schema("translate", "Translate text into another language.",
           {"text": prop("string", "Text to translate"),
            "target_language": prop("string", "Language code", enum=["en", "fr", "de", "ja", "zh"])},
           ["text", "target_language"]),
    schema("run_sql", "Run a read-only SQL query.",
           {"query": prop("string", "SQL SELECT statement"),
            "options": prop("object", "Execution options",
                            properties={"timeout_s": {"type": "number"},
                                        "limit": {"type": "integer"}})}, ["query"]),
]


def value(r, spec):
    kind = spec["type"]
    if "enum" in spec:
        return r.choice(spec["enum"])
    if kind == "string":
        return " ".join(r.choice(WORDS) for _ in range(r.randint(1, 8)))
    if kind == "integer":
        return r.randint(0, 5000)
    if kind == "number":
        return round(r.uniform(0, 1000), r.randint(0, 3))
    if kind == "array":
        return [value(r, spec["items"]) for _ in range(r.randint(1, 3))]
    return {k: value(r, v) for k, v in spec["properties"].items() if r.random() < 0.7}


def call(r, tool, n):
    fn = tool["function"]
    props = fn["parameters"]["properties"]
    args = {k: value(r, v) for k, v in props.items()
            if k in fn["parameters"]["required"] or r.random() < 0.5}
    if r.random() < 0.2:
        args = json.dumps(args, ensure_ascii=False)
    return {"id": f"call_{n}", "type": "function",
            "function": {"name": fn["name"], "arguments": args}}


def result(r):
    if r.random() < 0.5:
        return sentence(r, 3, 30)
    return json.dumps({"status": "ok", "value": r.randint(0, 10**6),
                       "note": sentence(r, 2, 12)}, ensure_ascii=False)


def conversation(r):
    tools = r.sample(TOOLS, r.randint(1, 4))
    msgs = []
    if r.random() < 0.2:
        msgs.append({"role": "system", "content": sentence(r, 5, 20)})
    for i in range(r.randint(1, 3)):
        msgs.append({"role": "user", "content": sentence(r, 5, 60)})
        if r.random() < 0.7:
            c = call(r, r.choice(tools), i)
            msgs.append({"role": "assistant", "content": "", "tool_calls": [c]})
            msgs.append({"role": "tool", "tool_call_id": c["id"], "name": c["function"]["name"],
                         "content": result(r)})
        answer = {"role": "assistant", "content": sentence(r, 10, 150)}
        if r.random() < 0.1:
            answer["reasoning_content"] = sentence(r, 10, 60)
        msgs.append(answer)
    return {"tools": tools, "messages": msgs}


if __name__ == "__main__":
    write_jsonl(conversation)
