/* The chat layer with tool calls, reasoning, documents and template kwargs
 * (issue 34), on real templates of the corpus: what reaches the template,
 * which bytes are targets (assistant turns with tool calls are, tool
 * results and tool declarations are not, reasoning by train_on_reasoning),
 * and the masks that were guessed before: the original Llama 3 template's
 * now exact, Llama Guard 3's (a classifier prompt) refused. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../data/data_testutil.h"
#include "data/chat.h"
#include "template/jinja.h"

#define CORPUS FSDPC_SOURCE_DIR "/tests/fixtures/chat_corpus/templates/"

static fsdpc_chat_template *load(const char *name, const char *bos, const char *eos) {
  char path[4096];
  snprintf(path, sizeof path, CORPUS "%s.jinja", name);
  size_t n;
  char *src = (char *)slurp(path, &n);
  fsdpc_chat_template *t = NULL;
  fsdpc_err err = {0};
  ck_assert_msg(fsdpc__chat_template_from_string(src, n, name, bos, eos, &t, &err) == FSDPC_OK,
                "%s", err.msg);
  fsdpc__chat_template_set_time(t, 1700000000);
  free(src);
  return t;
}

/* Parses json the way data prepare does (numbers keep their text). */
static cJSON *parse(const char *json) {
  cJSON *j = cJSON_Parse(json);
  ck_assert_ptr_nonnull(j);
  char why[200];
  ck_assert_int_eq(fsdpc__jinja_json_text(j, json, strlen(json), why, sizeof why), 0);
  return j;
}

typedef struct result {
  char *text;
  fsdpc_chat_span *sp;
  size_t ns;
  fsdpc_err err;
  fsdpc_status st;
} result;

static result run(const fsdpc_chat_template *t, const char *msgs, const char *tools,
                  const char *kwargs, int reasoning) {
  cJSON *m = parse(msgs), *tl = tools ? parse(tools) : NULL, *kw = kwargs ? parse(kwargs) : NULL;
  fsdpc_chat_ctx ctx = {tl, NULL, kw};
  fsdpc_chat_opts o = {0, FSDPC_TRAIN_ON_ASSISTANT, reasoning};
  result r = {0};
  size_t n;
  r.st = fsdpc__chat_render_ctx(t, m, &ctx, &o, &r.text, &n, &r.sp, &r.ns, &r.err);
  cJSON_Delete(m);
  cJSON_Delete(tl);
  cJSON_Delete(kw);
  return r;
}

static void span_is(const result *r, size_t k, const char *want) {
  ck_assert_msg(r->st == FSDPC_OK, "%s", r->err.msg);
  ck_assert_msg(k < r->ns, "only %zu spans", r->ns);
  const fsdpc_chat_span *s = &r->sp[k];
  ck_assert_msg(
      s->end - s->begin == strlen(want) && !memcmp(r->text + s->begin, want, strlen(want)),
      "span %zu is '%.*s', want '%s'", k, (int)(s->end - s->begin), r->text + s->begin, want);
}

static void done(result *r) {
  free(r->text);
  free(r->sp);
}

static const char TOOL_CONV[] =
    "[{\"role\": \"user\", \"content\": \"Weather in Paris?\"},"
    " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"c1\", \"type\": "
    "\"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": "
    "\"Paris\", \"days\": 20.0}}}]},"
    " {\"role\": \"tool\", \"tool_call_id\": \"c1\", \"name\": \"get_weather\", \"content\": "
    "\"sunny\"},"
    " {\"role\": \"assistant\", \"content\": \"It is sunny.\"}]";
static const char TOOLS[] = "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
                            "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": "
                            "{\"type\": \"string\"}}}}}]";

START_TEST(tool_calls_are_targets_tool_results_are_not) {
  fsdpc_chat_template *t = load("qwen--qwen2.5-7b-instruct", NULL, "<|im_end|>");
  result r = run(t, TOOL_CONV, TOOLS, NULL, 1);
  ck_assert_uint_eq(r.ns, 2);
  span_is(&r, 0,
          "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": "
          "20.0}}\n</tool_call><|im_end|>");
  span_is(&r, 1, "It is sunny.<|im_end|>");
  /* the tool declaration and the tool result are in the text, not in a span */
  ck_assert_ptr_nonnull(strstr(r.text, "\"name\": \"get_weather\", \"parameters\""));
  ck_assert_ptr_nonnull(strstr(r.text, "<tool_response>\nsunny\n</tool_response>"));
  done(&r);
  /* arguments as a JSON string: rendered as given (as jinja2 does: this
   * template's tojson quotes it), trained the same way */
  const char *str_args =
      "[{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": null, "
      "\"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": "
      "\"{\\\"x\\\": 123456789012345678}\"}}]}]";
  r = run(t, str_args, NULL, NULL, 1);
  span_is(&r, 0,
          "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 123456789012345678}\"}\n"
          "</tool_call><|im_end|>");
  done(&r);
  fsdpc__chat_template_destroy(t);
}
END_TEST

