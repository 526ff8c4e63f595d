/* Python str semantics shared by the filters and methods: strip over
 * Unicode whitespace, ASCII-only case mapping (non-ASCII letters are
 * refused), replace, and sequences of items. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "template/internal.h"

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

int jf_need_str(jctx *x, const jnode *at, const jv *v, const char *what) {
  if (v->kind != JV_STR)
    return jx_fail(x, at, "%s expects a string, got %s", what, jv_type_name(v));
  return 0;
}

/* ASCII case mapping; non-ASCII letters are refused (see the file comment). */
int jf_case_map(jctx *x, const jnode *at, const jv *v, int mode, jv *out) {
  /* mode: 0 lower, 1 upper, 2 capitalize, 3 str.title, 4 Jinja title */
  for (size_t i = 0; i < v->u.s.n; i++)
    if ((unsigned char)v->u.s.p[i] >= 0x80)
      return jx_fail(x, at, "unsupported construct 'case mapping of non-ASCII text'");
  char *p = ja_alloc(&x->arena, v->u.s.n + 1);
  if (!p)
    return jx_oom(x, at);
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

int jf_replace(jctx *x, const jnode *at, const jv *s, const jv *old, const jv *nw, int64_t count,
               jv *out) {
  if (jf_need_str(x, at, s, "replace") || jf_need_str(x, at, old, "replace") ||
      jf_need_str(x, at, nw, "replace"))
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
  return jx_take_str(x, at, &b, rc, out);
}

jv *jf_seq_items(jctx *x, const jnode *at, const jv *v, size_t *n, int *rc) {
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
      *rc = jx_oom(x, at);
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
      *rc = jx_oom(x, at);
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

int jf_mklist(jctx *x, const jnode *at, jv *items, size_t n, jv *out) {
  jlist *l = jl_new(&x->arena, n);
  if (!l)
    return jx_oom(x, at);
  if (n)
    memcpy(l->items, items, n * sizeof *items);
  out->kind = JV_LIST;
  out->u.l = l;
  return 0;
}

int jx_take_str(jctx *x, const jnode *at, jbuf *b, int failed, jv *out) {
  char *p = failed ? NULL : ja_strdup(&x->arena, b->p, b->n);
  size_t n = b->n;
  free(b->p);
  b->p = NULL;
  if (!p)
    return jx_fail(x, at, "out of memory");
  *out = jv_str(p, n);
  return 0;
}
