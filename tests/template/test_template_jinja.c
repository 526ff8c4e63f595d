/* The Jinja subset engine: constructs, whitespace rules, errors with the
 * template's line and column, refusal of unsupported constructs, render
 * bounds and {% generation %} spans. (Byte-exact agreement with Python's
 * jinja2 over many more templates: compare_jinja2.py.) */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "../data/data_testutil.h"
#include "template/jinja.h"

/* Renders src over vars_json; returns the malloc'd text or NULL with err. */
static char *render(const char *src, const char *vars_json, fsdpc_err *err) {
  fsdpc_jinja *t = NULL;
  memset(err, 0, sizeof *err);
  if (fsdpc__jinja_parse(src, strlen(src), "t.jinja", &t, err) != FSDPC_OK)
    return NULL;
  cJSON *vars = cJSON_Parse(vars_json ? vars_json : "{}");
  ck_assert_ptr_nonnull(vars);
  char *out = NULL;
  size_t n = 0;
  fsdpc_jinja_opts o = {.now = 1700000000, .max_steps = 100000, .max_output = 1 << 16};
  fsdpc_status s = fsdpc__jinja_render_opts(t, vars, &o, &out, &n, err);
  if (s == FSDPC_OK)
    ck_assert_uint_eq(strlen(out), n);
  else
    ck_assert_ptr_null(out);
  cJSON_Delete(vars);
  fsdpc__jinja_destroy(t);
  return out;
}

#define EXPECT(src, vars, want)                                                                    \
  do {                                                                                             \
    fsdpc_err e_;                                                                                  \
    char *o_ = render(src, vars, &e_);                                                             \
    ck_assert_msg(o_ != NULL, "%s: %s", src, e_.msg);                                              \
    ck_assert_str_eq(o_, want);                                                                    \
    free(o_);                                                                                      \
  } while (0)

#define EXPECT_ERR(src, vars, ...)                                                                 \
  do {                                                                                             \
    fsdpc_err e_;                                                                                  \
    char *o_ = render(src, vars, &e_);                                                             \
    ck_assert_msg(o_ == NULL, "%s rendered '%s'", src, o_ ? o_ : "");                              \
    ck_assert_int_eq(e_.status, FSDPC_INVALID_USAGE);                                              \
    ASSERT_ONE_LINE_ERROR(e_, __VA_ARGS__);                                                        \
  } while (0)

START_TEST(expressions) {
  EXPECT("{{ 1 + 2 * 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 / 2 }}|{{ -7 % 3 }}|{{ 2 ** 10 }}", NULL,
         "7|3|-4|3.5|2|1024");
  EXPECT("{{ 'a' ~ 1 ~ none ~ true ~ 2.5 }}|{{ 'x' + 'y' }}|{{ [1] + [2] }}", NULL,
         "a1NoneTrue2.5|xy|[1, 2]");
  EXPECT("{{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ 1 < 2 < 3 }} {{ 3 < 2 < 4 }} {{ 2 in [1, 2] }}", NULL,
         "True True True False True");
  EXPECT("{{ x or 'f' }}|{{ x and 'g' }}|{{ 'y' if x else 'n' }}|{{ not x }}", "{\"x\": 0}",
         "f|0|n|True");
  EXPECT("{{ [1, 'a', none, true, {'k': 'v'}] }}|{{ (1,) }}|{{ 1e16 }}|{{ 0.1 + 0.2 }}", NULL,
         "[1, 'a', None, True, {'k': 'v'}]|(1,)|1e+16|0.30000000000000004");
  EXPECT("{{ s[1:] }}|{{ s[::-1] }}|{{ s[-2:] }}|{{ xs[-1] }}|{{ 'h\xc3\xa9llo'[1] }}",
         "{\"s\": \"abcd\", \"xs\": [1, 2, 3]}", "bcd|dcba|cd|3|\xc3\xa9");
  EXPECT("{{ '\\u00e9\\t\\x41\\q' }}", NULL, "\xc3\xa9\tA\\q");
}
END_TEST

