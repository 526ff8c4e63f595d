/* Jinja's filters over sequences: first, last, list, reverse, unique, join,
 * items, dictsort, sort, min, max, sum, map, select / reject and their attr
 * forms, batch, slice.
 *
 * Where jinja2 returns a generator (map, select, reject, selectattr,
 * rejectattr, unique, items, batch, slice, and reverse of a sequence) the
 * result is a one-pass iterator (JL_ITER): true even when empty, without
 * len(), consumed by the first loop over it, and refused when printed, as
 * in Python. Items are computed when the filter runs, not lazily. */
#include <stdlib.h>
#include <string.h>

#include "template/filters.h"

int jf_is_seq_filter(int id) {
  switch (id) {
  case FL_FIRST:
  case FL_LAST:
  case FL_LIST:
  case FL_REVERSE:
  case FL_UNIQUE:
  case FL_JOIN:
  case FL_ITEMS:
  case FL_DICTSORT:
  case FL_SORT:
  case FL_MIN:
  case FL_MAX:
  case FL_SUM:
  case FL_MAP:
  case FL_SELECT:
  case FL_REJECT:
  case FL_SELECTATTR:
  case FL_REJECTATTR:
  case FL_BATCH:
  case FL_SLICE:
  case FL_GROUPBY:
    return 1;
  default:
    return 0;
  }
}

/* iter(v) for a filter argument: None and other non-iterables fail. */
static int items_of(jctx *x, const jnode *at, const jv *v, jv **items, size_t *n) {
  jv copy = *v;
  return jv_iter(x, at, &copy, items, n);
}

/* jinja2's ignore_case: strings compare lower-cased. */
static int ignore_case(jctx *x, const jnode *at, jv *v) {
  if (v->kind != JV_STR)
    return 0;
  return jf_case_map(x, at, v, 0, v);
}

/* The sort key of item: an attribute path (or a comma-separated list of
 * them), lower-cased unless case_sensitive. */
static int sort_key(jctx *x, const jnode *at, const jv *item, const jv *attr, int cs, jv *key) {
  if (!attr || attr->kind == JV_NONE) {
    *key = *item;
    return cs ? 0 : ignore_case(x, at, key);
  }
  if (attr->kind == JV_STR && memchr(attr->u.s.p, ',', attr->u.s.n)) {
    size_t parts = 1;
    for (size_t i = 0; i < attr->u.s.n; i++)
      parts += attr->u.s.p[i] == ',';
    jlist *l = jl_new(&x->arena, parts);
    if (!l)
      return jx_oom(x, at);
    const char *p = attr->u.s.p, *end = p + attr->u.s.n;
    for (size_t k = 0; k < parts; k++) {
      const char *c = memchr(p, ',', (size_t)(end - p));
      if (!c)
        c = end;
      jv path = jv_str(p, (size_t)(c - p));
      if (jf_attr_path(x, at, item, &path, &l->items[k]) ||
          (!cs && ignore_case(x, at, &l->items[k])))
        return -1;
      p = c + 1;
    }
    *key = jv_list(l);
    return 0;
  }
  if (jf_attr_path(x, at, item, attr, key))
    return -1;
  return cs ? 0 : ignore_case(x, at, key);
}

/* Python's sorted(): stable merge sort; reverse compares reversed. */
static int cmp_keys(jctx *x, const jnode *at, const jv *a, const jv *b, int rev, int *out) {
  int ok, c = jv_compare(x, a, b, &ok);
  if (x->failed)
    return -1;
  if (!ok)
    return jx_fail(x, at, "'<' not supported between instances of '%s' and '%s'", jv_type_name(a),
                   jv_type_name(b));
  if (ok == 2)
    c = 0;
  *out = rev ? -c : c;
  return 0;
}

