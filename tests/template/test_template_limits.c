/* The engine's limits (issue 43, items 1 and 2), one check per finding:
 * long left-associative chains refused with their line and column instead
 * of overflowing the stack; string repetition that cannot hang; the memory
 * of a whole render bounded (set blocks, macros, doubling strings and
 * lists, a range per iteration); range and slice bounds without integer
 * overflow; Python's results for **, //, % and int() of huge strings; and
 * the deepest recursion the limits allow, in a thread with a small stack. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../data/data_testutil.h"
#include "data/chat.h"
#include "template/jinja.h"

/* Renders src (len bytes) with the given bounds; returns the text or NULL
 * with err set. */
static char *render_n(const char *src, size_t len, const char *vars_json, size_t max_memory,
                      uint64_t max_steps, size_t *n, fsdpc_err *err) {
  fsdpc_jinja *t = NULL;
  memset(err, 0, sizeof *err);
  *n = 0;
  if (fsdpc__jinja_parse(src, len, "t.jinja", &t, err) != FSDPC_OK)
    return NULL;
  cJSON *vars = cJSON_Parse(vars_json ? vars_json : "{}");
  char *out = NULL;
  fsdpc_jinja_opts o = {.now = 1700000000, .max_steps = max_steps, .max_memory = max_memory};
  fsdpc__jinja_render_opts(t, vars, &o, &out, n, err);
  cJSON_Delete(vars);
  fsdpc__jinja_destroy(t);
  return out;
}

static char *render(const char *src, size_t max_memory, fsdpc_err *err) {
  size_t n;
  return render_n(src, strlen(src), NULL, max_memory, 0, &n, err);
}

#define EXPECT(src, want)                                                                          \
  do {                                                                                             \
    fsdpc_err e_;                                                                                  \
    char *o_ = render(src, 0, &e_);                                                                \
    ck_assert_msg(o_ != NULL, "%s: %s", src, e_.msg);                                              \
    ck_assert_str_eq(o_, want);                                                                    \
    free(o_);                                                                                      \
  } while (0)

#define EXPECT_ERR(src, mem, ...)                                                                  \
  do {                                                                                             \
    fsdpc_err e_;                                                                                  \
    char *o_ = render(src, mem, &e_);                                                              \
    ck_assert_msg(o_ == NULL, "%s rendered", src);                                                 \
    ASSERT_ONE_LINE_ERROR(e_, __VA_ARGS__);                                                        \
  } while (0)

/* "{{ " head (link)*k tail " }}" */
static char *chain(const char *head, const char *link, int k, const char *tail) {
  size_t n = strlen(head) + strlen(link) * (size_t)k + strlen(tail) + 16;
  char *s = malloc(n), *p = s;
  p += sprintf(p, "{{ %s", head);
  for (int i = 0; i < k; i++)
    p += sprintf(p, "%s", link);
  sprintf(p, "%s }}", tail);
  return s;
}

/* Finding 1: a 10,000-link chain overflowed the evaluator's stack. */
START_TEST(long_chains_refused_with_position) {
  const char *links[][3] = {{"1", " + 1", ""}, {"'a'", " | trim", ""},
                            {"d", ".a", ""},   {"x", " ~ x", ""},
                            {"1", " < 2", ""}, {"1 if 1 else ", "1 if 1 else ", "1"},
                            {"", "(", "1"},    {"", "not ", "1"}};
  for (size_t k = 0; k < sizeof links / sizeof links[0]; k++) {
    char *src = chain(links[k][0], links[k][1], 10000, links[k][2]);
    if (!strcmp(links[k][1], "(")) { /* close the parentheses */
      size_t n = strlen(src);
      src = realloc(src, n + 10001);
      memmove(src + n - 3 + 10000, src + n - 3, 4);
      memset(src + n - 3, ')', 10000);
    }
    fsdpc_err e;
    size_t n;
    char *o = render_n(src, strlen(src), "{\"d\": {}, \"x\": \"x\"}", 0, 0, &n, &e);
    ck_assert_msg(o == NULL, "link '%s' rendered", links[k][1]);
    ASSERT_ONE_LINE_ERROR(e, "t.jinja:1:", "nested too deeply");
    free(src);
  }
  /* A real template's chain of a few hundred links still renders. */
  char *ok = chain("1", " + 1", 200, "");
  EXPECT(ok, "201");
  free(ok);
}
END_TEST

