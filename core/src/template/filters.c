/* Jinja's filters on single values (strings, numbers, tojson), the filter
 * table and the argument binding every filter shares. The filters over
 * sequences are in filters_seq.c.
 *
 * Each behaves as jinja2 3.1's (with autoescape off, as transformers runs
 * it: markupsafe's Markup only where a template asks for it); tojson is
 * transformers' override (json.dumps with ensure_ascii=False). Arguments
 * bind as Python binds them, by position or by name. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unictype.h>

#include "template/filters.h"

static const char *const FILTERS[FL_N] = {
    [FL_ABS] = "abs",
    [FL_ATTR] = "attr",
    [FL_BATCH] = "batch",
    [FL_CAPITALIZE] = "capitalize",
    [FL_CENTER] = "center",
    [FL_COUNT] = "count",
    [FL_D] = "d",
    [FL_DEFAULT] = "default",
    [FL_DICTSORT] = "dictsort",
    [FL_E] = "e",
    [FL_ESCAPE] = "escape",
    [FL_FIRST] = "first",
    [FL_FLOAT] = "float",
    [FL_FORCEESCAPE] = "forceescape",
    [FL_FORMAT] = "format",
    [FL_GROUPBY] = "groupby",
    [FL_INDENT] = "indent",
    [FL_INT] = "int",
    [FL_ITEMS] = "items",
    [FL_JOIN] = "join",
    [FL_LAST] = "last",
    [FL_LENGTH] = "length",
    [FL_LIST] = "list",
    [FL_LOWER] = "lower",
    [FL_MAP] = "map",
    [FL_MAX] = "max",
    [FL_MIN] = "min",
    [FL_REJECT] = "reject",
    [FL_REJECTATTR] = "rejectattr",
    [FL_REPLACE] = "replace",
    [FL_REVERSE] = "reverse",
    [FL_ROUND] = "round",
    [FL_SAFE] = "safe",
    [FL_SELECT] = "select",
    [FL_SELECTATTR] = "selectattr",
    [FL_SLICE] = "slice",
    [FL_SORT] = "sort",
    [FL_STRING] = "string",
    [FL_SUM] = "sum",
    [FL_TITLE] = "title",
    [FL_TOJSON] = "tojson",
    [FL_TRIM] = "trim",
    [FL_UNIQUE] = "unique",
    [FL_UPPER] = "upper",
    [FL_WORDCOUNT] = "wordcount",
};

int jf_filter_id(const char *name, size_t len) {
  for (int i = 1; i < FL_N; i++)
    if (FILTERS[i] && strlen(FILTERS[i]) == len && memcmp(FILTERS[i], name, len) == 0)
      return i;
  return 0;
}
const char *jf_filter_name(int id) {
  return id > 0 && id < FL_N && FILTERS[id] ? FILTERS[id] : "?";
}

const jv *jf_kwarg(const char **kwn, const jv *kwv, size_t nkw, const char *name) {
  for (size_t i = 0; i < nkw; i++)
    if (strcmp(kwn[i], name) == 0)
      return &kwv[i];
  return NULL;
}

int jf_check_kwargs(jctx *x, const jnode *at, const char *what, const char **kwn, size_t nkw,
                    const char *const *allowed) {
  for (size_t i = 0; i < nkw; i++) {
    int ok = 0;
    for (size_t k = 0; allowed && allowed[k]; k++)
      if (strcmp(allowed[k], kwn[i]) == 0)
        ok = 1;
    if (!ok)
      return jx_fail(x, at, "%s() got an unexpected keyword argument '%s'", what, kwn[i]);
  }
  return 0;
}

int jf_bind(jctx *x, const jnode *at, const char *fname, const char *const *params, const jv *args,
            size_t nargs, const char **kwn, const jv *kwv, size_t nkw, const jv **got) {
  size_t np = 0;
  while (params[np])
    np++;
  if (nargs > np)
    return jx_fail(x, at, "%s() takes at most %zu argument(s) (%zu given)", fname, np, nargs);
  for (size_t i = 0; i < np; i++)
    got[i] = i < nargs ? &args[i] : NULL;
  for (size_t k = 0; k < nkw; k++) {
    size_t i = 0;
    while (i < np && strcmp(params[i], kwn[k]) != 0)
      i++;
    if (i == np)
      return jx_fail(x, at, "%s() got an unexpected keyword argument '%s'", fname, kwn[k]);
    if (got[i])
      return jx_fail(x, at, "%s() got multiple values for argument '%s'", fname, kwn[k]);
    got[i] = &kwv[k];
  }
  return 0;
}

int jf_attr_path(jctx *x, const jnode *at, const jv *item, const jv *path, jv *out) {
  if (path->kind != JV_STR) {
    *out = *item;
    if (path->kind == JV_NONE)
      return 0;
    return jx_get_item(x, at, item, path, out);
  }
  jv cur = *item;
  const char *p = path->u.s.p, *end = p + path->u.s.n;
  for (;;) {
    const char *dot = memchr(p, '.', (size_t)(end - p));
    if (!dot)
      dot = end;
    size_t len = (size_t)(dot - p);
    int digits = len > 0;
    for (size_t i = 0; i < len; i++)
      digits &= p[i] >= '0' && p[i] <= '9';
    jv key = jv_str(p, len), next;
    if (digits && len < 18) {
      int64_t v = 0;
      for (size_t i = 0; i < len; i++)
        v = v * 10 + (p[i] - '0');
      key = jv_int(v);
    }
    if (jx_get_item(x, at, &cur, &key, &next))
      return -1;
    cur = next;
    if (dot == end)
      break;
    p = dot + 1;
  }
  *out = cur;
  return 0;
}

/* Jinja's indent(width=4, first=False, blank=False): lines are Python's
 * splitlines() of the text plus a newline. */
