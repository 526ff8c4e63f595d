/* libFuzzer harness for the Jinja subset engine and the chat mask.
 *
 * The input is a template source. Whatever it holds, parsing either refuses
 * it with one line that names the origin, or gives a template that renders
 * (within small step and output bounds) to a NUL-terminated text or a
 * one-line refusal; rendered as a chat template over a fixed conversation,
 * the target spans are sorted, non-empty, non-overlapping and inside the
 * text. ASan / UBSan catch the rest. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/chat.h"
#include "template/jinja.h"

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond))                                                                                   \
      __builtin_trap();                                                                            \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char VARS[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", "
    "\"content\": \" h\\u00e9llo \"}, {\"role\": \"assistant\", \"content\": \"ans\", \"train\": "
    "true}, {\"role\": \"user\", \"content\": \"\"}], \"add_generation_prompt\": true, "
    "\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"tools\": null, \"n\": 3, \"f\": 1.5, "
    "\"d\": {\"a\": [1, 2, {\"b\": null}], \"s\": \"x\"}}";

static void check_err(const fsdpc_err *err, fsdpc_status s) {
  CHECK(s != FSDPC_OK && err->status == s);
  CHECK(strchr(err->msg, '\n') == NULL);
  CHECK(strncmp(err->msg, "fuzz.jinja", 10) == 0 || strstr(err->msg, "out of memory") ||
        strncmp(err->msg, "messages[", 9) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static cJSON *vars;
  if (!vars)
    vars = cJSON_Parse(VARS);
  fsdpc_err err = {0};
  fsdpc_jinja *t = NULL;
  fsdpc_status s = fsdpc__jinja_parse((const char *)data, size, "fuzz.jinja", &t, &err);
  if (s != FSDPC_OK) {
    CHECK(t == NULL);
    check_err(&err, s);
    return 0;
  }
  char *out = NULL;
  size_t n = 0;
  fsdpc_jinja_span *gen = NULL;
  size_t n_gen = 0;
  fsdpc_jinja_opts o = {
      .now = 1700000000, .max_steps = 20000, .max_output = 1 << 20, .gen = &gen, .n_gen = &n_gen};
  s = fsdpc__jinja_render_opts(t, vars, &o, &out, &n, &err);
  if (s == FSDPC_OK) {
    CHECK(out && out[n] == '\0' && n <= (1u << 20));
    for (size_t i = 0; i < n_gen; i++)
      CHECK(gen[i].begin <= gen[i].end && gen[i].end <= n);
  } else {
    CHECK(out == NULL);
    check_err(&err, s);
  }
  free(out);
  free(gen);
  fsdpc__jinja_destroy(t);

  fsdpc_chat_template *ct = NULL;
  if (fsdpc__chat_template_from_string((const char *)data, size, "fuzz.jinja", "<s>", "</s>", &ct,
                                       &err) != FSDPC_OK)
    return 0;
  fsdpc__chat_template_set_time(ct, 1700000000);
  fsdpc__chat_template_set_limits(ct, 20000, 1 << 20);
  fsdpc_chat_span *spans = NULL;
  size_t ns = 0;
  for (int train_on = 0; train_on < 3; train_on++) {
    s = fsdpc__chat_render(ct, cJSON_GetObjectItem(vars, "messages"), train_on != 1, train_on, &out,
                           &n, &spans, &ns, &err);
    if (s == FSDPC_OK) {
      CHECK(out[n] == '\0');
      for (size_t i = 0; i < ns; i++) {
        CHECK(spans[i].begin < spans[i].end && spans[i].end <= n);
        CHECK(i == 0 || spans[i].begin >= spans[i - 1].end);
      }
      CHECK(train_on != 1 || ns == (n ? 1u : 0u));
    } else {
      check_err(&err, s);
    }
    free(out);
    free(spans);
  }
  fsdpc__chat_template_destroy(ct);
  return 0;
}