/* Finding 1 through the chat layer: a 55 KB tokenizer_config.json. */
START_TEST(long_chain_in_tokenizer_config) {
  char dir[4096], path[4200];
  tmp_path(dir, sizeof dir, "chain");
  mkdir(dir, 0755);
  snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
  char *src = chain("1", " + 1", 13000, "");
  size_t n = strlen(src) + 64;
  char *cfg = malloc(n);
  snprintf(cfg, n, "{\"chat_template\": \"%s\"}", src);
  spit(path, cfg, strlen(cfg));
  fsdpc_chat_template *t = NULL;
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__chat_template_load(dir, NULL, NULL, &t, &err), FSDPC_INVALID_USAGE);
  ASSERT_ONE_LINE_ERROR(err, "tokenizer_config.json:chat_template:1:", "nested too deeply");
  ck_assert_ptr_null(t);
  free(src);
  free(cfg);
}
END_TEST

/* Finding 2: '' * 9223372036854775807 skipped the size check and looped. */
START_TEST(string_repetition) {
  EXPECT("[{{ '' * 9223372036854775807 }}]", "[]");
  EXPECT("[{{ 9223372036854775807 * '' }}]", "[]");
  EXPECT("{{ 'ab' * 3 }}|{{ 'ab' * -1 }}|{{ [1] * 2 }}|{{ 2 * (1,) }}", "ababab||[1, 1]|(1, 1)");
  EXPECT_ERR("{{ 'ab' * 9223372036854775807 }}", 1 << 24, "t.jinja:1:", "memory");
  EXPECT_ERR("{{ [1] * 9223372036854775807 }}", 1 << 24, "t.jinja:1:", "memory");
  EXPECT_ERR("{{ 'x' * 99999999999999999999 }}", 1 << 24, "repetition too large");
}
END_TEST

/* Finding 2: the output limit did not apply inside set blocks and macros,
 * and values could grow without bound. */
START_TEST(render_memory_bounded) {
  const size_t mem = 16u << 20;
  EXPECT_ERR("{% set b %}{% for i in range(100000) %}{{ 'x' * 10000 }}{% endfor %}{% endset %}",
             mem, "t.jinja:1:", "render uses more than 16 MiB");
  EXPECT_ERR("{% macro m() %}{% for i in range(100000) %}{{ 'x' * 10000 }}{% endfor %}"
             "{% endmacro %}{% set y = m() %}",
             mem, "render uses more than 16 MiB");
  EXPECT_ERR("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
             "{% endfor %}",
             mem, "render uses more than 16 MiB");
  EXPECT_ERR("{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}"
             "{% endfor %}",
             mem, "render uses more than 16 MiB");
  EXPECT_ERR("{% for i in range(100000) %}{% set r = range(100000) %}{% endfor %}", mem,
             "render uses more than 16 MiB");
  EXPECT_ERR("{% for i in range(100000) %}{{ ('x' * 1000) | replace('x', 'yy') | length }}"
             "{% endfor %}",
             mem, "render uses more than 16 MiB");
  /* within the budget the same constructs render */
  EXPECT("{% set b %}{% for i in range(3) %}{{ 'x' * 2 }}{% endfor %}{% endset %}{{ b }}",
         "xxxxxx");
}
END_TEST

/* Finding 2: integer overflow in range() and slices (UBSan). */
START_TEST(range_and_slice_bounds) {
  EXPECT("{{ range(-9223372036854775807, 9223372036854775807, 9223372036854775807) | list }}",
         "[-9223372036854775807, 0]");
  EXPECT("{{ range(9223372036854775807, -9223372036854775807, -9223372036854775807) | list }}",
         "[9223372036854775807, 0]");
  EXPECT("{{ range(-9223372036854775807 - 1, -9223372036854775807 + 2) | list }}",
         "[-9223372036854775808, -9223372036854775807, -9223372036854775806]");
  EXPECT_ERR("{{ range(-9223372036854775807 - 1, 9223372036854775807) | list }}", 0,
             "range too big");
  EXPECT("{{ [1, 2, 3][::9223372036854775807] }}|{{ [1, 2, 3][::-9223372036854775807] }}|"
         "{{ [1, 2, 3][-9223372036854775807 - 1:] }}|{{ 'abc'[9223372036854775807:] }}|"
         "{{ 'abc'[:-9223372036854775807 - 1:-1] }}|{{ [1, 2][99999999999999999999:] }}",
         "[1]|[3]|[1, 2, 3]||cba|[]");
  EXPECT("{{ range(10)[::3] }}|{{ range(10)[::-1] }}|{{ range(10)[0:7:3] | list }}",
         "range(0, 10, 3)|range(9, -1, -1)|[0, 3, 6]");
  EXPECT_ERR("{{ 9223372036854775807 + 1 }}", 0, "integer beyond 64 bits");
  EXPECT_ERR("{{ (-9223372036854775807 - 1) // -1 }}", 0, "integer beyond 64 bits");
  EXPECT("{{ -(-9223372036854775807 - 1) }}|{{ (-9223372036854775807 - 1) % -1 }}",
         "9223372036854775808|0");
}
END_TEST