static size_t line_break(const char *s, size_t n, size_t i) {
  unsigned char c = (unsigned char)s[i];
  if (c == '\r')
    return i + 1 < n && s[i + 1] == '\n' ? 2 : 1;
  if (c == '\n' || c == '\v' || c == '\f' || c == 0x1c || c == 0x1d || c == 0x1e)
    return 1;
  if (c == 0xC2 && i + 1 < n && (unsigned char)s[i + 1] == 0x85)
    return 2;
  if (c == 0xE2 && i + 2 < n && (unsigned char)s[i + 1] == 0x80 &&
      ((unsigned char)s[i + 2] == 0xA8 || (unsigned char)s[i + 2] == 0xA9))
    return 3;
  return 0;
}

static int indent(jctx *x, const jnode *at, const jv *v, const jv *const *g, jv *out) {
  jv s, ind = jv_str("    ", 4);
  if (jv_stringify(x, at, v, &s))
    return -1;
  if (g[0] && g[0]->kind == JV_STR) {
    ind = *g[0];
  } else if (g[0]) {
    if (!jv_is_int(g[0]) || g[0]->kind == JV_BIGINT)
      return jx_fail(x, at, "indent width must be an integer or a string");
    int64_t w = g[0]->kind == JV_INT ? g[0]->u.i : g[0]->u.b;
    if (w > (int64_t)(x->mem.limit ? x->mem.limit : (size_t)1 << 30))
      return jx_oom(x, at);
    char *sp = ja_alloc(&x->arena, (size_t)(w > 0 ? w : 0) + 1);
    if (!sp)
      return jx_oom(x, at);
    memset(sp, ' ', (size_t)(w > 0 ? w : 0));
    ind = jv_str(sp, (size_t)(w > 0 ? w : 0));
  }
  int first = g[1] && jv_truthy(g[1]), bl = g[2] && jv_truthy(g[2]);
  const char *t = s.u.s.p;
  size_t n = s.u.s.n;
  jbuf b = jx_buf(x);
  int e = jb_put(&b, "", 0);
  if (first)
    e |= jb_put(&b, ind.u.s.p, ind.u.s.n);
  /* lines of str.splitlines(s + "\n"): the appended newline ends the last */
  for (size_t i = 0, k = 0; !e; k++) {
    size_t j = i, brk = 0;
    while (j < n && !(brk = line_break(t, n, j)))
      j++;
    if (k > 0) {
      e |= jb_put(&b, "\n", 1);
      if (bl || j > i)
        e |= jb_put(&b, ind.u.s.p, ind.u.s.n);
    }
    e |= jb_put(&b, t + i, j - i);
    if (j >= n || jx_work(x, at, j - i + ind.u.s.n))
      break;
    i = j + brk;
  }
  if (x->failed) {
    jb_free(&b);
    return -1;
  }
  if (jx_take_str(x, at, &b, e, out))
    return -1;
  out->safe = s.safe;
  return 0;
}

