/* Values of the Jinja subset: construction, Python-like conversion to text
 * (str, repr, json.dumps), truth, equality and ordering; the render arena
 * and output buffer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/internal.h"

/* ---- arena ---- */
struct jblock {
  struct jblock *next;
  size_t used, cap;
  max_align_t data[];
};

void *ja_alloc(jarena *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (n == 0)
    n = 16;
  struct jblock *b = a->head;
  if (!b || b->cap - b->used < n) {
    size_t cap = n > 65536 - sizeof *b ? n : 65536 - sizeof *b;
    b = malloc(sizeof *b + cap);
    if (!b)
      return NULL;
    b->cap = cap;
    b->used = 0;
    b->next = a->head;
    a->head = b;
  }
  void *p = (char *)b->data + b->used;
  b->used += n;
  memset(p, 0, n);
  return p;
}

char *ja_strdup(jarena *a, const char *s, size_t n) {
  char *p = ja_alloc(a, n + 1);
  if (p) {
    memcpy(p, s, n);
    p[n] = '\0';
  }
  return p;
}

void ja_free(jarena *a) {
  struct jblock *b = a->head;
  while (b) {
    struct jblock *next = b->next;
    free(b);
    b = next;
  }
  a->head = NULL;
}

/* ---- buffer ---- */
int jb_put(jbuf *b, const char *s, size_t n) {
  if (b->cap - b->n <= n) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->n <= n) {
      if (cap > ((size_t)-1) / 2)
        return -1;
      cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p)
      return -1;
    b->p = p;
    b->cap = cap;
  }
  if (n)
    memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = '\0';
  return 0;
}

int jb_putc(jbuf *b, char c) {
  return jb_put(b, &c, 1);
}

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

jv jv_from_json(const cJSON *j) {
  if (!j)
    return jv_undef(NULL);
  if (cJSON_IsString(j))
    return jv_str(j->valuestring, strlen(j->valuestring));
  if (cJSON_IsNumber(j)) {
    double d = j->valuedouble;
    /* JSON has one number type; integral values are Python ints. */
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
    if (!keys || !klens || !vals)
      return -1;
    if (d->n) {
      memcpy(keys, d->keys, d->n * sizeof *keys);
      memcpy(klens, d->klens, d->n * sizeof *klens);
      memcpy(vals, d->vals, d->n * sizeof *vals);
    }
    d->keys = keys;
    d->klens = klens;
    d->vals = vals;
    d->cap = cap;
  }
  d->keys[d->n] = k;
  d->klens[d->n] = klen;
  d->vals[d->n] = v;
  d->n++;
  return 0;
}

jlist *jl_new(jarena *a, size_t n) {
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
static uint32_t u8decode(const char *s, size_t n, size_t i, size_t *len) {
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
  uint32_t c = u8decode(s, n, 0, len);
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
    return v->u.l->n != 0;
  case JV_DICT:
    return v->u.m->n != 0;
  case JV_JSON:
    return v->u.j->child != NULL;
  default:
    return 1;
  }
}

int jv_is_seq(const jv *v) {
  return v->kind == JV_LIST || (v->kind == JV_JSON && cJSON_IsArray(v->u.j));
}
int jv_is_mapping(const jv *v) {
  return v->kind == JV_DICT || (v->kind == JV_JSON && cJSON_IsObject(v->u.j));
}

size_t jv_len(const jv *v) {
  switch (v->kind) {
  case JV_STR:
    return ju_count(v->u.s.p, v->u.s.n);
  case JV_LIST:
    return v->u.l->n;
  case JV_DICT:
  case JV_NS:
    return v->u.m->n;
  case JV_JSON:
    return (size_t)cJSON_GetArraySize(v->u.j);
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
    for (const cJSON *c = v->u.j->child; c; c = c->next)
      if (c->string && strlen(c->string) == klen && memcmp(c->string, key, klen) == 0) {
        *out = jv_from_json(c);
        return 1;
      }
  }
  return 0;
}