static int merge_sort(jctx *x, const jnode *at, jv *items, jv *keys, size_t n, int rev) {
  if (n < 2)
    return 0;
  jv *ti = ja_alloc(&x->arena, n * sizeof *ti), *tk = ja_alloc(&x->arena, n * sizeof *tk);
  if (!ti || !tk)
    return jx_oom(x, at);
  for (size_t w = 1; w < n; w *= 2) {
    for (size_t lo = 0; lo < n; lo += 2 * w) {
      size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      size_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) {
        int c;
        if (cmp_keys(x, at, &keys[j], &keys[i], rev, &c))
          return -1;
        if (c < 0) { /* strictly smaller: take from the right, else keep order */
          ti[k] = items[j];
          tk[k++] = keys[j++];
        } else {
          ti[k] = items[i];
          tk[k++] = keys[i++];
        }
      }
      while (i < mid) {
        ti[k] = items[i];
        tk[k++] = keys[i++];
      }
      while (j < hi) {
        ti[k] = items[j];
        tk[k++] = keys[j++];
      }
    }
    memcpy(items, ti, n * sizeof *items);
    memcpy(keys, tk, n * sizeof *keys);
    if (jx_work(x, at, n))
      return -1;
  }
  return 0;
}

static int sorted(jctx *x, const jnode *at, jv *items, size_t n, const jv *attr, int cs, int rev,
                  jv *out) {
  jv *its = ja_alloc(&x->arena, (n + 1) * sizeof *its),
     *keys = ja_alloc(&x->arena, (n + 1) * sizeof *keys);
  if (!its || !keys)
    return jx_oom(x, at);
  for (size_t i = 0; i < n; i++) {
    its[i] = items[i];
    if (sort_key(x, at, &items[i], attr, cs, &keys[i]))
      return -1;
  }
  if (merge_sort(x, at, its, keys, n, rev))
    return -1;
  return jf_mklist(x, at, its, n, out);
}

/* The (key, value) tuples of mapping v, in its order, into *pairs (n of
 * them); -1 on out of memory (reported). */
static int map_pairs(jctx *x, const jnode *at, const jv *v, jv **pairs, size_t *n) {
  *n = jv_len(v);
  *pairs = ja_alloc(&x->arena, (*n + 1) * sizeof **pairs);
  if (!*pairs)
    return jx_oom(x, at);
  for (size_t i = 0; i < *n; i++) {
    jlist *t = jl_new(&x->arena, 2);
    if (!t)
      return jx_oom(x, at);
    t->type = JL_TUPLE;
    jv_map_at(v, i, &t->items[0], &t->items[1]);
    (*pairs)[i] = jv_list(t);
  }
  return 0;
}

static int dictsort(jctx *x, const jnode *at, const jv *v, const jv *const *g, jv *out) {
  if (!jv_is_mapping(v))
    return jx_fail(x, at, "'%s' object has no attribute 'items'", jv_type_name(v));
  int by_value = 0;
  if (g[1]) {
    if (g[1]->kind == JV_STR && g[1]->u.s.n == 5 && !memcmp(g[1]->u.s.p, "value", 5))
      by_value = 1;
    else if (!(g[1]->kind == JV_STR && g[1]->u.s.n == 3 && !memcmp(g[1]->u.s.p, "key", 3)))
      return jx_fail(x, at, "You can only sort by either \"key\" or \"value\"");
  }
  size_t n;
  jv *pairs;
  if (map_pairs(x, at, v, &pairs, &n))
    return -1;
  jv path = jv_int(by_value);
  return sorted(x, at, pairs, n, &path, g[0] && jv_truthy(g[0]), g[2] && jv_truthy(g[2]), out);
}

static int minmax(jctx *x, const jnode *at, int id, const jv *v, const jv *const *g, jv *out) {
  jv *items;
  size_t n;
  if (items_of(x, at, v, &items, &n))
    return -1;
  if (!n) {
    *out = jv_undef(NULL);
    return 0;
  }
  size_t best = 0;
  jv bk;
  if (sort_key(x, at, &items[0], g[1], g[0] && jv_truthy(g[0]), &bk))
    return -1;
  for (size_t i = 1; i < n; i++) {
    jv k;
    int c;
    if (sort_key(x, at, &items[i], g[1], g[0] && jv_truthy(g[0]), &k) ||
        cmp_keys(x, at, &k, &bk, 0, &c))
      return -1;
    if (id == FL_MIN ? c < 0 : c > 0) {
      best = i;
      bk = k;
    }
  }
  *out = items[best];
  return 0;
}

static int sum(jctx *x, const jnode *at, const jv *v, const jv *const *g, jv *out) {
  jv *items;
  size_t n;
  if (items_of(x, at, v, &items, &n))
    return -1;
  jv acc = g[1] ? *g[1] : jv_int(0);
  for (size_t i = 0; i < n; i++) {
    jv it = items[i];
    if (g[0] && g[0]->kind != JV_NONE && jf_attr_path(x, at, &items[i], g[0], &it))
      return -1;
    if (jx_binop(x, at, OP_ADD, &acc, &it, &acc))
      return -1;
  }
  *out = acc;
  return 0;
}

