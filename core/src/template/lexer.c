/* Lexer of the Jinja subset: template data and tags to tokens.
 *
 * Whitespace rules are Jinja's with Hugging Face's settings: the source's
 * line ends are normalised and one trailing newline is dropped
 * (keep_trailing_newline=False); trim_blocks removes the newline after a
 * block or comment tag; lstrip_blocks removes the spaces and tabs between
 * the start of a line and a block or comment tag ("{%+" turns it off);
 * "{%-" / "-%}" (and the {{ }} and {# #} forms) strip all whitespace on
 * that side. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/internal.h"

typedef struct lexer {
  fsdpc_jinja *t;
  const char *s;
  size_t n;
  jtok *toks;
  size_t ntok, cap;
  /* incremental line / column tracking */
  size_t at, line_start;
  int line;
  fsdpc_err *err;
} lexer;

static void locate(lexer *L, size_t pos, int *line, int *col) {
  if (pos < L->at) { /* never happens in order, but stay correct */
    L->at = 0;
    L->line = 1;
    L->line_start = 0;
  }
  for (; L->at < pos; L->at++)
    if (L->s[L->at] == '\n') {
      L->line++;
      L->line_start = L->at + 1;
    }
  *line = L->line;
  *col = (int)(pos - L->line_start) + 1;
}

static fsdpc_status lfail(lexer *L, size_t pos, const char *what) {
  int line, col;
  locate(L, pos, &line, &col);
  return fsdpc__fail(L->err, FSDPC_INVALID_USAGE, "%s:%d:%d: %s", L->t->origin, line, col, what);
}

static jtok *push(lexer *L, int kind, size_t pos) {
  if (L->ntok == L->cap) {
    size_t cap = L->cap ? L->cap * 2 : 256;
    jtok *nt = realloc(L->toks, cap * sizeof *nt);
    if (!nt)
      return NULL;
    L->toks = nt;
    L->cap = cap;
  }
  jtok *k = &L->toks[L->ntok++];
  memset(k, 0, sizeof *k);
  k->kind = kind;
  locate(L, pos, &k->line, &k->col);
  return k;
}

static int is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
static int is_name0(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static int is_digit(char c) {
  return c >= '0' && c <= '9';
}

static void put_utf8(char *o, size_t *k, uint32_t cp) {
  if (cp < 0x80) {
    o[(*k)++] = (char)cp;
  } else if (cp < 0x800) {
    o[(*k)++] = (char)(0xC0 | (cp >> 6));
    o[(*k)++] = (char)(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    o[(*k)++] = (char)(0xE0 | (cp >> 12));
    o[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[(*k)++] = (char)(0x80 | (cp & 0x3F));
  } else {
    o[(*k)++] = (char)(0xF0 | (cp >> 18));
    o[(*k)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[(*k)++] = (char)(0x80 | (cp & 0x3F));
  }
}

static int hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* Python string-literal escapes, as Jinja decodes them. Returns NULL with a
 * message in *why on a bad escape. */
static char *unescape(jarena *a, const char *s, size_t n, size_t *out_n, const char **why) {
  char *o = ja_alloc(a, n + 1);
  if (!o) {
    *why = "out of memory";
    return NULL;
  }
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] != '\\' || i + 1 == n) {
      o[k++] = s[i];
      continue;
    }
    char c = s[++i];
    switch (c) {
    case '\n':
      break;
    case '\\':
      o[k++] = '\\';
      break;
    case '\'':
      o[k++] = '\'';
      break;
    case '"':
      o[k++] = '"';
      break;
    case 'a':
      o[k++] = '\a';
      break;
    case 'b':
      o[k++] = '\b';
      break;
    case 'f':
      o[k++] = '\f';
      break;
    case 'n':
      o[k++] = '\n';
      break;
    case 'r':
      o[k++] = '\r';
      break;
    case 't':
      o[k++] = '\t';
      break;
    case 'v':
      o[k++] = '\v';
      break;
    case 'x':
    case 'u':
    case 'U': {
      int digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
      uint32_t cp = 0;
      for (int d = 0; d < digits; d++) {
        int h = i + 1 + (size_t)d < n ? hexval(s[i + 1 + d]) : -1;
        if (h < 0) {
          *why = "truncated \\x, \\u or \\U escape in a string literal";
          return NULL;
        }
        cp = cp * 16 + (uint32_t)h;
      }
      if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        *why = "a string escape outside Unicode scalar values";
        return NULL;
      }
      i += (size_t)digits;
      put_utf8(o, &k, cp);
      break;
    }
    case 'N':
      *why = "unsupported construct '\\N{...} escape'";
      return NULL;
    default:
      if (c >= '0' && c <= '7') {
        uint32_t cp = (uint32_t)(c - '0');
        for (int d = 0; d < 2 && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '7'; d++)
          cp = cp * 8 + (uint32_t)(s[++i] - '0');
        put_utf8(o, &k, cp);
      } else {
        o[k++] = '\\';
        o[k++] = c;
      }
    }
  }
  o[k] = '\0';
  *out_n = k;
  return o;
}

