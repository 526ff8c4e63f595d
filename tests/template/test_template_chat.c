/* Chat templates of model folders: where the template comes from (string,
 * named list, chat_template.jinja, a file), special tokens, bad folders,
 * bad conversations, and the assistant mask (train flags, train_on modes,
 * {% generation %} blocks, refusal where the rule cannot apply). */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../data/data_testutil.h"
#include "data/chat.h"

#define FIXTURES FSDPC_SOURCE_DIR "/tests/fixtures/chat_templates"

static void mkdir_tmp(char *out, size_t cap, const char *name) {
  tmp_path(out, cap, name);
  mkdir(out, 0755);
}

static void write_in(const char *dir, const char *file, const char *text) {
  char p[4096];
  snprintf(p, sizeof p, "%s/%s", dir, file);
  spit(p, text, strlen(text));
}

static fsdpc_chat_template *load_ok(const char *dir, const char *file, const char *name) {
  fsdpc_err err = {0};
  fsdpc_chat_template *t = NULL;
  ck_assert_msg(fsdpc__chat_template_load(dir, file, name, &t, &err) == FSDPC_OK, "%s", err.msg);
  return t;
}

static char *render_ok(fsdpc_chat_template *t, const char *msgs_json, int agp, int train_on,
                       fsdpc_chat_span **spans, size_t *ns) {
  cJSON *m = cJSON_Parse(msgs_json);
  ck_assert_ptr_nonnull(m);
  fsdpc_err err = {0};
  char *text = NULL;
  size_t n = 0;
  ck_assert_msg(fsdpc__chat_render(t, m, agp, train_on, &text, &n, spans, ns, &err) == FSDPC_OK,
                "%s", err.msg);
  cJSON_Delete(m);
  return text;
}

static void span_is(const char *text, const fsdpc_chat_span *s, const char *want) {
  ck_assert_uint_eq(s->end - s->begin, strlen(want));
  ck_assert_msg(memcmp(text + s->begin, want, strlen(want)) == 0, "span '%.*s' != '%s'",
                (int)(s->end - s->begin), text + s->begin, want);
}

START_TEST(fixture_tokens_and_origin) {
  fsdpc_chat_template *t = load_ok(FIXTURES "/llama2-chat", NULL, NULL);
  ck_assert_str_eq(fsdpc__chat_template_bos(t), "<s>"); /* an AddedToken object */
  ck_assert_str_eq(fsdpc__chat_template_eos(t), "</s>");
  ck_assert_ptr_nonnull(
      strstr(fsdpc__chat_template_origin(t), "tokenizer_config.json:chat_template"));
  fsdpc__chat_template_destroy(t);
  t = load_ok(FIXTURES "/qwen2.5-instruct", NULL, NULL);
  ck_assert_ptr_null(fsdpc__chat_template_bos(t)); /* null in the config */
  ck_assert_str_eq(fsdpc__chat_template_eos(t), "<|im_end|>");
  fsdpc__chat_template_destroy(t);
  fsdpc__chat_template_destroy(NULL);
}
END_TEST

START_TEST(template_sources) {
  char dir[4096];
  mkdir_tmp(dir, sizeof dir, "named");
  write_in(dir, "tokenizer_config.json",
           "{\"eos_token\": \"</s>\", \"chat_template\": [{\"name\": \"default\", \"template\": "
           "\"D{{ messages | length }}{{ eos_token }}\"}, {\"name\": \"tool_use\", \"template\": "
           "\"T\"}]}");
  const char *msgs = "[{\"role\": \"user\", \"content\": \"x\"}]";
  fsdpc_chat_template *t = load_ok(dir, NULL, NULL);
  char *s = render_ok(t, msgs, 0, FSDPC_TRAIN_ON_ASSISTANT, NULL, NULL);
  ck_assert_str_eq(s, "D1</s>");
  free(s);
  fsdpc__chat_template_destroy(t);
  t = load_ok(dir, NULL, "tool_use");
  s = render_ok(t, msgs, 0, FSDPC_TRAIN_ON_ASSISTANT, NULL, NULL);
  ck_assert_str_eq(s, "T");
  free(s);
  fsdpc__chat_template_destroy(t);
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__chat_template_load(dir, NULL, "nope", &t, &err), FSDPC_INVALID_USAGE);
  ASSERT_ONE_LINE_ERROR(err, "no chat template named 'nope'", "default, tool_use");
  /* chat_template.jinja wins over the config's template. */
  write_in(dir, "chat_template.jinja", "J{{ bos_token is defined }}\n");
  t = load_ok(dir, NULL, NULL);
  s = render_ok(t, msgs, 0, FSDPC_TRAIN_ON_ASSISTANT, NULL, NULL);
  ck_assert_str_eq(s, "JFalse");
  free(s);
  fsdpc__chat_template_destroy(t);
  /* An explicit file wins over both. */
  char file[4200];
  snprintf(file, sizeof file, "%s/mine.jinja", dir);
  write_in(dir, "mine.jinja", "M{{ eos_token }}");
  t = load_ok(dir, file, NULL);
  s = render_ok(t, msgs, 0, FSDPC_TRAIN_ON_ASSISTANT, NULL, NULL);
  ck_assert_str_eq(s, "M</s>");
  free(s);
  fsdpc__chat_template_destroy(t);
  t = load_ok(NULL, file, NULL);
  fsdpc__chat_template_destroy(t);
}
END_TEST

