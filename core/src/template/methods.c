/* Methods templates call on values: str (strip, split, startswith, find,
 * join, format, ...), dict (items, keys, values, get, copy), list and tuple
 * (index, count, copy) and the loop (cycle, changed). A method Python has
 * but fsdpc does not implement is refused by name, never guessed; the
 * sandbox's unsafe ones (list.append, dict.pop, ...) never get here. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unicase.h>
#include <unictype.h>

#include "template/filters.h"

static int unsupported(jctx *x, const jnode *at, const char *nm, const jv *self) {
  return jx_fail(x, at, "unsupported construct 'method %s of %s'", nm, jv_type_name(self));
}

/* str.split / str.rsplit */
static int split_str(jctx *x, const jnode *at, const jv *s, const jv *sep, int64_t maxsplit,
                     int right, jv *out) {
  const char *p = s->u.s.p;
  size_t n = s->u.s.n, l;
  size_t cap = 8, k = 0;
  size_t *seg = ja_alloc(&x->arena, cap * 2 * sizeof *seg);
  if (!seg)
    return jx_oom(x, at);
#define PUSH(b, e)                                                                                 \
  do {                                                                                             \
    if (k == cap) {                                                                                \
      size_t *ns = ja_alloc(&x->arena, cap * 4 * sizeof *ns);                                      \
      if (!ns)                                                                                     \
        return jx_oom(x, at);                                                                      \
      memcpy(ns, seg, cap * 2 * sizeof *ns);                                                       \
      seg = ns;                                                                                    \
      cap *= 2;                                                                                    \
    }                                                                                              \
    seg[2 * k] = (b);                                                                              \
    seg[2 * k + 1] = (e);                                                                          \
    k++;                                                                                           \
  } while (0)
  if (!sep || sep->kind == JV_NONE) {
    if (!right) {
      size_t i = 0;
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
      size_t j = n;
      for (;;) {
        size_t b0, e0;
        jf_strip(p, j, NULL, 0, 0, 1, &b0, &e0);
        j = e0;
        if (j == 0)
          break;
        if (maxsplit >= 0 && (int64_t)k >= maxsplit) {
          size_t b, e;
          jf_strip(p, j, NULL, 0, 1, 0, &b, &e);
          PUSH(b, j);
          break;
        }
        size_t e = j, i = j;
        while (i > 0) {
          size_t q = i - 1;
          while (q > 0 && ((unsigned char)p[q] & 0xC0) == 0x80)
            q--;
          if (ju_is_space(p + q, i - q, &l))
            break;
          i = q;
        }
        PUSH(i, e);
        j = i;
      }
    }
  } else {
    if (sep->kind != JV_STR)
      return jx_fail(x, at, "must be str or None, not %s", jv_type_name(sep));
    if (sep->u.s.n == 0)
      return jx_fail(x, at, "empty separator");
    size_t m = sep->u.s.n;
    if (!right) {
      size_t b = 0, i = 0;
      while (i + m <= n) {
        if ((maxsplit < 0 || (int64_t)k < maxsplit) && memcmp(p + i, sep->u.s.p, m) == 0) {
          PUSH(b, i);
          i += m;
          b = i;
        } else {
          i++;
        }
      }
      PUSH(b, n);
    } else {
      size_t e = n, i = n;
      while (i >= m) {
        if ((maxsplit < 0 || (int64_t)k < maxsplit) && memcmp(p + i - m, sep->u.s.p, m) == 0) {
          PUSH(i, e);
          i -= m;
          e = i;
        } else {
          i--;
        }
      }
      PUSH(0, e);
    }
  }
#undef PUSH
  if (jx_work(x, at, n))
    return -1;
  jlist *lst = jl_new(&x->arena, k);
  if (!lst)
    return jx_oom(x, at);
  for (size_t i = 0; i < k; i++) {
    size_t src = right ? k - 1 - i : i;
    lst->items[i] = jv_str(p + seg[2 * src], seg[2 * src + 1] - seg[2 * src]);
    lst->items[i].safe = s->safe;
  }
  *out = jv_list(lst);
  return 0;
}

