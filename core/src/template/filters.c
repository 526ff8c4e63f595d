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
                                          [FL_UNIQUE] = "unique"};

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

int jf_filter_id(const char *name, size_t len) {
  for (int i = 1; i < FL_N; i++)
    if (strlen(FILTERS[i]) == len && memcmp(FILTERS[i], name, len) == 0)
      return i;
  return 0;
}
const char *jf_filter_name(int id) {
  return id > 0 && id < FL_N ? FILTERS[id] : "?";
}
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

static int oom(jctx *x, const jnode *at) {
  return jx_fail(x, at, "out of memory");
}

/* ---- string helpers ---- */
int jf_strip(const char *s, size_t n, const char *chars, size_t nchars, int left, int right,
             size_t *b, size_t *e) {
  size_t i = 0, j = n, l;
  if (chars) {
    /* chars is a set of code points */
    while (left && i < j) {
      l = ju_offset(s + i, j - i, 1);
      int hit = 0;
      for (size_t k = 0; k < nchars;) {
        size_t cl = ju_offset(chars + k, nchars - k, 1);
        if (cl == l && memcmp(chars + k, s + i, l) == 0)
          hit = 1;
        k += cl;
      }
      if (!hit)
        break;
      i += l;
    }
    while (right && j > i) {
      size_t p = j - 1;
      while (p > i && ((unsigned char)s[p] & 0xC0) == 0x80)
        p--;
      l = j - p;
      int hit = 0;
      for (size_t k = 0; k < nchars;) {
        size_t cl = ju_offset(chars + k, nchars - k, 1);
        if (cl == l && memcmp(chars + k, s + p, l) == 0)
          hit = 1;
        k += cl;
      }
      if (!hit)
        break;
      j = p;
    }
  } else {
    while (left && i < j && ju_is_space(s + i, j - i, &l))
      i += l;
    while (right && j > i) {
      size_t p = j - 1;
      while (p > i && ((unsigned char)s[p] & 0xC0) == 0x80)
        p--;
      if (!ju_is_space(s + p, j - p, &l) || p + l != j)
        break;
      j = p;
    }
  }
  *b = i;
  *e = j;
  return 0;
}

static int need_str(jctx *x, const jnode *at, const jv *v, const char *what) {
  if (v->kind != JV_STR)
    return jx_fail(x, at, "%s expects a string, got %s", what, jv_type_name(v));
  return 0;
}

/* ASCII case mapping; non-ASCII letters are refused (see the file comment). */
static int case_map(jctx *x, const jnode *at, const jv *v, int mode, jv *out) {
  /* mode: 0 lower, 1 upper, 2 capitalize, 3 str.title, 4 Jinja title */
  for (size_t i = 0; i < v->u.s.n; i++)
    if ((unsigned char)v->u.s.p[i] >= 0x80)
      return jx_fail(x, at, "unsupported construct 'case mapping of non-ASCII text'");
  char *p = ja_alloc(&x->arena, v->u.s.n + 1);
  if (!p)
    return oom(x, at);
  int prev_cased = 0;
  for (size_t i = 0; i < v->u.s.n; i++) {
    char c = v->u.s.p[i];
    int is_lo = c >= 'a' && c <= 'z', is_up = c >= 'A' && c <= 'Z';
    int up;
    if (mode == 0)
      up = 0;
    else if (mode == 1)
      up = 1;
    else if (mode == 2)
      up = i == 0;
    else if (mode == 3)
      up = !prev_cased;
    else
      up = i == 0 || v->u.s.p[i - 1] == ' ' || v->u.s.p[i - 1] == '-' || v->u.s.p[i - 1] == '(' ||
           v->u.s.p[i - 1] == '{' || v->u.s.p[i - 1] == '[' || v->u.s.p[i - 1] == '<' ||
           v->u.s.p[i - 1] == '_';
    if (up && is_lo)
      c = (char)(c - 32);
    else if (!up && is_up)
      c = (char)(c + 32);
    p[i] = c;
    if (mode == 4 && i > 0 &&
        !(v->u.s.p[i - 1] == ' ' || v->u.s.p[i - 1] == '-' || v->u.s.p[i - 1] == '(' ||
          v->u.s.p[i - 1] == '{' || v->u.s.p[i - 1] == '[' || v->u.s.p[i - 1] == '<' ||
          v->u.s.p[i - 1] == '_')) {
      /* Jinja's title keeps the rest of a word lower-cased: done above. */
    }
    prev_cased = is_lo || is_up;
  }
  *out = jv_str(p, v->u.s.n);
  return 0;
}