START_TEST(bad_folders) {
  char dir[4096];
  fsdpc_err err = {0};
  fsdpc_chat_template *t = NULL;
  mkdir_tmp(dir, sizeof dir, "none");
  write_in(dir, "tokenizer_config.json", "{\"eos_token\": \"</s>\"}");
  ck_assert_int_eq(fsdpc__chat_template_load(dir, NULL, NULL, &t, &err), FSDPC_INVALID_USAGE);
  ASSERT_ONE_LINE_ERROR(err, "no chat template", "data.chat_template");
  write_in(dir, "tokenizer_config.json", "{\"chat_template\": ");
  ck_assert_int_eq(fsdpc__chat_template_load(dir, NULL, NULL, &t, &err), FSDPC_INVALID_USAGE);
  ASSERT_ONE_LINE_ERROR(err, "tokenizer_config.json", "not a JSON object");
  write_in(dir, "tokenizer_config.json", "{\"chat_template\": \"{% for %}\"}");
  ck_assert_int_eq(fsdpc__chat_template_load(dir, NULL, NULL, &t, &err), FSDPC_INVALID_USAGE);
  ASSERT_ONE_LINE_ERROR(err, "tokenizer_config.json:chat_template:1:8:");
  ck_assert_int_eq(fsdpc__chat_template_load(dir, "/nonexistent/x.jinja", NULL, &t, &err),
                   FSDPC_INVALID_USAGE);
  ASSERT_ONE_LINE_ERROR(err, "/nonexistent/x.jinja", "cannot read");
  ck_assert_ptr_null(t);
}
END_TEST

START_TEST(bad_conversations) {
  fsdpc_chat_template *t = load_ok(FIXTURES "/zephyr-7b-beta", NULL, NULL);
  const char *bad[][2] = {
      {"{\"role\": \"user\"}", "messages: expected a list of messages"},
      {"[{\"content\": \"x\"}]", "messages[0].role"},
      {"[{\"role\": 3, \"content\": \"x\"}]", "messages[0].role: expected a string"},
      {"[{\"role\": \"assistant\", \"content\": \"x\", \"train\": \"no\"}]", "messages[0].train"},
      {"[1]", "messages[0]: expected an object"}};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    cJSON *m = cJSON_Parse(bad[k][0]);
    fsdpc_err err = {0};
    char *text = NULL;
    size_t n;
    ck_assert_int_eq(fsdpc__chat_render(t, m, 0, 0, &text, &n, NULL, NULL, &err),
                     FSDPC_INVALID_USAGE);
    ASSERT_ONE_LINE_ERROR(err, bad[k][1]);
    ck_assert_ptr_null(text);
    cJSON_Delete(m);
  }
  fsdpc__chat_template_destroy(t);
  /* The template's own refusal, with its message. */
  t = load_ok(FIXTURES "/mistral-instruct-v0.1", NULL, NULL);
  cJSON *m = cJSON_Parse("[{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"user\", "
                         "\"content\": \"b\"}]");
  fsdpc_err err = {0};
  char *text = NULL;
  size_t n;
  ck_assert_int_eq(fsdpc__chat_render(t, m, 0, 0, &text, &n, NULL, NULL, &err),
                   FSDPC_INVALID_USAGE);
  ASSERT_ONE_LINE_ERROR(err, "tokenizer_config.json:chat_template:1:",
                        "raise_exception: Conversation roles must alternate");
  cJSON_Delete(m);
  fsdpc__chat_template_destroy(t);
}
END_TEST

START_TEST(mask_modes) {
  fsdpc_chat_template *t = load_ok(FIXTURES "/llama3-instruct", NULL, NULL);
  const char *msgs =
      "[{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": "
      "\"q1\"}, {\"role\": \"assistant\", \"content\": \" a1 \", \"train\": false}, "
      "{\"role\": \"user\", \"content\": \"q2\"}, {\"role\": \"assistant\", "
      "\"content\": \"a2\"}, {\"role\": \"user\", \"content\": \"q3\"}, {\"role\": "
      "\"assistant\", \"content\": \" a3\\n\"}]";
  fsdpc_chat_span *sp;
  size_t ns;
  char *s = render_ok(t, msgs, 0, FSDPC_TRAIN_ON_ASSISTANT, &sp, &ns);
  ck_assert_uint_eq(ns, 2); /* a1 is train: false */
  span_is(s, &sp[0], "a2<|eot_id|>");
  span_is(s, &sp[1], "a3<|eot_id|>"); /* the template trims */
  /* The header before each span is not a target. */
  ck_assert_int_eq(memcmp(s + sp[0].begin - 13, "<|end_header_id|>\n\n" + 6, 13), 0);
  free(s);
  free(sp);
  s = render_ok(t, msgs, 0, FSDPC_TRAIN_ON_LAST_ASSISTANT, &sp, &ns);
  ck_assert_uint_eq(ns, 1);
  span_is(s, &sp[0], "a3<|eot_id|>");
  free(sp);
  size_t len = strlen(s);
  free(s);
  s = render_ok(t, msgs, 0, FSDPC_TRAIN_ON_ALL, &sp, &ns);
  ck_assert_uint_eq(ns, 1);
  ck_assert_uint_eq(sp[0].begin, 0);
  ck_assert_uint_eq(sp[0].end, len);
  free(s);
  free(sp);
  fsdpc__chat_template_destroy(t);
}
END_TEST

