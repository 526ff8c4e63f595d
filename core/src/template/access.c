/* Attribute, item and slice access as jinja2's sandbox does it.
 *
 * `obj.name` (getattr): a Python attribute of obj's type first (a method,
 * or undefined where the immutable sandbox refuses it), then obj['name'],
 * then undefined. `obj[key]` (getitem): the subscript first (a mapping's
 * key, a sequence's or string's index), then, for a string key, the
 * attribute, then undefined. Undefined values fail only when used
 * (printing one gives ""). */
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
  char *p = na + nb < na ? NULL : ja_alloc(&x->arena, na + nb + 1);
  *ok = p != NULL;
  if (!p)
    return jv_undef(NULL);
  if (na)
    memcpy(p, a, na);
  if (nb)
    memcpy(p + na, b, nb);
  return jv_str(p, na + nb);
}

static int method_value(jctx *x, const jnode *at, const jv *self, const char *name, size_t len,
                        jv *out) {
  jmethod *m = ja_alloc(&x->arena, sizeof *m);
  char *nm = ja_strdup(&x->arena, name, len);
  if (!m || !nm)
    return jx_oom(x, at);
  m->self = *self;
  m->name = nm;
  *out = (jv){.kind = JV_METHOD};
  out->u.meth = m;
  return 0;
}

static int undef_named(jctx *x, const jnode *at, const char *name, size_t len, jv *out) {
  char *nm = ja_strdup(&x->arena, name, len);
  if (!nm)
    return jx_oom(x, at);
  *out = jv_undef(nm);
  return 0;
}

static int loop_attr(jctx *x, const jnode *at, const jv *obj, const char *name, size_t len,
                     jv *out) {
  const jloop *l = obj->u.loop;
  static const char *const f[] = {"index",  "index0", "revindex", "revindex0", "first",
                                  "last",   "length", "previtem", "nextitem",  "depth",
                                  "depth0", "cycle",  "changed"};
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
  case 11:
  case 12:
    return method_value(x, at, obj, name, len, out);
  default:
    return undef_named(x, at, name, len, out);
  }
}

/* The data attributes of numbers: real, imag, numerator, denominator. */
static int number_attr(const jv *obj, const char *name, size_t len, jv *out) {
  int is_int = jv_is_int(obj), is_float = obj->kind == JV_FLOAT;
  if (!is_int && !is_float)
    return 0;
  jv self = obj->kind == JV_BOOL ? jv_int(obj->u.b) : *obj;
  if ((len == 4 && !memcmp(name, "real", 4)) ||
      (is_int && len == 9 && !memcmp(name, "numerator", 9)))
    *out = self;
  else if (len == 4 && !memcmp(name, "imag", 4))
    *out = is_float ? jv_float(0.0) : jv_int(0);
  else if (is_int && len == 11 && !memcmp(name, "denominator", 11))
    *out = jv_int(1);
  else
    return 0;
  return 1;
}

int jx_get_attr(jctx *x, const jnode *at, const jv *obj, const char *name, size_t len, jv *out) {
  if (obj->kind == JV_UNDEF)
    return jx_undef_fail(x, at, obj);
  if (obj->kind == JV_LOOP)
    return loop_attr(x, at, obj, name, len, out);
  if (obj->kind == JV_NS) {
    if (jv_map_get(obj, name, len, out))
      return 0;
    return undef_named(x, at, name, len, out);
  }
  int safe;
  if (jf_has_pyattr(obj, name, len, &safe)) {
    if (!safe)
      return undef_named(x, at, name, len, out);
    if (number_attr(obj, name, len, out))
      return 0;
    return method_value(x, at, obj, name, len, out);
  }
  if (jv_is_mapping(obj) && jv_map_get(obj, name, len, out))
    return 0;
  return undef_named(x, at, name, len, out);
}

/* An index for a sequence of len items: Python's negative indexing; -1
 * when out of range (IndexError: jinja2 gives undefined). */