static int replace_str(jctx *x, const jnode *at, const jv *s, const jv *old, const jv *nw,
                       int64_t count, jv *out) {
  if (need_str(x, at, s, "replace") || need_str(x, at, old, "replace") ||
      need_str(x, at, nw, "replace"))
    return -1;
  jbuf b = {0};
  size_t i = 0, done = 0;
  int rc = 0;
  if (old->u.s.n == 0) {
    /* Python inserts the replacement between every code point. */
    size_t cps = ju_count(s->u.s.p, s->u.s.n);
    for (size_t c = 0; c <= cps && !rc; c++) {
      if (count < 0 || (int64_t)done < count) {
        rc |= jb_put(&b, nw->u.s.p, nw->u.s.n);
        done++;
      }
      if (c < cps) {
        size_t l = ju_offset(s->u.s.p + i, s->u.s.n - i, 1);
        rc |= jb_put(&b, s->u.s.p + i, l);
        i += l;
      }
    }
  } else {
    while (i < s->u.s.n && !rc) {
      if ((count < 0 || (int64_t)done < count) && i + old->u.s.n <= s->u.s.n &&
          memcmp(s->u.s.p + i, old->u.s.p, old->u.s.n) == 0) {
        rc |= jb_put(&b, nw->u.s.p, nw->u.s.n);
        i += old->u.s.n;
        done++;
      } else {
        rc |= jb_put(&b, s->u.s.p + i, 1);
        i++;
      }
    }
  }
  if (!rc && jb_put(&b, "", 0))
    rc = -1;
  char *p = rc ? NULL : ja_strdup(&x->arena, b.p, b.n);
  size_t n = b.n;
  free(b.p);
  if (!p)
    return oom(x, at);
  *out = jv_str(p, n);
  return 0;
}

static jv *seq_items(jctx *x, const jnode *at, const jv *v, size_t *n, int *rc) {
  *rc = 0;
  if (v->kind == JV_UNDEF) {
    *n = 0;
    return NULL;
  }
  if (v->kind == JV_LIST) {
    *n = v->u.l->n;
    return v->u.l->items;
  }
  if (v->kind == JV_STR) {
    size_t cnt = ju_count(v->u.s.p, v->u.s.n), o = 0;
    jv *it = ja_alloc(&x->arena, (cnt + 1) * sizeof *it);
    if (!it) {
      *rc = oom(x, at);
      return NULL;
    }
    for (size_t i = 0; i < cnt; i++) {
      size_t l = ju_offset(v->u.s.p + o, v->u.s.n - o, 1);
      it[i] = jv_str(v->u.s.p + o, l);
      o += l;
    }
    *n = cnt;
    return it;
  }
  if (jv_is_seq(v) || jv_is_mapping(v)) {
    size_t cnt = jv_len(v), i = 0;
    jv *it = ja_alloc(&x->arena, (cnt + 1) * sizeof *it);
    if (!it) {
      *rc = oom(x, at);
      return NULL;
    }
    if (jv_is_seq(v)) {
      for (const cJSON *c = v->u.j->child; c && i < cnt; c = c->next)
        it[i++] = jv_from_json(c);
    } else {
      for (; i < cnt; i++) {
        jv val;
        jv_map_at(v, i, &it[i], &val);
      }
    }
    *n = cnt;
    return it;
  }
  *rc = jx_fail(x, at, "'%s' object is not iterable", jv_type_name(v));
  return NULL;
}

