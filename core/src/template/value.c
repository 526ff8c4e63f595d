/* Values of the Jinja subset: construction, Python truth, len() and
 * iteration, equality and ordering. Printing is print.c; numbers beyond C's
 * are number.c.
 *
 * JSON numbers keep Python's types: a number written with a '.', 'e' or 'E'
 * is a float, any other an int of any size. fsdpc__jinja_json_keep_numbers
 * (json_text.c) stores each number's text in its cJSON node (valuestring),
 * so an int beyond 2^53 keeps every digit; numbers built in C without text
 * fall back to "integral doubles are ints". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/internal.h"

/* ---- constructors ---- */
jv jv_undef(const char *name) {
  jv v = {.kind = JV_UNDEF};
  v.undef_name = name;
  return v;
}
jv jv_none(void) {
  return (jv){.kind = JV_NONE};
}
jv jv_bool(int b) {
  jv v = {.kind = JV_BOOL};
  v.u.b = b ? 1 : 0;
  return v;
}
jv jv_int(int64_t i) {
  jv v = {.kind = JV_INT};
  v.u.i = i;
  return v;
}
jv jv_float(double d) {
  jv v = {.kind = JV_FLOAT};
  v.u.d = d;
  return v;
}
jv jv_str(const char *p, size_t n) {
  jv v = {.kind = JV_STR};
  v.u.s.p = p;
  v.u.s.n = n;
  return v;
}
jv jv_list(jlist *l) {
  jv v = {.kind = JV_LIST};
  v.u.l = l;
  return v;
}

/* A JSON integer literal's text: an int64 when it fits, else a big int. */
static jv json_int_text(const char *t, double d) {
  int neg = t[0] == '-';
  const char *dg = t + neg;
  size_t nd = strlen(dg);
  if (nd <= 18 ||
      (nd == 19 && strcmp(dg, neg ? "9223372036854775808" : "9223372036854775807") <= 0)) {
    uint64_t u = 0;
    for (size_t i = 0; i < nd; i++)
      u = u * 10 + (uint64_t)(dg[i] - '0');
    return jv_int(neg ? (int64_t)(0 - u) : (int64_t)u);
  }
  (void)d;
  jv v = {.kind = JV_BIGINT};
  v.u.s.p = t;
  v.u.s.n = strlen(t);
  return v;
}

jv jv_from_json(const cJSON *j) {
  if (!j)
    return jv_undef(NULL);
  if (cJSON_IsString(j))
    return jv_str(j->valuestring, strlen(j->valuestring));
  if (cJSON_IsNumber(j)) {
    double d = j->valuedouble;
    const char *t = j->valuestring;
    if (t && t[0] && !strpbrk(t, ".eE"))
      return json_int_text(t, d);
    if (t && t[0])
      return jv_float(d);
    if (d == floor(d) && fabs(d) < 9007199254740992.0)
      return jv_int((int64_t)d);
    return jv_float(d);
  }
  if (cJSON_IsBool(j))
    return jv_bool(cJSON_IsTrue(j));
  if (cJSON_IsNull(j))
    return jv_none();
  if (cJSON_IsArray(j) || cJSON_IsObject(j)) {
    jv v = {.kind = JV_JSON};
    v.u.j = j;
    return v;
  }
  return jv_undef(NULL);
}

jdict *jd_new(jarena *a) {
  return ja_alloc(a, sizeof(jdict));
}

int jd_set(jarena *a, jdict *d, const char *k, size_t klen, jv v) {
  for (size_t i = 0; i < d->n; i++)
    if (d->klens[i] == klen && memcmp(d->keys[i], k, klen) == 0) {
      d->vals[i] = v;
      return 0;
    }
  if (d->n == d->cap) {
    size_t cap = d->cap ? d->cap * 2 : 4;
    const char **keys = ja_alloc(a, cap * sizeof *keys);
    size_t *klens = ja_alloc(a, cap * sizeof *klens);
    jv *vals = ja_alloc(a, cap * sizeof *vals);
    jv *kv = d->kv ? ja_alloc(a, cap * sizeof *kv) : NULL;
    if (!keys || !klens || !vals || (d->kv && !kv))
      return -1;
    if (d->n) {
      memcpy(keys, d->keys, d->n * sizeof *keys);
      memcpy(klens, d->klens, d->n * sizeof *klens);
      memcpy(vals, d->vals, d->n * sizeof *vals);
      if (kv)
        memcpy(kv, d->kv, d->n * sizeof *kv);
    }
    d->keys = keys;
    d->klens = klens;
    d->vals = vals;
    d->kv = kv;
    d->cap = cap;
  }
  d->keys[d->n] = k;
  d->klens[d->n] = klen;
  d->vals[d->n] = v;
  d->n++;
  return 0;
}