void jv_map_at(const jv *v, size_t i, jv *key, jv *val) {
  if (v->kind == JV_DICT || v->kind == JV_NS) {
    *key = jv_str(v->u.m->keys[i], v->u.m->klens[i]);
    *val = v->u.m->vals[i];
    return;
  }
  const cJSON *c = v->u.j->child;
  while (c && i--)
    c = c->next;
  *key = c && c->string ? jv_str(c->string, strlen(c->string)) : jv_undef(NULL);
  *val = jv_from_json(c);
}

const char *jv_type_name(const jv *v) {
  switch (v->kind) {
  case JV_UNDEF:
    return "undefined";
  case JV_NONE:
    return "NoneType";
  case JV_BOOL:
    return "bool";
  case JV_INT:
    return "int";
  case JV_FLOAT:
    return "float";
  case JV_STR:
    return "str";
  case JV_LIST:
    return v->u.l->tuple ? "tuple" : "list";
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
  default:
    return "function";
  }
}

/* ---- numbers as Python prints them ---- */
void jv_fmt_float(double d, char *out, size_t cap) {
  if (isnan(d)) {
    snprintf(out, cap, "nan");
    return;
  }
  if (isinf(d)) {
    snprintf(out, cap, d < 0 ? "-inf" : "inf");
    return;
  }
  char e[64];
  int p;
  for (p = 1; p <= 17; p++) {
    snprintf(e, sizeof e, "%.*e", p - 1, d);
    if (strtod(e, NULL) == d)
      break;
  }
  /* e = [-]D[.DDD]e[+-]XX: digits and decimal exponent */
  char digits[32];
  int nd = 0, neg = 0;
  const char *q = e;
  if (*q == '-') {
    neg = 1;
    q++;
  }
  for (; *q && *q != 'e'; q++)
    if (*q != '.')
      digits[nd++] = *q;
  int exp10 = atoi(q + 1);
  while (nd > 1 && digits[nd - 1] == '0')
    nd--;
  digits[nd] = '\0';
  size_t k = 0;
  char o[64];
  if (neg)
    o[k++] = '-';
  if (exp10 >= -5 + 1 && exp10 < 16) {
    if (exp10 < 0) {
      o[k++] = '0';
      o[k++] = '.';
      for (int z = 0; z < -exp10 - 1; z++)
        o[k++] = '0';
      for (int z = 0; z < nd; z++)
        o[k++] = digits[z];
    } else {
      for (int z = 0; z <= exp10; z++)
        o[k++] = z < nd ? digits[z] : '0';
      o[k++] = '.';
      if (nd > exp10 + 1)
        for (int z = exp10 + 1; z < nd; z++)
          o[k++] = digits[z];
      else
        o[k++] = '0';
    }
    o[k] = '\0';
  } else {
    o[k++] = digits[0];
    if (nd > 1) {
      o[k++] = '.';
      for (int z = 1; z < nd; z++)
        o[k++] = digits[z];
    }
    k += (size_t)snprintf(o + k, sizeof o - k, "e%c%02d", exp10 < 0 ? '-' : '+',
                          exp10 < 0 ? -exp10 : exp10);
  }
  snprintf(out, cap, "%s", o);
}

static int put(jctx *x, const jnode *at, jbuf *b, const char *s, size_t n) {
  return jb_put(b, s, n) ? jx_oom(x, at) : 0;
}