static int to_int(jctx *x, const jnode *at, const jv *v, const jv *dflt, jv *out) {
  jv d = dflt ? *dflt : jv_int(0);
  switch (v->kind) {
  case JV_INT:
  case JV_BIGINT:
    *out = *v;
    return 0;
  case JV_BOOL:
    *out = jv_int(v->u.b);
    return 0;
  case JV_FLOAT:
    return jn_int_from_double(x, at, v->u.d, out);
  case JV_STR: {
    /* do_int: int(value, 10), else int(float(value)), else the default */
    int r = jn_parse_int(x, at, v->u.s.p, v->u.s.n, out);
    if (r <= 0)
      return r;
    double f;
    if (jn_parse_float(v->u.s.p, v->u.s.n, &f) || isnan(f)) {
      *out = d;
      return 0;
    }
    return jn_int_from_double(x, at, f, out);
  }
  default:
    *out = d;
    return 0;
  }
}

static int to_float(const jv *v, const jv *dflt, jv *out) {
  jv d = dflt ? *dflt : jv_float(0.0);
  switch (v->kind) {
  case JV_INT:
    *out = jv_float((double)v->u.i);
    return 0;
  case JV_BOOL:
    *out = jv_float(v->u.b);
    return 0;
  case JV_BIGINT:
    *out = jv_float(jn_bigint_to_double(v));
    return 0;
  case JV_FLOAT:
    *out = *v;
    return 0;
  case JV_STR: {
    double f;
    *out = jn_parse_float(v->u.s.p, v->u.s.n, &f) ? d : jv_float(f);
    return 0;
  }
  default:
    *out = d;
    return 0;
  }
}

/* Python's round(number, ndigits) and jinja's ceil / floor methods. */
static int do_round(jctx *x, const jnode *at, const jv *v, const jv *const *g, jv *out) {
  int64_t prec = 0;
  if (g[0]) {
    if (g[0]->kind != JV_INT && g[0]->kind != JV_BOOL)
      return jx_fail(x, at, "round precision must be an integer");
    prec = g[0]->kind == JV_INT ? g[0]->u.i : g[0]->u.b;
  }
  const char *method = "common";
  if (g[1]) {
    if (g[1]->kind != JV_STR)
      return jx_fail(x, at, "method must be common, ceil or floor");
    method = ja_strdup(&x->arena, g[1]->u.s.p, g[1]->u.s.n);
    if (!method)
      return jx_oom(x, at);
  }
  if (strcmp(method, "common") && strcmp(method, "ceil") && strcmp(method, "floor"))
    return jx_fail(x, at, "method must be common, ceil or floor");
  if (v->kind == JV_INT || v->kind == JV_BOOL || v->kind == JV_BIGINT) {
    if (!strcmp(method, "common") && prec >= 0) {
      *out = v->kind == JV_BOOL ? jv_int(v->u.b) : *v;
      return 0;
    }
    if (!strcmp(method, "common"))
      return jx_fail(x, at, "unsupported construct 'round of an int to negative digits'");
  } else if (v->kind != JV_FLOAT) {
    return jx_fail(x, at, "type %s doesn't define __round__ method", jv_type_name(v));
  }
  double d = v->kind == JV_FLOAT ? v->u.d : v->kind == JV_INT ? (double)v->u.i : v->u.b;
  if (prec > 300 || prec < -300)
    return jx_fail(x, at, "unsupported construct 'round to more than 300 digits'");
  double m = pow(10.0, (double)prec);
  if (!strcmp(method, "ceil") || !strcmp(method, "floor")) {
    double r = (!strcmp(method, "ceil") ? ceil(d * m) : floor(d * m)) / m;
    *out = jv_float(r);
    return 0;
  }
  if (!isfinite(d)) {
    *out = jv_float(d);
    return 0;
  }
  /* Python rounds half to even on the exact decimal value: go through the
   * shortest repr, as CPython's float round does with dtoa. */
  char buf[400];
  snprintf(buf, sizeof buf, "%.*f", prec >= 0 ? (int)prec : 0, prec >= 0 ? d : d * m);
  double r = strtod(buf, NULL);
  if (prec < 0)
    r /= m;
  *out = jv_float(r);
  return 0;
}