START_TEST(statements) {
  EXPECT("{% for x in xs %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}",
         "{\"xs\": [\"a\", \"b\"]}", "1a,2b");
  EXPECT("{% for x in xs if x > 1 %}{{ x }}/{{ loop.length }} {% else %}E{% endfor %}",
         "{\"xs\": [1, 2, 3]}", "2/2 3/2 ");
  EXPECT("{% for x in [] %}x{% else %}empty{% endfor %}", NULL, "empty");
  EXPECT("{% for k, v in d | items %}{{ k }}={{ v }};{% endfor %}", "{\"d\": {\"b\": 1, \"a\": 2}}",
         "b=1;a=2;");
  EXPECT("{% for x in [1,2,3,4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}"
         "{% break %}{% endif %}{{ x }}{% endfor %}",
         NULL, "13");
  /* A set inside a loop body does not outlive the iteration. */
  EXPECT("{% set x = 0 %}{% for i in [1, 2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}{{ x }}",
         NULL, "01020");
  EXPECT("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}"
         "{% endfor %}{{ ns.n }}",
         NULL, "6");
  EXPECT("{% set b %}in {{ 1 }}{% endset %}[{{ b }}]", NULL, "[in 1]");
  EXPECT("{% macro f(a, b='B') %}<{{ a }}{{ b }}>{% endmacro %}{{ f(1) }}{{ f(2, b=3) }}", NULL,
         "<1B><23>");
  EXPECT("{% macro w() %}[{{ caller() }}]{% endmacro %}{% call w() %}body{% endcall %}", NULL,
         "[body]");
  EXPECT("{% macro f(a, b, c='C') %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ f(*[1, 2]) }}"
         "{{ f(0, *xs) }}{{ [f][0](*xs, c=9) }}",
         "{\"xs\": [\"x\", \"y\"]}", "12C0xyxy9");
  EXPECT("{% if a %}A{% elif b %}B{% else %}C{% endif %}", "{\"a\": false, \"b\": 1}", "B");
}
END_TEST

START_TEST(filters_tests_methods) {
  EXPECT("{{ ' x ' | trim }}|{{ 'ab' | length }}|{{ 'hello' | capitalize }}|{{ 'a' | upper }}",
         NULL, "x|2|Hello|A");
  EXPECT("{{ d | tojson }}|{{ d | tojson(indent=2) }}",
         "{\"d\": {\"a\": [1, \"\xc3\xa9\\n\"], \"b\": null}}",
         "{\"a\": [1, \"\xc3\xa9\\n\"], \"b\": null}|{\n  \"a\": [\n    1,\n    \"\xc3\xa9\\n\"\n  "
         "],\n"
         "  \"b\": null\n}");
  EXPECT("{{ u | default('d') }}|{{ [1, 2] | join('-') }}|{{ 'aXb' | replace('X', '') }}|"
         "{{ [3, 4] | first }}{{ [3, 4] | last }}|{{ 5 | string }}",
         NULL, "d|1-2|ab|34|5");
  EXPECT("{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='c') | join }}|"
         "{{ ms | rejectattr('role', 'eq', 'user') | list | length }}",
         "{\"ms\": [{\"role\": \"user\", \"c\": \"u\"}, {\"role\": \"x\", \"c\": \"a\"}]}", "u|1");
  EXPECT("{{ u is defined }}{{ n is none }}{{ 's' is string }}{{ {} is mapping }}"
         "{{ 's' is iterable }}{{ 3 is odd }}{{ n is sameas none }}{{ 1 is not string }}",
         "{\"n\": null}", "FalseTrueTrueTrueTrueTrueTrueTrue");
  EXPECT("{{ ' a '.strip() }}|{{ 'ab'.startswith('a') }}|{{ 'a b'.split() }}|{{ 'user'.title() }}"
         "|{{ d.get('k') }}{{ d.get('z', 0) }}|{{ d.items() | list }}",
         "{\"d\": {\"k\": 1}}", "a|True|['a', 'b']|User|10|[('k', 1)]");
  EXPECT("{{ strftime_now('%Y') | length }}", NULL, "4");
}
END_TEST

START_TEST(whitespace) {
  /* trim_blocks + lstrip_blocks, as transformers sets them. */
  EXPECT("  {% if true %}\n  x\n  {% endif %}\nend\n", NULL, "  x\nend");
  EXPECT("a  {%- if true -%}  b  {%- endif -%}  c", NULL, "abc");
  EXPECT("{{- ' x ' -}}\n y", NULL, " x y");
  EXPECT("a {# c #}\nb {#- c -#} c", NULL, "a bc");
  EXPECT("x\n  {# c #}\ny", NULL, "x\ny");
  EXPECT("x\n  {%+ if true %}y{% endif %}", NULL, "x\n  y");
  EXPECT("a\r\nb\r\n", NULL, "a\nb");
}
END_TEST

