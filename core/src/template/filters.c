/* Filters, tests and the str / dict methods of the Jinja subset.
 *
 * Each behaves as Jinja 3.1 (and Python's str) does on the values chat
 * templates meet; tojson is transformers' override (json.dumps with
 * ensure_ascii=False). Case mapping of non-ASCII letters is refused rather
 * than done differently from Python. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "template/internal.h"

enum {
  FL_ABS = 1,
  FL_CAPITALIZE,
  FL_COUNT,
  FL_D,
  FL_DEFAULT,
  FL_E,
  FL_ESCAPE,
  FL_FIRST,
  FL_FLOAT,
  FL_INT,
  FL_ITEMS,
  FL_JOIN,
  FL_LAST,
  FL_LENGTH,
  FL_LIST,
  FL_LOWER,
  FL_MAP,
  FL_REJECT,
  FL_REJECTATTR,
  FL_REPLACE,
  FL_REVERSE,
  FL_SAFE,
  FL_SELECT,
  FL_SELECTATTR,
  FL_STRING,
  FL_TITLE,
  FL_TOJSON,
  FL_TRIM,
  FL_UPPER,
  FL_UNIQUE,
  FL_INDENT,
  FL_N
};
static const char *const FILTERS[FL_N] = {[FL_ABS] = "abs",
                                          [FL_CAPITALIZE] = "capitalize",
                                          [FL_COUNT] = "count",
                                          [FL_D] = "d",
                                          [FL_DEFAULT] = "default",
                                          [FL_E] = "e",
                                          [FL_ESCAPE] = "escape",
                                          [FL_FIRST] = "first",
                                          [FL_FLOAT] = "float",
                                          [FL_INT] = "int",
                                          [FL_ITEMS] = "items",
                                          [FL_JOIN] = "join",
                                          [FL_LAST] = "last",
                                          [FL_LENGTH] = "length",
                                          [FL_LIST] = "list",
                                          [FL_LOWER] = "lower",
                                          [FL_MAP] = "map",
                                          [FL_REJECT] = "reject",
                                          [FL_REJECTATTR] = "rejectattr",
                                          [FL_REPLACE] = "replace",
                                          [FL_REVERSE] = "reverse",
                                          [FL_SAFE] = "safe",
                                          [FL_SELECT] = "select",
                                          [FL_SELECTATTR] = "selectattr",
                                          [FL_STRING] = "string",
                                          [FL_TITLE] = "title",
                                          [FL_TOJSON] = "tojson",
                                          [FL_TRIM] = "trim",
                                          [FL_UPPER] = "upper",
                                          [FL_UNIQUE] = "unique",
                                          [FL_INDENT] = "indent"};

int jf_filter_id(const char *name, size_t len) {
  for (int i = 1; i < FL_N; i++)
    if (strlen(FILTERS[i]) == len && memcmp(FILTERS[i], name, len) == 0)
      return i;
  return 0;
}
const char *jf_filter_name(int id) {
  return id > 0 && id < FL_N ? FILTERS[id] : "?";
}

static const jv *kwarg(const char **kwn, const jv *kwv, size_t nkw, const char *name) {
  for (size_t i = 0; i < nkw; i++)
    if (strcmp(kwn[i], name) == 0)
      return &kwv[i];
  return NULL;
}

static int check_kwargs(jctx *x, const jnode *at, const char *what, const char **kwn, size_t nkw,
                        const char *const *allowed) {
  for (size_t i = 0; i < nkw; i++) {
    int ok = 0;
    for (size_t k = 0; allowed && allowed[k]; k++)
      if (strcmp(allowed[k], kwn[i]) == 0)
        ok = 1;
    if (!ok)
      return jx_fail(x, at, "unsupported construct '%s(%s=...)'", what, kwn[i]);
  }
  return 0;
}

/* attribute lookup by a dotted path, as Jinja's make_attrgetter */
static int attr_path(jctx *x, const jnode *at, const jv *item, const jv *path, jv *out) {
  if (path->kind == JV_INT) {
    *out = jv_is_seq(item) ? jv_seq_at(item, (size_t)path->u.i) : jv_undef(NULL);
    return 0;
  }
  if (jf_need_str(x, at, path, "attribute"))
    return -1;
  jv cur = *item;
  const char *p = path->u.s.p, *end = p + path->u.s.n;
  while (p <= end) {
    const char *dot = memchr(p, '.', (size_t)(end - p));
    if (!dot)
      dot = end;
    jv next;
    if (cur.kind == JV_UNDEF || !(jv_is_mapping(&cur) || cur.kind == JV_NS) ||
        !jv_map_get(&cur, p, (size_t)(dot - p), &next))
      next = jv_undef(NULL);
    cur = next;
    p = dot + 1;
  }
  *out = cur;
  return 0;
}