static int tojson(jctx *x, const jnode *at, const jv *v, const jv *const *g, jv *out) {
  /* json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) */
  const jv *asc = g[0], *ind = g[1], *seps = g[2], *sk = g[3];
  const char *indent = NULL;
  if (ind && ind->kind != JV_NONE) {
    if (ind->kind == JV_STR) {
      indent = ja_strdup(&x->arena, ind->u.s.p, ind->u.s.n);
    } else if (ind->kind == JV_INT || ind->kind == JV_BOOL) {
      int64_t w = ind->kind == JV_INT ? ind->u.i : ind->u.b;
      if (w > 4096)
        return jx_fail(x, at, "unsupported construct 'tojson indent beyond 4096'");
      char *sp = ja_alloc(&x->arena, (size_t)(w > 0 ? w : 0) + 1);
      if (sp)
        memset(sp, ' ', (size_t)(w > 0 ? w : 0));
      indent = sp;
    } else {
      return jx_fail(x, at, "tojson indent must be an integer or a string");
    }
    if (!indent)
      return jx_oom(x, at);
  }
  const char *isep = indent ? "," : ", ", *ksep = ": ";
  if (seps && seps->kind != JV_NONE) {
    if (!jv_is_seq(seps) || jv_len(seps) != 2)
      return jx_fail(x, at, "tojson separators must be a pair of strings");
    jv a = jv_seq_at(seps, 0), b = jv_seq_at(seps, 1);
    if (jf_need_str(x, at, &a, "separators") || jf_need_str(x, at, &b, "separators"))
      return -1;
    isep = ja_strdup(&x->arena, a.u.s.p, a.u.s.n);
    ksep = ja_strdup(&x->arena, b.u.s.p, b.u.s.n);
    if (!isep || !ksep)
      return jx_oom(x, at);
  }
  jbuf b = jx_buf(x);
  if (jv_to_json(x, at, v, asc && jv_truthy(asc), indent, isep, ksep, sk && jv_truthy(sk), &b) ||
      jb_put(&b, "", 0)) {
    jb_free(&b);
    return x->failed ? -1 : jx_oom(x, at);
  }
  return jx_take_str(x, at, &b, 0, out);
}

/* Python's str.center(width): the extra space goes left when both the
 * padding and the width are odd. */
static int center(jctx *x, const jnode *at, const jv *s, const jv *w, jv *out) {
  int64_t width = 80;
  if (w) {
    if (w->kind != JV_INT && w->kind != JV_BOOL)
      return jx_fail(x, at, "center width must be an integer");
    width = w->kind == JV_INT ? w->u.i : w->u.b;
  }
  int64_t len = (int64_t)ju_count(s->u.s.p, s->u.s.n);
  if (width <= len) {
    *out = *s;
    return 0;
  }
  int64_t marg = width - len, left = marg / 2 + (marg & width & 1);
  if ((uint64_t)marg > (x->mem.limit ? x->mem.limit : (size_t)1 << 30))
    return jx_oom(x, at);
  char *p = ja_alloc(&x->arena, s->u.s.n + (size_t)marg + 1);
  if (!p)
    return jx_oom(x, at);
  memset(p, ' ', (size_t)left);
  memcpy(p + left, s->u.s.p, s->u.s.n);
  memset(p + left + s->u.s.n, ' ', (size_t)(marg - left));
  *out = jv_str(p, s->u.s.n + (size_t)marg);
  return jx_work(x, at, (size_t)marg);
}

/* len(re.findall(r"\w+", s)): runs of word characters */
static int64_t wordcount(const char *s, size_t n) {
  int64_t words = 0;
  int in = 0;
  for (size_t i = 0; i < n;) {
    size_t l;
    uint32_t c = ju_decode(s, n, i, &l);
    int w = c < 0x80 ? ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                        (c >= 'A' && c <= 'Z') || c == '_')
                     : (uc_is_alnum(c) || uc_is_general_category(c, UC_CATEGORY_Mn) ||
                        uc_is_general_category(c, UC_CATEGORY_Mc) ||
                        uc_is_general_category(c, UC_CATEGORY_Nd) ||
                        uc_is_general_category(c, UC_CATEGORY_Pc));
    if (w && !in)
      words++;
    in = w;
    i += l;
  }
  return words;
}