/* Finding 2: (-1)**3 gave 1, 1 // 0.1 gave 10.0, '9999...'|int saturated. */
START_TEST(python_arithmetic) {
  EXPECT(
      "{{ (-1) ** 3 }} {{ (-1) ** 4 }} {{ (-2) ** 63 }} {{ 2 ** 62 }} {{ 0 ** 0 }} {{ 2 ** -1 }}",
      "-1 1 -9223372036854775808 4611686018427387904 1 0.5");
  EXPECT_ERR("{{ 2 ** 63 }}", 0, "integer beyond 64 bits");
  EXPECT_ERR("{{ 0 ** -1 }}", 0, "0.0 cannot be raised to a negative power");
  EXPECT_ERR("{{ (-8) ** 0.5 }}", 0, "complex number");
  EXPECT_ERR("{{ 10.0 ** 400 }}", 0, "Numerical result out of range");
  EXPECT(
      "{{ 1 // 0.1 }} {{ 1 % 0.1 }} {{ -1 // 0.1 }} {{ 7.5 // -2 }} {{ -7.5 % 2 }} {{ 0.0 // -1 }}",
      "9.0 0.09999999999999995 -10.0 -4.0 0.5 -0.0");
  EXPECT("{{ -7 // 2 }} {{ -7 % 2 }} {{ 7 % -2 }} {{ 5 / 2 }} {{ 9007199254740993 / 1 }}",
         "-4 1 -1 2.5 9007199254740992.0");
  EXPECT_ERR("{{ 1 // 0.0 }}", 0, "float floor division by zero");
  EXPECT_ERR("{{ 1 % 0 }}", 0, "integer division or modulo by zero");
  EXPECT("{{ '99999999999999999999999'|int }} {{ ' -00012 '|int }} {{ '1_000'|int }} "
         "{{ '1e3'|int }} {{ '1.9'|int }} {{ 'x'|int(7) }} {{ 'nan'|int }} {{ 1e20|int }}",
         "99999999999999999999999 -12 1000 1000 1 7 0 100000000000000000000");
  EXPECT_ERR("{{ 'inf'|int }}", 0, "cannot convert float infinity to integer");
}
END_TEST

typedef struct deep_arg {
  const char *src;
  int ok;
  fsdpc_err err;
} deep_arg;

static void *deep_render(void *p) {
  deep_arg *a = p;
  size_t n;
  char *o = render_n(a->src, strlen(a->src), NULL, 0, 0, &n, &a->err);
  a->ok = o != NULL;
  free(o);
  return NULL;
}

/* The deepest recursion the limits let through: macros 100 deep, each
 * evaluating a 250-level expression inside nested blocks, in a thread with
 * a 4 MiB stack (less than glibc's default for threads). */
START_TEST(deepest_recursion_fits_a_small_stack) {
  char *expr = chain("1", " + 1", 250, "");
  size_t n = strlen(expr) + 4096;
  char *src = malloc(n);
  snprintf(src, n,
           "{%% macro m(k) %%}{%% if k > 0 %%}{%% for i in [1] %%}{%% if true %%}%s"
           "{{ m(k - 1) }}{%% endif %%}{%% endfor %%}{%% endif %%}{%% endmacro %%}{{ m(200) }}",
           expr);
  deep_arg a = {.src = src};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, (size_t)4 << 20);
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, &attr, deep_render, &a), 0);
  pthread_join(th, NULL);
  pthread_attr_destroy(&attr);
  ck_assert_msg(!a.ok, "a 200-deep macro recursion rendered");
  ASSERT_ONE_LINE_ERROR(a.err, "nested too deeply");
  free(src);
  free(expr);
}
END_TEST

int main(void) {
  Suite *s = suite_create("template_limits");
  TCase *tc = tcase_create("all");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, long_chains_refused_with_position);
  tcase_add_test(tc, long_chain_in_tokenizer_config);
  tcase_add_test(tc, string_repetition);
  tcase_add_test(tc, render_memory_bounded);
  tcase_add_test(tc, range_and_slice_bounds);
  tcase_add_test(tc, python_arithmetic);
  tcase_add_test(tc, deepest_recursion_fits_a_small_stack);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
