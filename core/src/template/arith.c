/* Operators with Python's semantics: checked 64-bit integer arithmetic
 * (a result beyond 64 bits is refused, never wrapped), float floor
 * division, modulo and powers as CPython computes them, str and list
 * repetition and concatenation (markupsafe's Markup escapes the str it is
 * joined with), printf-style "%" on strings, and membership. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "template/internal.h"

static int is_num(const jv *v) {
  return v->kind == JV_INT || v->kind == JV_FLOAT || v->kind == JV_BOOL || v->kind == JV_BIGINT;
}
static double as_d(const jv *v) {
  return v->kind == JV_FLOAT ? v->u.d : v->kind == JV_INT ? (double)v->u.i : (double)v->u.b;
}
static int64_t as_i(const jv *v) {
  return v->kind == JV_INT ? v->u.i : (int64_t)v->u.b;
}

static const char *op_text(int op) {
  static const char *const t[] = {"?", "+", "-", "*", "/", "//", "%", "**", "~"};
  return op >= 1 && op <= 8 ? t[op] : "?";
}

static int too_big(jctx *x, const jnode *at) {
  return jx_fail(x, at, "unsupported construct 'integer beyond 64 bits'");
}

static int float_op(jctx *x, const jnode *at, int op, double p, double q, jv *out) {
  double r;
  switch (op) {
  case OP_ADD:
    r = p + q;
    break;
  case OP_SUB:
    r = p - q;
    break;
  case OP_MUL:
    r = p * q;
    break;
  case OP_DIV:
    if (q == 0)
      return jx_fail(x, at, "float division by zero");
    r = p / q;
    break;
  case OP_FLOORDIV:
    if (jn_float_floordiv(p, q, &r))
      return jx_fail(x, at, "float floor division by zero");
    break;
  case OP_MOD:
    if (jn_float_mod(p, q, &r))
      return jx_fail(x, at, "float modulo");
    break;
  default:
    return jx_fail(x, at, "internal error: float operator %d", op);
  }
  *out = jv_float(r);
  return 0;
}

static int int_op(jctx *x, const jnode *at, int op, int64_t p, int64_t q, jv *out) {
  int64_t r = 0;
  switch (op) {
  case OP_ADD:
    if (__builtin_add_overflow(p, q, &r))
      return too_big(x, at);
    break;
  case OP_SUB:
    if (__builtin_sub_overflow(p, q, &r))
      return too_big(x, at);
    break;
  case OP_MUL:
    if (__builtin_mul_overflow(p, q, &r))
      return too_big(x, at);
    break;
  case OP_DIV:
    if (q == 0)
      return jx_fail(x, at, "division by zero");
    /* Python's int / int is correctly rounded; long double holds both
     * operands exactly. */
    *out = jv_float((double)((long double)p / (long double)q));
    return 0;
  case OP_FLOORDIV:
  case OP_MOD:
    if (q == 0)
      return jx_fail(x, at, "integer division or modulo by zero");
    if (p == INT64_MIN && q == -1) {
      if (op == OP_MOD) {
        *out = jv_int(0);
        return 0;
      }
      return too_big(x, at);
    }
    r = op == OP_FLOORDIV ? p / q : p % q;
    if (op == OP_FLOORDIV && (p % q != 0) && ((p < 0) != (q < 0)))
      r--;
    if (op == OP_MOD && r != 0 && ((r < 0) != (q < 0)))
      r += q;
    break;
  default:
    return jx_fail(x, at, "internal error: int operator %d", op);
  }
  *out = jv_int(r);
  return 0;
}

static int num_op(jctx *x, const jnode *at, int op, const jv *a, const jv *b, jv *out) {
  if (op == OP_POW)
    return jn_pow(x, at, a, b, out);
  if (a->kind == JV_BIGINT || b->kind == JV_BIGINT)
    return jx_fail(x, at, "unsupported construct 'arithmetic on integers beyond 64 bits'");
  if (a->kind == JV_FLOAT || b->kind == JV_FLOAT)
    return float_op(x, at, op, as_d(a), as_d(b), out);
  return int_op(x, at, op, as_i(a), as_i(b), out);
}