START_TEST(reasoning_trained_or_not) {
  fsdpc_chat_template *t = load("trl-qwen3", NULL, "<|im_end|>");
  const char *conv = "[{\"role\": \"user\", \"content\": \"2+2?\"}, {\"role\": \"assistant\", "
                     "\"content\": \"4\", \"reasoning_content\": \"Add them.\"}]";
  result r = run(t, conv, NULL, NULL, 1);
  ck_assert_uint_eq(r.ns, 1);
  span_is(&r, 0, "<think>\nAdd them.\n</think>\n\n4<|im_end|>");
  done(&r);
  r = run(t, conv, NULL, NULL, 0); /* data.train_on_reasoning: false */
  ck_assert_uint_eq(r.ns, 1);
  span_is(&r, 0, "4<|im_end|>");
  ck_assert_ptr_nonnull(strstr(r.text, "<think>\nAdd them.\n</think>"));
  done(&r);
  /* enable_thinking: false reaches the template: the prompt holds the empty
   * think block, so the turn starts after it */
  const char *plain = "[{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", "
                      "\"content\": \"Hello\"}]";
  r = run(t, plain, NULL, "{\"enable_thinking\": false}", 1);
  span_is(&r, 0, "Hello<|im_end|>");
  done(&r);
  fsdpc__chat_template_destroy(t);
  /* {% generation %} blocks keep precedence; reasoning is still cut out */
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/fixtures/chat_corpus/oracles/qwen3_training.jinja",
           FSDPC_SOURCE_DIR);
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__chat_template_load(NULL, path, NULL, &t, &err), FSDPC_OK);
  r = run(t, conv, NULL, NULL, 1);
  span_is(&r, 0, "<think>\nAdd them.\n</think>\n\n4<|im_end|>\n");
  done(&r);
  r = run(t, conv, NULL, NULL, 0);
  span_is(&r, 0, "4<|im_end|>\n");
  done(&r);
  fsdpc__chat_template_destroy(t);
}
END_TEST

/* Issue 34: the original Llama 3 8B Instruct template appends a generation
 * prompt whatever add_generation_prompt says; the next turn's header token
 * was a target of every turn. */
START_TEST(llama3_original_template_exact) {
  fsdpc_chat_template *t = load("ollama-dolphin-llama3-8b", "<|begin_of_text|>", "<|eot_id|>");
  const char *conv = "[{\"role\": \"user\", \"content\": \"q1\"}, {\"role\": \"assistant\", "
                     "\"content\": \"a1\"}, {\"role\": \"user\", \"content\": \"q2\"}, {\"role\": "
                     "\"assistant\", \"content\": \"a2\"}]";
  result r = run(t, conv, NULL, NULL, 1);
  ck_assert_uint_eq(r.ns, 2);
  span_is(&r, 0, "a1<|eot_id|>");
  span_is(&r, 1, "a2<|eot_id|>");
  ck_assert_ptr_nonnull(strstr(r.text, "a2<|eot_id|><|start_header_id|>assistant"));
  done(&r);
  fsdpc__chat_template_destroy(t);
}
END_TEST

/* Issue 34: Llama Guard 3 is a classifier prompt, not a chat template: the
 * conversation is quoted inside the user's instructions and the reply is
 * asked for after them, so no text of the template marks an assistant turn
 * (before, the 8B template's target was the agent's message alone, with no
 * end-of-turn; the 11B Vision one's ran into "<END CONVERSATION>"). Both
 * real templates are refused in one line naming the template and the turn,
 * by what their renders show, not by name: the same conversation on the
 * original Llama 3 template (which also writes a generation prompt
 * whatever add_generation_prompt says) keeps an exact mask. Sources:
 * tests/fixtures/chat_corpus/manifest.json (Ollama's llama-guard3:8b and
 * meta-llama/Llama-Guard-3-11B-Vision, via huggingface.js). */
