/* libFuzzer harness for the Jinja subset engine and the chat layer.
 *
 * The input is a template source. A conversation is generated from a hash
 * of the input (so every mutation meets another one): system, user,
 * assistant and tool messages whose content is a string, null, missing or
 * a list of parts; assistant tool calls with arguments as an object or a
 * JSON string, reasoning_content / thinking, unknown keys; a tools column,
 * documents and template kwargs, all as data prepare reads them (numbers
 * keep their text). Whatever the input holds, parsing either refuses it
 * with one line, or gives a template that renders (within small step,
 * output and memory bounds) to a NUL-terminated text whose write ends
 * increase inside it, or a one-line refusal; rendered as a chat template
 * with every train_on and train_on_reasoning, the target spans are sorted,
 * non-empty, non-overlapping and inside the text. ASan / UBSan catch the
 * rest. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/chat.h"
#include "template/jinja.h"

#include "fuzz_check.h"

#define MAX_MEMORY ((size_t)64 << 20)
#define MAX_STEPS 20000
#define MAX_OUTPUT ((size_t)1 << 20)

typedef struct gen {
  uint64_t s;
  char *buf;
  size_t len, cap;
} gen;

static uint64_t next(gen *g) { /* splitmix64 */
  uint64_t z = (g->s += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}
static unsigned below(gen *g, unsigned n) {
  return (unsigned)(next(g) % n);
}

static void put(gen *g, const char *s) {
  size_t n = strlen(s);
  if (g->len + n + 1 > g->cap) {
    g->cap = (g->len + n + 1) * 2;
    g->buf = realloc(g->buf, g->cap);
    CHECK(g->buf);
  }
  memcpy(g->buf + g->len, s, n + 1);
  g->len += n;
}

/* JSON string literals (escaped as JSON text): edge cases of the engine and
 * of the mask (markers the templates write, private-use characters the
 * mask's sentinels use, whitespace the templates trim). */
static const char *const strs[] = {
    "\"\"",           "\" hi \"",           "\"h\\u00e9llo\"", "\"a\\nb\"",    "\"{{ x }}\"",
    "\"<|im_end|>\"", "\"</s>\"",           "\"\\ue000\"",     "\"\\uf8f0x\"", "\"  \\n\"",
    "\"2 + 2 = 4\"",  "\"\\ud83d\\ude00\"", "\"<think>\"",     "\"x\\ty\"",    "\"[TOOL_CALLS]\""};
static const char *const nums[] = {"0",    "-1",  "20.0", "1e300", "123456789012345678901234567890",
                                   "-0.0", "3.14"};

static void str(gen *g) {
  put(g, strs[below(g, sizeof strs / sizeof *strs)]);
}

static void value(gen *g, int depth) {
  switch (below(g, depth > 2 ? 4 : 7)) {
  case 0:
    str(g);
    break;
  case 1:
    put(g, nums[below(g, sizeof nums / sizeof *nums)]);
    break;
  case 2:
    put(g, below(g, 2) ? "true" : "null");
    break;
  case 3:
    put(g, "false");
    break;
  case 4:
  case 5: {
    put(g, "{");
    unsigned n = below(g, 3);
    for (unsigned i = 0; i < n; i++) {
      put(g, i ? ", " : "");
      put(g, (const char *[]){"\"a\"", "\"items\"", "\"type\"", "\"content\""}[below(g, 4)]);
      put(g, ": ");
      value(g, depth + 1);
    }
    put(g, "}");
    break;
  }
  default: {
    put(g, "[");
    unsigned n = below(g, 3);
    for (unsigned i = 0; i < n; i++) {
      put(g, i ? ", " : "");
      value(g, depth + 1);
    }
    put(g, "]");
  }
  }
}

static void content(gen *g) {
  switch (below(g, 10)) {
  case 0:
    return; /* no content key */
  case 1:
    put(g, ", \"content\": null");
    return;
  case 2:
    put(g, ", \"content\": [{\"type\": \"text\", \"text\": ");
    str(g);
    put(g, below(g, 2) ? "}, {\"type\": \"image\"}]" : "}]");
    return;
  default:
    put(g, ", \"content\": ");
    str(g);
  }
}