static int str_filter(jctx *x, const jnode *at, int id, const jv *v, const jv *const *g, jv *out) {
  jv s;
  if (jv_stringify(x, at, v, &s))
    return -1;
  switch (id) {
  case FL_TRIM: {
    if (g[0] && g[0]->kind != JV_NONE && jf_need_str(x, at, g[0], "trim"))
      return -1;
    const jv *ch = g[0] && g[0]->kind == JV_STR ? g[0] : NULL;
    size_t b, e;
    jf_strip(s.u.s.p, s.u.s.n, ch ? ch->u.s.p : NULL, ch ? ch->u.s.n : 0, 1, 1, &b, &e);
    *out = jv_str(s.u.s.p + b, e - b);
    out->safe = s.safe;
    return jx_work(x, at, s.u.s.n);
  }
  case FL_LOWER:
  case FL_UPPER:
  case FL_CAPITALIZE:
  case FL_TITLE:
    if (jf_case_map(x, at, &s,
                    id == FL_LOWER        ? 0
                    : id == FL_UPPER      ? 1
                    : id == FL_CAPITALIZE ? 2
                                          : 4,
                    out))
      return -1;
    if (id == FL_TITLE)
      out->safe = 0; /* do_title joins with "".join: a plain str */
    return 0;
  case FL_REPLACE: {
    /* autoescape off: str(s).replace(str(old), str(new), count) */
    if (!g[0] || !g[1])
      return jx_fail(x, at, "replace() missing required argument");
    jv o, n;
    int64_t count = -1;
    if (jv_stringify(x, at, g[0], &o) || jv_stringify(x, at, g[1], &n))
      return -1;
    if (g[2] && g[2]->kind != JV_NONE) {
      if (g[2]->kind != JV_INT && g[2]->kind != JV_BOOL)
        return jx_fail(x, at, "replace count must be an integer");
      count = g[2]->kind == JV_INT ? g[2]->u.i : g[2]->u.b;
    }
    s.safe = o.safe = n.safe = 0;
    return jf_replace(x, at, &s, &o, &n, count, out);
  }
  case FL_CENTER:
    return center(x, at, &s, g[0], out);
  case FL_WORDCOUNT:
    *out = jv_int(wordcount(s.u.s.p, s.u.s.n));
    return jx_work(x, at, s.u.s.n);
  }
  return jx_fail(x, at, "internal error: string filter %d", id);
}

static int escape_filter(jctx *x, const jnode *at, int id, const jv *v, jv *out) {
  if (id == FL_SAFE || (v->kind == JV_STR && v->safe && id != FL_FORCEESCAPE)) {
    if (jv_stringify(x, at, v, out))
      return -1;
    out->safe = 1;
    return 0;
  }
  jv s;
  if (jv_stringify(x, at, v, &s))
    return -1;
  jbuf b = jx_buf(x);
  int e = jf_escape_into(s.u.s.p, s.u.s.n, &b) || jb_put(&b, "", 0);
  if (jx_work(x, at, s.u.s.n) || jx_take_str(x, at, &b, e, out))
    return -1;
  out->safe = 1;
  return 0;
}

