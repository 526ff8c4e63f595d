/* Values in operation: attribute, item and slice access, arithmetic,
 * concatenation and membership, with Python's semantics (floor division,
 * modulo sign, str * int, list + list) and Jinja's undefined rules. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "template/internal.h"

int jx_undef_fail(jctx *x, const jnode *at, const jv *v) {
  if (v->undef_name)
    return jx_fail(x, at, "'%s' is undefined", v->undef_name);
  return jx_fail(x, at, "use of an undefined value");
}

jv jx_mkstr(jctx *x, const char *a, size_t na, const char *b, size_t nb, int *ok) {
  char *p = ja_alloc(&x->arena, na + nb + 1);
  *ok = p != NULL;
  if (!p)
    return jv_undef(NULL);
  memcpy(p, a, na);
  memcpy(p + na, b, nb);
  return jv_str(p, na + nb);
}

/* ---- attribute and item access ---- */
int jx_get_attr(jctx *x, const jnode *at, const jv *obj, const char *name, size_t len, jv *out) {
  if (obj->kind == JV_UNDEF)
    return jx_undef_fail(x, at, obj);
  if (obj->kind == JV_LOOP) {
    const jloop *l = obj->u.loop;
    static const char *const f[] = {"index",  "index0",   "revindex", "revindex0", "first", "last",
                                    "length", "previtem", "nextitem", "depth",     "depth0"};
    int k = -1;
    for (int i = 0; i < (int)(sizeof f / sizeof f[0]); i++)
      if (strlen(f[i]) == len && memcmp(f[i], name, len) == 0)
        k = i;
    switch (k) {
    case 0:
      *out = jv_int(l->index0 + 1);
      return 0;
    case 1:
      *out = jv_int(l->index0);
      return 0;
    case 2:
      *out = jv_int(l->length - l->index0);
      return 0;
    case 3:
      *out = jv_int(l->length - l->index0 - 1);
      return 0;
    case 4:
      *out = jv_bool(l->index0 == 0);
      return 0;
    case 5:
      *out = jv_bool(l->index0 == l->length - 1);
      return 0;
    case 6:
      *out = jv_int(l->length);
      return 0;
    case 7:
      *out = l->index0 > 0 ? l->items[l->index0 - 1] : jv_undef("previtem");
      return 0;
    case 8:
      *out = l->index0 + 1 < l->length ? l->items[l->index0 + 1] : jv_undef("nextitem");
      return 0;
    case 9:
      *out = jv_int(1);
      return 0;
    case 10:
      *out = jv_int(0);
      return 0;
    default:
      return jx_fail(x, at, "unsupported construct 'loop.%.*s'", (int)len, name);
    }
  }
  if (jf_is_method(obj, name, len)) {
    jmethod *m = ja_alloc(&x->arena, sizeof *m);
    char *nm = ja_strdup(&x->arena, name, len);
    if (!m || !nm)
      return jx_oom(x, at);
    m->self = *obj;
    m->name = nm;
    out->kind = JV_METHOD;
    out->u.meth = m;
    return 0;
  }
  if ((jv_is_mapping(obj) || obj->kind == JV_NS) && jv_map_get(obj, name, len, out))
    return 0;
  char *nm = ja_strdup(&x->arena, name, len);
  *out = jv_undef(nm);
  return 0;
}

/* Python's slice.indices() */
static void slice_indices(int64_t len, const jv *a, const jv *b, const jv *c, int64_t *start,
                          int64_t *stop, int64_t *stepv) {
  int64_t st = c && c->kind == JV_INT ? c->u.i : 1;
  *stepv = st;
  int64_t lo = st < 0 ? -1 : 0, hi = st < 0 ? len - 1 : len;
  if (a && a->kind == JV_INT) {
    *start = a->u.i < 0 ? a->u.i + len : a->u.i;
    if (*start < lo)
      *start = lo;
    if (*start > hi)
      *start = hi;
  } else {
    *start = st < 0 ? hi : lo;
  }
  if (b && b->kind == JV_INT) {
    *stop = b->u.i < 0 ? b->u.i + len : b->u.i;
    if (*stop < lo)
      *stop = lo;
    if (*stop > hi)
      *stop = hi;
  } else {
    *stop = st < 0 ? lo : hi;
  }
}