START_TEST(llama_guard_is_refused) {
  const char *conv = "[{\"role\": \"user\", \"content\": \"How do I bake bread?\"}, {\"role\": "
                     "\"assistant\", \"content\": \"Mix flour and water.\"}]";
  const char *longer = "[{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", "
                       "\"content\": \"Hello.\"}, {\"role\": \"user\", \"content\": \"How do I "
                       "bake bread?\"}, {\"role\": \"assistant\", \"content\": \"Mix flour.\"}, "
                       "{\"role\": \"user\", \"content\": \"Thanks\"}]";
  const char *parts = "[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": "
                      "\"How do I bake bread?\"}]}, {\"role\": \"assistant\", \"content\": "
                      "[{\"type\": \"text\", \"text\": \"Mix flour and water.\"}]}]";
  struct {
    const char *name, *conv, *turn;
  } cases[] = {{"ollama-llama-guard3-8b", conv, "messages[1]:"},
               {"ollama-llama-guard3-8b", longer, "messages[1]:"},
               {"meta-llama--llama-guard-3-11b-vision", parts, "messages[1]:"}};
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    fsdpc_chat_template *t = load(cases[k].name, "<|begin_of_text|>", "<|eot_id|>");
    result r = run(t, cases[k].conv, NULL, NULL, 1);
    ck_assert_int_eq(r.st, FSDPC_INVALID_USAGE);
    char where[160];
    snprintf(where, sizeof where, "%s: %s", cases[k].name, cases[k].turn);
    ASSERT_ONE_LINE_ERROR(r.err, where, "no text of the template marks it as a turn",
                          "quotes the conversation", "no assistant mask can be derived");
    done(&r);
    /* the text itself still renders (train_on: all, inference) */
    cJSON *m = parse(cases[k].conv);
    fsdpc_chat_ctx ctx = {0};
    fsdpc_chat_opts o = {0, FSDPC_TRAIN_ON_ALL, 1};
    char *text = NULL;
    size_t n, ns = 0;
    fsdpc_chat_span *sp = NULL;
    fsdpc_err err = {0};
    ck_assert_msg(fsdpc__chat_render_ctx(t, m, &ctx, &o, &text, &n, &sp, &ns, &err) == FSDPC_OK,
                  "%s", err.msg);
    ck_assert_ptr_nonnull(strstr(text, "Provide your safety assessment"));
    ck_assert_uint_eq(ns, 1);
    free(text), free(sp);
    cJSON_Delete(m);
    fsdpc__chat_template_destroy(t);
  }
  /* the same conversation on a chat template that also ignores
   * add_generation_prompt: an exact mask */
  fsdpc_chat_template *t = load("ollama-llama3-8b", "<|begin_of_text|>", "<|eot_id|>");
  result r = run(t, conv, NULL, NULL, 1);
  span_is(&r, 0, "Mix flour and water.<|eot_id|>");
  done(&r);
  fsdpc__chat_template_destroy(t);
}
END_TEST

START_TEST(messages_reach_the_template_as_given) {
  const char *src =
      "{% for m in messages %}{{ m.role }}:{{ m.meta.source if m.meta }}:{{ m.content[0].text "
      "if m.content is not string else m.content }}:{{ m.tool_call_id }}|"
      "{% endfor %}{{ tools | length }}:{{ documents[0].title }}:{{ flag }}:"
      "{{ bos_token }}";
  fsdpc_chat_template *t = NULL;
  fsdpc_err err = {0};
  ck_assert_int_eq(
      fsdpc__chat_template_from_string(src, strlen(src), "t.jinja", "<s>", NULL, &t, &err),
      FSDPC_OK);
  cJSON *m = parse("[{\"role\": \"user\", \"meta\": {\"source\": \"web\"}, \"content\": "
                   "[{\"type\": \"text\", \"text\": \"hi\"}]}, {\"role\": \"tool\", "
                   "\"tool_call_id\": \"c9\", \"content\": \"r\"}]");
  cJSON *tools = parse(TOOLS), *docs = parse("[{\"title\": \"T\", \"text\": \"x\"}]"),
        *kw = parse("{\"flag\": 20.0, \"bos_token\": \"<B>\"}");
  fsdpc_chat_ctx ctx = {tools, docs, kw};
  fsdpc_chat_opts o = {0, FSDPC_TRAIN_ON_ASSISTANT, 1};
  char *text = NULL;
  size_t n;
  ck_assert_msg(fsdpc__chat_render_ctx(t, m, &ctx, &o, &text, &n, NULL, NULL, &err) == FSDPC_OK,
                "%s", err.msg);
  ck_assert_str_eq(text, "user:web:hi:|tool::r:c9|1:T:20.0:<B>"); /* kwargs win over tokens */
  free(text);
  cJSON *bad = parse("{\"messages\": 1}");
  ctx.kwargs = bad;
  ck_assert_int_eq(fsdpc__chat_render_ctx(t, m, &ctx, &o, &text, &n, NULL, NULL, &err),
                   FSDPC_INVALID_USAGE);
  ASSERT_ONE_LINE_ERROR(err, "template kwargs: 'messages' is set by fsdpc itself");
  cJSON_Delete(bad);
  cJSON_Delete(m);
  cJSON_Delete(tools);
  cJSON_Delete(docs);
  cJSON_Delete(kw);
  fsdpc__chat_template_destroy(t);
}
END_TEST