static int64_t seq_index(const jv *key, size_t len) {
  if (key->kind == JV_BIGINT)
    return -1;
  int64_t i = key->kind == JV_INT ? key->u.i : key->u.b;
  if (i < 0)
    i += (int64_t)len;
  return i < 0 || i >= (int64_t)len ? -1 : i;
}

int jx_get_item(jctx *x, const jnode *at, const jv *obj, const jv *key, jv *out) {
  if (obj->kind == JV_UNDEF)
    return jx_undef_fail(x, at, obj);
  if (jv_is_mapping(obj)) {
    /* obj[undefined] is a KeyError (undefined is hashable): undefined */
    if (key->kind == JV_STR && jv_map_get(obj, key->u.s.p, key->u.s.n, out))
      return 0;
    if (key->kind != JV_STR && key->kind != JV_UNDEF && obj->kind == JV_DICT) {
      int r = jv_dict_get(x, at, obj, key, out);
      if (r)
        return r < 0 ? -1 : 0;
    }
  } else if (obj->kind == JV_STR && jv_is_int(key)) {
    size_t len = ju_count(obj->u.s.p, obj->u.s.n);
    int64_t i = seq_index(key, len);
    if (jx_work(x, at, obj->u.s.n))
      return -1;
    if (i < 0) {
      *out = jv_undef(NULL);
      return 0;
    }
    size_t b = ju_offset(obj->u.s.p, obj->u.s.n, (size_t)i);
    size_t e = b + ju_offset(obj->u.s.p + b, obj->u.s.n - b, 1);
    *out = jv_str(obj->u.s.p + b, e - b);
    out->safe = obj->safe;
    return 0;
  } else if (jv_is_seq(obj) && jv_is_int(key)) {
    int64_t i = seq_index(key, jv_len(obj));
    *out = i < 0 ? jv_undef(NULL) : jv_seq_at(obj, (size_t)i);
    return 0;
  }
  /* The subscript failed: a string key is tried as an attribute. */
  if (key->kind == JV_STR && obj->kind != JV_LOOP)
    return jx_get_attr(x, at, obj, key->u.s.p, key->u.s.n, out);
  if (key->kind == JV_STR)
    return loop_attr(x, at, obj, key->u.s.p, key->u.s.n, out);
  *out = jv_undef(NULL);
  return 0;
}

/* Python's slice.indices(len), in 128 bits so that no bound overflows. */
static int64_t clamp_index(const jv *v, int64_t len, int64_t lo, int64_t hi) {
  __int128 i;
  if (v->kind == JV_BIGINT)
    i = v->u.s.p[0] == '-' ? -((__int128)INT64_MAX) * 4 : ((__int128)INT64_MAX) * 4;
  else
    i = v->kind == JV_INT ? v->u.i : v->u.b;
  if (i < 0)
    i += len;
  if (i < lo)
    i = lo;
  if (i > hi)
    i = hi;
  return (int64_t)i;
}

static int is_index(const jv *v) {
  return v->kind == JV_INT || v->kind == JV_NONE || v->kind == JV_BOOL || v->kind == JV_BIGINT;
}