/* Contents that start with every sentinel byte the one-render way could
 * use: the spans come from the exact per-message way, and are the same. */
START_TEST(mask_per_message_fallback) {
  fsdpc_chat_template *t = load_ok(FIXTURES "/zephyr-7b-beta", NULL, NULL);
  const char *msgs =
      "[{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": "
      "\"\\u0001a\"}, {\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", "
      "\"content\": \"\\u0003b\"}, {\"role\": \"user\", \"content\": \"q\"}, {\"role\": "
      "\"assistant\", \"content\": \"\\u0005c\"}, {\"role\": \"user\", \"content\": \"q\"}, "
      "{\"role\": \"assistant\", \"content\": \"\\u000ed\"}]";
  fsdpc_chat_span *sp;
  size_t ns;
  char *s = render_ok(t, msgs, 0, FSDPC_TRAIN_ON_ASSISTANT, &sp, &ns);
  ck_assert_uint_eq(ns, 4);
  span_is(s, &sp[0], "\001a</s>");
  span_is(s, &sp[1], "\003b</s>");
  span_is(s, &sp[2], "\005c</s>");
  span_is(s, &sp[3], "\016d</s>");
  free(s);
  free(sp);
  fsdpc__chat_template_destroy(t);
}
END_TEST

START_TEST(mask_generation_blocks_and_refusal) {
  char dir[4096], file[4200];
  mkdir_tmp(dir, sizeof dir, "gen");
  snprintf(file, sizeof file, "%s/gen.jinja", dir);
  write_in(dir, "gen.jinja",
           "{% for m in messages %}{% if m.role == 'assistant' %}<a>{% generation %}"
           "{{ m.content | upper }}<end>{% endgeneration %}\n{% else %}<u>{{ m.content }}\n"
           "{% endif %}{% endfor %}");
  fsdpc_chat_template *t = load_ok(NULL, file, NULL);
  const char *msgs = "[{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", "
                     "\"content\": \"yes\"}, {\"role\": \"user\", \"content\": \"q\"}, {\"role\": "
                     "\"assistant\", \"content\": \"no\", \"train\": false}]";
  fsdpc_chat_span *sp;
  size_t ns;
  char *s = render_ok(t, msgs, 0, FSDPC_TRAIN_ON_ASSISTANT, &sp, &ns);
  ck_assert_uint_eq(ns, 1);
  span_is(s, &sp[0], "YES<end>");
  free(s);
  free(sp);
  fsdpc__chat_template_destroy(t);
  /* Without generation blocks, content the template changes is refused. */
  write_in(dir, "upper.jinja",
           "{% for m in messages %}{{ m.role }}: {{ m.content | upper }}\n{% endfor %}");
  snprintf(file, sizeof file, "%s/upper.jinja", dir);
  t = load_ok(NULL, file, NULL);
  cJSON *m = cJSON_Parse(msgs);
  fsdpc_err err = {0};
  char *text = NULL;
  size_t n;
  ck_assert_int_eq(fsdpc__chat_render(t, m, 0, 0, &text, &n, &sp, &ns, &err), FSDPC_INVALID_USAGE);
  ASSERT_ONE_LINE_ERROR(err, "upper.jinja: messages[1]:", "none of its content", "generation");
  /* train_on all needs no placement. */
  ck_assert_int_eq(fsdpc__chat_render(t, m, 0, FSDPC_TRAIN_ON_ALL, &text, &n, &sp, &ns, &err),
                   FSDPC_OK);
  ck_assert_uint_eq(ns, 1);
  free(text);
  free(sp);
  cJSON_Delete(m);
  fsdpc__chat_template_destroy(t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("template_chat");
  TCase *tc = tcase_create("all");
  tcase_add_test(tc, fixture_tokens_and_origin);
  tcase_add_test(tc, template_sources);
  tcase_add_test(tc, bad_folders);
  tcase_add_test(tc, bad_conversations);
  tcase_add_test(tc, mask_modes);
  tcase_add_test(tc, mask_per_message_fallback);
  tcase_add_test(tc, mask_generation_blocks_and_refusal);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