/* A list of named templates: with none named, "default" renders
 * conversations without tools and "tool_use" those with tools (Hermes 2
 * Pro, Command-R), as transformers' get_chat_template picks them. */
START_TEST(tool_use_template_picked_with_tools) {
  char dir[4096], path[4200];
  tmp_path(dir, sizeof dir, "tooluse");
  mkdir(dir, 0755);
  snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
  const char *cfg =
      "{\"eos_token\": \"</s>\", \"chat_template\": [{\"name\": \"default\", \"template\": "
      "\"D{% for m in messages %}[{{ m.content }}</s>]{% endfor %}\"}, {\"name\": \"tool_use\", "
      "\"template\": \"T{{ tools | length }}{% for m in messages %}[{{ m.content }}</s>]"
      "{% endfor %}\"}]}";
  spit(path, cfg, strlen(cfg));
  const char *conv = "[{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", "
                     "\"content\": \"a\"}]";
  for (int named = 0; named < 2; named++) {
    fsdpc_chat_template *t = NULL;
    fsdpc_err err = {0};
    ck_assert_int_eq(fsdpc__chat_template_load(dir, NULL, named ? "default" : NULL, &t, &err),
                     FSDPC_OK);
    result r = run(t, conv, NULL, NULL, 1);
    ck_assert_str_eq(r.text, "D[q</s>][a</s>]");
    span_is(&r, 0, "[a</s>]"); /* no header: the turn is all it writes */
    done(&r);
    r = run(t, conv, TOOLS, NULL, 1);
    ck_assert_str_eq(r.text, named ? "D[q</s>][a</s>]" : "T1[q</s>][a</s>]");
    span_is(&r, 0, "[a</s>]"); /* no header: the turn is all it writes */
    done(&r);
    fsdpc__chat_template_destroy(t);
  }
}
END_TEST

/* Refusals name the template and the turn; nothing falls back to a guess. */
START_TEST(refusals_name_template_and_turn) {
  /* a template that writes a generation prompt whatever
   * add_generation_prompt says and refuses a conversation going on after
   * the assistant: the last turn's end is unknown */
  const char *src = "{% for m in messages %}{% if loop.index0 > 1 %}{{ raise_exception('only "
                    "one exchange') }}{% endif %}<{{ m.role }}>{{ m.content }}</s>{% endfor %}"
                    "<assistant>";
  fsdpc_chat_template *t = NULL;
  fsdpc_err err = {0};
  ck_assert_int_eq(
      fsdpc__chat_template_from_string(src, strlen(src), "one.jinja", NULL, "</s>", &t, &err),
      FSDPC_OK);
  result r = run(t,
                 "[{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", "
                 "\"content\": \"a\"}]",
                 NULL, NULL, 1);
  ck_assert_int_eq(r.st, FSDPC_INVALID_USAGE);
  ASSERT_ONE_LINE_ERROR(r.err, "one.jinja: messages[1]:", "refuses a conversation that goes on",
                        "generation");
  done(&r);
  fsdpc__chat_template_destroy(t);
  /* a template that writes the tool result inside the assistant turn that
   * calls the tool */
  src = "{% for m in messages %}{% if m.role == 'assistant' %}A:{% if m.tool_calls %}"
        "{{ messages[loop.index0 + 1].content if not loop.last }} -> {{ "
        "m.tool_calls[0].function.name }}"
        "{% else %}{{ m.content }}{% endif %}</turn>\n{% elif m.role == 'user' %}<user>"
        "{{ m.content }}</turn>\n{% endif %}{% endfor %}";
  ck_assert_int_eq(
      fsdpc__chat_template_from_string(src, strlen(src), "in.jinja", NULL, NULL, &t, &err),
      FSDPC_OK);
  r = run(t, TOOL_CONV, NULL, NULL, 1);
  ck_assert_int_eq(r.st, FSDPC_INVALID_USAGE);
  ASSERT_ONE_LINE_ERROR(r.err, "in.jinja: messages[1]:", "writes messages[2]");
  done(&r);
  fsdpc__chat_template_destroy(t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("template_chat_tools");
  TCase *tc = tcase_create("all");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, tool_calls_are_targets_tool_results_are_not);
  tcase_add_test(tc, reasoning_trained_or_not);
  tcase_add_test(tc, llama3_original_template_exact);
  tcase_add_test(tc, llama_guard_is_refused);
  tcase_add_test(tc, messages_reach_the_template_as_given);
  tcase_add_test(tc, refusals_name_template_and_turn);
  tcase_add_test(tc, tool_use_template_picked_with_tools);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