/* str * n, list * n, Markup * n: Python's repetition (n <= 0: empty). */
static int repeat(jctx *x, const jnode *at, const jv *s, const jv *count, jv *out) {
  if (count->kind == JV_BIGINT && count->u.s.p[0] != '-')
    return jx_fail(x, at, "repetition too large (Python raises OverflowError or MemoryError)");
  int64_t k = count->kind == JV_BIGINT ? 0 : as_i(count);
  if (k < 0)
    k = 0;
  if (s->kind == JV_STR) {
    size_t unit = s->u.s.n;
    if (unit == 0 || k == 0) {
      *out = jv_str("", 0);
      out->safe = s->safe;
      return 0;
    }
    if ((uint64_t)k > ((size_t)-1) / 2 / unit)
      return jx_oom(x, at);
    size_t total = unit * (size_t)k;
    if (jx_work(x, at, total))
      return -1;
    char *p = ja_alloc(&x->arena, total + 1);
    if (!p)
      return jx_oom(x, at);
    for (int64_t i = 0; i < k; i++)
      memcpy(p + (size_t)i * unit, s->u.s.p, unit);
    *out = jv_str(p, total);
    out->safe = s->safe;
    return 0;
  }
  size_t unit = jv_len(s);
  if (unit && (uint64_t)k > ((size_t)-1) / 64 / unit)
    return jx_oom(x, at);
  size_t total = unit * (size_t)k;
  if (jx_work(x, at, total))
    return -1;
  jlist *l = jl_new(&x->arena, total);
  if (!l)
    return jx_oom(x, at);
  l->type = s->kind == JV_LIST && s->u.l->type == JL_TUPLE ? JL_TUPLE : JL_LIST;
  for (size_t i = 0; i < unit; i++)
    l->items[i] = jv_seq_at(s, i);
  for (size_t i = unit; i < total; i++)
    l->items[i] = l->items[i - unit];
  *out = jv_list(l);
  return 0;
}

static int concat_str(jctx *x, const jnode *at, const jv *a, const jv *b, jv *out) {
  jv sa = *a, sb = *b;
  int safe = a->safe || b->safe;
  /* Markup + str escapes the str (markupsafe's __add__ / __radd__) */
  if (safe && ((!a->safe && jf_markup_operand(x, at, a, &sa)) ||
               (!b->safe && jf_markup_operand(x, at, b, &sb))))
    return -1;
  if (jx_work(x, at, sa.u.s.n + sb.u.s.n))
    return -1;
  int ok;
  *out = jx_mkstr(x, sa.u.s.p, sa.u.s.n, sb.u.s.p, sb.u.s.n, &ok);
  out->safe = (uint8_t)safe;
  return ok ? 0 : jx_oom(x, at);
}

static int seq_type(const jv *v) {
  return v->kind == JV_JSON ? JL_LIST : v->u.l->type;
}

int jx_binop(jctx *x, const jnode *at, int op, const jv *a, const jv *b, jv *out) {
  if (op == OP_CONCAT) {
    /* jinja2's str_join: plain str() of both sides, Markup or not */
    jv sa, sb;
    if (jv_stringify(x, at, a, &sa) || jv_stringify(x, at, b, &sb))
      return -1;
    if (jx_work(x, at, sa.u.s.n + sb.u.s.n))
      return -1;
    int ok;
    *out = jx_mkstr(x, sa.u.s.p, sa.u.s.n, sb.u.s.p, sb.u.s.n, &ok);
    return ok ? 0 : jx_oom(x, at);
  }
  if (a->kind == JV_UNDEF)
    return jx_undef_fail(x, at, a);
  if (b->kind == JV_UNDEF)
    return jx_undef_fail(x, at, b);
  if (is_num(a) && is_num(b))
    return num_op(x, at, op, a, b, out);
  if (op == OP_ADD && a->kind == JV_STR && b->kind == JV_STR)
    return concat_str(x, at, a, b, out);
  if (op == OP_ADD && jv_is_seq(a) && jv_is_seq(b) && seq_type(a) != JL_RANGE &&
      seq_type(a) == seq_type(b)) {
    size_t na = jv_len(a), nb = jv_len(b);
    if (jx_work(x, at, na + nb))
      return -1;
    jlist *l = jl_new(&x->arena, na + nb);
    if (!l)
      return jx_oom(x, at);
    l->type = (uint8_t)seq_type(a);
    jv *dst = l->items;
    for (int side = 0; side < 2; side++) {
      const jv *s = side ? b : a;
      if (s->kind == JV_LIST) {
        memcpy(dst, s->u.l->items, s->u.l->n * sizeof *dst);
        dst += s->u.l->n;
      } else {
        for (const cJSON *c = s->u.j->child; c; c = c->next)
          *dst++ = jv_from_json(c);
      }
    }
    *out = jv_list(l);
    return 0;
  }
  if (op == OP_MUL && (a->kind == JV_STR || (jv_is_seq(a) && seq_type(a) != JL_RANGE)) &&
      jv_is_int(b))
    return repeat(x, at, a, b, out);
  if (op == OP_MUL && (b->kind == JV_STR || (jv_is_seq(b) && seq_type(b) != JL_RANGE)) &&
      jv_is_int(a))
    return repeat(x, at, b, a, out);
  if (op == OP_MOD && a->kind == JV_STR)
    return jf_percent_format(x, at, a, b, out);
  return jx_fail(x, at, "unsupported operand type(s) for %s: '%s' and '%s'", op_text(op),
                 jv_type_name(a), jv_type_name(b));
}