/* The canonical text of a non-string key: "\x01" then the number's value
 * (so that 1, 1.0 and True are one key, as Python hashes them), or the
 * float's repr, or "None". */
static int dict_key(jctx *x, const jnode *at, const jv *key, char *buf, size_t cap) {
  switch (key->kind) {
  case JV_INT:
    snprintf(buf, cap, "\x01%lld", (long long)key->u.i);
    return 0;
  case JV_BOOL:
    snprintf(buf, cap, "\x01%d", key->u.b);
    return 0;
  case JV_NONE:
    snprintf(buf, cap, "\x01None");
    return 0;
  case JV_FLOAT:
    if (key->u.d == floor(key->u.d) && fabs(key->u.d) < 9.2e18)
      snprintf(buf, cap, "\x01%lld", (long long)key->u.d);
    else {
      buf[0] = '\x01';
      buf[1] = 'f';
      jv_fmt_float(key->u.d, buf + 2, cap - 2);
    }
    return 0;
  case JV_BIGINT:
    snprintf(buf, cap, "\x01%.*s", (int)(key->u.s.n < cap - 2 ? key->u.s.n : cap - 2), key->u.s.p);
    return key->u.s.n < cap - 2 ? 0
                                : jx_fail(x, at, "unsupported construct 'dict key of a big int'");
  default:
    return jx_fail(x, at, "unsupported construct 'dict key of type %s'", jv_type_name(key));
  }
}

int jd_set_key(jctx *x, const jnode *at, jdict *d, const jv *key, jv v) {
  if (key->kind == JV_STR)
    return jd_set(&x->arena, d, key->u.s.p, key->u.s.n, v) ? jx_oom(x, at) : 0;
  char buf[64];
  if (dict_key(x, at, key, buf, sizeof buf))
    return -1;
  size_t n = strlen(buf), before = d->n;
  char *k = ja_strdup(&x->arena, buf, n);
  if (!k || jd_set(&x->arena, d, k, n, v))
    return jx_oom(x, at);
  if (d->n == before)
    return 0; /* an existing key keeps its first form */
  if (!d->kv) {
    d->kv = ja_alloc(&x->arena, d->cap * sizeof *d->kv);
    if (!d->kv)
      return jx_oom(x, at);
  }
  d->kv[d->n - 1] = *key;
  return 0;
}

int jv_dict_get(jctx *x, const jnode *at, const jv *d, const jv *key, jv *out) {
  char buf[64];
  if (dict_key(x, at, key, buf, sizeof buf))
    return -1;
  return jv_map_get(d, buf, strlen(buf), out);
}

jlist *jl_new(jarena *a, size_t n) {
  if (n > ((size_t)-1) / (2 * sizeof(jv)))
    return NULL;
  jlist *l = ja_alloc(a, sizeof *l);
  if (!l)
    return NULL;
  l->n = n;
  l->items = ja_alloc(a, (n ? n : 1) * sizeof(jv));
  return l->items ? l : NULL;
}

