/* Python str semantics shared by the filters and methods: strip over
 * Unicode whitespace, case mapping (full Unicode mappings through
 * libunistring, as str.upper() and friends), replace, markupsafe's escape,
 * and new list / iterator values. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unicase.h>
#include <unictype.h>

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
  if (v->kind == JV_UNDEF)
    return jx_undef_fail(x, at, v);
  if (v->kind != JV_STR)
    return jx_fail(x, at, "%s expects a string, got %s", what, jv_type_name(v));
  return 0;
}

static int is_ascii(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] >= 0x80)
      return 0;
  return 1;
}

typedef uint8_t *(*u8_map_fn)(const uint8_t *, size_t, const char *, uninorm_t, uint8_t *,
                              size_t *);

/* Full Unicode mapping of s through libunistring, appended to b. */
static int map_unicode(jctx *x, const jnode *at, const char *s, size_t n, u8_map_fn fn, jbuf *b) {
  size_t len = 0;
  uint8_t *r = fn((const uint8_t *)s, n, NULL, NULL, NULL, &len);
  if (!r)
    return jx_fail(x, at, "unsupported construct 'case mapping of invalid UTF-8'");
  int e = jb_put(b, (const char *)r, len);
  free(r);
  return e ? jx_oom(x, at) : 0;
}

static int ascii_cased(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int title_sep(const char *s, size_t i) {
  char c = s[i];
  return c == ' ' || c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || c == '\t' ||
         c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* str.title(), or Jinja's title filter (jinja = 1): each word's first code
 * point title-cased, the rest lower-cased. */
static int title_case(jctx *x, const jnode *at, const char *s, size_t n, int jinja, jbuf *b) {
  int prev_cased = 0, e = 0;
  for (size_t i = 0; i < n && !e;) {
    size_t l;
    uint32_t c = ju_decode(s, n, i, &l);
    int start = jinja ? (i == 0 || title_sep(s, i - 1)) : !prev_cased;
    if (jinja && i > 0 && (unsigned char)s[i - 1] >= 0x80) {
      size_t pl;
      size_t p = i - 1;
      while (p > 0 && ((unsigned char)s[p] & 0xC0) == 0x80)
        p--;
      uint32_t pc = ju_decode(s, n, p, &pl);
      start = uc_is_space(pc) ? 1 : 0;
    }
    if (c < 0x80) {
      char ch = (char)c;
      if (start && ch >= 'a' && ch <= 'z')
        ch = (char)(ch - 32);
      else if (!start && ch >= 'A' && ch <= 'Z')
        ch = (char)(ch + 32);
      e = jb_put(b, &ch, 1) ? jx_oom(x, at) : 0;
      prev_cased = ascii_cased((char)c);
    } else {
      e = map_unicode(x, at, s + i, l, start ? u8_totitle : u8_tolower, b);
      prev_cased = uc_is_property_cased(c);
    }
    i += l;
  }
  return e;
}

int jf_case_map(jctx *x, const jnode *at, const jv *v, int mode, jv *out) {
  /* mode: 0 lower, 1 upper, 2 capitalize, 3 str.title, 4 Jinja title */
  const char *s = v->u.s.p;
  size_t n = v->u.s.n;
  if (jx_work(x, at, n))
    return -1;
  jbuf b = jx_buf(x);
  int e = jb_put(&b, "", 0) ? jx_oom(x, at) : 0;
  if (!e && is_ascii(s, n)) {
    for (size_t i = 0; i < n && !e; i++) {
      char c = s[i];
      int up = mode == 1 || (mode == 2 && i == 0) ||
               (mode == 3 && (i == 0 || !ascii_cased(s[i - 1]))) ||
               (mode == 4 && (i == 0 || title_sep(s, i - 1)));
      if (up && c >= 'a' && c <= 'z')
        c = (char)(c - 32);
      else if (!up && c >= 'A' && c <= 'Z')
        c = (char)(c + 32);
      e = jb_putc(&b, c) ? jx_oom(x, at) : 0;
    }
  } else if (!e && mode <= 1) {
    e = map_unicode(x, at, s, n, mode ? u8_toupper : u8_tolower, &b);
  } else if (!e && mode == 2) {
    /* title-case the first code point, lower-case the rest (with the
     * whole string as context, for the final sigma) */
    size_t l1 = n ? ju_offset(s, n, 1) : 0, lowfirst = 0;
    jbuf low = jx_buf(x), one = jx_buf(x);
    e = map_unicode(x, at, s, n, u8_tolower, &low) || map_unicode(x, at, s, l1, u8_tolower, &one);
    if (!e) {
      lowfirst = one.n;
      e = map_unicode(x, at, s, l1, u8_totitle, &b) ||
          (jb_put(&b, low.p + lowfirst, low.n - lowfirst) ? jx_oom(x, at) : 0);
    }
    jb_free(&low);
    jb_free(&one);
  } else if (!e) {
    e = title_case(x, at, s, n, mode == 4, &b);
  }
  if (e) {
    jb_free(&b);
    return -1;
  }
  if (jx_take_str(x, at, &b, 0, out))
    return -1;
  out->safe = v->safe;
  return 0;
}

int jf_replace(jctx *x, const jnode *at, const jv *s, const jv *old, const jv *nw, int64_t count,
               jv *out) {
  if (jf_need_str(x, at, s, "replace") || jf_need_str(x, at, old, "replace") ||
      jf_need_str(x, at, nw, "replace"))
    return -1;
  jbuf b = jx_buf(x);
  size_t i = 0, done = 0;
  int rc = jb_put(&b, "", 0);
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
      if (!rc && jx_work(x, at, nw->u.s.n + 1))
        rc = -2;
    }
  } else {
    size_t run = 0;
    while (i < s->u.s.n && !rc) {
      if ((count < 0 || (int64_t)done < count) && i + old->u.s.n <= s->u.s.n &&
          memcmp(s->u.s.p + i, old->u.s.p, old->u.s.n) == 0) {
        rc |= jb_put(&b, s->u.s.p + i - run, run);
        run = 0;
        rc |= jb_put(&b, nw->u.s.p, nw->u.s.n);
        i += old->u.s.n;
        done++;
        if (!rc && jx_work(x, at, nw->u.s.n))
          rc = -2;
      } else {
        run++;
        i++;
      }
    }
    if (!rc)
      rc |= jb_put(&b, s->u.s.p + i - run, run);
  }
  if (rc == -2 || (!rc && jx_work(x, at, s->u.s.n))) {
    jb_free(&b);
    return -1;
  }
  return jx_take_str(x, at, &b, rc, out);
}