static const char *const OPS2[] = {"//", "**", "==", "!=", ">=", "<="};
static const char OPS1[] = "+-*/%~<>=.,:|()[]{}";

/* Lexes the inside of a tag from *pos; stops at its end marker (at balance
 * 0). Sets *minus to 1 when the end is "-}}" / "-%}", -1 for "+%}". */
static fsdpc_status lex_tag(lexer *L, size_t *pos, size_t open, char end0, int *minus) {
  const char *s = L->s;
  size_t n = L->n, i = *pos;
  int balance = 0;
  for (;;) {
    while (i < n && is_ws(s[i]))
      i++;
    if (i >= n)
      return lfail(L, open,
                   end0 == '}' ? "unclosed '{{' (missing '}}')" : "unclosed '{%' (missing '%}')");
    if (balance == 0) {
      if (s[i] == '-' && i + 2 < n && s[i + 1] == end0 && s[i + 2] == '}') {
        *minus = 1;
        *pos = i + 3;
        return FSDPC_OK;
      }
      if (s[i] == '+' && end0 == '%' && i + 2 < n && s[i + 1] == '%' && s[i + 2] == '}') {
        *minus = -1; /* "+%}": no trim_blocks after this tag */
        *pos = i + 3;
        return FSDPC_OK;
      }
      if (s[i] == end0 && i + 1 < n && s[i + 1] == '}') {
        *minus = 0;
        *pos = i + 2;
        return FSDPC_OK;
      }
    }
    char c = s[i];
    if (is_name0(c)) {
      size_t b = i;
      while (i < n && (is_name0(s[i]) || is_digit(s[i])))
        i++;
      jtok *k = push(L, TK_NAME, b);
      if (!k)
        return fsdpc__fail(L->err, FSDPC_SYSTEM_ERROR, "out of memory");
      k->str = s + b;
      k->len = i - b;
    } else if (is_digit(c)) {
      size_t b = i;
      int is_float = 0;
      while (i < n && (is_digit(s[i]) || (s[i] == '_' && i + 1 < n && is_digit(s[i + 1]))))
        i++;
      if (i + 1 < n && s[i] == '.' && is_digit(s[i + 1])) {
        is_float = 1;
        i++;
        while (i < n && (is_digit(s[i]) || (s[i] == '_' && i + 1 < n && is_digit(s[i + 1]))))
          i++;
      }
      if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1;
        if (j < n && (s[j] == '+' || s[j] == '-'))
          j++;
        if (j < n && is_digit(s[j])) {
          is_float = 1;
          i = j;
          while (i < n && is_digit(s[i]))
            i++;
        }
      }
      char *num = ja_alloc(&L->t->arena, i - b + 1);
      if (!num)
        return fsdpc__fail(L->err, FSDPC_SYSTEM_ERROR, "out of memory");
      size_t m = 0;
      for (size_t q = b; q < i; q++)
        if (s[q] != '_')
          num[m++] = s[q];
      num[m] = '\0';
      jtok *k = push(L, is_float ? TK_FLOAT : TK_INT, b);
      if (!k)
        return fsdpc__fail(L->err, FSDPC_SYSTEM_ERROR, "out of memory");
      if (is_float) {
        k->fval = strtod(num, NULL);
      } else {
        errno = 0;
        unsigned long long v = strtoull(num, NULL, 10);
        if (errno == ERANGE || v > (unsigned long long)INT64_MAX) {
          /* beyond 64 bits: the parser makes a big int of the digits */
          size_t z = 0;
          while (z + 1 < m && num[z] == '0')
            z++;
          if (m - z > 4300)
            return lfail(L, b, "integer literal beyond Python's limit of 4300 digits");
          k->str = num + z;
          k->len = m - z;
        } else {
          k->ival = (int64_t)v;
        }
      }
    } else if (c == '\'' || c == '"') {
      size_t b = i++;
      while (i < n && s[i] != c) {
        if (s[i] == '\\' && i + 1 < n)
          i++;
        i++;
      }
      if (i >= n)
        return lfail(L, b, "unterminated string literal");
      const char *why = NULL;
      size_t un;
      char *v = unescape(&L->t->arena, s + b + 1, i - b - 1, &un, &why);
      if (!v)
        return lfail(L, b, why);
      i++;
      jtok *k = push(L, TK_STRING, b);
      if (!k)
        return fsdpc__fail(L->err, FSDPC_SYSTEM_ERROR, "out of memory");
      k->str = v;
      k->len = un;
    } else {
      size_t len = 0;
      for (size_t o = 0; o < sizeof OPS2 / sizeof OPS2[0]; o++)
        if (i + 1 < n && s[i] == OPS2[o][0] && s[i + 1] == OPS2[o][1])
          len = 2;
      if (!len && strchr(OPS1, c) && c != '\0')
        len = 1;
      if (!len) {
        char what[64];
        snprintf(what, sizeof what, "unexpected character '%c' in a tag",
                 (c >= 32 && c < 127) ? c : '?');
        return lfail(L, i, what);
      }
      if (len == 1 && (c == '(' || c == '[' || c == '{'))
        balance++;
      if (len == 1 && (c == ')' || c == ']' || c == '}')) {
        if (balance == 0)
          return lfail(L, i, "unbalanced bracket in a tag");
        balance--;
      }
      jtok *k = push(L, TK_OP, i);
      if (!k)
        return fsdpc__fail(L->err, FSDPC_SYSTEM_ERROR, "out of memory");
      k->str = s + i;
      k->len = len;
      i += len;
    }
  }
}