static int is_int_or_none(const jv *v) {
  return v->kind == JV_INT || v->kind == JV_NONE || v->kind == JV_BOOL;
}

int jx_slice(jctx *x, const jnode *at, const jv *obj, jv *pa, jv *pb, jv *pc, jv *out) {
  jv *ps[3] = {pa, pb, pc};
  for (int i = 0; i < 3; i++) {
    if (ps[i] && ps[i]->kind == JV_BOOL)
      *ps[i] = jv_int(ps[i]->u.b);
    if (ps[i] && !is_int_or_none(ps[i]))
      return jx_fail(x, at, "slice indices must be integers or None");
  }
  if (pc && pc->kind == JV_INT && pc->u.i == 0)
    return jx_fail(x, at, "slice step cannot be zero");
  if (obj->kind == JV_UNDEF)
    return jx_undef_fail(x, at, obj);
  int is_str = obj->kind == JV_STR;
  if (!is_str && !jv_is_seq(obj))
    return jx_fail(x, at, "'%s' object is not subscriptable by a slice", jv_type_name(obj));
  /* Code point offsets for strings. */
  size_t len = is_str ? ju_count(obj->u.s.p, obj->u.s.n) : jv_len(obj);
  int64_t start, stop, stp;
  slice_indices((int64_t)len, pa, pb, pc, &start, &stop, &stp);
  size_t cnt = 0;
  if (stp > 0 && stop > start)
    cnt = (size_t)((stop - start + stp - 1) / stp);
  else if (stp < 0 && start > stop)
    cnt = (size_t)((start - stop + (-stp) - 1) / (-stp));
  if (is_str) {
    size_t *offs = malloc((len + 1) * sizeof *offs);
    if (!offs)
      return jx_oom(x, at);
    size_t o = 0, i = 0;
    for (; i < len; i++) {
      offs[i] = o;
      o += ju_offset(obj->u.s.p + o, obj->u.s.n - o, 1);
    }
    offs[len] = obj->u.s.n;
    char *p = ja_alloc(&x->arena, obj->u.s.n + 1);
    if (!p) {
      free(offs);
      return jx_oom(x, at);
    }
    size_t k = 0;
    for (size_t c = 0; c < cnt; c++) {
      int64_t idx = start + (int64_t)c * stp;
      size_t b = offs[idx], e = offs[idx + 1];
      memcpy(p + k, obj->u.s.p + b, e - b);
      k += e - b;
    }
    free(offs);
    *out = jv_str(p, k);
    return 0;
  }
  jlist *l = jl_new(&x->arena, cnt);
  if (!l)
    return jx_oom(x, at);
  l->tuple = obj->kind == JV_LIST && obj->u.l->tuple;
  if (obj->kind == JV_LIST) {
    for (size_t c = 0; c < cnt; c++)
      l->items[c] = obj->u.l->items[start + (int64_t)c * stp];
  } else {
    /* JSON arrays are linked lists: index them once. */
    const cJSON **arr = malloc((len ? len : 1) * sizeof *arr);
    if (!arr)
      return jx_oom(x, at);
    size_t i = 0;
    for (const cJSON *c = obj->u.j->child; c && i < len; c = c->next)
      arr[i++] = c;
    for (size_t c = 0; c < cnt; c++)
      l->items[c] = jv_from_json(arr[start + (int64_t)c * stp]);
    free(arr);
  }
  out->kind = JV_LIST;
  out->u.l = l;
  return 0;
}