static int prefix_test(jctx *x, const jnode *at, const jv *s, const jv *arg, int suffix, int *out) {
  *out = 0;
  if (arg->kind == JV_STR) {
    if (arg->u.s.n <= s->u.s.n)
      *out = memcmp(s->u.s.p + (suffix ? s->u.s.n - arg->u.s.n : 0), arg->u.s.p, arg->u.s.n) == 0;
    return 0;
  }
  if (arg->kind == JV_LIST && arg->u.l->type == JL_TUPLE) {
    for (size_t i = 0; i < arg->u.l->n && !*out; i++) {
      jv it = arg->u.l->items[i];
      if (it.kind != JV_STR)
        return jx_fail(x, at, "tuple for %s must only contain str, not %s",
                       suffix ? "endswith" : "startswith", jv_type_name(&it));
      if (prefix_test(x, at, s, &it, suffix, out))
        return -1;
    }
    return 0;
  }
  return jx_fail(x, at, "%s first arg must be str or a tuple of str, not %s",
                 suffix ? "endswith" : "startswith", jv_type_name(arg));
}

/* str.find / rfind / index / rindex / count of sub: code point results */
static int find(jctx *x, const jnode *at, const jv *self, const char *nm, const jv *sub, jv *out) {
  if (jf_need_str(x, at, sub, nm))
    return -1;
  int rev = nm[0] == 'r', count = !strcmp(nm, "count");
  int64_t found = -1, cnt = 0;
  const char *h = self->u.s.p;
  size_t hn = self->u.s.n, m = sub->u.s.n;
  if (jx_work(x, at, hn))
    return -1;
  if (m == 0) {
    size_t cps = ju_count(h, hn);
    found = rev ? (int64_t)cps : 0;
    cnt = (int64_t)cps + 1;
  } else if (!rev) {
    for (size_t i = 0; i + m <= hn;) {
      if (memcmp(h + i, sub->u.s.p, m) == 0) {
        if (found < 0)
          found = (int64_t)ju_count(h, i);
        cnt++;
        if (!count)
          break;
        i += m;
      } else {
        i++;
      }
    }
  } else {
    for (size_t i = hn - m + 1; i-- > 0;)
      if (memcmp(h + i, sub->u.s.p, m) == 0) {
        found = (int64_t)ju_count(h, i);
        break;
      }
  }
  if (count) {
    *out = jv_int(cnt);
    return 0;
  }
  if (found < 0 && (!strcmp(nm, "index") || !strcmp(nm, "rindex")))
    return jx_fail(x, at, "substring not found");
  *out = jv_int(found);
  return 0;
}

static int str_join(jctx *x, const jnode *at, const jv *self, const jv *seq, jv *out) {
  jv *items;
  size_t n;
  jv copy = *seq;
  if (jv_iter(x, at, &copy, &items, &n))
    return -1;
  jbuf b = jx_buf(x);
  int e = jb_put(&b, "", 0);
  for (size_t i = 0; i < n && !e; i++) {
    jv it = items[i];
    if (it.kind != JV_STR) {
      jb_free(&b);
      return jx_fail(x, at, "sequence item %zu: expected str instance, %s found", i,
                     jv_type_name(&it));
    }
    if (self->safe && jf_markup_operand(x, at, &items[i], &it)) {
      jb_free(&b);
      return -1;
    }
    if (i)
      e |= jb_put(&b, self->u.s.p, self->u.s.n);
    e |= jb_put(&b, it.u.s.p, it.u.s.n);
    if (!e && jx_work(x, at, it.u.s.n + self->u.s.n)) {
      jb_free(&b);
      return -1;
    }
  }
  if (jx_take_str(x, at, &b, e, out))
    return -1;
  out->safe = self->safe;
  return 0;
}

/* str.partition / rpartition: a 3-tuple */
static int partition(jctx *x, const jnode *at, const jv *self, const jv *sep, int rev, jv *out) {
  if (jf_need_str(x, at, sep, "partition"))
    return -1;
  if (!sep->u.s.n)
    return jx_fail(x, at, "empty separator");
  const char *h = self->u.s.p;
  size_t hn = self->u.s.n, m = sep->u.s.n, hit = (size_t)-1;
  for (size_t i = 0; i + m <= hn; i++) {
    size_t k = rev ? hn - m - i : i;
    if (memcmp(h + k, sep->u.s.p, m) == 0) {
      hit = k;
      break;
    }
  }
  jlist *l = jl_new(&x->arena, 3);
  if (!l)
    return jx_oom(x, at);
  l->type = JL_TUPLE;
  if (hit == (size_t)-1) {
    l->items[rev ? 2 : 0] = *self;
    l->items[1] = l->items[rev ? 0 : 2] = jv_str("", 0);
  } else {
    l->items[0] = jv_str(h, hit);
    l->items[1] = jv_str(h + hit, m);
    l->items[2] = jv_str(h + hit + m, hn - hit - m);
  }
  *out = jv_list(l);
  return jx_work(x, at, hn);
}

