/* The Jinja tests ("x is defined", "is none", "is equalto y", ...), with
 * jinja2's answers for undefined values (iterable, a sequence, callable)
 * and Python's for the rest. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unictype.h>

#include "template/internal.h"

enum {
  TS_DEFINED = 1,
  TS_UNDEFINED,
  TS_NONE,
  TS_STRING,
  TS_NUMBER,
  TS_INTEGER,
  TS_FLOAT,
  TS_MAPPING,
  TS_ITERABLE,
  TS_SEQUENCE,
  TS_BOOLEAN,
  TS_TRUE,
  TS_FALSE,
  TS_CALLABLE,
  TS_EQ,
  TS_NE,
  TS_LT,
  TS_LE,
  TS_GT,
  TS_GE,
  TS_SAMEAS,
  TS_IN,
  TS_ODD,
  TS_EVEN,
  TS_DIVISIBLEBY,
  TS_LOWER,
  TS_UPPER,
  TS_ESCAPED,
  TS_FILTER,
  TS_TEST,
  TS_N
};
static const struct {
  const char *name;
  int id;
} TESTS[] = {{"defined", TS_DEFINED},
             {"undefined", TS_UNDEFINED},
             {"none", TS_NONE},
             {"string", TS_STRING},
             {"number", TS_NUMBER},
             {"integer", TS_INTEGER},
             {"float", TS_FLOAT},
             {"mapping", TS_MAPPING},
             {"iterable", TS_ITERABLE},
             {"sequence", TS_SEQUENCE},
             {"boolean", TS_BOOLEAN},
             {"true", TS_TRUE},
             {"false", TS_FALSE},
             {"callable", TS_CALLABLE},
             {"equalto", TS_EQ},
             {"eq", TS_EQ},
             {"==", TS_EQ},
             {"ne", TS_NE},
             {"!=", TS_NE},
             {"lt", TS_LT},
             {"lessthan", TS_LT},
             {"<", TS_LT},
             {"le", TS_LE},
             {"<=", TS_LE},
             {"gt", TS_GT},
             {"greaterthan", TS_GT},
             {">", TS_GT},
             {"ge", TS_GE},
             {">=", TS_GE},
             {"sameas", TS_SAMEAS},
             {"in", TS_IN},
             {"odd", TS_ODD},
             {"even", TS_EVEN},
             {"divisibleby", TS_DIVISIBLEBY},
             {"lower", TS_LOWER},
             {"upper", TS_UPPER},
             {"escaped", TS_ESCAPED},
             {"filter", TS_FILTER},
             {"test", TS_TEST}};

int jf_test_id(const char *name, size_t len) {
  for (size_t i = 0; i < sizeof TESTS / sizeof TESTS[0]; i++)
    if (strlen(TESTS[i].name) == len && memcmp(TESTS[i].name, name, len) == 0)
      return TESTS[i].id;
  return 0;
}
const char *jf_test_name(int id) {
  for (size_t i = 0; i < sizeof TESTS / sizeof TESTS[0]; i++)
    if (TESTS[i].id == id)
      return TESTS[i].name;
  return "?";
}

/* Every filter and test jinja2 has, for the "filter" and "test" tests
 * (whether fsdpc implements them or not). */
static const char *const JINJA_FILTERS[] = {
    "abs",       "attr",       "batch",       "capitalize", "center",  "count",
    "d",         "default",    "dictsort",    "e",          "escape",  "filesizeformat",
    "first",     "float",      "forceescape", "format",     "groupby", "indent",
    "int",       "join",       "last",        "length",     "list",    "lower",
    "items",     "map",        "min",         "max",        "pprint",  "random",
    "reject",    "rejectattr", "replace",     "reverse",    "round",   "safe",
    "select",    "selectattr", "slice",       "sort",       "string",  "striptags",
    "sum",       "title",      "trim",        "truncate",   "unique",  "upper",
    "urlencode", "urlize",     "wordcount",   "wordwrap",   "xmlattr", "tojson",
    NULL};

int jf_jinja_has_filter(const char *name, size_t len) {
  for (size_t i = 0; JINJA_FILTERS[i]; i++)
    if (strlen(JINJA_FILTERS[i]) == len && memcmp(JINJA_FILTERS[i], name, len) == 0)
      return 1;
  return 0;
}

static int named(const char *const *list, const jv *v) {
  if (v->kind != JV_STR)
    return 0;
  for (size_t i = 0; list[i]; i++)
    if (strlen(list[i]) == v->u.s.n && memcmp(list[i], v->u.s.p, v->u.s.n) == 0)
      return 1;
  return 0;
}

/* str.islower() / str.isupper(): every cased character in that case, and
 * at least one cased character. */
static int case_test(const jv *s, int upper) {
  int cased = 0;
  for (size_t i = 0; i < s->u.s.n;) {
    size_t l;
    uint32_t c = ju_decode(s->u.s.p, s->u.s.n, i, &l);
    int lo = c < 0x80 ? (c >= 'a' && c <= 'z') : uc_is_property_lowercase(c);
    int up = c < 0x80 ? (c >= 'A' && c <= 'Z') : uc_is_property_uppercase(c);
    int ti = c >= 0x80 && uc_is_general_category(c, UC_CATEGORY_Lt);
    if (upper ? (lo || ti) : (up || ti))
      return 0;
    if (upper ? up : lo)
      cased = 1;
    i += l;
  }
  return cased;
}