static int join(jctx *x, const jnode *at, const jv *v, const jv *const *g, jv *out) {
  jv seps = jv_str("", 0);
  if (g[0] && jv_stringify(x, at, g[0], &seps))
    return -1;
  jv *items;
  size_t n;
  if (items_of(x, at, v, &items, &n))
    return -1;
  jbuf b = jx_buf(x);
  int e = jb_put(&b, "", 0);
  for (size_t i = 0; i < n && !e; i++) {
    jv it = items[i];
    if (g[1] && g[1]->kind != JV_NONE && jf_attr_path(x, at, &items[i], g[1], &it)) {
      jb_free(&b);
      return -1;
    }
    if (i)
      e |= jb_put(&b, seps.u.s.p, seps.u.s.n);
    if (jv_to_str(x, at, &it, &b) || jx_work(x, at, seps.u.s.n + 8)) {
      jb_free(&b);
      return -1;
    }
  }
  return jx_take_str(x, at, &b, e, out);
}

/* select / reject / selectattr / rejectattr */
static int select_like(jctx *x, const jnode *at, int id, const jv *v, const jv *args, size_t nargs,
                       const char **kwn, const jv *kwv, size_t nkw, jv *out) {
  int by_attr = id == FL_SELECTATTR || id == FL_REJECTATTR;
  int reject = id == FL_REJECT || id == FL_REJECTATTR;
  size_t off = by_attr ? 1 : 0;
  if (nkw)
    return jx_fail(x, at, "unsupported construct '%s with keyword arguments'", jf_filter_name(id));
  if (by_attr && nargs < 1)
    return jx_fail(x, at, "Missing parameter for attribute name");
  if (!jv_truthy(v)) /* jinja2: "if value:" -- none, undefined and empty give nothing */
    return jf_mkiter(x, at, NULL, 0, out);
  int test = 0;
  if (nargs > off) {
    if (jf_need_str(x, at, &args[off], "test name"))
      return -1;
    test = jf_test_id(args[off].u.s.p, args[off].u.s.n);
    if (!test)
      return jx_fail(x, at, "No test named '%.*s'.",
                     (int)(args[off].u.s.n > 60 ? 60 : args[off].u.s.n), args[off].u.s.p);
  }
  jv *items;
  size_t n;
  if (items_of(x, at, v, &items, &n))
    return -1;
  jv *kept = ja_alloc(&x->arena, (n + 1) * sizeof *kept);
  if (!kept)
    return jx_oom(x, at);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    jv subject = items[i];
    if (by_attr && jf_attr_path(x, at, &items[i], &args[0], &subject))
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
  return jf_mkiter(x, at, kept, k, out);
}

static int map(jctx *x, const jnode *at, const jv *v, const jv *args, size_t nargs,
               const char **kwn, const jv *kwv, size_t nkw, jv *out) {
  const jv *attr = nargs ? NULL : jf_kwarg(kwn, kwv, nkw, "attribute");
  if (attr) {
    static const char *const ok[] = {"attribute", "default", NULL};
    if (jf_check_kwargs(x, at, "map", kwn, nkw, ok))
      return -1;
  } else if (!nargs) {
    return jx_fail(x, at, "map requires a filter argument");
  }
  if (!jv_truthy(v))
    return jf_mkiter(x, at, NULL, 0, out);
  int fid = 0;
  if (!attr) {
    if (args[0].kind != JV_STR)
      return jx_fail(x, at, "map: the filter name must be a string");
    fid = jf_filter_id(args[0].u.s.p, args[0].u.s.n);
    if (!fid)
      return jx_fail(x, at, "unsupported construct 'filter %.*s'",
                     (int)(args[0].u.s.n > 60 ? 60 : args[0].u.s.n), args[0].u.s.p);
  }
  jv *items;
  size_t n;
  if (items_of(x, at, v, &items, &n))
    return -1;
  jv *r = ja_alloc(&x->arena, (n + 1) * sizeof *r);
  if (!r)
    return jx_oom(x, at);
  const jv *dflt = attr ? jf_kwarg(kwn, kwv, nkw, "default") : NULL;
  for (size_t i = 0; i < n; i++) {
    if (attr) {
      if (jf_attr_path(x, at, &items[i], attr, &r[i]))
        return -1;
      if (dflt && r[i].kind == JV_UNDEF)
        r[i] = *dflt;
    } else if (jf_apply_filter(x, at, fid, &items[i], args + 1, nargs - 1, kwn, kwv, nkw, &r[i])) {
      return -1;
    }
  }
  return jf_mkiter(x, at, r, n, out);
}