/* Python repr() of a str. */
static int repr_str(jctx *x, const jnode *at, const char *s, size_t n, jbuf *b) {
  int has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
  char q = (has_sq && !has_dq) ? '"' : '\'';
  if (put(x, at, b, &q, 1))
    return -1;
  for (size_t i = 0; i < n;) {
    size_t l;
    uint32_t c = u8decode(s, n, i, &l);
    char tmp[16];
    const char *o = s + i;
    size_t on = l;
    if (c == '\\' || c == (uint32_t)q) {
      tmp[0] = '\\';
      tmp[1] = (char)c;
      o = tmp;
      on = 2;
    } else if (c == '\n' || c == '\r' || c == '\t') {
      tmp[0] = '\\';
      tmp[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
      o = tmp;
      on = 2;
    } else if (c < 0x20 || c == 0x7F || (c >= 0x80 && c <= 0xA0) || c == 0xAD) {
      on = (size_t)snprintf(tmp, sizeof tmp, "\\x%02x", c);
      o = tmp;
    } else if (c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
               (c >= 0x205F && c <= 0x206F) || c == 0x3000 || c == 0xFEFF ||
               (c >= 0xD800 && c <= 0xF8FF) || (c >= 0xFFF9 && c <= 0xFFFB)) {
      on = (size_t)snprintf(tmp, sizeof tmp, "\\u%04x", c);
      o = tmp;
    }
    if (put(x, at, b, o, on))
      return -1;
    i += l;
  }
  return put(x, at, b, &q, 1);
}

int jv_repr(jctx *x, const jnode *at, const jv *v, jbuf *b) {
  if (v->kind == JV_STR)
    return repr_str(x, at, v->u.s.p, v->u.s.n, b);
  if (jv_is_seq(v)) {
    int tuple = v->kind == JV_LIST && v->u.l->tuple;
    size_t n = jv_len(v);
    if (put(x, at, b, tuple ? "(" : "[", 1))
      return -1;
    for (size_t i = 0; i < n; i++) {
      jv it = jv_seq_at(v, i);
      if ((i && put(x, at, b, ", ", 2)) || jv_repr(x, at, &it, b))
        return -1;
    }
    if (tuple && n == 1 && put(x, at, b, ",", 1))
      return -1;
    return put(x, at, b, tuple ? ")" : "]", 1);
  }
  if (jv_is_mapping(v)) {
    size_t n = jv_len(v);
    if (put(x, at, b, "{", 1))
      return -1;
    for (size_t i = 0; i < n; i++) {
      jv k, val;
      jv_map_at(v, i, &k, &val);
      if ((i && put(x, at, b, ", ", 2)) || jv_repr(x, at, &k, b) || put(x, at, b, ": ", 2) ||
          jv_repr(x, at, &val, b))
        return -1;
    }
    return put(x, at, b, "}", 1);
  }
  if (v->kind == JV_UNDEF)
    return 0;
  return jv_to_str(x, at, v, b);
}

int jv_to_str(jctx *x, const jnode *at, const jv *v, jbuf *b) {
  char tmp[64];
  switch (v->kind) {
  case JV_UNDEF:
    return 0;
  case JV_NONE:
    return put(x, at, b, "None", 4);
  case JV_BOOL:
    return v->u.b ? put(x, at, b, "True", 4) : put(x, at, b, "False", 5);
  case JV_INT: {
    int n = snprintf(tmp, sizeof tmp, "%lld", (long long)v->u.i);
    return put(x, at, b, tmp, (size_t)n);
  }
  case JV_FLOAT:
    jv_fmt_float(v->u.d, tmp, sizeof tmp);
    return put(x, at, b, tmp, strlen(tmp));
  case JV_STR:
    return put(x, at, b, v->u.s.p, v->u.s.n);
  case JV_LIST:
  case JV_DICT:
  case JV_JSON:
    return jv_repr(x, at, v, b);
  case JV_NS: {
    jv d = *v;
    d.kind = JV_DICT;
    return put(x, at, b, "<Namespace ", 11) || jv_repr(x, at, &d, b) || put(x, at, b, ">", 1);
  }
  default:
    return jx_fail(x, at, "unsupported construct 'printing a %s'", jv_type_name(v));
  }
}

int jv_stringify(jctx *x, const jnode *at, const jv *v, jv *out) {
  if (v->kind == JV_STR) {
    *out = *v;
    return 0;
  }
  jbuf b = {0};
  if (jv_to_str(x, at, v, &b)) {
    free(b.p);
    return -1;
  }
  char *s = ja_strdup(&x->arena, b.p ? b.p : "", b.n);
  free(b.p);
  if (!s)
    return jx_oom(x, at);
  *out = jv_str(s, b.n);
  return 0;
}

/* ---- json.dumps ---- */
static int json_str(jctx *x, const jnode *at, const char *s, size_t n, int ensure_ascii, jbuf *b) {
  if (put(x, at, b, "\"", 1))
    return -1;
  size_t run = 0;
  for (size_t i = 0; i < n;) {
    unsigned char c = (unsigned char)s[i];
    char tmp[16];
    size_t tn = 0;
    size_t l = 1;
    if (c == '"' || c == '\\') {
      tmp[0] = '\\';
      tmp[1] = (char)c;
      tn = 2;
    } else if (c < 0x20) {
      const char *esc = c == '\n'   ? "\\n"
                        : c == '\r' ? "\\r"
                        : c == '\t' ? "\\t"
                        : c == '\b' ? "\\b"
                        : c == '\f' ? "\\f"
                                    : NULL;
      if (esc) {
        memcpy(tmp, esc, 2);
        tn = 2;
      } else {
        tn = (size_t)snprintf(tmp, sizeof tmp, "\\u%04x", c);
      }
    } else if (c >= 0x80 && ensure_ascii) {
      uint32_t cp = u8decode(s, n, i, &l);
      if (cp >= 0x10000) {
        cp -= 0x10000;
        tn = (size_t)snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xD800 + (cp >> 10),
                              0xDC00 + (cp & 0x3FF));
      } else {
        tn = (size_t)snprintf(tmp, sizeof tmp, "\\u%04x", cp);
      }
    } else {
      run++;
      i++;
      continue;
    }
    if (run && put(x, at, b, s + i - run, run))
      return -1;
    run = 0;
    if (put(x, at, b, tmp, tn))
      return -1;
    i += l;
  }
  if (run && put(x, at, b, s + n - run, run))
    return -1;
  return put(x, at, b, "\"", 1);
}