int jx_neg(jctx *x, const jnode *at, const jv *a, int negate, jv *out) {
  if (a->kind == JV_UNDEF)
    return jx_undef_fail(x, at, a);
  if (!is_num(a))
    return jx_fail(x, at, "bad operand type for unary %s: '%s'", negate ? "-" : "+",
                   jv_type_name(a));
  if (!negate) {
    *out = a->kind == JV_BOOL ? jv_int(a->u.b) : *a;
    return 0;
  }
  if (a->kind == JV_FLOAT) {
    *out = jv_float(-a->u.d);
  } else if (a->kind == JV_BIGINT) {
    int neg = a->u.s.p[0] == '-';
    return jn_int_from_digits(x, at, a->u.s.p + neg, a->u.s.n - (size_t)neg, !neg, out);
  } else if (as_i(a) == INT64_MIN) {
    return jn_int_from_digits(x, at, "9223372036854775808", 19, 0, out);
  } else {
    *out = jv_int(-as_i(a));
  }
  return 0;
}

static int hashable(const jv *v) {
  return !(v->kind == JV_LIST && v->u.l->type == JL_LIST) && v->kind != JV_DICT &&
         v->kind != JV_JSON && v->kind != JV_NS;
}

int jx_contains(jctx *x, const jnode *at, const jv *item, const jv *cont, int *out) {
  *out = 0;
  if (cont->kind == JV_STR) {
    if (item->kind != JV_STR)
      return jx_fail(x, at, "'in <string>' requires string as left operand, not %s",
                     jv_type_name(item));
    const char *h = cont->u.s.p, *nd = item->u.s.p;
    size_t hn = cont->u.s.n, nn = item->u.s.n;
    if (nn == 0) {
      *out = 1;
      return 0;
    }
    if (jx_work(x, at, hn))
      return -1;
    for (size_t i = 0; i + nn <= hn; i++)
      if (h[i] == nd[0] && memcmp(h + i, nd, nn) == 0) {
        *out = 1;
        break;
      }
    return 0;
  }
  if (jv_is_mapping(cont) || (cont->kind == JV_LIST && cont->u.l->type == JL_KEYS)) {
    if (!hashable(item))
      return jx_fail(x, at, "unhashable type: '%s'", jv_type_name(item));
    jv dummy;
    if (cont->kind == JV_DICT && item->kind != JV_STR) {
      int r = jv_dict_get(x, at, cont, item, &dummy);
      *out = r > 0;
      return r < 0 ? -1 : 0;
    }
    if (cont->kind != JV_LIST) {
      *out = item->kind == JV_STR && jv_map_get(cont, item->u.s.p, item->u.s.n, &dummy);
      return 0;
    }
  }
  if (cont->kind == JV_UNDEF)
    return 0;
  if (jv_is_seq(cont) || cont->kind == JV_LIST) {
    size_t n = jv_len(cont), from = 0;
    if (cont->kind == JV_LIST && cont->u.l->type == JL_ITER) {
      from = cont->u.l->pos;
      n = cont->u.l->n;
    }
    if (jx_work(x, at, n - from))
      return -1;
    for (size_t i = from; i < n && !*out; i++) {
      jv it = jv_seq_at(cont, i);
      *out = jv_equal(x, item, &it);
      if (cont->kind == JV_LIST && cont->u.l->type == JL_ITER)
        cont->u.l->pos = i + 1; /* a generator is consumed up to the match */
    }
    return x->failed ? -1 : 0;
  }
  return jx_fail(x, at, "argument of type '%s' is not iterable", jv_type_name(cont));
}