/* Python's str.splitlines() + "\n".join(): every line end becomes "\n" and
 * one final line end disappears. */
static char *normalise(const char *src, size_t len, size_t *out_len) {
  char *o = malloc(len + 1);
  if (!o)
    return NULL;
  size_t k = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)src[i];
    size_t skip = 0;
    if (c == '\r')
      skip = (i + 1 < len && src[i + 1] == '\n') ? 1 : 0;
    else if (c == '\n' || c == '\v' || c == '\f' || c == 0x1c || c == 0x1d || c == 0x1e)
      skip = 0;
    else if (c == 0xC2 && i + 1 < len && (unsigned char)src[i + 1] == 0x85)
      skip = 1;
    else if (c == 0xE2 && i + 2 < len && (unsigned char)src[i + 1] == 0x80 &&
             ((unsigned char)src[i + 2] == 0xA8 || (unsigned char)src[i + 2] == 0xA9))
      skip = 2;
    else {
      o[k++] = (char)c;
      continue;
    }
    o[k++] = '\n';
    i += skip;
  }
  if (k > 0 && o[k - 1] == '\n')
    k--;
  o[k] = '\0';
  *out_len = k;
  return o;
}

fsdpc_status fsdpc__jinja_lex(fsdpc_jinja *t, jtok **toks, size_t *ntoks, fsdpc_err *err) {
  lexer L = {.t = t, .err = err, .line = 1};
  /* The source is normalised by the caller (t->src). */
  L.s = t->src;
  L.n = t->src_len;
  const char *s = L.s;
  size_t n = L.n, pos = 0;
  int lead = 0; /* 0: keep, 1: drop one newline (trim_blocks), 2: drop all whitespace */
  fsdpc_status st;
  for (;;) {
    size_t tag = pos;
    while (tag + 1 < n &&
           !(s[tag] == '{' && (s[tag + 1] == '{' || s[tag + 1] == '%' || s[tag + 1] == '#')))
      tag++;
    if (tag + 1 >= n)
      tag = n;
    size_t tb = pos, te = tag;
    if (lead == 2)
      while (tb < te && is_ws(s[tb]))
        tb++;
    else if (lead == 1 && tb < te && s[tb] == '\n')
      tb++;
    if (tag < n) {
      char kind = s[tag + 1];
      char mod = tag + 2 < n ? s[tag + 2] : '\0';
      if (mod == '-') {
        while (te > tb && is_ws(s[te - 1]))
          te--;
      } else if (kind != '{' && mod != '+') {
        size_t q = te;
        while (q > tb && (s[q - 1] == ' ' || s[q - 1] == '\t'))
          q--;
        if (q == 0 || s[q - 1] == '\n')
          te = q;
      }
    }
    if (te > tb) {
      jtok *k = push(&L, TK_TEXT, tb);
      if (!k)
        goto oom;
      k->str = s + tb;
      k->len = te - tb;
    }
    if (tag >= n)
      break;
    char kind = s[tag + 1];
    size_t p = tag + 2;
    if (p < n && (s[p] == '-' || s[p] == '+'))
      p++;
    if (kind == '#') {
      size_t q = p;
      while (q + 1 < n && !(s[q] == '#' && s[q + 1] == '}'))
        q++;
      if (q + 1 >= n) {
        st = lfail(&L, tag, "unclosed comment '{#' (missing '#}')");
        goto fail;
      }
      lead = (q > p && s[q - 1] == '-') ? 2 : 1;
      pos = q + 2;
      continue;
    }
    jtok *b = push(&L, kind == '{' ? TK_VAR_BEGIN : TK_BLOCK_BEGIN, tag);
    if (!b)
      goto oom;
    int minus = 0;
    st = lex_tag(&L, &p, tag, kind == '{' ? '}' : '%', &minus);
    if (st != FSDPC_OK)
      goto fail;
    jtok *e = push(&L, kind == '{' ? TK_VAR_END : TK_BLOCK_END, p - 2);
    if (!e)
      goto oom;
    lead = minus > 0 ? 2 : (kind == '%' && minus == 0 ? 1 : 0);
    pos = p;
  }
  if (!push(&L, TK_EOF, n))
    goto oom;
  *toks = L.toks;
  *ntoks = L.ntok;
  return FSDPC_OK;
oom:
  st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory while lexing", t->origin);
fail:
  free(L.toks);
  return st;
}

char *fsdpc__jinja_normalise(const char *src, size_t len, size_t *out_len) {
  return normalise(src, len, out_len);
}
