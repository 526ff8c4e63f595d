/* Values as Python prints them: str(), repr() (the form of values inside
 * printed lists and dicts) and json.dumps (transformers' tojson).
 *
 * What Python prints with a memory address (generators, functions, macros)
 * is refused rather than printed differently. Walks over nested values are
 * bounded by MAX_VALUE_DEPTH. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unictype.h>

#include "template/internal.h"

/* ---- floats as Python's repr ---- */
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
  if (exp10 >= -4 && exp10 < 16) {
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

static int too_deep(jctx *x, const jnode *at, int level) {
  if (level > MAX_VALUE_DEPTH)
    return jx_fail(x, at, "value nested too deeply to print (more than %d levels)",
                   MAX_VALUE_DEPTH);
  return 0;
}

/* Python's str.isprintable() for one code point: not the categories Cc, Cf,
 * Cs, Co, Cn, Zl, Zp and Zs other than the space. */
static int printable(uint32_t c) {
  if (c < 0x7F)
    return c >= 0x20;
  if (c >= 0xD800 && c <= 0xDFFF)
    return 0;
  return !uc_is_general_category_withtable(
      c, UC_CATEGORY_MASK_Cc | UC_CATEGORY_MASK_Cf | UC_CATEGORY_MASK_Cs | UC_CATEGORY_MASK_Co |
             UC_CATEGORY_MASK_Cn | UC_CATEGORY_MASK_Zl | UC_CATEGORY_MASK_Zp | UC_CATEGORY_MASK_Zs);
}

/* Python repr() of a str. */
static int repr_str(jctx *x, const jnode *at, const char *s, size_t n, jbuf *b) {
  int has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
  char q = (has_sq && !has_dq) ? '"' : '\'';
  if (put(x, at, b, &q, 1))
    return -1;
  for (size_t i = 0; i < n;) {
    size_t l;
    uint32_t c = ju_decode(s, n, i, &l);
    char tmp[16];
    const char *o = s + i;
    size_t on = l;
    if (l == 1 && (unsigned char)s[i] >= 0x80) {
      /* invalid UTF-8 cannot come from Python: print the byte escaped */
      on = (size_t)snprintf(tmp, sizeof tmp, "\\x%02x", (unsigned char)s[i]);
      o = tmp;
    } else if (c == '\\' || c == (uint32_t)q) {
      tmp[0] = '\\';
      tmp[1] = (char)c;
      o = tmp;
      on = 2;
    } else if (c == '\n' || c == '\r' || c == '\t') {
      tmp[0] = '\\';
      tmp[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
      o = tmp;
      on = 2;
    } else if (!printable(c)) {
      on = (size_t)snprintf(tmp, sizeof tmp,
                            c < 0x100     ? "\\x%02x"
                            : c < 0x10000 ? "\\u%04x"
                                          : "\\U%08x",
                            c);
      o = tmp;
    }
    if (put(x, at, b, o, on))
      return -1;
    i += l;
  }
  return put(x, at, b, &q, 1);
}

static int repr_d(jctx *x, const jnode *at, const jv *v, jbuf *b, int level);

/* The items of a sequence-like list type, as "[a, b]" or "(a,)". */
static int repr_items(jctx *x, const jnode *at, const jv *v, int tuple, jbuf *b, int level) {
  size_t n = v->kind == JV_LIST ? v->u.l->n : jv_len(v);
  if (put(x, at, b, tuple ? "(" : "[", 1))
    return -1;
  const cJSON *c = v->kind == JV_JSON ? v->u.j->child : NULL;
  for (size_t i = 0; i < n; i++) {
    jv it = v->kind == JV_JSON ? jv_from_json(c) : v->u.l->items[i];
    if (c)
      c = c->next;
    if ((i && put(x, at, b, ", ", 2)) || repr_d(x, at, &it, b, level + 1))
      return -1;
  }
  if (tuple && n == 1 && put(x, at, b, ",", 1))
    return -1;
  return put(x, at, b, tuple ? ")" : "]", 1);
}

static int repr_map(jctx *x, const jnode *at, const jv *v, jbuf *b, int level) {
  jv m = *v;
  if (m.kind == JV_NS)
    m.kind = JV_DICT;
  size_t n = jv_len(&m);
  if (put(x, at, b, "{", 1))
    return -1;
  const cJSON *c = m.kind == JV_JSON ? m.u.j->child : NULL;
  for (size_t i = 0; i < n; i++) {
    jv k, val;
    if (c) {
      k = jv_str(c->string, strlen(c->string));
      val = jv_from_json(c);
      c = c->next;
    } else {
      jv_map_at(&m, i, &k, &val);
    }
    if ((i && put(x, at, b, ", ", 2)) || repr_d(x, at, &k, b, level + 1) ||
        put(x, at, b, ": ", 2) || repr_d(x, at, &val, b, level + 1))
      return -1;
  }
  return put(x, at, b, "}", 1);
}

static int print_list_type(jctx *x, const jnode *at, const jv *v, jbuf *b, int level) {
  const jlist *l = v->u.l;
  switch (l->type) {
  case JL_LIST:
    return repr_items(x, at, v, 0, b, level);
  case JL_TUPLE:
    return repr_items(x, at, v, 1, b, level);
  case JL_ITEMS:
  case JL_KEYS:
  case JL_VALUES: {
    const char *nm = jv_type_name(v);
    jv as_list = *v;
    return put(x, at, b, nm, strlen(nm)) || put(x, at, b, "(", 1) ||
           repr_items(x, at, &as_list, 0, b, level) || put(x, at, b, ")", 1);
  }
  case JL_RANGE: {
    char tmp[80];
    int k = l->rstep == 1
                ? snprintf(tmp, sizeof tmp, "range(%lld, %lld)", (long long)l->r0, (long long)l->r1)
                : snprintf(tmp, sizeof tmp, "range(%lld, %lld, %lld)", (long long)l->r0,
                           (long long)l->r1, (long long)l->rstep);
    return put(x, at, b, tmp, (size_t)k);
  }
  default:
    return jx_fail(x, at,
                   "unsupported construct 'printing a generator' (Python prints its memory "
                   "address; use |list)");
  }
}

static int repr_d(jctx *x, const jnode *at, const jv *v, jbuf *b, int level) {
  if (too_deep(x, at, level))
    return -1;
  switch (v->kind) {
  case JV_STR:
    if (v->safe)
      return put(x, at, b, "Markup(", 7) || repr_str(x, at, v->u.s.p, v->u.s.n, b) ||
             put(x, at, b, ")", 1);
    return repr_str(x, at, v->u.s.p, v->u.s.n, b);
  case JV_UNDEF:
    return put(x, at, b, "Undefined", 9);
  case JV_LIST:
    return print_list_type(x, at, v, b, level);
  case JV_JSON:
    return cJSON_IsArray(v->u.j) ? repr_items(x, at, v, 0, b, level) : repr_map(x, at, v, b, level);
  case JV_DICT:
    return repr_map(x, at, v, b, level);
  case JV_NS:
    return put(x, at, b, "<Namespace ", 11) || repr_map(x, at, v, b, level) ||
           put(x, at, b, ">", 1);
  default:
    return jv_to_str(x, at, v, b);
  }
}

int jv_repr(jctx *x, const jnode *at, const jv *v, jbuf *b) {
  return repr_d(x, at, v, b, 0);
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
  case JV_BIGINT:
    return put(x, at, b, v->u.s.p, v->u.s.n);
  case JV_FLOAT:
    jv_fmt_float(v->u.d, tmp, sizeof tmp);
    return put(x, at, b, tmp, strlen(tmp));
  case JV_STR:
    return put(x, at, b, v->u.s.p, v->u.s.n);
  case JV_LIST:
  case JV_DICT:
  case JV_JSON:
  case JV_NS:
    return repr_d(x, at, v, b, 0);
  default:
    return jx_fail(x, at,
                   "unsupported construct 'printing a %s' (Python prints its memory address)",
                   jv_type_name(v));
  }
}

int jv_stringify(jctx *x, const jnode *at, const jv *v, jv *out) {
  if (v->kind == JV_STR) {
    *out = *v;
    return 0;
  }
  jbuf b = jx_buf(x);
  if (jv_to_str(x, at, v, &b)) {
    jb_free(&b);
    return -1;
  }
  return jx_take_str(x, at, &b, 0, out);
}

/* ---- json.dumps ---- */
typedef struct jopts {
  int ensure_ascii, sort_keys;
  const char *indent, *isep, *ksep; /* indent NULL: no newlines */
} jopts;

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
      uint32_t cp = ju_decode(s, n, i, &l);
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

static int json_nl(jctx *x, const jnode *at, const jopts *o, int level, jbuf *b) {
  if (put(x, at, b, "\n", 1))
    return -1;
  size_t n = strlen(o->indent);
  for (int i = 0; i < level; i++)
    if (put(x, at, b, o->indent, n))
      return -1;
  return 0;
}

static int json_rec(jctx *x, const jnode *at, const jv *v, const jopts *o, int level, jbuf *b);

/* Keys of mapping v in json.dumps order: insertion, or sorted. */
static int map_order(jctx *x, const jnode *at, const jv *v, int sort, size_t **order) {
  size_t n = jv_len(v);
  *order = ja_alloc(&x->arena, (n + 1) * sizeof **order);
  if (!*order)
    return jx_oom(x, at);
  jv *keys = ja_alloc(&x->arena, (n + 1) * sizeof *keys);
  if (!keys)
    return jx_oom(x, at);
  for (size_t i = 0; i < n; i++) {
    jv val;
    jv_map_at(v, i, &keys[i], &val);
    (*order)[i] = i;
  }
  if (sort) /* insertion sort: stable, as Python's sorted() */
    for (size_t i = 1; i < n; i++)
      for (size_t j = i; j > 0; j--) {
        int ok;
        if (jv_compare(x, &keys[(*order)[j - 1]], &keys[(*order)[j]], &ok) <= 0)
          break;
        size_t t = (*order)[j];
        (*order)[j] = (*order)[j - 1];
        (*order)[j - 1] = t;
      }
  return jx_work(x, at, sort ? n * n : n);
}

static int json_container(jctx *x, const jnode *at, const jv *v, const jopts *o, int level,
                          jbuf *b) {
  int map = jv_is_mapping(v);
  size_t n = jv_len(v), *order = NULL;
  if (put(x, at, b, map ? "{" : "[", 1))
    return -1;
  if (n == 0)
    return put(x, at, b, map ? "}" : "]", 1);
  if (map && map_order(x, at, v, o->sort_keys, &order))
    return -1;
  const cJSON *c = v->kind == JV_JSON && !o->sort_keys ? v->u.j->child : NULL;
  for (size_t i = 0; i < n; i++) {
    if (i && put(x, at, b, o->isep, strlen(o->isep)))
      return -1;
    if (o->indent && json_nl(x, at, o, level + 1, b))
      return -1;
    jv it, k;
    if (c) {
      k = map ? jv_str(c->string, strlen(c->string)) : jv_undef(NULL);
      it = jv_from_json(c);
      c = c->next;
    } else if (map) {
      jv_map_at(v, order[i], &k, &it);
    } else {
      it = jv_seq_at(v, i);
    }
    if (map && k.kind != JV_STR) { /* json.dumps writes a number, bool or None key as a string */
      jbuf kb = jx_buf(x);
      int rc = k.kind == JV_BOOL   ? put(x, at, &kb, k.u.b ? "true" : "false", k.u.b ? 4 : 5)
               : k.kind == JV_NONE ? put(x, at, &kb, "null", 4)
                                   : jv_to_str(x, at, &k, &kb);
      rc = rc || jx_take_str(x, at, &kb, 0, &k);
      if (rc)
        return -1;
    }
    if (map && (json_str(x, at, k.u.s.p, k.u.s.n, o->ensure_ascii, b) ||
                put(x, at, b, o->ksep, strlen(o->ksep))))
      return -1;
    if (json_rec(x, at, &it, o, level + 1, b))
      return -1;
  }
  if (o->indent && json_nl(x, at, o, level, b))
    return -1;
  return put(x, at, b, map ? "}" : "]", 1);
}

static int json_rec(jctx *x, const jnode *at, const jv *v, const jopts *o, int level, jbuf *b) {
  if (too_deep(x, at, level))
    return -1;
  switch (v->kind) {
  case JV_NONE:
    return put(x, at, b, "null", 4);
  case JV_BOOL:
    return v->u.b ? put(x, at, b, "true", 4) : put(x, at, b, "false", 5);
  case JV_FLOAT:
    if (isnan(v->u.d))
      return put(x, at, b, "NaN", 3);
    if (isinf(v->u.d))
      return v->u.d < 0 ? put(x, at, b, "-Infinity", 9) : put(x, at, b, "Infinity", 8);
    return jv_to_str(x, at, v, b);
  case JV_INT:
  case JV_BIGINT:
    return jv_to_str(x, at, v, b);
  case JV_STR:
    return json_str(x, at, v->u.s.p, v->u.s.n, o->ensure_ascii, b);
  case JV_DICT:
  case JV_JSON:
    return json_container(x, at, v, o, level, b);
  case JV_LIST:
    if (v->u.l->type == JL_LIST || v->u.l->type == JL_TUPLE)
      return json_container(x, at, v, o, level, b);
    break;
  default:
    break;
  }
  return jx_fail(x, at, "tojson: Object of type %s is not JSON serializable", jv_type_name(v));
}

int jv_to_json(jctx *x, const jnode *at, const jv *v, int ensure_ascii, const char *indent,
               const char *item_sep, const char *key_sep, int sort_keys, jbuf *b) {
  jopts o = {ensure_ascii, sort_keys, indent, item_sep, key_sep};
  return json_rec(x, at, v, &o, 0, b);
}