static int unique(jctx *x, const jnode *at, const jv *v, const jv *const *g, jv *out) {
  jv *items;
  size_t n;
  if (items_of(x, at, v, &items, &n))
    return -1;
  jv *r = ja_alloc(&x->arena, (n + 1) * sizeof *r),
     *keys = ja_alloc(&x->arena, (n + 1) * sizeof *keys);
  if (!r || !keys)
    return jx_oom(x, at);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    jv key;
    if (sort_key(x, at, &items[i], g[1], g[0] && jv_truthy(g[0]), &key))
      return -1;
    if ((key.kind == JV_LIST && key.u.l->type == JL_LIST) || key.kind == JV_DICT ||
        key.kind == JV_JSON)
      return jx_fail(x, at, "unhashable type: '%s'", jv_type_name(&key));
    int seen = 0;
    for (size_t j = 0; j < k && !seen; j++)
      seen = jv_equal(x, &keys[j], &key);
    if (x->failed || jx_work(x, at, k))
      return -1;
    if (!seen) {
      keys[k] = key;
      r[k++] = items[i];
    }
  }
  return jf_mkiter(x, at, r, k, out);
}

static int reverse(jctx *x, const jnode *at, const jv *v, jv *out) {
  if (v->kind == JV_STR) {
    jv s = jv_int(-1), none = jv_none();
    return jx_slice(x, at, v, &none, &none, &s, out);
  }
  if (v->kind == JV_NONE || !jv_is_iterable(v))
    return jx_fail(x, at, "argument must be iterable");
  int gen = v->kind == JV_LIST && v->u.l->type == JL_ITER;
  jv *items;
  size_t n;
  if (items_of(x, at, v, &items, &n))
    return -1;
  jv *r = ja_alloc(&x->arena, (n + 1) * sizeof *r);
  if (!r)
    return jx_oom(x, at);
  for (size_t i = 0; i < n; i++)
    r[i] = items[n - 1 - i];
  /* reversed(seq) is an iterator; a generator is listed, then reversed */
  return gen ? jf_mklist(x, at, r, n, out) : jf_mkiter(x, at, r, n, out);
}

static int items(jctx *x, const jnode *at, const jv *v, jv *out) {
  if (v->kind == JV_UNDEF)
    return jf_mkiter(x, at, NULL, 0, out);
  if (!jv_is_mapping(v))
    return jx_fail(x, at, "Can only get item pairs from a mapping.");
  size_t n;
  jv *pairs;
  if (map_pairs(x, at, v, &pairs, &n))
    return -1;
  return jf_mkiter(x, at, pairs, n, out);
}

/* batch(n, fill_with) and slice(n, fill_with): lists of items */
static int chunks(jctx *x, const jnode *at, int id, const jv *v, const jv *const *g, jv *out) {
  if (!g[0] || !jv_is_int(g[0]) || g[0]->kind == JV_BIGINT)
    return jx_fail(x, at, "%s() needs an integer count", jf_filter_name(id));
  int64_t c = g[0]->kind == JV_INT ? g[0]->u.i : g[0]->u.b;
  jv *its;
  size_t n;
  if (items_of(x, at, v, &its, &n))
    return -1;
  if (c <= 0)
    return jx_fail(x, at,
                   id == FL_BATCH ? "batch size must be positive" : "slice count must be positive");
  size_t cnt = (size_t)c, groups, per = 0, extra = 0;
  if (id == FL_BATCH) {
    groups = (n + cnt - 1) / cnt;
  } else {
    groups = cnt;
    per = n / cnt;
    extra = n % cnt;
  }
  if (jx_work(x, at, n + groups))
    return -1;
  jv *rows = ja_alloc(&x->arena, (groups + 1) * sizeof *rows);
  if (!rows)
    return jx_oom(x, at);
  size_t offset = 0;
  for (size_t k = 0; k < groups; k++) {
    size_t len = id == FL_BATCH ? (n - offset < cnt ? n - offset : cnt) : per + (k < extra);
    size_t width =
        id == FL_BATCH ? (g[1] ? cnt : len) : (g[1] && extra && k >= extra ? len + 1 : len);
    jlist *l = jl_new(&x->arena, width);
    if (!l)
      return jx_oom(x, at);
    for (size_t i = 0; i < width; i++)
      l->items[i] = i < len ? its[offset + i] : *g[1];
    offset += len;
    rows[k] = jv_list(l);
  }
  return jf_mkiter(x, at, rows, groups, out);
}