static int select_like(jctx *x, const jnode *at, int id, const jv *v, const jv *args, size_t nargs,
                       jv *out) {
  int by_attr = id == FL_SELECTATTR || id == FL_REJECTATTR;
  int reject = id == FL_REJECT || id == FL_REJECTATTR;
  size_t off = by_attr ? 1 : 0;
  if (by_attr && nargs < 1)
    return jx_fail(x, at, "%s needs an attribute name", jf_filter_name(id));
  int test = 0;
  if (nargs > off) {
    if (jf_need_str(x, at, &args[off], "test name"))
      return -1;
    test = jf_test_id(args[off].u.s.p, args[off].u.s.n);
    if (!test)
      return jx_fail(x, at, "unsupported construct 'test %.*s'", (int)args[off].u.s.n,
                     args[off].u.s.p);
  }
  int rc;
  size_t n;
  jv *items = jf_seq_items(x, at, v, &n, &rc);
  if (rc)
    return -1;
  jv *kept = ja_alloc(&x->arena, (n + 1) * sizeof *kept);
  if (!kept)
    return jx_oom(x, at);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    jv subject = items[i];
    if (by_attr && attr_path(x, at, &items[i], &args[0], &subject))
      return -1;
    int r;
    if (test) {
      if (jf_apply_test(x, at, test, &subject, args + off + 1, nargs - off - 1, &r))
        return -1;
    } else {
      r = jv_truthy(&subject);
    }
    if (r != reject)
      kept[k++] = items[i];
  }
  return jf_mklist(x, at, kept, k, out);
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

static int indent(jctx *x, const jnode *at, const jv *v, const jv *args, size_t nargs,
                  const char **kwn, const jv *kwv, size_t nkw, jv *out) {
  static const char *const ok[] = {"width", "first", "blank", NULL};
  if (check_kwargs(x, at, "indent", kwn, nkw, ok))
    return -1;
  const jv *w = nargs > 0 ? &args[0] : kwarg(kwn, kwv, nkw, "width");
  const jv *first = nargs > 1 ? &args[1] : kwarg(kwn, kwv, nkw, "first");
  const jv *blank = nargs > 2 ? &args[2] : kwarg(kwn, kwv, nkw, "blank");
  jv s, ind = jv_str("    ", 4);
  if (jv_stringify(x, at, v, &s))
    return -1;
  char spaces[65];
  if (w && w->kind == JV_STR) {
    ind = *w;
  } else if (w) {
    if (w->kind != JV_INT || w->u.i < 0 || w->u.i > 64)
      return jx_fail(x, at, "unsupported construct 'indent width that is not 0..64'");
    memset(spaces, ' ', (size_t)w->u.i);
    ind = jv_str(spaces, (size_t)w->u.i);
  }
  /* lines of str.splitlines(s + "\n") */
  const char *t = s.u.s.p;
  size_t n = s.u.s.n, cap = 8, nl = 0;
  size_t *lb = malloc(cap * 2 * sizeof *lb);
  if (!lb)
    return jx_fail(x, at, "out of memory");
  for (size_t i = 0;;) {
    size_t j = i, brk = 0;
    while (j < n && !(brk = line_break(t, n, j)))
      j++;
    if (nl == cap) {
      size_t *nb = realloc(lb, (cap *= 2) * 2 * sizeof *lb);
      if (!nb) {
        free(lb);
        return jx_fail(x, at, "out of memory");
      }
      lb = nb;
    }
    lb[2 * nl] = i;
    lb[2 * nl + 1] = j;
    nl++;
    if (j >= n)
      break; /* the appended "\n" ends this line */
    i = j + brk;
  }
  int bl = blank && jv_truthy(blank);
  jbuf b = {0};
  int e = jb_put(&b, "", 0);
  if (first && jv_truthy(first))
    e |= jb_put(&b, ind.u.s.p, ind.u.s.n);
  for (size_t k = 0; k < nl && !e; k++) {
    size_t lo = lb[2 * k], hi = lb[2 * k + 1];
    if (k > 0) {
      e |= jb_put(&b, "\n", 1);
      if (bl || hi > lo)
        e |= jb_put(&b, ind.u.s.p, ind.u.s.n);
    }
    e |= jb_put(&b, t + lo, hi - lo);
  }
  free(lb);
  return jx_take_str(x, at, &b, e, out);
}