int jx_slice(jctx *x, const jnode *at, const jv *obj, jv *pa, jv *pb, jv *pc, jv *out) {
  jv *ps[3] = {pa, pb, pc};
  for (int i = 0; i < 3; i++)
    if (ps[i] && !is_index(ps[i]))
      return jx_fail(x, at, "slice indices must be integers or None or have an __index__ method");
  if (obj->kind == JV_UNDEF)
    return jx_undef_fail(x, at, obj);
  int is_str = obj->kind == JV_STR;
  if (!is_str && !jv_is_seq(obj)) {
    *out = jv_undef(NULL); /* TypeError in the subscript: jinja2 gives undefined */
    return 0;
  }
  int64_t st = 1;
  if (pc && pc->kind != JV_NONE) {
    if (pc->kind == JV_BIGINT)
      st = pc->u.s.p[0] == '-' ? -INT64_MAX : INT64_MAX;
    else
      st = pc->kind == JV_INT ? pc->u.i : pc->u.b;
    if (st == 0)
      return jx_fail(x, at, "slice step cannot be zero");
    if (st == INT64_MIN)
      st = -INT64_MAX;
  }
  size_t len = is_str ? ju_count(obj->u.s.p, obj->u.s.n) : jv_len(obj);
  if (len > INT64_MAX / 4)
    return jx_oom(x, at);
  int64_t L = (int64_t)len, lo = st < 0 ? -1 : 0, hi = st < 0 ? L - 1 : L;
  int64_t start = pa && pa->kind != JV_NONE ? clamp_index(pa, L, lo, hi) : (st < 0 ? hi : lo);
  int64_t stop = pb && pb->kind != JV_NONE ? clamp_index(pb, L, lo, hi) : (st < 0 ? lo : hi);
  __int128 span = st > 0 ? (__int128)stop - start : (__int128)start - stop;
  __int128 ast = st > 0 ? st : -(__int128)st;
  size_t cnt = span > 0 ? (size_t)((span + ast - 1) / ast) : 0;
  if (jx_work(x, at, is_str ? obj->u.s.n : len))
    return -1;
  if (is_str) {
    size_t *offs = ja_alloc(&x->arena, (len + 1) * sizeof *offs);
    char *p = ja_alloc(&x->arena, obj->u.s.n + 1);
    if (!offs || !p)
      return jx_oom(x, at);
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
      offs[i] = o;
      o += ju_offset(obj->u.s.p + o, obj->u.s.n - o, 1);
    }
    offs[len] = obj->u.s.n;
    size_t k = 0;
    for (size_t c = 0; c < cnt; c++) {
      size_t idx = (size_t)(start + (__int128)c * st);
      memcpy(p + k, obj->u.s.p + offs[idx], offs[idx + 1] - offs[idx]);
      k += offs[idx + 1] - offs[idx];
    }
    *out = jv_str(p, k);
    out->safe = obj->safe;
    return 0;
  }
  jlist *l = jl_new(&x->arena, cnt);
  if (!l)
    return jx_oom(x, at);
  l->type = obj->kind == JV_LIST && obj->u.l->type == JL_TUPLE ? JL_TUPLE : JL_LIST;
  if (obj->kind == JV_LIST && obj->u.l->type == JL_RANGE) {
    /* a slice of a range is a range */
    l->type = JL_RANGE;
    const jlist *r = obj->u.l;
    __int128 r0 = r->r0 + (__int128)start * r->rstep, r1 = r->r0 + (__int128)stop * r->rstep,
             rs = (__int128)r->rstep * st;
    if (r0 > INT64_MAX || r0 < INT64_MIN || r1 > INT64_MAX || r1 < INT64_MIN || rs > INT64_MAX ||
        rs < INT64_MIN)
      return jx_fail(x, at, "unsupported construct 'integer beyond 64 bits'");
    l->r0 = (int64_t)r0;
    l->r1 = (int64_t)r1;
    l->rstep = (int64_t)rs;
  }
  if (obj->kind == JV_LIST) {
    for (size_t c = 0; c < cnt; c++)
      l->items[c] = obj->u.l->items[(size_t)(start + (__int128)c * st)];
  } else {
    /* JSON arrays are linked lists: index them once. */
    const cJSON **arr = ja_alloc(&x->arena, (len ? len : 1) * sizeof *arr);
    if (!arr)
      return jx_oom(x, at);
    size_t i = 0;
    for (const cJSON *c = obj->u.j->child; c && i < len; c = c->next)
      arr[i++] = c;
    for (size_t c = 0; c < cnt; c++)
      l->items[c] = jv_from_json(arr[(size_t)(start + (__int128)c * st)]);
  }
  *out = jv_list(l);
  return 0;
}