static int is_class(const jv *s, int what) {
  if (!s->u.s.n)
    return 0;
  for (size_t i = 0; i < s->u.s.n;) {
    size_t l;
    uint32_t c = ju_decode(s->u.s.p, s->u.s.n, i, &l);
    int ok = what == 0   ? (c < 0x80 ? c >= '0' && c <= '9' : uc_digit_value(c) >= 0)
             : what == 1 ? (c < 0x80 ? ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') : uc_is_alpha(c))
             : what == 2
                 ? (c < 0x80 ? ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || (c >= '0' && c <= '9')
                             : uc_is_alnum(c))
                 : ju_is_space(s->u.s.p + i, s->u.s.n - i, &l);
    if (!ok)
      return 0;
    i += l;
  }
  return 1;
}

static int str_method(jctx *x, const jnode *at, const jv *self, const char *nm, const jv *const *g,
                      const jv *args, size_t nargs, const char **kwn, const jv *kwv, size_t nkw,
                      jv *out) {
  if (!strcmp(nm, "strip") || !strcmp(nm, "lstrip") || !strcmp(nm, "rstrip")) {
    const jv *chars = g[0] && g[0]->kind != JV_NONE ? g[0] : NULL;
    if (chars && jf_need_str(x, at, chars, nm))
      return -1;
    size_t b, e;
    jf_strip(self->u.s.p, self->u.s.n, chars ? chars->u.s.p : NULL, chars ? chars->u.s.n : 0,
             nm[0] != 'r', nm[0] != 'l', &b, &e);
    *out = jv_str(self->u.s.p + b, e - b);
    out->safe = self->safe;
    return jx_work(x, at, self->u.s.n);
  }
  if (!strcmp(nm, "split") || !strcmp(nm, "rsplit")) {
    int64_t maxsplit = -1;
    if (g[1]) {
      if (g[1]->kind != JV_INT && g[1]->kind != JV_BOOL)
        return jx_fail(x, at, "'%s' object cannot be interpreted as an integer",
                       jv_type_name(g[1]));
      maxsplit = g[1]->kind == JV_INT ? g[1]->u.i : g[1]->u.b;
    }
    return split_str(x, at, self, g[0], maxsplit, nm[0] == 'r', out);
  }
  if (!strcmp(nm, "upper") || !strcmp(nm, "lower") || !strcmp(nm, "title") ||
      !strcmp(nm, "capitalize") || !strcmp(nm, "casefold"))
    return jf_case_map(x, at, self,
                       !strcmp(nm, "lower") || !strcmp(nm, "casefold") ? 0
                       : !strcmp(nm, "upper")                          ? 1
                       : !strcmp(nm, "capitalize")                     ? 2
                                                                       : 3,
                       out);
  if (!strcmp(nm, "replace")) {
    if (!g[0] || !g[1])
      return jx_fail(x, at, "replace expected at least 2 arguments");
    int64_t count = -1;
    if (g[2]) {
      if (g[2]->kind != JV_INT && g[2]->kind != JV_BOOL)
        return jx_fail(x, at, "'%s' object cannot be interpreted as an integer",
                       jv_type_name(g[2]));
      count = g[2]->kind == JV_INT ? g[2]->u.i : g[2]->u.b;
    }
    jv o = *g[0], n = *g[1];
    if (self->safe && (jf_markup_operand(x, at, g[0], &o) || jf_markup_operand(x, at, g[1], &n)))
      return -1;
    if (jf_replace(x, at, self, &o, &n, count, out))
      return -1;
    out->safe = self->safe;
    return 0;
  }
  if (!strcmp(nm, "startswith") || !strcmp(nm, "endswith")) {
    if (!g[0] || g[1])
      return g[0] ? jx_fail(x, at, "unsupported construct '%s with start/end arguments'", nm)
                  : jx_fail(x, at, "%s takes at least 1 argument", nm);
    int r;
    if (prefix_test(x, at, self, g[0], nm[0] == 'e', &r))
      return -1;
    *out = jv_bool(r);
    return 0;
  }
  if (!strcmp(nm, "find") || !strcmp(nm, "rfind") || !strcmp(nm, "index") ||
      !strcmp(nm, "rindex") || !strcmp(nm, "count")) {
    if (!g[0] || g[1])
      return g[0] ? jx_fail(x, at, "unsupported construct '%s with start/end arguments'", nm)
                  : jx_fail(x, at, "%s takes at least 1 argument", nm);
    return find(x, at, self, nm, g[0], out);
  }
  if (!strcmp(nm, "join")) {
    if (!g[0])
      return jx_fail(x, at, "join() takes exactly one argument");
    return str_join(x, at, self, g[0], out);
  }
  if (!strcmp(nm, "format"))
    return jf_str_format(x, at, self, args, nargs, kwn, kwv, nkw, out);
  if (!strcmp(nm, "isdigit") || !strcmp(nm, "isalpha") || !strcmp(nm, "isalnum") ||
      !strcmp(nm, "isspace")) {
    *out = jv_bool(is_class(self, nm[2] == 'd'                   ? 0
                                  : nm[3] == 'l' && nm[4] == 'p' ? 1
                                  : nm[2] == 'a'                 ? 2
                                                                 : 3));
    return jx_work(x, at, self->u.s.n);
  }
  if (!strcmp(nm, "islower") || !strcmp(nm, "isupper")) {
    int r;
    if (jf_apply_test(x, at, jf_test_id(nm + 2, 5), self, NULL, 0, &r))
      return -1;
    *out = jv_bool(r);
    return 0;
  }
  if (!strcmp(nm, "removeprefix") || !strcmp(nm, "removesuffix")) {
    if (!g[0] || jf_need_str(x, at, g[0], nm))
      return g[0] ? -1 : jx_fail(x, at, "%s() takes exactly one argument", nm);
    int suf = nm[6] == 's', r;
    if (prefix_test(x, at, self, g[0], suf, &r))
      return -1;
    size_t m = r ? g[0]->u.s.n : 0;
    *out = jv_str(self->u.s.p + (suf ? 0 : m), self->u.s.n - m);
    out->safe = self->safe;
    return 0;
  }
  if (!strcmp(nm, "partition") || !strcmp(nm, "rpartition")) {
    if (!g[0])
      return jx_fail(x, at, "%s() takes exactly one argument", nm);
    return partition(x, at, self, g[0], nm[0] == 'r', out);
  }
  return unsupported(x, at, nm, self);
}

static int dict_method(jctx *x, const jnode *at, const jv *self, const char *nm, const jv *const *g,
                       jv *out) {
  if (!strcmp(nm, "items") || !strcmp(nm, "keys") || !strcmp(nm, "values")) {
    size_t n = jv_len(self);
    jlist *l = jl_new(&x->arena, n);
    if (!l)
      return jx_oom(x, at);
    l->type = nm[0] == 'i' ? JL_ITEMS : nm[0] == 'k' ? JL_KEYS : JL_VALUES;
    size_t i = 0;
    const cJSON *c = self->kind == JV_JSON ? self->u.j->child : NULL;
    for (; i < n; i++) {
      jv k, v;
      if (c) {
        k = jv_str(c->string, strlen(c->string));
        v = jv_from_json(c);
        c = c->next;
      } else {
        jv_map_at(self, i, &k, &v);
      }
      if (l->type == JL_ITEMS) {
        jlist *t = jl_new(&x->arena, 2);
        if (!t)
          return jx_oom(x, at);
        t->type = JL_TUPLE;
        t->items[0] = k;
        t->items[1] = v;
        l->items[i] = jv_list(t);
      } else {
        l->items[i] = l->type == JL_KEYS ? k : v;
      }
    }
    *out = jv_list(l);
    return jx_work(x, at, n);
  }
  if (!strcmp(nm, "get")) {
    if (!g[0])
      return jx_fail(x, at, "get expected at least 1 argument, got 0");
    if (g[0]->kind != JV_STR || !jv_map_get(self, g[0]->u.s.p, g[0]->u.s.n, out))
      *out = g[1] ? *g[1] : jv_none();
    return 0;
  }
  if (!strcmp(nm, "copy")) {
    jdict *d = jd_new(&x->arena);
    if (!d)
      return jx_oom(x, at);
    size_t n = jv_len(self);
    for (size_t i = 0; i < n; i++) {
      jv k, v;
      jv_map_at(self, i, &k, &v);
      if (jd_set(&x->arena, d, k.u.s.p, k.u.s.n, v))
        return jx_oom(x, at);
    }
    *out = (jv){.kind = JV_DICT};
    out->u.m = d;
    return jx_work(x, at, n);
  }
  return unsupported(x, at, nm, self);
}

static int seq_method(jctx *x, const jnode *at, const jv *self, const char *nm, const jv *const *g,
                      jv *out) {
  if (!strcmp(nm, "index") || !strcmp(nm, "count")) {
    if (!g[0])
      return jx_fail(x, at, "%s() takes exactly one argument (0 given)", nm);
    size_t n = jv_len(self);
    int64_t cnt = 0, at_i = -1;
    for (size_t i = 0; i < n; i++) {
      jv it = jv_seq_at(self, i);
      if (jv_equal(x, &it, g[0])) {
        cnt++;
        if (at_i < 0)
          at_i = (int64_t)i;
      }
      if (x->failed)
        return -1;
    }
    if (jx_work(x, at, n))
      return -1;
    if (nm[0] == 'i' && at_i < 0)
      return jx_fail(x, at, "value is not in %s", jv_type_name(self));
    *out = jv_int(nm[0] == 'i' ? at_i : cnt);
    return 0;
  }
  if (!strcmp(nm, "copy") && !(self->kind == JV_LIST && self->u.l->type == JL_TUPLE)) {
    jv *items;
    size_t n;
    jv copy = *self;
    if (jv_iter(x, at, &copy, &items, &n))
      return -1;
    return jf_mklist(x, at, items, n, out);
  }
  return unsupported(x, at, nm, self);
}

/* loop.cycle(*args) and loop.changed(*args) */
static int loop_method(jctx *x, const jnode *at, const jv *self, const char *nm, const jv *args,
                       size_t nargs, jv *out) {
  jloop *l = self->u.loop;
  if (!strcmp(nm, "cycle")) {
    if (!nargs)
      return jx_fail(x, at, "no items for cycling given");
    *out = args[l->index0 % (int64_t)nargs];
    return 0;
  }
  jlist *cur = jl_new(&x->arena, nargs);
  if (!cur)
    return jx_oom(x, at);
  cur->type = JL_TUPLE;
  if (nargs)
    memcpy(cur->items, args, nargs * sizeof *args);
  jv v = jv_list(cur);
  int changed = !*l->changed_set || !jv_equal(x, l->changed_last, &v);
  if (x->failed)
    return -1;
  if (changed) {
    *l->changed_last = v;
    *l->changed_set = 1;
  }
  *out = jv_bool(changed);
  return 0;
}

int jf_call_method(jctx *x, const jnode *at, const jmethod *m, const jv *args, size_t nargs,
                   const char **kwn, const jv *kwv, size_t nkw, jv *out) {
  const jv *self = &m->self;
  const char *nm = m->name;
  if (self->kind == JV_LOOP)
    return loop_method(x, at, self, nm, args, nargs, out);
  static const char *const P_STRIP[] = {"chars", NULL},
                           *const P_SPLIT[] = {"sep", "maxsplit", NULL},
                           *const P_REPLACE[] = {"old", "new", "count", NULL},
                           *const P_ONE2[] = {"a", "b", NULL},
                           *const P_FIND[] = {"sub", "start", "end", NULL},
                           *const P_GET[] = {"key", "default", NULL}, *const P_NONE[] = {NULL};
  const char *const *params = P_ONE2;
  if (!strcmp(nm, "strip") || !strcmp(nm, "lstrip") || !strcmp(nm, "rstrip"))
    params = P_STRIP;
  else if (!strcmp(nm, "split") || !strcmp(nm, "rsplit"))
    params = P_SPLIT;
  else if (!strcmp(nm, "replace"))
    params = P_REPLACE;
  else if (!strcmp(nm, "find") || !strcmp(nm, "rfind") || !strcmp(nm, "index") ||
           !strcmp(nm, "rindex") || (!strcmp(nm, "count") && self->kind == JV_STR) ||
           !strcmp(nm, "startswith") || !strcmp(nm, "endswith"))
    params = P_FIND;
  else if (!strcmp(nm, "get"))
    params = P_GET;
  else if (!strcmp(nm, "items") || !strcmp(nm, "keys") || !strcmp(nm, "values") ||
           !strcmp(nm, "copy") || !strcmp(nm, "upper") || !strcmp(nm, "lower") ||
           !strcmp(nm, "title") || !strcmp(nm, "capitalize") || !strcmp(nm, "casefold") ||
           !strncmp(nm, "is", 2))
    params = P_NONE;
  const jv *g[4] = {0};
  if (strcmp(nm, "format") && jf_bind(x, at, nm, params, args, nargs, kwn, kwv, nkw, g))
    return -1;
  if (self->kind == JV_STR)
    return str_method(x, at, self, nm, g, args, nargs, kwn, kwv, nkw, out);
  if (jv_is_mapping(self))
    return dict_method(x, at, self, nm, g, out);
  if (jv_is_seq(self))
    return seq_method(x, at, self, nm, g, out);
  return unsupported(x, at, nm, self);
}