int jf_apply_filter(jctx *x, const jnode *at, int id, jv *v, const jv *args, size_t nargs,
                    const char **kwn, const jv *kwv, size_t nkw, jv *out) {
  int rc;
  size_t n;
  if (id != FL_TOJSON && id != FL_MAP && id != FL_JOIN && id != FL_DEFAULT && id != FL_D &&
      id != FL_INT && id != FL_FLOAT && id != FL_INDENT && nkw)
    return jx_fail(x, at, "unsupported construct '%s(%s=...)'", jf_filter_name(id), kwn[0]);
  switch (id) {
  case FL_SAFE:
  case FL_STRING:
    return jv_stringify(x, at, v, out);
  case FL_E:
  case FL_ESCAPE: {
    jv s;
    if (jv_stringify(x, at, v, &s))
      return -1;
    jbuf b = {0};
    int e = 0;
    for (size_t i = 0; i < s.u.s.n; i++) {
      char c = s.u.s.p[i];
      const char *r = c == '&'    ? "&amp;"
                      : c == '<'  ? "&lt;"
                      : c == '>'  ? "&gt;"
                      : c == '"'  ? "&#34;"
                      : c == '\'' ? "&#39;"
                                  : NULL;
      e |= r ? jb_put(&b, r, strlen(r)) : jb_put(&b, &c, 1);
    }
    e |= jb_put(&b, "", 0);
    return jx_take_str(x, at, &b, e, out);
  }
  case FL_TRIM: {
    jv s;
    if (jv_stringify(x, at, v, &s))
      return -1;
    size_t b, e;
    if (nargs && jf_need_str(x, at, &args[0], "trim"))
      return -1;
    jf_strip(s.u.s.p, s.u.s.n, nargs ? args[0].u.s.p : NULL, nargs ? args[0].u.s.n : 0, 1, 1, &b,
             &e);
    *out = jv_str(s.u.s.p + b, e - b);
    return 0;
  }
  case FL_LENGTH:
  case FL_COUNT:
    if (!(v->kind == JV_STR || v->kind == JV_UNDEF || jv_is_seq(v) || jv_is_mapping(v) ||
          v->kind == JV_NS))
      return jx_fail(x, at, "object of type '%s' has no len()", jv_type_name(v));
    *out = jv_int((int64_t)jv_len(v));
    return 0;
  case FL_LOWER:
  case FL_UPPER:
  case FL_CAPITALIZE:
  case FL_TITLE: {
    jv s;
    if (jv_stringify(x, at, v, &s))
      return -1;
    return jf_case_map(x, at, &s,
                       id == FL_LOWER        ? 0
                       : id == FL_UPPER      ? 1
                       : id == FL_CAPITALIZE ? 2
                                             : 4,
                       out);
  }
  case FL_D:
  case FL_DEFAULT: {
    static const char *const ok[] = {"default_value", "boolean", NULL};
    if (check_kwargs(x, at, "default", kwn, nkw, ok))
      return -1;
    const jv *dflt = nargs > 0 ? &args[0] : kwarg(kwn, kwv, nkw, "default_value");
    const jv *boolean = nargs > 1 ? &args[1] : kwarg(kwn, kwv, nkw, "boolean");
    int use = v->kind == JV_UNDEF || (boolean && jv_truthy(boolean) && !jv_truthy(v));
    *out = use ? (dflt ? *dflt : jv_str("", 0)) : *v;
    return 0;
  }
  case FL_FIRST:
  case FL_LAST: {
    if (v->kind == JV_UNDEF)
      return jx_fail(x, at, "%s of an undefined value", jf_filter_name(id));
    jv *items = jf_seq_items(x, at, v, &n, &rc);
    if (rc)
      return -1;
    *out = n ? items[id == FL_FIRST ? 0 : n - 1] : jv_undef(NULL);
    return 0;
  }
  case FL_LIST: {
    jv *items = jf_seq_items(x, at, v, &n, &rc);
    return rc ? -1 : jf_mklist(x, at, items, n, out);
  }
  case FL_REVERSE: {
    if (v->kind == JV_STR) {
      char *p = ja_alloc(&x->arena, v->u.s.n + 1);
      if (!p)
        return jx_oom(x, at);
      size_t o = v->u.s.n;
      for (size_t i = 0; i < v->u.s.n;) {
        size_t l = ju_offset(v->u.s.p + i, v->u.s.n - i, 1);
        o -= l;
        memcpy(p + o, v->u.s.p + i, l);
        i += l;
      }
      *out = jv_str(p, v->u.s.n);
      return 0;
    }
    jv *items = jf_seq_items(x, at, v, &n, &rc);
    if (rc)
      return -1;
    jv *r = ja_alloc(&x->arena, (n + 1) * sizeof *r);
    if (!r)
      return jx_oom(x, at);
    for (size_t i = 0; i < n; i++)
      r[i] = items[n - 1 - i];
    return jf_mklist(x, at, r, n, out);
  }
  case FL_UNIQUE: {
    jv *items = jf_seq_items(x, at, v, &n, &rc);
    if (rc)
      return -1;
    jv *r = ja_alloc(&x->arena, (n + 1) * sizeof *r);
    if (!r)
      return jx_oom(x, at);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
      int seen = 0;
      if (items[i].kind == JV_STR)
        for (size_t j = 0; j < k && !seen; j++)
          seen = jv_equal(&r[j], &items[i]);
      else if (items[i].kind != JV_INT && items[i].kind != JV_BOOL && items[i].kind != JV_NONE)
        return jx_fail(x, at, "unsupported construct 'unique of %s items'",
                       jv_type_name(&items[i]));
      else
        for (size_t j = 0; j < k && !seen; j++)
          seen = jv_equal(&r[j], &items[i]);
      if (!seen)
        r[k++] = items[i];
    }
    return jf_mklist(x, at, r, k, out);
  }
  case FL_JOIN: {
    static const char *const ok[] = {"d", "attribute", NULL};
    if (check_kwargs(x, at, "join", kwn, nkw, ok))
      return -1;
    const jv *sep = nargs > 0 ? &args[0] : kwarg(kwn, kwv, nkw, "d");
    const jv *attr = nargs > 1 ? &args[1] : kwarg(kwn, kwv, nkw, "attribute");
    jv seps = jv_str("", 0);
    if (sep && jv_stringify(x, at, sep, &seps))
      return -1;
    jv *items = jf_seq_items(x, at, v, &n, &rc);
    if (rc)
      return -1;
    jbuf b = {0};
    int e = jb_put(&b, "", 0);
    for (size_t i = 0; i < n && !e; i++) {
      jv it = items[i];
      if (attr && attr_path(x, at, &items[i], attr, &it)) {
        free(b.p);
        return -1;
      }
      if (i)
        e |= jb_put(&b, seps.u.s.p, seps.u.s.n);
      if (jv_to_str(x, at, &it, &b)) {
        free(b.p);
        return -1;
      }
    }
    return jx_take_str(x, at, &b, e, out);
  }
  case FL_REPLACE: {
    if (nargs < 2)
      return jx_fail(x, at, "replace needs two arguments");
    jv s;
    if (jv_stringify(x, at, v, &s))
      return -1;
    int64_t count = -1;
    if (nargs > 2) {
      if (args[2].kind != JV_INT)
        return jx_fail(x, at, "replace count must be an integer");
      count = args[2].u.i;
    }
    return jf_replace(x, at, &s, &args[0], &args[1], count, out);
  }
  case FL_ITEMS: {
    if (v->kind == JV_UNDEF)
      return jf_mklist(x, at, NULL, 0, out);
    if (!jv_is_mapping(v) && v->kind != JV_NS)
      return jx_fail(x, at, "items filter expects a mapping, got %s", jv_type_name(v));
    n = jv_len(v);
    jv *pairs = ja_alloc(&x->arena, (n + 1) * sizeof *pairs);
    if (!pairs)
      return jx_oom(x, at);
    for (size_t i = 0; i < n; i++) {
      jlist *t = jl_new(&x->arena, 2);
      if (!t)
        return jx_oom(x, at);
      t->tuple = 1;
      jv_map_at(v, i, &t->items[0], &t->items[1]);
      pairs[i].kind = JV_LIST;
      pairs[i].u.l = t;
    }
    return jf_mklist(x, at, pairs, n, out);
  }
  case FL_SELECT:
  case FL_REJECT:
  case FL_SELECTATTR:
  case FL_REJECTATTR:
    return select_like(x, at, id, v, args, nargs, out);
  case FL_MAP: {
    jv *items = jf_seq_items(x, at, v, &n, &rc);
    if (rc)
      return -1;
    jv *r = ja_alloc(&x->arena, (n + 1) * sizeof *r);
    if (!r)
      return jx_oom(x, at);
    const jv *attr = kwarg(kwn, kwv, nkw, "attribute");
    if (attr) {
      static const char *const ok[] = {"attribute", "default", NULL};
      if (nargs || check_kwargs(x, at, "map", kwn, nkw, ok))
        return nargs ? jx_fail(x, at, "map: attribute= with positional arguments") : -1;
      const jv *dflt = kwarg(kwn, kwv, nkw, "default");
      for (size_t i = 0; i < n; i++) {
        if (attr_path(x, at, &items[i], attr, &r[i]))
          return -1;
        if (dflt && r[i].kind == JV_UNDEF)
          r[i] = *dflt;
      }
      return jf_mklist(x, at, r, n, out);
    }
    if (!nargs || args[0].kind != JV_STR)
      return jx_fail(x, at, "map needs a filter name or attribute=");
    int fid = jf_filter_id(args[0].u.s.p, args[0].u.s.n);
    if (!fid || fid == FL_MAP)
      return jx_fail(x, at, "unsupported construct 'filter %.*s'", (int)args[0].u.s.n,
                     args[0].u.s.p);
    for (size_t i = 0; i < n; i++)
      if (jf_apply_filter(x, at, fid, &items[i], args + 1, nargs - 1, kwn, kwv, nkw, &r[i]))
        return -1;
    return jf_mklist(x, at, r, n, out);
  }
  case FL_TOJSON: {
    static const char *const ok[] = {"indent", "ensure_ascii", "separators", "sort_keys", NULL};
    if (check_kwargs(x, at, "tojson", kwn, nkw, ok))
      return -1;
    const jv *ind = nargs > 1 ? &args[1] : kwarg(kwn, kwv, nkw, "indent");
    const jv *asc = nargs > 0 ? &args[0] : kwarg(kwn, kwv, nkw, "ensure_ascii");
    const jv *seps = nargs > 2 ? &args[2] : kwarg(kwn, kwv, nkw, "separators");
    const jv *sk = nargs > 3 ? &args[3] : kwarg(kwn, kwv, nkw, "sort_keys");
    if (nargs > 4)
      return jx_fail(x, at, "tojson takes at most 4 arguments");
    if (sk && jv_truthy(sk))
      return jx_fail(x, at, "unsupported construct 'tojson(sort_keys=true)'");
    int indent = -1;
    if (ind && ind->kind != JV_NONE) {
      if (ind->kind != JV_INT || ind->u.i < 0 || ind->u.i > 64)
        return jx_fail(x, at, "unsupported construct 'tojson indent that is not 0..64'");
      indent = (int)ind->u.i;
    }
    const char *isep = indent >= 0 ? "," : ", ", *ksep = ": ";
    char *is2 = NULL, *ks2 = NULL;
    if (seps && seps->kind != JV_NONE) {
      if (!jv_is_seq(seps) || jv_len(seps) != 2)
        return jx_fail(x, at, "tojson separators must be a pair of strings");
      jv a = jv_seq_at(seps, 0), b = jv_seq_at(seps, 1);
      if (jf_need_str(x, at, &a, "separators") || jf_need_str(x, at, &b, "separators"))
        return -1;
      is2 = ja_strdup(&x->arena, a.u.s.p, a.u.s.n);
      ks2 = ja_strdup(&x->arena, b.u.s.p, b.u.s.n);
      if (!is2 || !ks2)
        return jx_oom(x, at);
      isep = is2;
      ksep = ks2;
    }
    jbuf b = {0};
    if (jv_to_json(x, at, v, asc && jv_truthy(asc), indent, isep, ksep, &b) || jb_put(&b, "", 0)) {
      free(b.p);
      return x->failed ? -1 : jx_oom(x, at);
    }
    char *p = ja_strdup(&x->arena, b.p, b.n);
    size_t len = b.n;
    free(b.p);
    if (!p)
      return jx_oom(x, at);
    *out = jv_str(p, len);
    return 0;
  }
  case FL_INT:
  case FL_FLOAT: {
    const jv *dflt = nargs ? &args[0] : kwarg(kwn, kwv, nkw, "default");
    jv d = dflt ? *dflt : (id == FL_INT ? jv_int(0) : jv_float(0.0));
    if (v->kind == JV_INT || v->kind == JV_BOOL) {
      *out = id == FL_INT ? jv_int(v->kind == JV_INT ? v->u.i : v->u.b)
                          : jv_float(v->kind == JV_INT ? (double)v->u.i : v->u.b);
      return 0;
    }
    if (v->kind == JV_FLOAT) {
      if (id == FL_FLOAT) {
        *out = *v;
      } else if (isfinite(v->u.d) && fabs(v->u.d) < 9.2e18) {
        *out = jv_int((int64_t)v->u.d);
      } else {
        *out = d;
      }
      return 0;
    }
    if (v->kind == JV_STR) {
      char buf[64];
      size_t b, e;
      jf_strip(v->u.s.p, v->u.s.n, NULL, 0, 1, 1, &b, &e);
      if (e - b == 0 || e - b >= sizeof buf) {
        *out = d;
        return 0;
      }
      memcpy(buf, v->u.s.p + b, e - b);
      buf[e - b] = '\0';
      char *end;
      if (id == FL_INT) {
        long long r = strtoll(buf, &end, 10);
        if (*end) {
          double f = strtod(buf, &end);
          *out = *end || !isfinite(f) ? d : jv_int((int64_t)f);
        } else {
          *out = jv_int(r);
        }
      } else {
        double f = strtod(buf, &end);
        *out = *end ? d : jv_float(f);
      }
      return 0;
    }
    *out = d;
    return 0;
  }
  case FL_INDENT:
    return indent(x, at, v, args, nargs, kwn, kwv, nkw, out);
  case FL_ABS:
    if (v->kind == JV_INT) {
      if (v->u.i == INT64_MIN)
        return jx_fail(x, at, "unsupported construct 'integer beyond 64 bits'");
      *out = jv_int(v->u.i < 0 ? -v->u.i : v->u.i);
    } else if (v->kind == JV_FLOAT) {
      *out = jv_float(fabs(v->u.d));
    } else if (v->kind == JV_BOOL) {
      *out = jv_int(v->u.b);
    } else {
      return jx_fail(x, at, "bad operand type for abs(): '%s'", jv_type_name(v));
    }
    return 0;
  }
  return jx_fail(x, at, "internal error: filter %d", id);
}