static void tool_calls(gen *g) {
  put(g, ", \"tool_calls\": [");
  unsigned n = 1 + below(g, 2);
  for (unsigned i = 0; i < n; i++) {
    put(g, i ? ", " : "");
    put(g, below(g, 2) ? "{\"id\": \"c1\", \"type\": \"function\", " : "{");
    put(g, "\"function\": {\"name\": ");
    put(g, below(g, 4) ? "\"get_weather\"" : "\"\"");
    put(g, ", \"arguments\": ");
    unsigned k = below(g, 4);
    if (k == 0)
      put(g, "\"{\\\"city\\\": \\\"Paris\\\"}\"");
    else if (k == 1)
      value(g, 0);
    else
      put(g, "{\"city\": \"Paris\", \"days\": 3}");
    put(g, "}}");
  }
  put(g, "]");
}

static void message(gen *g, const char *role, int calls) {
  put(g, "{\"role\": \"");
  put(g, role);
  put(g, "\"");
  content(g);
  if (!strcmp(role, "assistant")) {
    if (calls)
      tool_calls(g);
    if (below(g, 3) == 0) {
      put(g, below(g, 2) ? ", \"reasoning_content\": " : ", \"thinking\": ");
      str(g);
    }
  } else if (!strcmp(role, "tool") && below(g, 4)) {
    put(g, ", \"tool_call_id\": \"c1\", \"name\": \"get_weather\"");
  }
  if (below(g, 6) == 0) {
    put(g, ", \"meta\": ");
    value(g, 1);
  }
  put(g, "}");
}

/* {"messages": [...], "tools": ..., "documents": ..., "kwargs": {...}}:
 * mostly as people write them (an optional system prompt, user and
 * assistant turns, tool results after a call), sometimes any order. */
static void conversation(gen *g) {
  static const char *const roles[] = {"user", "assistant", "tool", "system", "developer"};
  put(g, "{\"messages\": [");
  int wild = below(g, 5) == 0, first = 1;
  if (below(g, 3) == 0) {
    message(g, "system", 0);
    first = 0;
  }
  unsigned n = 1 + below(g, 4);
  for (unsigned i = 0; i < n; i++) {
    put(g, first ? "" : ", ");
    first = 0;
    if (wild) {
      message(g, roles[below(g, 5)], below(g, 2));
      continue;
    }
    message(g, "user", 0);
    if (i + 1 == n && below(g, 4) == 0)
      break; /* ends with the user */
    put(g, ", ");
    int calls = below(g, 3) == 0;
    message(g, "assistant", calls);
    if (calls) {
      put(g, ", ");
      message(g, "tool", 0);
      if (below(g, 2)) {
        put(g, ", ");
        message(g, "assistant", 0);
      }
    }
  }
  put(g, "], \"tools\": ");
  unsigned k = below(g, 8);
  if (k == 0)
    value(g, 1);
  else if (k < 4)
    put(g, "null");
  else
    put(g, "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "
           "\"Weather.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": "
           "{\"type\": \"string\"}}, \"required\": [\"city\"]}}}]");
  put(g, ", \"documents\": ");
  put(g, below(g, 3) ? "null" : "[{\"title\": \"T\", \"text\": \"doc\"}]");
  put(g, ", \"kwargs\": {");
  k = below(g, 4);
  if (k == 1)
    put(g, "\"enable_thinking\": false");
  else if (k == 2)
    put(g, "\"enable_thinking\": true, \"custom\": [1, 2]");
  put(g, "}}");
}