static int new_seq(jctx *x, const jnode *at, jv *items, size_t n, int type, jv *out) {
  jlist *l = jl_new(&x->arena, n);
  if (!l)
    return jx_oom(x, at);
  if (n)
    memcpy(l->items, items, n * sizeof *items);
  l->type = (uint8_t)type;
  *out = jv_list(l);
  return jx_work(x, at, n);
}

int jf_mklist(jctx *x, const jnode *at, jv *items, size_t n, jv *out) {
  return new_seq(x, at, items, n, JL_LIST, out);
}

int jf_mkiter(jctx *x, const jnode *at, jv *items, size_t n, jv *out) {
  return new_seq(x, at, items, n, JL_ITER, out);
}

int jx_take_str(jctx *x, const jnode *at, jbuf *b, int failed, jv *out) {
  char *p = failed ? NULL : ja_strdup(&x->arena, b->p ? b->p : "", b->n);
  size_t n = b->n;
  jb_free(b);
  if (!p)
    return jx_oom(x, at);
  *out = jv_str(p, n);
  return 0;
}

int jf_escape_into(const char *s, size_t n, jbuf *b) {
  size_t run = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    const char *r = c == '&'    ? "&amp;"
                    : c == '<'  ? "&lt;"
                    : c == '>'  ? "&gt;"
                    : c == '"'  ? "&#34;"
                    : c == '\'' ? "&#39;"
                                : NULL;
    if (!r) {
      run++;
      continue;
    }
    if (jb_put(b, s + i - run, run) || jb_put(b, r, strlen(r)))
      return -1;
    run = 0;
  }
  return jb_put(b, s + n - run, run);
}

int jf_markup_operand(jctx *x, const jnode *at, const jv *v, jv *out) {
  if (v->kind == JV_STR && v->safe) {
    *out = *v;
    return 0;
  }
  jv s;
  if (jv_stringify(x, at, v, &s))
    return -1;
  jbuf b = jx_buf(x);
  if (jf_escape_into(s.u.s.p, s.u.s.n, &b) || jb_put(&b, "", 0)) {
    jb_free(&b);
    return jx_oom(x, at);
  }
  if (jx_work(x, at, s.u.s.n) || jx_take_str(x, at, &b, 0, out))
    return -1;
  out->safe = 1;
  return 0;
}