static int mklist(jctx *x, const jnode *at, jv *items, size_t n, jv *out) {
  jlist *l = jl_new(&x->arena, n);
  if (!l)
    return oom(x, at);
  if (n)
    memcpy(l->items, items, n * sizeof *items);
  out->kind = JV_LIST;
  out->u.l = l;
  return 0;
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
  if (need_str(x, at, path, "attribute"))
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
    if (need_str(x, at, &args[off], "test name"))
      return -1;
    test = jf_test_id(args[off].u.s.p, args[off].u.s.n);
    if (!test)
      return jx_fail(x, at, "unsupported construct 'test %.*s'", (int)args[off].u.s.n,
                     args[off].u.s.p);
  }
  int rc;
  size_t n;
  jv *items = seq_items(x, at, v, &n, &rc);
  if (rc)
    return -1;
  jv *kept = ja_alloc(&x->arena, (n + 1) * sizeof *kept);
  if (!kept)
    return oom(x, at);
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
  return mklist(x, at, kept, k, out);
}

int jf_apply_filter(jctx *x, const jnode *at, int id, jv *v, const jv *args, size_t nargs,
                    const char **kwn, const jv *kwv, size_t nkw, jv *out) {
  int rc;
  size_t n;
  if (id != FL_TOJSON && id != FL_MAP && id != FL_JOIN && id != FL_DEFAULT && id != FL_D &&
      id != FL_INT && id != FL_FLOAT && nkw)
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
    char *p = e ? NULL : ja_strdup(&x->arena, b.p, b.n);
    size_t len = b.n;
    free(b.p);
    if (!p)
      return oom(x, at);
    *out = jv_str(p, len);
    return 0;
  }
  case FL_TRIM: {
    jv s;
    if (jv_stringify(x, at, v, &s))
      return -1;
    size_t b, e;
    if (nargs && need_str(x, at, &args[0], "trim"))
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
    return case_map(x, at, &s,
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
    jv *items = seq_items(x, at, v, &n, &rc);
    if (rc)
      return -1;
    *out = n ? items[id == FL_FIRST ? 0 : n - 1] : jv_undef(NULL);
    return 0;
  }
  case FL_LIST: {
    jv *items = seq_items(x, at, v, &n, &rc);
    return rc ? -1 : mklist(x, at, items, n, out);
  }
  case FL_REVERSE: {
    if (v->kind == JV_STR) {
      char *p = ja_alloc(&x->arena, v->u.s.n + 1);
      if (!p)
        return oom(x, at);
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
    jv *items = seq_items(x, at, v, &n, &rc);
    if (rc)
      return -1;
    jv *r = ja_alloc(&x->arena, (n + 1) * sizeof *r);
    if (!r)
      return oom(x, at);
    for (size_t i = 0; i < n; i++)
      r[i] = items[n - 1 - i];
    return mklist(x, at, r, n, out);
  }
  case FL_UNIQUE: {
    jv *items = seq_items(x, at, v, &n, &rc);
    if (rc)
      return -1;
    jv *r = ja_alloc(&x->arena, (n + 1) * sizeof *r);
    if (!r)
      return oom(x, at);
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
    return mklist(x, at, r, k, out);
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
    jv *items = seq_items(x, at, v, &n, &rc);
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
    char *p = e ? NULL : ja_strdup(&x->arena, b.p, b.n);
    size_t len = b.n;
    free(b.p);
    if (!p)
      return oom(x, at);
    *out = jv_str(p, len);
    return 0;
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
    return replace_str(x, at, &s, &args[0], &args[1], count, out);
  }
  case FL_ITEMS: {
    if (v->kind == JV_UNDEF)
      return mklist(x, at, NULL, 0, out);
    if (!jv_is_mapping(v) && v->kind != JV_NS)
      return jx_fail(x, at, "items filter expects a mapping, got %s", jv_type_name(v));
    n = jv_len(v);
    jv *pairs = ja_alloc(&x->arena, (n + 1) * sizeof *pairs);
    if (!pairs)
      return oom(x, at);
    for (size_t i = 0; i < n; i++) {
      jlist *t = jl_new(&x->arena, 2);
      if (!t)
        return oom(x, at);
      t->tuple = 1;
      jv_map_at(v, i, &t->items[0], &t->items[1]);
      pairs[i].kind = JV_LIST;
      pairs[i].u.l = t;
    }
    return mklist(x, at, pairs, n, out);
  }
  case FL_SELECT:
  case FL_REJECT:
  case FL_SELECTATTR:
  case FL_REJECTATTR:
    return select_like(x, at, id, v, args, nargs, out);
  case FL_MAP: {
    jv *items = seq_items(x, at, v, &n, &rc);
    if (rc)
      return -1;
    jv *r = ja_alloc(&x->arena, (n + 1) * sizeof *r);
    if (!r)
      return oom(x, at);
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
      return mklist(x, at, r, n, out);
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
    return mklist(x, at, r, n, out);
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
      if (need_str(x, at, &a, "separators") || need_str(x, at, &b, "separators"))
        return -1;
      is2 = ja_strdup(&x->arena, a.u.s.p, a.u.s.n);
      ks2 = ja_strdup(&x->arena, b.u.s.p, b.u.s.n);
      if (!is2 || !ks2)
        return oom(x, at);
      isep = is2;
      ksep = ks2;
    }
    jbuf b = {0};
    if (jv_to_json(x, at, v, asc && jv_truthy(asc), indent, isep, ksep, &b) || jb_put(&b, "", 0)) {
      free(b.p);
      return x->failed ? -1 : oom(x, at);
    }
    char *p = ja_strdup(&x->arena, b.p, b.n);
    size_t len = b.n;
    free(b.p);
    if (!p)
      return oom(x, at);
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

/* ---- methods ---- */
static const char *const STR_METHODS[] = {
    "strip",   "lstrip",     "rstrip",   "split", "upper", "lower", "title", "capitalize",
    "replace", "startswith", "endswith", "find",  "count", "join",  NULL};
static const char *const MAP_METHODS[] = {"items", "keys", "values", "get", NULL};

static int in_list(const char *const *l, const char *name, size_t len) {
  for (size_t i = 0; l[i]; i++)
    if (strlen(l[i]) == len && memcmp(l[i], name, len) == 0)
      return 1;
  return 0;
}

int jf_is_method(const jv *self, const char *name, size_t len) {
  if (self->kind == JV_STR)
    return in_list(STR_METHODS, name, len);
  if (jv_is_mapping(self))
    return in_list(MAP_METHODS, name, len);
  return 0;
}

static int split_str(jctx *x, const jnode *at, const jv *s, const jv *sep, int64_t maxsplit,
                     jv *out) {
  size_t cap = 8, k = 0;
  jv *parts = malloc(cap * sizeof *parts);
  if (!parts)
    return oom(x, at);
  const char *p = s->u.s.p;
  size_t n = s->u.s.n, i = 0, l;
#define PUSH(b, e)                                                                                 \
  do {                                                                                             \
    if (k == cap) {                                                                                \
      jv *np = realloc(parts, (cap *= 2) * sizeof *parts);                                         \
      if (!np) {                                                                                   \
        free(parts);                                                                               \
        return oom(x, at);                                                                         \
      }                                                                                            \
      parts = np;                                                                                  \
    }                                                                                              \
    parts[k++] = jv_str(p + (b), (e) - (b));                                                       \
  } while (0)
  if (!sep || sep->kind == JV_NONE) {
    for (;;) {
      while (i < n && ju_is_space(p + i, n - i, &l))
        i += l;
      if (i >= n)
        break;
      if (maxsplit >= 0 && (int64_t)k >= maxsplit) {
        size_t b, e;
        jf_strip(p + i, n - i, NULL, 0, 0, 1, &b, &e);
        PUSH(i, i + e);
        break;
      }
      size_t b = i;
      while (i < n && !ju_is_space(p + i, n - i, &l))
        i += ju_offset(p + i, n - i, 1);
      PUSH(b, i);
    }
  } else {
    if (sep->kind != JV_STR || sep->u.s.n == 0) {
      free(parts);
      return jx_fail(x, at,
                     sep->kind != JV_STR ? "split separator must be a string" : "empty separator");
    }
    size_t b = 0;
    while (i + sep->u.s.n <= n) {
      if ((maxsplit < 0 || (int64_t)k < maxsplit) && memcmp(p + i, sep->u.s.p, sep->u.s.n) == 0) {
        PUSH(b, i);
        i += sep->u.s.n;
        b = i;
      } else {
        i++;
      }
    }
    PUSH(b, n);
  }
#undef PUSH
  int rc = mklist(x, at, parts, k, out);
  free(parts);
  return rc;
}

static int prefix_test(jctx *x, const jnode *at, const jv *s, const jv *arg, int suffix, int *out) {
  *out = 0;
  if (arg->kind == JV_STR) {
    if (arg->u.s.n <= s->u.s.n)
      *out = memcmp(s->u.s.p + (suffix ? s->u.s.n - arg->u.s.n : 0), arg->u.s.p, arg->u.s.n) == 0;
    return 0;
  }
  if (jv_is_seq(arg)) {
    for (size_t i = 0; i < jv_len(arg) && !*out; i++) {
      jv it = jv_seq_at(arg, i);
      if (it.kind != JV_STR)
        return jx_fail(x, at, "%s first arg must be str or a tuple of str",
                       suffix ? "endswith" : "startswith");
      if (prefix_test(x, at, s, &it, suffix, out))
        return -1;
    }
    return 0;
  }
  return jx_fail(x, at, "%s first arg must be str or a tuple of str",
                 suffix ? "endswith" : "startswith");
}

int jf_call_method(jctx *x, const jnode *at, const jmethod *m, const jv *args, size_t nargs,
                   const char **kwn, const jv *kwv, size_t nkw, jv *out) {
  const jv *self = &m->self;
  const char *nm = m->name;
  (void)kwv;
  if (nkw)
    return jx_fail(x, at, "unsupported construct '%s(%s=...)'", nm, kwn[0]);
  if (self->kind == JV_STR) {
    if (!strcmp(nm, "strip") || !strcmp(nm, "lstrip") || !strcmp(nm, "rstrip")) {
      const jv *chars = nargs && args[0].kind != JV_NONE ? &args[0] : NULL;
      if (chars && need_str(x, at, chars, nm))
        return -1;
      size_t b, e;
      jf_strip(self->u.s.p, self->u.s.n, chars ? chars->u.s.p : NULL, chars ? chars->u.s.n : 0,
               nm[0] != 'r', nm[0] != 'l', &b, &e);
      *out = jv_str(self->u.s.p + b, e - b);
      return 0;
    }
    if (!strcmp(nm, "split")) {
      int64_t maxsplit = -1;
      if (nargs > 1) {
        if (args[1].kind != JV_INT)
          return jx_fail(x, at, "split maxsplit must be an integer");
        maxsplit = args[1].u.i;
      }
      return split_str(x, at, self, nargs ? &args[0] : NULL, maxsplit, out);
    }
    if (!strcmp(nm, "upper") || !strcmp(nm, "lower") || !strcmp(nm, "title") ||
        !strcmp(nm, "capitalize"))
      return case_map(x, at, self, nm[0] == 'l' ? 0 : nm[0] == 'u' ? 1 : nm[0] == 'c' ? 2 : 3, out);
    if (!strcmp(nm, "replace")) {
      if (nargs < 2)
        return jx_fail(x, at, "replace needs two arguments");
      int64_t count = -1;
      if (nargs > 2) {
        if (args[2].kind != JV_INT)
          return jx_fail(x, at, "replace count must be an integer");
        count = args[2].u.i;
      }
      return replace_str(x, at, self, &args[0], &args[1], count, out);
    }
    if (!strcmp(nm, "startswith") || !strcmp(nm, "endswith")) {
      if (nargs != 1)
        return jx_fail(x, at, "unsupported construct '%s with start/end arguments'", nm);
      int r;
      if (prefix_test(x, at, self, &args[0], nm[0] == 'e', &r))
        return -1;
      *out = jv_bool(r);
      return 0;
    }
    if (!strcmp(nm, "find") || !strcmp(nm, "count")) {
      if (nargs != 1 || args[0].kind != JV_STR)
        return jx_fail(x, at, "unsupported construct '%s with start/end arguments'", nm);
      const jv *sub = &args[0];
      int64_t found = -1, cnt = 0;
      if (sub->u.s.n == 0) {
        found = 0;
        cnt = (int64_t)ju_count(self->u.s.p, self->u.s.n) + 1;
      } else {
        for (size_t i = 0; i + sub->u.s.n <= self->u.s.n;) {
          if (memcmp(self->u.s.p + i, sub->u.s.p, sub->u.s.n) == 0) {
            if (found < 0)
              found = (int64_t)ju_count(self->u.s.p, i);
            cnt++;
            i += sub->u.s.n;
          } else {
            i++;
          }
        }
      }
      *out = jv_int(nm[0] == 'f' ? found : cnt);
      return 0;
    }
    if (!strcmp(nm, "join")) {
      if (nargs != 1)
        return jx_fail(x, at, "join takes one argument");
      int rc;
      size_t n;
      jv *items = seq_items(x, at, &args[0], &n, &rc);
      if (rc)
        return -1;
      jbuf b = {0};
      int e = jb_put(&b, "", 0);
      for (size_t i = 0; i < n && !e; i++) {
        if (items[i].kind != JV_STR) {
          free(b.p);
          return jx_fail(x, at, "sequence item %zu: expected str instance, %s found", i,
                         jv_type_name(&items[i]));
        }
        if (i)
          e |= jb_put(&b, self->u.s.p, self->u.s.n);
        e |= jb_put(&b, items[i].u.s.p, items[i].u.s.n);
      }
      char *p = e ? NULL : ja_strdup(&x->arena, b.p, b.n);
      size_t len = b.n;
      free(b.p);
      if (!p)
        return oom(x, at);
      *out = jv_str(p, len);
      return 0;
    }
  } else if (jv_is_mapping(self)) {
    if (!strcmp(nm, "items"))
      return jf_apply_filter(x, at, FL_ITEMS, (jv *)self, NULL, 0, NULL, NULL, 0, out);
    if (!strcmp(nm, "keys") || !strcmp(nm, "values")) {
      size_t n = jv_len(self);
      jv *r = ja_alloc(&x->arena, (n + 1) * sizeof *r);
      if (!r)
        return oom(x, at);
      for (size_t i = 0; i < n; i++) {
        jv k, v;
        jv_map_at(self, i, &k, &v);
        r[i] = nm[0] == 'k' ? k : v;
      }
      return mklist(x, at, r, n, out);
    }
    if (!strcmp(nm, "get")) {
      if (nargs < 1 || nargs > 2)
        return jx_fail(x, at, "get takes 1 or 2 arguments");
      if (args[0].kind != JV_STR || !jv_map_get(self, args[0].u.s.p, args[0].u.s.n, out))
        *out = nargs > 1 ? args[1] : jv_none();
      return 0;
    }
  }
  return jx_fail(x, at, "unsupported construct 'method %s of %s'", nm, jv_type_name(self));
}