static void check_err(const fsdpc_err *err, fsdpc_status s) {
  CHECK(s != FSDPC_OK && err->status == s);
  CHECK(err->msg[0] && strchr(err->msg, '\n') == NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  gen g = {.s = 1469598103934665603u};
  for (size_t i = 0; i < size; i++)
    g.s = (g.s ^ data[i]) * 1099511628211u;
  conversation(&g);
  cJSON *conv = cJSON_Parse(g.buf);
  CHECK(conv);
  char why[256];
  CHECK(fsdpc__jinja_json_text(conv, g.buf, g.len, why, sizeof why) == 0);
  cJSON *msgs = cJSON_GetObjectItemCaseSensitive(conv, "messages");
  cJSON *tools = cJSON_GetObjectItemCaseSensitive(conv, "tools");
  cJSON *docs = cJSON_GetObjectItemCaseSensitive(conv, "documents");
  cJSON *kwargs = cJSON_GetObjectItemCaseSensitive(conv, "kwargs");
  unsigned pick = below(&g, 8);

  /* the engine alone: the conversation's keys as template variables */
  cJSON *vars = cJSON_CreateObject();
  CHECK(vars);
  for (const char *k = "messages\0tools\0documents\0"; *k; k += strlen(k) + 1)
    cJSON_AddItemReferenceToObject(vars, k, cJSON_GetObjectItemCaseSensitive(conv, k));
  cJSON_AddBoolToObject(vars, "add_generation_prompt", pick & 1);
  cJSON_AddStringToObject(vars, "bos_token", "<s>");
  cJSON_AddStringToObject(vars, "eos_token", "</s>");
  fsdpc_err err = {0};
  fsdpc_jinja *t = NULL;
  fsdpc_status s = fsdpc__jinja_parse((const char *)data, size, "fuzz.jinja", &t, &err);
  if (s != FSDPC_OK) {
    CHECK(t == NULL);
    check_err(&err, s);
    CHECK(strncmp(err.msg, "fuzz.jinja", 10) == 0 || strstr(err.msg, "out of memory"));
  } else {
    char *out = NULL;
    size_t n = 0, n_gen = 0, n_ends = 0, *ends = NULL;
    fsdpc_jinja_span *gen_spans = NULL;
    fsdpc_jinja_opts o = {.now = 1700000000,
                          .max_steps = MAX_STEPS,
                          .max_output = MAX_OUTPUT,
                          .max_memory = MAX_MEMORY,
                          .gen = &gen_spans,
                          .n_gen = &n_gen,
                          .ends = &ends,
                          .n_ends = &n_ends};
    s = fsdpc__jinja_render_opts(t, vars, &o, &out, &n, &err);
    if (s == FSDPC_OK) {
      CHECK(out && out[n] == '\0' && n <= MAX_OUTPUT);
      for (size_t i = 0; i < n_gen; i++)
        CHECK(gen_spans[i].begin <= gen_spans[i].end && gen_spans[i].end <= n);
      for (size_t i = 0; i < n_ends; i++)
        CHECK(ends[i] <= n && (i == 0 || ends[i] > ends[i - 1]));
    } else {
      CHECK(out == NULL);
      check_err(&err, s);
    }
    free(out);
    free(gen_spans);
    free(ends);
    fsdpc__jinja_destroy(t);
  }
  cJSON_Delete(vars);

  /* the chat layer: every train_on, reasoning trained or not */
  fsdpc_chat_template *ct = NULL;
  s = fsdpc__chat_template_from_string((const char *)data, size, "fuzz.jinja", "<s>", "</s>", &ct,
                                       &err);
  if (s != FSDPC_OK) {
    check_err(&err, s);
  } else {
    fsdpc__chat_template_set_time(ct, 1700000000);
    fsdpc__chat_template_set_limits(ct, MAX_STEPS, MAX_OUTPUT);
    fsdpc__chat_template_set_max_memory(ct, MAX_MEMORY);
    fsdpc_chat_ctx ctx = {tools, docs, kwargs};
    for (int train_on = 0; train_on < 3; train_on++) {
      fsdpc_chat_opts co = {(pick & 2) != 0, train_on, (int)(pick >> 2) & 1};
      char *out = NULL;
      size_t n = 0, ns = 0;
      fsdpc_chat_span *spans = NULL;
      s = fsdpc__chat_render_ctx(ct, msgs, &ctx, &co, &out, &n, &spans, &ns, &err);
      if (s == FSDPC_OK) {
        CHECK(out[n] == '\0');
        for (size_t i = 0; i < ns; i++) {
          CHECK(spans[i].begin < spans[i].end && spans[i].end <= n);
          CHECK(i == 0 || spans[i].begin >= spans[i - 1].end);
        }
        CHECK(train_on != FSDPC_TRAIN_ON_ALL || ns == (n ? 1u : 0u));
      } else {
        CHECK(out == NULL);
        check_err(&err, s);
      }
      free(out);
      free(spans);
    }
    fsdpc__chat_template_destroy(ct);
  }
  cJSON_Delete(conv);
  free(g.buf);
  return 0;
}