START_TEST(errors_name_line_and_column) {
  EXPECT_ERR("line1\n{% if x %}never closed", NULL, "t.jinja:2:4:", "'if' is never closed",
             "endif");
  EXPECT_ERR("{{ x | nosuch }}", NULL, "t.jinja:1:8:", "no filter named 'nosuch'");
  EXPECT_ERR("{{ x | pprint }}", NULL, "t.jinja:1:8:", "unsupported construct 'filter pprint'");
  EXPECT_ERR("{{ x is nosuch }}", NULL, "t.jinja:1:9:", "no test named 'nosuch'");
  EXPECT_ERR("\n\n  {% include 'a' %}", NULL, "t.jinja:3:6:", "unsupported construct 'include'");
  EXPECT_ERR("{% extends 'a' %}", NULL, "unsupported construct 'extends'");
  EXPECT_ERR("{% for x in y recursive %}{% endfor %}", NULL, "unsupported construct 'recursive'");
  EXPECT_ERR("{{ f(**a) }}", NULL, "unsupported construct '**kwargs'");
  EXPECT_ERR("{% macro f(a) %}{% endmacro %}{{ f(*3) }}", NULL,
             "t.jinja:1:36:", "argument after * must be an iterable, not int");
  EXPECT_ERR("{% set a, b = 1, 2, 3 %}", NULL, "too many values to unpack (expected 2, got 3)");
  EXPECT_ERR("{{ '%s %s' % 1 }}", NULL, "not enough arguments for format string");
  EXPECT_ERR("{{ 'a' | upper(1) }}", NULL, "upper() takes at most 0 argument(s)");
  EXPECT_ERR("{{ x", NULL, "t.jinja:1:1:", "unclosed '{{'");
  EXPECT_ERR("{% endif %}", NULL, "unexpected 'endif'");
  EXPECT_ERR("{% break %}", NULL, "'break' outside a for loop");
  EXPECT_ERR("{{ 'abc }}", NULL, "unterminated string literal");
  EXPECT_ERR("{# open", NULL, "unclosed comment");
  EXPECT_ERR("a\nb {{ raise_exception('Roles must alternate') }}", NULL,
             "t.jinja:2:", "raise_exception: Roles must alternate");
  EXPECT_ERR("{{ nope.attr }}", NULL, "t.jinja:1:", "'nope' is undefined");
  EXPECT_ERR("{{ 'a' + 1 }}", NULL, "unsupported operand type(s) for +: 'str' and 'int'");
  EXPECT_ERR("{{ 1 // 0 }}", NULL, "integer division or modulo by zero");
  EXPECT_ERR("{% set x = 1 %}{% set x.y = 2 %}", NULL,
             "cannot assign attribute on non-namespace object");
  EXPECT_ERR("{{ u | tojson }}", NULL, "is not JSON serializable");
}
END_TEST

START_TEST(bounds) {
  EXPECT_ERR("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", NULL,
             "evaluation steps");
  EXPECT_ERR("{{ range(100001) | length }}", NULL, "range too big");
  EXPECT_ERR("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", NULL, "nested too deeply");
  EXPECT_ERR("{{ 'x' * 100000 }}", NULL, "t.jinja:1:");
  /* Deep nesting is refused at parse time, not by the C stack. */
  char deep[4000];
  size_t k = 0;
  k += (size_t)snprintf(deep, sizeof deep, "{{ ");
  for (int i = 0; i < 600; i++)
    deep[k++] = '(';
  deep[k++] = '1';
  for (int i = 0; i < 600; i++)
    deep[k++] = ')';
  snprintf(deep + k, sizeof deep - k, " }}");
  EXPECT_ERR(deep, NULL, "nested too deeply");
}
END_TEST

START_TEST(generation_spans) {
  const char *src = "{% for m in messages %}{% if m.role == 'assistant' %}A:{% generation %}"
                    "{{ m.content }}</s>{% endgeneration %}\n{% else %}U:{{ m.content }}\n"
                    "{% endif %}{% endfor %}";
  fsdpc_err err = {0};
  fsdpc_jinja *t = NULL;
  ck_assert_int_eq(fsdpc__jinja_parse(src, strlen(src), "g.jinja", &t, &err), FSDPC_OK);
  ck_assert(fsdpc__jinja_has_generation(t));
  cJSON *vars = cJSON_Parse("{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, "
                            "{\"role\": \"assistant\", \"content\": \"ans\"}]}");
  fsdpc_jinja_span *gen = NULL;
  size_t n_gen = 0, n = 0;
  char *out = NULL;
  fsdpc_jinja_opts o = {.gen = &gen, .n_gen = &n_gen};
  ck_assert_int_eq(fsdpc__jinja_render_opts(t, vars, &o, &out, &n, &err), FSDPC_OK);
  ck_assert_str_eq(out, "U:q\nA:ans</s>"); /* trim_blocks ate the newline */
  ck_assert_uint_eq(n_gen, 1);
  ck_assert_uint_eq(gen[0].begin, 6);
  ck_assert_uint_eq(gen[0].end, 13);
  free(out);
  free(gen);
  cJSON_Delete(vars);
  fsdpc__jinja_destroy(t);
  fsdpc__jinja_destroy(NULL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("template_jinja");
  TCase *tc = tcase_create("all");
  tcase_add_test(tc, expressions);
  tcase_add_test(tc, statements);
  tcase_add_test(tc, filters_tests_methods);
  tcase_add_test(tc, whitespace);
  tcase_add_test(tc, errors_name_line_and_column);
  tcase_add_test(tc, bounds);
  tcase_add_test(tc, generation_spans);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