static int json_nl(jctx *x, const jnode *at, int indent, int level, jbuf *b) {
  if (put(x, at, b, "\n", 1))
    return -1;
  for (int i = 0; i < indent * level; i++)
    if (put(x, at, b, " ", 1))
      return -1;
  return 0;
}

static int json_rec(jctx *x, const jnode *at, const jv *v, int ensure_ascii, int indent,
                    const char *isep, const char *ksep, int level, jbuf *b) {
  if (level > 200)
    return jx_fail(x, at, "tojson: value nested too deeply");
  char tmp[64];
  switch (v->kind) {
  case JV_NONE:
    return put(x, at, b, "null", 4);
  case JV_BOOL:
    return v->u.b ? put(x, at, b, "true", 4) : put(x, at, b, "false", 5);
  case JV_INT:
  case JV_FLOAT:
    if (v->kind == JV_FLOAT && isnan(v->u.d))
      return put(x, at, b, "NaN", 3);
    if (v->kind == JV_FLOAT && isinf(v->u.d))
      return v->u.d < 0 ? put(x, at, b, "-Infinity", 9) : put(x, at, b, "Infinity", 8);
    return jv_to_str(x, at, v, b);
  case JV_STR:
    return json_str(x, at, v->u.s.p, v->u.s.n, ensure_ascii, b);
  default:
    break;
  }
  if (jv_is_seq(v) || jv_is_mapping(v) || v->kind == JV_NS) {
    int map = !jv_is_seq(v);
    size_t n = jv_len(v);
    if (put(x, at, b, map ? "{" : "[", 1))
      return -1;
    if (n == 0)
      return put(x, at, b, map ? "}" : "]", 1);
    for (size_t i = 0; i < n; i++) {
      if (i && put(x, at, b, isep, strlen(isep)))
        return -1;
      if (indent >= 0 && json_nl(x, at, indent, level + 1, b))
        return -1;
      jv it;
      if (map) {
        jv k;
        jv_map_at(v, i, &k, &it);
        if (json_str(x, at, k.u.s.p, k.u.s.n, ensure_ascii, b) || put(x, at, b, ksep, strlen(ksep)))
          return -1;
      } else {
        it = jv_seq_at(v, i);
      }
      if (json_rec(x, at, &it, ensure_ascii, indent, isep, ksep, level + 1, b))
        return -1;
    }
    if (indent >= 0 && json_nl(x, at, indent, level, b))
      return -1;
    return put(x, at, b, map ? "}" : "]", 1);
  }
  snprintf(tmp, sizeof tmp, "%s", jv_type_name(v));
  return jx_fail(x, at, "tojson: Object of type %s is not JSON serializable", tmp);
}