static int num_mod2(jctx *x, const jnode *at, const jv *v, const jv *d, int *zero) {
  jv r;
  if (jx_binop(x, at, OP_MOD, v, d, &r))
    return -1;
  jv z = jv_int(0);
  *zero = jv_equal(x, &r, &z);
  return 0;
}

int jf_apply_test(jctx *x, const jnode *at, int id, const jv *v, const jv *args, size_t nargs,
                  int *out) {
  int needs = id == TS_EQ || id == TS_NE || id == TS_LT || id == TS_LE || id == TS_GT ||
              id == TS_GE || id == TS_SAMEAS || id == TS_IN || id == TS_DIVISIBLEBY;
  if (needs && nargs < 1)
    return jx_fail(x, at, "test '%s' needs an argument", jf_test_name(id));
  int ok;
  switch (id) {
  case TS_DEFINED:
    *out = v->kind != JV_UNDEF;
    return 0;
  case TS_UNDEFINED:
    *out = v->kind == JV_UNDEF;
    return 0;
  case TS_NONE:
    *out = v->kind == JV_NONE;
    return 0;
  case TS_STRING:
    *out = v->kind == JV_STR;
    return 0;
  case TS_NUMBER:
    *out = v->kind == JV_INT || v->kind == JV_FLOAT || v->kind == JV_BOOL || v->kind == JV_BIGINT;
    return 0;
  case TS_INTEGER:
    *out = v->kind == JV_INT || v->kind == JV_BIGINT;
    return 0;
  case TS_FLOAT:
    *out = v->kind == JV_FLOAT;
    return 0;
  case TS_MAPPING:
    *out = jv_is_mapping(v);
    return 0;
  case TS_ITERABLE:
    *out = jv_is_iterable(v) && v->kind != JV_LOOP;
    return 0;
  case TS_SEQUENCE:
    /* len() and __getitem__: strings, lists, tuples, ranges, dicts, undefined */
    *out = v->kind == JV_STR || jv_is_seq(v) || jv_is_mapping(v) || v->kind == JV_UNDEF;
    return 0;
  case TS_BOOLEAN:
    *out = v->kind == JV_BOOL;
    return 0;
  case TS_TRUE:
    *out = v->kind == JV_BOOL && v->u.b;
    return 0;
  case TS_FALSE:
    *out = v->kind == JV_BOOL && !v->u.b;
    return 0;
  case TS_CALLABLE:
    *out = v->kind == JV_MACRO || v->kind == JV_FUNC || v->kind == JV_METHOD || v->kind == JV_UNDEF;
    return 0;
  case TS_ESCAPED:
    *out = v->kind == JV_STR && v->safe;
    return 0;
  case TS_FILTER:
    *out = named(JINJA_FILTERS, v);
    return 0;
  case TS_TEST:
    *out = v->kind == JV_STR && jf_test_id(v->u.s.p, v->u.s.n) != 0;
    return 0;
  case TS_EQ:
  case TS_NE:
    *out = jv_equal(x, v, &args[0]);
    if (id == TS_NE)
      *out = !*out;
    return x->failed ? -1 : 0;
  case TS_SAMEAS:
    /* Python identity; equal scalars of one type stand in for it. */
    *out = v->kind == args[0].kind && jv_equal(x, v, &args[0]) &&
           (v->kind == JV_NONE || v->kind == JV_BOOL || v->kind == JV_UNDEF ||
            (v->kind == JV_INT && v->u.i >= -5 && v->u.i <= 256) ||
            (v->kind == JV_JSON && v->u.j == args[0].u.j) ||
            (v->kind == JV_LIST && v->u.l == args[0].u.l) ||
            (v->kind == JV_NS && v->u.m == args[0].u.m));
    return x->failed ? -1 : 0;
  case TS_LT:
  case TS_LE:
  case TS_GT:
  case TS_GE: {
    if (v->kind == JV_UNDEF)
      return jx_undef_fail(x, at, v);
    int r = jv_compare(x, v, &args[0], &ok);
    if (x->failed)
      return -1;
    if (!ok)
      return jx_fail(x, at, "'%s' not supported between instances of '%s' and '%s'",
                     id == TS_LT   ? "<"
                     : id == TS_LE ? "<="
                     : id == TS_GT ? ">"
                                   : ">=",
                     jv_type_name(v), jv_type_name(&args[0]));
    *out = ok == 2 ? 0 : id == TS_LT ? r < 0 : id == TS_LE ? r <= 0 : id == TS_GT ? r > 0 : r >= 0;
    return 0;
  }
  case TS_IN:
    return jx_contains(x, at, v, &args[0], out);
  case TS_ODD:
  case TS_EVEN:
  case TS_DIVISIBLEBY: {
    /* value % 2 == 1, value % 2 == 0, value % num == 0 */
    jv two = jv_int(2);
    int zero;
    if (v->kind == JV_UNDEF)
      return jx_undef_fail(x, at, v);
    if (num_mod2(x, at, v, id == TS_DIVISIBLEBY ? &args[0] : &two, &zero))
      return -1;
    if (id == TS_ODD) {
      jv r, one = jv_int(1);
      if (jx_binop(x, at, OP_MOD, v, &two, &r))
        return -1;
      *out = jv_equal(x, &r, &one);
    } else {
      *out = zero;
    }
    return x->failed ? -1 : 0;
  }
  case TS_LOWER:
  case TS_UPPER: {
    jv s;
    if (jv_stringify(x, at, v, &s))
      return -1;
    *out = case_test(&s, id == TS_UPPER);
    return jx_work(x, at, s.u.s.n);
  }
  }
  return jx_fail(x, at, "internal error: test %d", id);
}
