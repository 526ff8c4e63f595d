/* libFuzzer harness for one JSONL line -> one example (data/prepare_example.c)
 * in every format, with the byte tokenizer and no chat template, and as a
 * chat example with a tool-calling template (messages as given, a tools
 * column, documents, chat_template_kwargs; train_on_reasoning on and off).
 *
 * Whatever the line holds, the converter must either refuse it with one line
 * that starts with "fuzz.jsonl:N: " (N >= 7), or produce tokens inside the vocabulary
 * with a 0/1 mask, the plain layouts ending in a trained EOS. ASan checks
 * that nothing outside the line is read (it is an exact-size copy). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/prepare_internal.h"

#include "fuzz_check.h"

/* "fuzz.jsonl:N: ..." with N >= 7: the value starts on line 7, and a JSON
 * array's element (data/jsonl.h) may span lines, so an error inside it
 * names the line it is on. */
static int error_line_ok(const char *msg) {
  if (strncmp(msg, "fuzz.jsonl:", 11) != 0)
    return 0;
  char *end;
  long n = strtol(msg + 11, &end, 10);
  return n >= 7 && end[0] == ':' && end[1] == ' ';
}

/* A template that writes every kind of message field (as configs/templates/
 * chatml-tools.jinja, plus reasoning and documents). */
static const char TEMPLATE[] =
    "{%- if tools %}<|im_start|>system\nTools:{% for t in tools %} {{ t.function.name }}"
    "{% endfor %}<|im_end|>\n{% endif %}{% for d in documents or [] %}[{{ d.title }}]"
    "{% endfor %}{%- for m in messages %}<|im_start|>{{ m.role }}\n"
    "{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}"
    "{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content or [] %}"
    "{{ p.text }}{% endfor %}{% endif %}{% for c in m.tool_calls or [] %}<tool_call>"
    "{{ {'name': c.function.name, 'arguments': c.function.arguments} | tojson }}</tool_call>"
    "{% endfor %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% endif %}";

static void check_chat(const fsdpc_prep_example *ex) {
  if (ex->st != FSDPC_OK) {
    CHECK(ex->err.status == ex->st);
    CHECK(error_line_ok(ex->err.msg));
    CHECK(strchr(ex->err.msg, '\n') == NULL);
    CHECK(ex->ids == NULL);
    return;
  }
  CHECK(ex->copies >= 0 && ex->copies <= 1000);
  for (int64_t i = 0; i < ex->n; i++)
    CHECK(ex->ids[i] >= 0 && ex->ids[i] < FSDPC_BYTE_VOCAB && ex->mask[i] <= 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static fsdpc_tokenizer *tok;
  static fsdpc_chat_template *tmpl;
  fsdpc_err err = {0};
  if (!tok)
    CHECK(fsdpc__tokenizer_byte_create(&tok, &err) == FSDPC_OK);
  if (!tmpl) {
    CHECK(fsdpc__chat_template_from_string(TEMPLATE, strlen(TEMPLATE), "tools.jinja", NULL,
                                           "<|im_end|>", &tmpl, &err) == FSDPC_OK);
    fsdpc__chat_template_set_limits(tmpl, 200000, 1 << 20);
    fsdpc__chat_template_set_max_memory(tmpl, (size_t)64 << 20);
  }
  char *line = malloc(size + 1); /* the reader hands out NUL-terminated lines */
  CHECK(line);
  memcpy(line, data, size);
  line[size] = '\0';
  fsdpc_prepare_opts o;
  fsdpc__prepare_opts_default(&o);
  fsdpc_jsonl_line jl = {line, size, 7, 1};
  for (int format = FSDPC_FORMAT_TEXT; format <= FSDPC_FORMAT_CHAT; format++) {
    fsdpc_prep_ctx c = {.o = &o,
                        .format = format,
                        .tok = tok,
                        .tmpl = NULL,
                        .add_bos = 1,
                        .bos = FSDPC_BYTE_BOS,
                        .eos = FSDPC_BYTE_EOS};
    fsdpc_prep_example ex;
    fsdpc__prep_example(&c, "fuzz.jsonl", &jl, format == FSDPC_FORMAT_TEXT, &ex);
    if (ex.st != FSDPC_OK) {
      CHECK(ex.err.status == ex.st);
      CHECK(error_line_ok(ex.err.msg));
      CHECK(strchr(ex.err.msg, '\n') == NULL);
      CHECK(ex.ids == NULL);
    } else {
      CHECK(format != FSDPC_FORMAT_CHAT); /* no template: chat cannot succeed */
      CHECK(ex.n >= 2 && ex.ids[0] == FSDPC_BYTE_BOS && ex.mask[0] == 0);
      CHECK(ex.ids[ex.n - 1] == FSDPC_BYTE_EOS && ex.mask[ex.n - 1] == 1);
      CHECK(ex.copies >= 0 && ex.copies <= 1000);
      for (int64_t i = 0; i < ex.n; i++)
        CHECK(ex.ids[i] >= 0 && ex.ids[i] < FSDPC_BYTE_VOCAB && ex.mask[i] <= 1);
      /* byte tokens: the text itself, byte by byte; a byte of a multi-byte
       * character carries the character's range (data/tokenizer_byte.c) */
      for (int64_t i = 1, p = ex.text && ex.n > 2 ? (int64_t)ex.offsets[1][0] : 0;
           ex.text && i + 1 < ex.n; i++, p++)
        CHECK((int64_t)ex.offsets[i][0] <= p && p < (int64_t)ex.offsets[i][1] &&
              ex.offsets[i][1] - ex.offsets[i][0] <= 4 && (unsigned char)ex.text[p] == ex.ids[i]);
    }
    fsdpc__prep_example_free(&ex);
  }
  for (int reasoning = 0; reasoning < 2; reasoning++) {
    o.train_on_reasoning = reasoning;
    fsdpc_prep_ctx c = {.o = &o,
                        .format = FSDPC_FORMAT_CHAT,
                        .tok = tok,
                        .tmpl = tmpl,
                        .bos = FSDPC_BYTE_BOS,
                        .eos = FSDPC_BYTE_EOS};
    fsdpc_prep_example ex;
    fsdpc__prep_example(&c, "fuzz.jsonl", &jl, reasoning, &ex);
    check_chat(&ex);
    fsdpc__prep_example_free(&ex);
  }
  free(line);
  return 0;
}