int jv_to_json(jctx *x, const jnode *at, const jv *v, int ensure_ascii, int indent,
               const char *item_sep, const char *key_sep, jbuf *b) {
  return json_rec(x, at, v, ensure_ascii, indent, item_sep, key_sep, 0, b);
}

/* ---- equality and order ---- */
static int is_num(const jv *v) {
  return v->kind == JV_INT || v->kind == JV_FLOAT || v->kind == JV_BOOL;
}
static double num_d(const jv *v) {
  return v->kind == JV_FLOAT ? v->u.d : v->kind == JV_INT ? (double)v->u.i : (double)v->u.b;
}
static int64_t num_i(const jv *v) {
  return v->kind == JV_INT ? v->u.i : (int64_t)v->u.b;
}

int jv_equal(const jv *a, const jv *b) {
  if (is_num(a) && is_num(b)) {
    if (a->kind == JV_FLOAT || b->kind == JV_FLOAT)
      return num_d(a) == num_d(b);
    return num_i(a) == num_i(b);
  }
  if (a->kind == JV_STR && b->kind == JV_STR)
    return a->u.s.n == b->u.s.n && memcmp(a->u.s.p, b->u.s.p, a->u.s.n) == 0;
  if ((a->kind == JV_NONE && b->kind == JV_NONE) || (a->kind == JV_UNDEF && b->kind == JV_UNDEF))
    return 1;
  if (jv_is_seq(a) && jv_is_seq(b)) {
    int ta = a->kind == JV_LIST && a->u.l->tuple, tb = b->kind == JV_LIST && b->u.l->tuple;
    size_t n = jv_len(a);
    if (ta != tb || n != jv_len(b))
      return 0;
    for (size_t i = 0; i < n; i++) {
      jv x = jv_seq_at(a, i), y = jv_seq_at(b, i);
      if (!jv_equal(&x, &y))
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
      if (k.kind != JV_STR || !jv_map_get(b, k.u.s.p, k.u.s.n, &vb) || !jv_equal(&va, &vb))
        return 0;
    }
    return 1;
  }
  if (a->kind == JV_NS && b->kind == JV_NS)
    return a->u.m == b->u.m;
  if (a->kind == JV_JSON && b->kind == JV_JSON)
    return a->u.j == b->u.j;
  return 0;
}

int jv_compare(const jv *a, const jv *b, int *ok) {
  *ok = 1;
  if (is_num(a) && is_num(b)) {
    if (a->kind == JV_FLOAT || b->kind == JV_FLOAT) {
      double x = num_d(a), y = num_d(b);
      return x < y ? -1 : x > y ? 1 : 0;
    }
    int64_t x = num_i(a), y = num_i(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a->kind == JV_STR && b->kind == JV_STR) {
    size_t n = a->u.s.n < b->u.s.n ? a->u.s.n : b->u.s.n;
    int c = memcmp(a->u.s.p, b->u.s.p, n);
    if (c)
      return c < 0 ? -1 : 1;
    return a->u.s.n < b->u.s.n ? -1 : a->u.s.n > b->u.s.n ? 1 : 0;
  }
  if (jv_is_seq(a) && jv_is_seq(b)) {
    size_t na = jv_len(a), nb = jv_len(b);
    for (size_t i = 0; i < na && i < nb; i++) {
      jv x = jv_seq_at(a, i), y = jv_seq_at(b, i);
      if (jv_equal(&x, &y))
        continue;
      return jv_compare(&x, &y, ok);
    }
    return na < nb ? -1 : na > nb ? 1 : 0;
  }
  *ok = 0;
  return 0;
}
