/* The str and dict methods templates call: " x ".strip(), s.split(),
 * s.startswith(...), d.items(), d.get(k, default), ... */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "template/internal.h"

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
    return jx_oom(x, at);
  const char *p = s->u.s.p;
  size_t n = s->u.s.n, i = 0, l;
#define PUSH(b, e)                                                                                 \
  do {                                                                                             \
    if (k == cap) {                                                                                \
      jv *np = realloc(parts, (cap *= 2) * sizeof *parts);                                         \
      if (!np) {                                                                                   \
        free(parts);                                                                               \
        return jx_oom(x, at);                                                                      \
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
  int rc = jf_mklist(x, at, parts, k, out);
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
      if (chars && jf_need_str(x, at, chars, nm))
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
      return jf_case_map(x, at, self,
                         nm[0] == 'l'   ? 0
                         : nm[0] == 'u' ? 1
                         : nm[0] == 'c' ? 2
                                        : 3,
                         out);
    if (!strcmp(nm, "replace")) {
      if (nargs < 2)
        return jx_fail(x, at, "replace needs two arguments");
      int64_t count = -1;
      if (nargs > 2) {
        if (args[2].kind != JV_INT)
          return jx_fail(x, at, "replace count must be an integer");
        count = args[2].u.i;
      }
      return jf_replace(x, at, self, &args[0], &args[1], count, out);
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
      jv *items = jf_seq_items(x, at, &args[0], &n, &rc);
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
      return jx_take_str(x, at, &b, e, out);
    }
  } else if (jv_is_mapping(self)) {
    if (!strcmp(nm, "items"))
      return jf_apply_filter(x, at, jf_filter_id("items", 5), (jv *)self, NULL, 0, NULL, NULL, 0,
                             out);
    if (!strcmp(nm, "keys") || !strcmp(nm, "values")) {
      size_t n = jv_len(self);
      jv *r = ja_alloc(&x->arena, (n + 1) * sizeof *r);
      if (!r)
        return jx_oom(x, at);
      for (size_t i = 0; i < n; i++) {
        jv k, v;
        jv_map_at(self, i, &k, &v);
        r[i] = nm[0] == 'k' ? k : v;
      }
      return jf_mklist(x, at, r, n, out);
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