/* ---- UTF-8 ---- */
static size_t u8len(unsigned char c) {
  return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
}
static size_t u8step(const char *s, size_t n, size_t i) {
  size_t l = u8len((unsigned char)s[i]);
  if (i + l > n)
    return 1;
  for (size_t k = 1; k < l; k++)
    if (((unsigned char)s[i + k] & 0xC0) != 0x80)
      return 1;
  return l;
}
size_t ju_count(const char *s, size_t n) {
  size_t c = 0;
  for (size_t i = 0; i < n; i += u8step(s, n, i))
    c++;
  return c;
}
size_t ju_offset(const char *s, size_t n, size_t cp) {
  size_t i = 0;
  while (cp-- > 0 && i < n)
    i += u8step(s, n, i);
  return i < n ? i : n;
}
uint32_t ju_decode(const char *s, size_t n, size_t i, size_t *len) {
  size_t l = u8step(s, n, i);
  *len = l;
  const unsigned char *u = (const unsigned char *)s + i;
  if (l == 1)
    return u[0];
  if (l == 2)
    return ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
  if (l == 3)
    return ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
  return ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) |
         ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
}
int ju_is_space(const char *s, size_t n, size_t *len) {
  uint32_t c = ju_decode(s, n, 0, len);
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

/* ---- truth, sizes, access ---- */
int jv_truthy(const jv *v) {
  switch (v->kind) {
  case JV_UNDEF:
  case JV_NONE:
    return 0;
  case JV_BOOL:
    return v->u.b;
  case JV_INT:
    return v->u.i != 0;
  case JV_FLOAT:
    return v->u.d != 0.0;
  case JV_STR:
    return v->u.s.n != 0;
  case JV_LIST:
    /* a generator object is true even when it would yield nothing */
    return v->u.l->type == JL_ITER || v->u.l->n != 0;
  case JV_DICT:
    return v->u.m->n != 0;
  case JV_JSON:
    return v->u.j->child != NULL;
  default:
    return 1; /* big ints are never 0; objects and functions are true */
  }
}

int jv_is_int(const jv *v) {
  return v->kind == JV_INT || v->kind == JV_BOOL || v->kind == JV_BIGINT;
}

int jv_is_seq(const jv *v) {
  if (v->kind == JV_LIST)
    return v->u.l->type == JL_LIST || v->u.l->type == JL_TUPLE || v->u.l->type == JL_RANGE;
  return v->kind == JV_JSON && cJSON_IsArray(v->u.j);
}
int jv_is_mapping(const jv *v) {
  return v->kind == JV_DICT || (v->kind == JV_JSON && cJSON_IsObject(v->u.j));
}
int jv_is_iterable(const jv *v) {
  return v->kind == JV_STR || v->kind == JV_LIST || v->kind == JV_DICT || v->kind == JV_JSON ||
         v->kind == JV_UNDEF || v->kind == JV_LOOP;
}
int jv_has_len(const jv *v) {
  return v->kind == JV_STR || (v->kind == JV_LIST && v->u.l->type != JL_ITER) ||
         v->kind == JV_DICT || v->kind == JV_JSON || v->kind == JV_LOOP;
}

size_t jv_len(const jv *v) {
  switch (v->kind) {
  case JV_STR:
    return ju_count(v->u.s.p, v->u.s.n);
  case JV_LIST:
    return v->u.l->type == JL_ITER ? v->u.l->n - v->u.l->pos : v->u.l->n;
  case JV_DICT:
  case JV_NS:
    return v->u.m->n;
  case JV_JSON:
    return (size_t)cJSON_GetArraySize(v->u.j);
  case JV_LOOP:
    return (size_t)v->u.loop->length;
  default:
    return 0;
  }
}

jv jv_seq_at(const jv *v, size_t i) {
  if (v->kind == JV_LIST)
    return i < v->u.l->n ? v->u.l->items[i] : jv_undef(NULL);
  if (v->kind == JV_JSON) {
    const cJSON *c = v->u.j->child;
    while (c && i--)
      c = c->next;
    return jv_from_json(c);
  }
  return jv_undef(NULL);
}

int jv_map_get(const jv *v, const char *key, size_t klen, jv *out) {
  if (v->kind == JV_DICT || v->kind == JV_NS) {
    const jdict *d = v->u.m;
    for (size_t i = 0; i < d->n; i++)
      if (d->klens[i] == klen && memcmp(d->keys[i], key, klen) == 0) {
        *out = d->vals[i];
        return 1;
      }
    return 0;
  }
  if (v->kind == JV_JSON && cJSON_IsObject(v->u.j)) {
    /* Python's json keeps the last of duplicate keys. */
    const cJSON *hit = NULL;
    for (const cJSON *c = v->u.j->child; c; c = c->next)
      if (c->string && strlen(c->string) == klen && memcmp(c->string, key, klen) == 0)
        hit = c;
    if (hit) {
      *out = jv_from_json(hit);
      return 1;
    }
  }
  return 0;
}

void jv_map_at(const jv *v, size_t i, jv *key, jv *val) {
  if (v->kind == JV_DICT || v->kind == JV_NS) {
    const jdict *d = v->u.m;
    *key = d->kv && d->kv[i].kind != JV_UNDEF ? d->kv[i] : jv_str(d->keys[i], d->klens[i]);
    *val = v->u.m->vals[i];
    return;
  }
  const cJSON *c = v->u.j->child;
  while (c && i--)
    c = c->next;
  *key = c && c->string ? jv_str(c->string, strlen(c->string)) : jv_undef(NULL);
  *val = jv_from_json(c);
}

int jv_iter(jctx *x, const jnode *at, const jv *v, jv **items, size_t *n) {
  *items = NULL;
  *n = 0;
  switch (v->kind) {
  case JV_UNDEF:
    return 0;
  case JV_LIST: {
    jlist *l = v->u.l;
    *items = l->items + (l->type == JL_ITER ? l->pos : 0);
    *n = l->type == JL_ITER ? l->n - l->pos : l->n;
    if (l->type == JL_ITER)
      l->pos = l->n;
    return 0;
  }
  case JV_STR: {
    size_t cnt = ju_count(v->u.s.p, v->u.s.n), o = 0;
    jv *it = ja_alloc(&x->arena, (cnt + 1) * sizeof *it);
    if (!it)
      return jx_oom(x, at);
    for (size_t i = 0; i < cnt; i++) {
      size_t l = ju_offset(v->u.s.p + o, v->u.s.n - o, 1);
      it[i] = jv_str(v->u.s.p + o, l);
      o += l;
    }
    *items = it;
    *n = cnt;
    return jx_work(x, at, v->u.s.n);
  }
  case JV_DICT:
  case JV_JSON: {
    size_t cnt = jv_len(v), i = 0;
    jv *it = ja_alloc(&x->arena, (cnt + 1) * sizeof *it);
    if (!it)
      return jx_oom(x, at);
    if (v->kind == JV_JSON) {
      for (const cJSON *c = v->u.j->child; c && i < cnt; c = c->next, i++)
        it[i] = cJSON_IsArray(v->u.j) ? jv_from_json(c) : jv_str(c->string, strlen(c->string));
    } else {
      for (; i < cnt; i++) {
        jv val;
        jv_map_at(v, i, &it[i], &val);
      }
    }
    *items = it;
    *n = cnt;
    return jx_work(x, at, cnt);
  }
  default:
    return jx_fail(x, at, "'%s' object is not iterable", jv_type_name(v));
  }
}

const char *jv_type_name(const jv *v) {
  switch (v->kind) {
  case JV_UNDEF:
    return "Undefined";
  case JV_NONE:
    return "NoneType";
  case JV_BOOL:
    return "bool";
  case JV_INT:
  case JV_BIGINT:
    return "int";
  case JV_FLOAT:
    return "float";
  case JV_STR:
    return v->safe ? "Markup" : "str";
  case JV_LIST:
    switch (v->u.l->type) {
    case JL_TUPLE:
      return "tuple";
    case JL_ITER:
      return "generator";
    case JL_ITEMS:
      return "dict_items";
    case JL_KEYS:
      return "dict_keys";
    case JL_VALUES:
      return "dict_values";
    case JL_RANGE:
      return "range";
    default:
      return "list";
    }
  case JV_DICT:
    return "dict";
  case JV_JSON:
    return cJSON_IsArray(v->u.j) ? "list" : "dict";
  case JV_NS:
    return "Namespace";
  case JV_LOOP:
    return "LoopContext";
  case JV_MACRO:
    return "Macro";
  case JV_METHOD:
    return "method";
  default:
    return "function";
  }
}

/* ---- equality and order ---- */
static int is_num(const jv *v) {
  return v->kind == JV_INT || v->kind == JV_FLOAT || v->kind == JV_BOOL || v->kind == JV_BIGINT;
}
static double num_d(const jv *v) {
  switch (v->kind) {
  case JV_FLOAT:
    return v->u.d;
  case JV_INT:
    return (double)v->u.i;
  case JV_BIGINT:
    return jn_bigint_to_double(v);
  default:
    return (double)v->u.b;
  }
}
static int64_t num_i(const jv *v) {
  return v->kind == JV_INT ? v->u.i : (int64_t)v->u.b;
}

/* Python's int / float comparison: exact for ints, by value with floats. */
static int num_cmp(const jv *a, const jv *b) {
  if (a->kind == JV_BIGINT || b->kind == JV_BIGINT) {
    if (a->kind != JV_FLOAT && b->kind != JV_FLOAT) {
      jv x = a->kind == JV_BOOL ? jv_int(a->u.b) : *a, y = b->kind == JV_BOOL ? jv_int(b->u.b) : *b;
      return jn_bigint_cmp(&x, &y);
    }
  } else if (a->kind != JV_FLOAT && b->kind != JV_FLOAT) {
    int64_t x = num_i(a), y = num_i(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  double x = num_d(a), y = num_d(b);
  return x < y ? -1 : x > y ? 1 : x == y ? 0 : 2; /* 2: unordered (nan) */
}

static int seq_kind(const jv *v) {
  /* list and JSON arrays compare with each other, tuples with tuples */
  if (v->kind == JV_JSON)
    return JL_LIST;
  return v->u.l->type;
}

/* Value recursion is bounded: a render can nest lists as deep as it likes
 * (one level per loop iteration), the C stack cannot. Too deep fails the
 * render (x->failed) and compares unequal. */
static int too_deep(jctx *x, int depth) {
  if (depth <= MAX_VALUE_DEPTH)
    return 0;
  jx_fail(x, NULL, "value nested too deeply (more than %d levels)", MAX_VALUE_DEPTH);
  return 1;
}

static int equal_d(jctx *x, const jv *a, const jv *b, int depth);

int jv_equal(jctx *x, const jv *a, const jv *b) {
  return equal_d(x, a, b, 0);
}

static int equal_d(jctx *x, const jv *a, const jv *b, int depth) {
  if (too_deep(x, depth))
    return 0;
  if (is_num(a) && is_num(b))
    return num_cmp(a, b) == 0;
  if (a->kind == JV_STR && b->kind == JV_STR)
    return a->u.s.n == b->u.s.n && memcmp(a->u.s.p, b->u.s.p, a->u.s.n) == 0;
  if ((a->kind == JV_NONE && b->kind == JV_NONE) || (a->kind == JV_UNDEF && b->kind == JV_UNDEF))
    return 1;
  if ((a->kind == JV_LIST || a->kind == JV_JSON) && (b->kind == JV_LIST || b->kind == JV_JSON) &&
      (jv_is_seq(a) || (a->kind == JV_LIST && a->u.l->type != JL_ITER)) &&
      (jv_is_seq(b) || (b->kind == JV_LIST && b->u.l->type != JL_ITER))) {
    if (seq_kind(a) != seq_kind(b))
      return 0;
    size_t n = jv_len(a);
    if (n != jv_len(b))
      return 0;
    for (size_t i = 0; i < n; i++) {
      jv p = jv_seq_at(a, i), q = jv_seq_at(b, i);
      if (!equal_d(x, &p, &q, depth + 1))
        return 0;
    }
    return 1;
  }
  if (jv_is_mapping(a) && jv_is_mapping(b)) {
    size_t n = jv_len(a);
    if (n != jv_len(b))
      return 0;
    for (size_t i = 0; i < n; i++) {
      jv k, va, vb;
      jv_map_at(a, i, &k, &va);
      if (k.kind != JV_STR || !jv_map_get(b, k.u.s.p, k.u.s.n, &vb) ||
          !equal_d(x, &va, &vb, depth + 1))
        return 0;
    }
    return 1;
  }
  if (a->kind == JV_LIST && b->kind == JV_LIST)
    return a->u.l == b->u.l; /* iterators: identity */
  if (a->kind == JV_NS && b->kind == JV_NS)
    return a->u.m == b->u.m;
  if (a->kind == JV_JSON && b->kind == JV_JSON)
    return a->u.j == b->u.j;
  if (a->kind == JV_FUNC && b->kind == JV_FUNC)
    return a->u.func == b->u.func;
  if (a->kind == JV_MACRO && b->kind == JV_MACRO)
    return a->u.macro == b->u.macro;
  return 0;
}

static int compare_d(jctx *x, const jv *a, const jv *b, int *ok, int depth);

int jv_compare(jctx *x, const jv *a, const jv *b, int *ok) {
  return compare_d(x, a, b, ok, 0);
}

static int compare_d(jctx *x, const jv *a, const jv *b, int *ok, int depth) {
  *ok = 1;
  if (too_deep(x, depth)) {
    *ok = 0;
    return 0;
  }
  if (is_num(a) && is_num(b)) {
    int c = num_cmp(a, b);
    if (c == 2) {
      *ok = 2; /* comparable, but every ordering is false */
      return 0;
    }
    return c;
  }
  if (a->kind == JV_STR && b->kind == JV_STR) {
    size_t n = a->u.s.n < b->u.s.n ? a->u.s.n : b->u.s.n;
    int c = n ? memcmp(a->u.s.p, b->u.s.p, n) : 0;
    if (c)
      return c < 0 ? -1 : 1;
    return a->u.s.n < b->u.s.n ? -1 : a->u.s.n > b->u.s.n ? 1 : 0;
  }
  if (jv_is_seq(a) && jv_is_seq(b) && seq_kind(a) == seq_kind(b) && seq_kind(a) != JL_RANGE) {
    size_t na = jv_len(a), nb = jv_len(b);
    for (size_t i = 0; i < na && i < nb; i++) {
      jv p = jv_seq_at(a, i), q = jv_seq_at(b, i);
      if (equal_d(x, &p, &q, depth + 1))
        continue;
      return compare_d(x, &p, &q, ok, depth + 1);
    }
    return na < nb ? -1 : na > nb ? 1 : 0;
  }
  *ok = 0;
  return 0;
}