int jx_get_item(jctx *x, const jnode *at, const jv *obj, const jv *key, jv *out) {
  if (obj->kind == JV_UNDEF)
    return jx_undef_fail(x, at, obj);
  if (key->kind == JV_STR)
    return jx_get_attr(x, at, obj, key->u.s.p, key->u.s.n, out) ? -1 : 0;
  if (key->kind == JV_INT || key->kind == JV_BOOL) {
    int64_t i = key->kind == JV_INT ? key->u.i : key->u.b;
    if (obj->kind == JV_STR) {
      size_t len = ju_count(obj->u.s.p, obj->u.s.n);
      if (i < 0)
        i += (int64_t)len;
      if (i < 0 || i >= (int64_t)len) {
        *out = jv_undef(NULL);
        return 0;
      }
      size_t b = ju_offset(obj->u.s.p, obj->u.s.n, (size_t)i);
      size_t e = b + ju_offset(obj->u.s.p + b, obj->u.s.n - b, 1);
      *out = jv_str(obj->u.s.p + b, e - b);
      return 0;
    }
    if (jv_is_seq(obj)) {
      size_t len = jv_len(obj);
      if (i < 0)
        i += (int64_t)len;
      *out = (i < 0 || i >= (int64_t)len) ? jv_undef(NULL) : jv_seq_at(obj, (size_t)i);
      return 0;
    }
  }
  *out = jv_undef(NULL);
  return 0;
}

/* ---- arithmetic ---- */
static int is_num(const jv *v) {
  return v->kind == JV_INT || v->kind == JV_FLOAT || v->kind == JV_BOOL;
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

int jx_binop(jctx *x, const jnode *at, int op, const jv *a, const jv *b, jv *out) {
  if (op == OP_CONCAT) {
    jv sa, sb;
    if (jv_stringify(x, at, a, &sa) || jv_stringify(x, at, b, &sb))
      return -1;
    int ok;
    *out = jx_mkstr(x, sa.u.s.p, sa.u.s.n, sb.u.s.p, sb.u.s.n, &ok);
    return ok ? 0 : jx_oom(x, at);
  }
  if (a->kind == JV_UNDEF)
    return jx_undef_fail(x, at, a);
  if (b->kind == JV_UNDEF)
    return jx_undef_fail(x, at, b);
  if (is_num(a) && is_num(b)) {
    int fl = a->kind == JV_FLOAT || b->kind == JV_FLOAT;
    if (op == OP_DIV || (fl && op != OP_POW)) {
      double p = as_d(a), q = as_d(b), r;
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
          return jx_fail(x, at, "division by zero");
        r = p / q;
        break;
      case OP_FLOORDIV:
        if (q == 0)
          return jx_fail(x, at, "division by zero");
        r = floor(p / q);
        break;
      case OP_MOD:
        if (q == 0)
          return jx_fail(x, at, "modulo by zero");
        r = fmod(p, q);
        if (r != 0 && ((r < 0) != (q < 0)))
          r += q;
        break;
      default:
        return jx_fail(x, at, "unsupported operator");
      }
      *out = jv_float(r);
      return 0;
    }
    if (op == OP_POW) {
      if (!fl && as_i(b) >= 0) {
        int64_t base = as_i(a), e = as_i(b), r = 1;
        while (e-- > 0)
          if (__builtin_mul_overflow(r, base, &r))
            return jx_fail(x, at, "unsupported construct 'integer beyond 64 bits'");
          else if (r == 0 || r == 1)
            break;
        *out = jv_int(r);
        return 0;
      }
      *out = jv_float(pow(as_d(a), as_d(b)));
      return 0;
    }
    int64_t p = as_i(a), q = as_i(b), r;
    int ovf = 0;
    switch (op) {
    case OP_ADD:
      ovf = __builtin_add_overflow(p, q, &r);
      break;
    case OP_SUB:
      ovf = __builtin_sub_overflow(p, q, &r);
      break;
    case OP_MUL:
      ovf = __builtin_mul_overflow(p, q, &r);
      break;
    case OP_FLOORDIV:
    case OP_MOD:
      if (q == 0)
        return jx_fail(x, at, "integer division or modulo by zero");
      if (p == INT64_MIN && q == -1)
        return jx_fail(x, at, "unsupported construct 'integer beyond 64 bits'");
      r = op == OP_FLOORDIV ? p / q : p % q;
      if (op == OP_FLOORDIV && (p % q != 0) && ((p < 0) != (q < 0)))
        r--;
      if (op == OP_MOD && r != 0 && ((r < 0) != (q < 0)))
        r += q;
      break;
    default:
      return jx_fail(x, at, "unsupported operator");
    }
    if (ovf)
      return jx_fail(x, at, "unsupported construct 'integer beyond 64 bits'");
    *out = jv_int(r);
    return 0;
  }
  if (op == OP_ADD && a->kind == JV_STR && b->kind == JV_STR) {
    int ok;
    *out = jx_mkstr(x, a->u.s.p, a->u.s.n, b->u.s.p, b->u.s.n, &ok);
    return ok ? 0 : jx_oom(x, at);
  }
  if (op == OP_ADD && jv_is_seq(a) && jv_is_seq(b)) {
    int ta = a->kind == JV_LIST && a->u.l->tuple, tb = b->kind == JV_LIST && b->u.l->tuple;
    if (ta == tb) {
      size_t na = jv_len(a), nb = jv_len(b);
      jlist *l = jl_new(&x->arena, na + nb);
      if (!l)
        return jx_oom(x, at);
      l->tuple = ta;
      for (size_t i = 0; i < na; i++)
        l->items[i] = jv_seq_at(a, i);
      for (size_t i = 0; i < nb; i++)
        l->items[na + i] = jv_seq_at(b, i);
      out->kind = JV_LIST;
      out->u.l = l;
      return 0;
    }
  }
  if (op == OP_MUL &&
      ((a->kind == JV_STR && b->kind == JV_INT) || (a->kind == JV_INT && b->kind == JV_STR))) {
    const jv *s = a->kind == JV_STR ? a : b;
    int64_t k = a->kind == JV_INT ? a->u.i : b->u.i;
    if (k < 0)
      k = 0;
    if (s->u.s.n && (uint64_t)k > x->max_output / s->u.s.n)
      return jx_fail(x, at, "string repetition too large");
    char *p = ja_alloc(&x->arena, s->u.s.n * (size_t)k + 1);
    if (!p)
      return jx_oom(x, at);
    for (int64_t i = 0; i < k; i++)
      memcpy(p + (size_t)i * s->u.s.n, s->u.s.p, s->u.s.n);
    *out = jv_str(p, s->u.s.n * (size_t)k);
    return 0;
  }
  if (op == OP_MOD && a->kind == JV_STR)
    return jx_fail(x, at, "unsupported construct 'printf-style %% formatting'");
  return jx_fail(x, at, "unsupported operand type(s) for %s: '%s' and '%s'", op_text(op),
                 jv_type_name(a), jv_type_name(b));
}

