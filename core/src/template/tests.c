/* The Jinja tests ("x is defined", "is none", "is equalto y", ...). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
             {"upper", TS_UPPER}};

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
    *out = v->kind == JV_INT || v->kind == JV_FLOAT || v->kind == JV_BOOL;
    return 0;
  case TS_INTEGER:
    *out = v->kind == JV_INT;
    return 0;
  case TS_FLOAT:
    *out = v->kind == JV_FLOAT;
    return 0;
  case TS_MAPPING:
    *out = jv_is_mapping(v);
    return 0;
  case TS_ITERABLE:
    *out = v->kind == JV_STR || jv_is_seq(v) || jv_is_mapping(v) || v->kind == JV_UNDEF;
    return 0;
  case TS_SEQUENCE:
    *out = v->kind == JV_STR || jv_is_seq(v) || jv_is_mapping(v);
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
    *out = v->kind == JV_MACRO || v->kind == JV_FUNC || v->kind == JV_METHOD;
    return 0;
  case TS_EQ:
    *out = jv_equal(v, &args[0]);
    return 0;
  case TS_NE:
    *out = !jv_equal(v, &args[0]);
    return 0;
  case TS_SAMEAS:
    /* Python identity; equal scalars of one type stand in for it. */
    *out = v->kind == args[0].kind && jv_equal(v, &args[0]) &&
           (v->kind == JV_NONE || v->kind == JV_BOOL || v->kind == JV_UNDEF || v->kind == JV_INT ||
            (v->kind == JV_JSON && v->u.j == args[0].u.j));
    return 0;
  case TS_LT:
  case TS_LE:
  case TS_GT:
  case TS_GE: {
    int r = jv_compare(v, &args[0], &ok);
    if (!ok)
      return jx_fail(x, at, "cannot compare %s with %s", jv_type_name(v), jv_type_name(&args[0]));
    *out = id == TS_LT ? r < 0 : id == TS_LE ? r <= 0 : id == TS_GT ? r > 0 : r >= 0;
    return 0;
  }
  case TS_IN: {
    jv cont = args[0];
    if (cont.kind == JV_STR) {
      if (v->kind != JV_STR)
        return jx_fail(x, at, "'in <string>' requires string as left operand");
      *out = 0;
      for (size_t i = 0; i + v->u.s.n <= cont.u.s.n && !*out; i++)
        *out = memcmp(cont.u.s.p + i, v->u.s.p, v->u.s.n) == 0;
      return 0;
    }
    if (jv_is_mapping(&cont)) {
      jv d;
      *out = v->kind == JV_STR && jv_map_get(&cont, v->u.s.p, v->u.s.n, &d);
      return 0;
    }
    if (!jv_is_seq(&cont))
      return jx_fail(x, at, "argument of type '%s' is not iterable", jv_type_name(&cont));
    *out = 0;
    for (size_t i = 0; i < jv_len(&cont) && !*out; i++) {
      jv it = jv_seq_at(&cont, i);
      *out = jv_equal(v, &it);
    }
    return 0;
  }
  case TS_ODD:
  case TS_EVEN:
  case TS_DIVISIBLEBY: {
    if (v->kind != JV_INT || (id == TS_DIVISIBLEBY && args[0].kind != JV_INT))
      return jx_fail(x, at, "test '%s' expects integers", jf_test_name(id));
    if (id == TS_DIVISIBLEBY) {
      if (args[0].u.i == 0)
        return jx_fail(x, at, "divisibleby 0");
      *out = args[0].u.i == -1 || v->u.i % args[0].u.i == 0;
    } else {
      *out = (v->u.i % 2 != 0) == (id == TS_ODD);
    }
    return 0;
  }
  case TS_LOWER:
  case TS_UPPER: {
    if (v->kind != JV_STR)
      return jx_fail(x, at, "test '%s' expects a string", jf_test_name(id));
    int cased = 0, bad = 0;
    for (size_t i = 0; i < v->u.s.n; i++) {
      char c = v->u.s.p[i];
      if ((unsigned char)c >= 0x80)
        return jx_fail(x, at, "unsupported construct 'case test of non-ASCII text'");
      if (c >= 'a' && c <= 'z') {
        cased = 1;
        bad |= id == TS_UPPER;
      }
      if (c >= 'A' && c <= 'Z') {
        cased = 1;
        bad |= id == TS_LOWER;
      }
    }
    *out = cased && !bad;
    return 0;
  }
  }
  return jx_fail(x, at, "internal error: test %d", id);
}