int jf_apply_filter(jctx *x, const jnode *at, int id, jv *v, const jv *args, size_t nargs,
                    const char **kwn, const jv *kwv, size_t nkw, jv *out) {
  if (jf_is_seq_filter(id))
    return jf_seq_filter(x, at, id, v, args, nargs, kwn, kwv, nkw, out);
  static const char
      *const P_NONE[] = {NULL},
             *const P_TRIM[] = {"chars", NULL}, *const P_REPL[] = {"old", "new", "count", NULL},
             *const P_DEF[] = {"default_value", "boolean", NULL},
             *const P_IND[] = {"width", "first", "blank", NULL},
             *const P_INT[] = {"default", "base", NULL}, *const P_FLOAT[] = {"default", NULL},
             *const P_ROUND[] = {"precision", "method", NULL},
             *const P_JSON[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL},
             *const P_CENTER[] = {"width", NULL}, *const P_ATTR[] = {"name", NULL};
  const char *const *params = P_NONE;
  switch (id) {
  case FL_TRIM:
    params = P_TRIM;
    break;
  case FL_REPLACE:
    params = P_REPL;
    break;
  case FL_D:
  case FL_DEFAULT:
    params = P_DEF;
    break;
  case FL_INDENT:
    params = P_IND;
    break;
  case FL_INT:
    params = P_INT;
    break;
  case FL_FLOAT:
    params = P_FLOAT;
    break;
  case FL_ROUND:
    params = P_ROUND;
    break;
  case FL_TOJSON:
    params = P_JSON;
    break;
  case FL_CENTER:
    params = P_CENTER;
    break;
  case FL_ATTR:
    params = P_ATTR;
    break;
  default:
    break;
  }
  const jv *g[8] = {0};
  if (id != FL_FORMAT && jf_bind(x, at, jf_filter_name(id), params, args, nargs, kwn, kwv, nkw, g))
    return -1;
  switch (id) {
  case FL_SAFE:
  case FL_E:
  case FL_ESCAPE:
  case FL_FORCEESCAPE:
    return escape_filter(x, at, id, v, out);
  case FL_STRING:
    return jv_stringify(x, at, v, out);
  case FL_TRIM:
  case FL_LOWER:
  case FL_UPPER:
  case FL_CAPITALIZE:
  case FL_TITLE:
  case FL_REPLACE:
  case FL_CENTER:
  case FL_WORDCOUNT:
    return str_filter(x, at, id, v, g, out);
  case FL_LENGTH:
  case FL_COUNT:
    if (!jv_has_len(v) && v->kind != JV_UNDEF)
      return jx_fail(x, at, "object of type '%s' has no len()", jv_type_name(v));
    *out = jv_int((int64_t)jv_len(v));
    return jx_work(x, at, v->kind == JV_STR ? v->u.s.n : 0);
  case FL_D:
  case FL_DEFAULT: {
    int use = v->kind == JV_UNDEF || (g[1] && jv_truthy(g[1]) && !jv_truthy(v));
    *out = use ? (g[0] ? *g[0] : jv_str("", 0)) : *v;
    return 0;
  }
  case FL_INT:
    if (g[1] && !(g[1]->kind == JV_INT && g[1]->u.i == 10))
      return jx_fail(x, at, "unsupported construct 'int(base=...)'");
    return to_int(x, at, v, g[0], out);
  case FL_FLOAT:
    return to_float(v, g[0], out);
  case FL_ROUND:
    return do_round(x, at, v, g, out);
  case FL_INDENT:
    return indent(x, at, v, g, out);
  case FL_TOJSON:
    return tojson(x, at, v, g, out);
  case FL_FORMAT: {
    if (nargs && nkw)
      return jx_fail(x, at, "can't handle positional and keyword arguments at the same time");
    jv fmt;
    if (jv_stringify(x, at, v, &fmt))
      return -1;
    if (nkw) {
      jdict *d = jd_new(&x->arena);
      if (!d)
        return jx_oom(x, at);
      for (size_t k = 0; k < nkw; k++)
        if (jd_set(&x->arena, d, kwn[k], strlen(kwn[k]), kwv[k]))
          return jx_oom(x, at);
      jv m = {.kind = JV_DICT};
      m.u.m = d;
      return jf_percent_format(x, at, &fmt, &m, out);
    }
    jlist *l = jl_new(&x->arena, nargs);
    if (!l)
      return jx_oom(x, at);
    l->type = JL_TUPLE;
    if (nargs)
      memcpy(l->items, args, nargs * sizeof *args);
    jv t = jv_list(l);
    return jf_percent_format(x, at, &fmt, &t, out);
  }
  case FL_ATTR:
    if (!g[0])
      return jx_fail(x, at, "attr() missing required argument 'name'");
    if (g[0]->kind != JV_STR) {
      *out = jv_undef(NULL);
      return 0;
    }
    return jx_get_attr(x, at, v, g[0]->u.s.p, g[0]->u.s.n, out);
  case FL_ABS:
    if (v->kind == JV_INT || v->kind == JV_BOOL || v->kind == JV_BIGINT) {
      if (v->kind == JV_BIGINT || (v->kind == JV_INT && v->u.i < 0))
        return jx_neg(x, at, v, v->kind == JV_INT || v->u.s.p[0] == '-', out);
      *out = v->kind == JV_BOOL ? jv_int(v->u.b) : *v;
    } else if (v->kind == JV_FLOAT) {
      *out = jv_float(fabs(v->u.d));
    } else {
      return jx_fail(x, at, "bad operand type for abs(): '%s'", jv_type_name(v));
    }
    return 0;
  }
  return jx_fail(x, at, "internal error: filter %d", id);
}