int jf_seq_filter(jctx *x, const jnode *at, int id, jv *v, const jv *args, size_t nargs,
                  const char **kwn, const jv *kwv, size_t nkw, jv *out) {
  static const char *const P_NONE[] = {NULL}, *const P_JOIN[] = {"d", "attribute", NULL},
                           *const P_SORT[] = {"reverse", "case_sensitive", "attribute", NULL},
                           *const P_DICTSORT[] = {"case_sensitive", "by", "reverse", NULL},
                           *const P_UNIQUE[] = {"case_sensitive", "attribute", NULL},
                           *const P_SUM[] = {"attribute", "start", NULL},
                           *const P_BATCH[] = {"linecount", "fill_with", NULL},
                           *const P_SLICE[] = {"slices", "fill_with", NULL};
  const char *const *params = P_NONE;
  switch (id) {
  case FL_MAP:
    return map(x, at, v, args, nargs, kwn, kwv, nkw, out);
  case FL_SELECT:
  case FL_REJECT:
  case FL_SELECTATTR:
  case FL_REJECTATTR:
    return select_like(x, at, id, v, args, nargs, kwn, kwv, nkw, out);
  case FL_GROUPBY:
    return jx_fail(x, at, "unsupported construct 'filter groupby'");
  case FL_JOIN:
    params = P_JOIN;
    break;
  case FL_SORT:
    params = P_SORT;
    break;
  case FL_DICTSORT:
    params = P_DICTSORT;
    break;
  case FL_UNIQUE:
  case FL_MIN:
  case FL_MAX:
    params = P_UNIQUE;
    break;
  case FL_SUM:
    params = P_SUM;
    break;
  case FL_BATCH:
    params = P_BATCH;
    break;
  case FL_SLICE:
    params = P_SLICE;
    break;
  default:
    break;
  }
  const jv *g[4] = {0};
  if (jf_bind(x, at, jf_filter_name(id), params, args, nargs, kwn, kwv, nkw, g))
    return -1;
  jv *its;
  size_t n;
  switch (id) {
  case FL_FIRST:
    if (v->kind == JV_LIST && v->u.l->type == JL_ITER) {
      jlist *l = v->u.l;
      *out = l->pos < l->n ? l->items[l->pos++] : jv_undef(NULL);
      return 0;
    }
    if (items_of(x, at, v, &its, &n))
      return -1;
    *out = n ? its[0] : jv_undef(NULL);
    return 0;
  case FL_LAST:
    if (v->kind == JV_LIST && v->u.l->type == JL_ITER)
      return jx_fail(x, at, "'generator' object is not reversible");
    if (items_of(x, at, v, &its, &n))
      return -1;
    *out = n ? its[n - 1] : jv_undef(NULL);
    return 0;
  case FL_LIST:
    if (items_of(x, at, v, &its, &n))
      return -1;
    return jf_mklist(x, at, its, n, out);
  case FL_REVERSE:
    return reverse(x, at, v, out);
  case FL_UNIQUE:
    return unique(x, at, v, g, out);
  case FL_JOIN:
    return join(x, at, v, g, out);
  case FL_ITEMS:
    return items(x, at, v, out);
  case FL_DICTSORT:
    return dictsort(x, at, v, g, out);
  case FL_SORT:
    if (items_of(x, at, v, &its, &n))
      return -1;
    return sorted(x, at, its, n, g[2], g[1] && jv_truthy(g[1]), g[0] && jv_truthy(g[0]), out);
  case FL_MIN:
  case FL_MAX:
    return minmax(x, at, id, v, g, out);
  case FL_SUM:
    return sum(x, at, v, g, out);
  case FL_BATCH:
  case FL_SLICE:
    return chunks(x, at, id, v, g, out);
  }
  return jx_fail(x, at, "internal error: sequence filter %d", id);
}