int jx_contains(jctx *x, const jnode *at, const jv *item, const jv *cont, int *out) {
  if (cont->kind == JV_STR) {
    if (item->kind != JV_STR)
      return jx_fail(x, at, "'in <string>' requires string as left operand, not %s",
                     jv_type_name(item));
    const char *h = cont->u.s.p, *nd = item->u.s.p;
    size_t hn = cont->u.s.n, nn = item->u.s.n;
    *out = 0;
    if (nn == 0) {
      *out = 1;
      return 0;
    }
    for (size_t i = 0; i + nn <= hn; i++)
      if (h[i] == nd[0] && memcmp(h + i, nd, nn) == 0) {
        *out = 1;
        break;
      }
    return 0;
  }
  if (jv_is_mapping(cont) || cont->kind == JV_NS) {
    jv dummy;
    *out = item->kind == JV_STR && jv_map_get(cont, item->u.s.p, item->u.s.n, &dummy);
    return 0;
  }
  if (jv_is_seq(cont)) {
    size_t n = jv_len(cont);
    *out = 0;
    for (size_t i = 0; i < n && !*out; i++) {
      jv it = jv_seq_at(cont, i);
      *out = jv_equal(item, &it);
    }
    return 0;
  }
  if (cont->kind == JV_UNDEF) {
    *out = 0;
    return 0;
  }
  return jx_fail(x, at, "argument of type '%s' is not iterable", jv_type_name(cont));
}
