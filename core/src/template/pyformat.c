/* Python's string formatting as templates use it: printf-style
 * "fmt % args" (and Jinja's format filter, which is that) and str.format
 * with Python's format-spec mini-language for str, int and float. What
 * falls outside (nested replacement fields in specs, the 'n' type, '='
 * alignment of strings) is refused by name. Markup formats escape their
 * arguments, as markupsafe does. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/filters.h"

typedef struct spec {
  char fill[5]; /* one UTF-8 code point */
  char align;   /* < > ^ = or 0 */
  char sign;    /* + - space or 0 */
  int alt, zero, comma;
  int64_t width, prec; /* -1: none */
  char type;           /* 0: default */
} spec;

static int put(jctx *x, const jnode *at, jbuf *b, const char *s, size_t n) {
  return jb_put(b, s, n) ? jx_oom(x, at) : 0;
}

/* body padded to the spec's width (code points); num: '=' puts the
 * padding after the sign */
static int pad(jctx *x, const jnode *at, const spec *sp, const char *body, size_t n, int num,
               jbuf *b) {
  int64_t len = (int64_t)ju_count(body, n);
  if (sp->width <= len)
    return put(x, at, b, body, n);
  int64_t w = sp->width - len;
  if (w > (int64_t)1 << 24)
    return jx_oom(x, at);
  char align = sp->align ? sp->align : num ? '>' : '<';
  const char *fill = sp->fill[0] ? sp->fill : " ";
  size_t fl = strlen(fill);
  int64_t left = align == '>' || align == '=' ? w : align == '^' ? w / 2 : 0;
  size_t sign = 0;
  if (align == '=' && n && (body[0] == '-' || body[0] == '+' || body[0] == ' '))
    sign = 1;
  if (sign && put(x, at, b, body, 1))
    return -1;
  for (int64_t i = 0; i < left; i++)
    if (put(x, at, b, fill, fl))
      return -1;
  if (put(x, at, b, body + sign, n - sign))
    return -1;
  for (int64_t i = left; i < w; i++)
    if (put(x, at, b, fill, fl))
      return -1;
  return jx_work(x, at, (size_t)w);
}

/* Python's ',' grouping of the integer digits of s[0, n) */
static int group(jctx *x, const jnode *at, const char *s, size_t n, jbuf *b) {
  size_t dig = 0;
  while (dig < n && s[dig] >= '0' && s[dig] <= '9')
    dig++;
  for (size_t i = 0; i < dig; i++) {
    if (i && (dig - i) % 3 == 0 && put(x, at, b, ",", 1))
      return -1;
    if (put(x, at, b, s + i, 1))
      return -1;
  }
  return put(x, at, b, s + dig, n - dig);
}

/* A formatted number body[0, k) (its sign first) grouped with ',' when the
 * spec asks, then padded. */
static int pad_number(jctx *x, const jnode *at, const spec *sp, const char *body, size_t k,
                      jbuf *b) {
  if (!sp->comma)
    return pad(x, at, sp, body, k, 1, b);
  jbuf g = jx_buf(x);
  size_t s0 = (body[0] == '-' || body[0] == '+' || body[0] == ' ');
  int rc = put(x, at, &g, body, s0) || group(x, at, body + s0, k - s0, &g) ||
           pad(x, at, sp, g.p, g.n, 1, b);
  jb_free(&g);
  return rc;
}

static int fmt_float(jctx *x, const jnode *at, const spec *sp, double d, jbuf *b) {
  char type = sp->type ? sp->type : 0;
  char buf[512], body[600];
  int64_t prec = sp->prec;
  if (prec > 300)
    return jx_fail(x, at, "unsupported construct 'format precision beyond 300'");
  int neg = signbit(d) && !isnan(d);
  double a = fabs(d);
  if (!type && prec < 0) {
    jv_fmt_float(a, buf, sizeof buf); /* repr */
  } else if (isinf(a) || isnan(a)) {
    snprintf(buf, sizeof buf, "%s", isnan(a) ? "nan" : "inf");
    if (type == 'F' || type == 'E' || type == 'G')
      for (char *c = buf; *c; c++)
        *c = (char)(*c - 32);
  } else {
    char t = type ? type : 'g';
    if (t == '%') {
      snprintf(buf, sizeof buf, sp->alt ? "%#.*f%%" : "%.*f%%", (int)(prec < 0 ? 6 : prec),
               a * 100);
    } else if (!type) {
      /* no type with a precision: 'g' that keeps at least one digit after the point */
      snprintf(buf, sizeof buf, "%.*g", (int)(prec == 0 ? 1 : prec), a);
      if (!strpbrk(buf, ".e"))
        strcat(buf, ".0");
    } else {
      char f[16];
      snprintf(f, sizeof f, sp->alt ? "%%#.*%c" : "%%.*%c", t);
      snprintf(buf, sizeof buf, f, (int)(prec < 0 ? 6 : prec), a);
    }
  }
  size_t k = 0;
  if (neg)
    body[k++] = '-';
  else if (sp->sign == '+' || sp->sign == ' ')
    body[k++] = sp->sign;
  k += (size_t)snprintf(body + k, sizeof body - k, "%s", buf);
  return pad_number(x, at, sp, body, k, b);
}

static int fmt_int(jctx *x, const jnode *at, const spec *sp, const jv *v, jbuf *b) {
  char type = sp->type ? sp->type : 'd';
  if (strchr("eEfFgG%", type)) {
    double d = v->kind == JV_BIGINT ? jn_bigint_to_double(v)
               : v->kind == JV_INT  ? (double)v->u.i
                                    : v->u.b;
    return fmt_float(x, at, sp, d, b);
  }
  if (sp->prec >= 0)
    return jx_fail(x, at, "Precision not allowed in integer format specifier");
  char body[128];
  size_t k = 0;
  if (v->kind == JV_BIGINT) {
    if (type != 'd')
      return jx_fail(x, at, "unsupported construct 'format of a big int as %c'", type);
    int neg = v->u.s.p[0] == '-';
    jbuf tmp = jx_buf(x);
    int rc = 0;
    if (neg || sp->sign == '+' || sp->sign == ' ')
      rc = put(x, at, &tmp, neg ? "-" : &sp->sign, 1);
    rc = rc || (sp->comma ? group(x, at, v->u.s.p + neg, v->u.s.n - (size_t)neg, &tmp)
                          : put(x, at, &tmp, v->u.s.p + neg, v->u.s.n - (size_t)neg));
    rc = rc || pad(x, at, sp, tmp.p, tmp.n, 1, b);
    jb_free(&tmp);
    return rc;
  }
  int64_t i = v->kind == JV_INT ? v->u.i : v->u.b;
  uint64_t u = i < 0 ? 0 - (uint64_t)i : (uint64_t)i;
  if (i < 0)
    body[k++] = '-';
  else if (sp->sign == '+' || sp->sign == ' ')
    body[k++] = sp->sign;
  if (type == 'c') {
    if (i < 0 || i > 0x10FFFF)
      return jx_fail(x, at, "%%c arg not in range(0x110000)");
    k = 0;
    uint32_t c = (uint32_t)i;
    if (c < 0x80) {
      body[k++] = (char)c;
    } else if (c < 0x800) {
      body[k++] = (char)(0xC0 | (c >> 6));
      body[k++] = (char)(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      body[k++] = (char)(0xE0 | (c >> 12));
      body[k++] = (char)(0x80 | ((c >> 6) & 0x3F));
      body[k++] = (char)(0x80 | (c & 0x3F));
    } else {
      body[k++] = (char)(0xF0 | (c >> 18));
      body[k++] = (char)(0x80 | ((c >> 12) & 0x3F));
      body[k++] = (char)(0x80 | ((c >> 6) & 0x3F));
      body[k++] = (char)(0x80 | (c & 0x3F));
    }
    return pad(x, at, sp, body, k, 0, b);
  }
  if (sp->alt && strchr("xXob", type)) {
    body[k++] = '0';
    body[k++] = type == 'X' ? 'X' : type;
  }
  if (type == 'd' || type == 'i' || type == 'u') {
    k += (size_t)snprintf(body + k, sizeof body - k, "%llu", (unsigned long long)u);
  } else if (type == 'x' || type == 'X' || type == 'o') {
    char f[8] = {'%', 'l', 'l', type == 'o' ? 'o' : type, 0};
    k += (size_t)snprintf(body + k, sizeof body - k, f, (unsigned long long)u);
  } else if (type == 'b') {
    char bits[65];
    int nb = 0;
    do {
      bits[nb++] = (char)('0' + (u & 1));
      u >>= 1;
    } while (u);
    while (nb)
      body[k++] = bits[--nb];
  } else {
    return jx_fail(x, at, "Unknown format code '%c' for object of type 'int'", type);
  }
  return pad_number(x, at, sp, body, k, b);
}

/* format(v, spec) of str, int, bool, float and big int values; anything
 * else only with an empty spec (str(v)). */
static int format_value(jctx *x, const jnode *at, const jv *v, const spec *sp, jbuf *b) {
  if (sp->zero && !sp->align) {
    spec z = *sp;
    z.fill[0] = '0';
    z.fill[1] = 0;
    z.align = '=';
    if (v->kind != JV_STR)
      return format_value(x, at, v, &z, b);
  }
  switch (v->kind) {
  case JV_INT:
  case JV_BIGINT:
    return fmt_int(x, at, sp, v, b);
  case JV_BOOL:
    if (!sp->type && sp->width < 0)
      return put(x, at, b, v->u.b ? "True" : "False", v->u.b ? 4 : 5);
    if (!sp->type) {
      spec s2 = *sp;
      const char *t = v->u.b ? "True" : "False";
      return pad(x, at, &s2, t, strlen(t), 0, b);
    }
    return fmt_int(x, at, sp, v, b);
  case JV_FLOAT:
    if (sp->type && !strchr("eEfFgG%", sp->type))
      return jx_fail(x, at, "Unknown format code '%c' for object of type 'float'", sp->type);
    return fmt_float(x, at, sp, v->u.d, b);
  case JV_STR: {
    if (sp->type && sp->type != 's')
      return jx_fail(x, at, "Unknown format code '%c' for object of type 'str'", sp->type);
    if (sp->align == '=')
      return jx_fail(x, at, "'=' alignment not allowed in string format specifier");
    size_t n = v->u.s.n;
    if (sp->prec >= 0)
      n = ju_offset(v->u.s.p, v->u.s.n, (size_t)sp->prec);
    return pad(x, at, sp, v->u.s.p, n, 0, b);
  }
  default:
    if (sp->type || sp->width >= 0 || sp->prec >= 0 || sp->align || sp->sign)
      return jx_fail(x, at, "unsupported format string passed to %s.__format__", jv_type_name(v));
    return jv_to_str(x, at, v, b);
  }
}

/* Python's format-spec mini-language: [[fill]align][sign][#][0][width][,][.prec][type] */
static int parse_spec(jctx *x, const jnode *at, const char *s, size_t n, spec *sp) {
  memset(sp, 0, sizeof *sp);
  sp->width = sp->prec = -1;
  size_t i = 0;
  if (n) {
    size_t l = ju_offset(s, n, 1);
    if (l < n && strchr("<>^=", s[l])) {
      memcpy(sp->fill, s, l);
      sp->align = s[l];
      i = l + 1;
    } else if (strchr("<>^=", s[0])) {
      sp->align = s[0];
      i = 1;
    }
  }
  if (i < n && strchr("+- ", s[i]))
    sp->sign = s[i++];
  if (i < n && s[i] == '#')
    sp->alt = 1, i++;
  if (i < n && s[i] == '0')
    sp->zero = 1, i++;
  while (i < n && s[i] >= '0' && s[i] <= '9') {
    sp->width = (sp->width < 0 ? 0 : sp->width) * 10 + (s[i++] - '0');
    if (sp->width > 1 << 24)
      return jx_oom(x, at);
  }
  if (i < n && (s[i] == ',' || s[i] == '_')) {
    if (s[i] == '_')
      return jx_fail(x, at, "unsupported construct \"format spec with '_'\"");
    sp->comma = 1, i++;
  }
  if (i < n && s[i] == '.') {
    i++;
    sp->prec = 0;
    if (i >= n || s[i] < '0' || s[i] > '9')
      return jx_fail(x, at, "Format specifier missing precision");
    while (i < n && s[i] >= '0' && s[i] <= '9') {
      sp->prec = sp->prec * 10 + (s[i++] - '0');
      if (sp->prec > 1 << 20)
        return jx_fail(x, at, "precision too big");
    }
  }
  if (i < n)
    sp->type = s[i++];
  if (i < n || (sp->type && !strchr("sdbcoxXeEfFgG%", sp->type)))
    return jx_fail(x, at, "unsupported construct 'format spec %.*s'", (int)(n > 40 ? 40 : n), s);
  return 0;
}

/* ---- printf-style ---- */
int jf_percent_format(jctx *x, const jnode *at, const jv *fmt, const jv *args, jv *out) {
  const char *s = fmt->u.s.p;
  size_t n = fmt->u.s.n, next = 0;
  int tuple = args->kind == JV_LIST && args->u.l->type == JL_TUPLE;
  int mapping = jv_is_mapping(args);
  size_t nargs = tuple ? args->u.l->n : 1;
  int used_mapping = 0;
  jbuf b = jx_buf(x);
  int rc = put(x, at, &b, "", 0);
  for (size_t i = 0; i < n && !rc;) {
    const char *pc = memchr(s + i, '%', n - i);
    size_t lit = pc ? (size_t)(pc - s) - i : n - i;
    rc = put(x, at, &b, s + i, lit);
    i += lit;
    if (!pc || rc)
      break;
    i++;
    if (i >= n) {
      rc = jx_fail(x, at, "incomplete format");
      break;
    }
    const jv *val = NULL;
    jv looked;
    if (s[i] == '(') {
      const char *close = memchr(s + i, ')', n - i);
      if (!close || !mapping) {
        rc = jx_fail(x, at, close ? "format requires a mapping" : "incomplete format key");
        break;
      }
      size_t kl = (size_t)(close - s) - i - 1;
      if (!jv_map_get(args, s + i + 1, kl, &looked)) {
        rc = jx_fail(x, at, "KeyError: '%.*s'", (int)(kl > 60 ? 60 : kl), s + i + 1);
        break;
      }
      val = &looked;
      used_mapping = 1;
      i = (size_t)(close - s) + 1;
    }
    spec sp;
    memset(&sp, 0, sizeof sp);
    sp.width = sp.prec = -1;
    for (; i < n && strchr("-+ #0", s[i]); i++) {
      if (s[i] == '-')
        sp.align = '<';
      else if (s[i] == '+' || s[i] == ' ')
        sp.sign = sp.sign == '+' ? '+' : s[i];
      else if (s[i] == '#')
        sp.alt = 1;
      else
        sp.zero = 1;
    }
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
      sp.width = (sp.width < 0 ? 0 : sp.width) * 10 + (s[i] - '0');
    if (i < n && s[i] == '*') {
      rc = jx_fail(x, at, "unsupported construct \"'*' width in %% formatting\"");
      break;
    }
    if (i < n && s[i] == '.') {
      sp.prec = 0;
      for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++)
        sp.prec = sp.prec * 10 + (s[i] - '0');
    }
    while (i < n && strchr("hlL", s[i]))
      i++;
    if (i >= n) {
      rc = jx_fail(x, at, "incomplete format");
      break;
    }
    char t = s[i++];
    if (t == '%') {
      rc = put(x, at, &b, "%", 1);
      continue;
    }
    if (!val) {
      if (next >= nargs || (mapping && !tuple && used_mapping)) {
        rc = jx_fail(x, at, "not enough arguments for format string");
        break;
      }
      val = tuple ? &args->u.l->items[next] : args;
      next++;
    }
    if (sp.zero && sp.align != '<')
      sp.align = '=', sp.fill[0] = '0';
    else if (!sp.align)
      sp.align = '>';
    if (t == 's' || t == 'r' || t == 'a') {
      jv str;
      jbuf tmp = jx_buf(x);
      if (t == 's' ? jv_stringify(x, at, val, &str)
                   : (jv_repr(x, at, val, &tmp) || jx_take_str(x, at, &tmp, 0, &str))) {
        jb_free(&tmp);
        rc = -1;
        break;
      }
      if (fmt->safe && jf_markup_operand(x, at, &str, &str)) {
        rc = -1;
        break;
      }
      spec ss = sp;
      ss.sign = 0, ss.zero = 0;
      if (ss.align == '=')
        ss.align = '>', ss.fill[0] = 0;
      size_t len = str.u.s.n;
      if (ss.prec >= 0)
        len = ju_offset(str.u.s.p, str.u.s.n, (size_t)ss.prec);
      rc = pad(x, at, &ss, str.u.s.p, len, 0, &b);
    } else if (strchr("diouxXeEfFgGc", t)) {
      jv num = *val;
      if (t == 'c' && val->kind == JV_STR) {
        if (ju_count(val->u.s.p, val->u.s.n) != 1) {
          rc = jx_fail(x, at, "%%c requires int or char");
          break;
        }
        rc = pad(x, at, &sp, val->u.s.p, val->u.s.n, 0, &b);
        continue;
      }
      if (!(num.kind == JV_INT || num.kind == JV_BOOL || num.kind == JV_FLOAT ||
            num.kind == JV_BIGINT)) {
        rc = jx_fail(x, at, "%%%c format: a real number is required, not %s", t, jv_type_name(val));
        break;
      }
      if (strchr("diouxXc", t) && num.kind == JV_FLOAT) {
        if (t != 'd' && t != 'i' && t != 'u') {
          rc = jx_fail(x, at, "%%%c format: an integer is required, not float", t);
          break;
        }
        if (jn_int_from_double(x, at, num.u.d, &num)) {
          rc = -1;
          break;
        }
      }
      sp.type = t == 'i' || t == 'u' ? 'd' : t;
      if (strchr("diouxXc", t))
        sp.prec = -1; /* %.3d pads with zeros in Python; rare: ignored */
      rc = format_value(x, at, &num, &sp, &b);
    } else {
      rc =
          jx_fail(x, at, "unsupported format character '%c' (0x%x)", t, (unsigned)(unsigned char)t);
    }
  }
  if (!rc && tuple && next < nargs)
    rc = jx_fail(x, at, "not all arguments converted during string formatting");
  if (!rc && !tuple && !mapping && next == 0)
    rc = jx_fail(x, at, "not all arguments converted during string formatting");
  if (rc) {
    jb_free(&b);
    return -1;
  }
  if (jx_take_str(x, at, &b, 0, out))
    return -1;
  out->safe = fmt->safe;
  return 0;
}

/* ---- str.format ---- */
int jf_str_format(jctx *x, const jnode *at, const jv *fmt, const jv *args, size_t nargs,
                  const char **kwn, const jv *kwv, size_t nkw, jv *out) {
  const char *s = fmt->u.s.p;
  size_t n = fmt->u.s.n, auto_i = 0;
  int manual = 0, automatic = 0;
  jbuf b = jx_buf(x);
  int rc = put(x, at, &b, "", 0);
  for (size_t i = 0; i < n && !rc;) {
    char c = s[i];
    if (c == '}') {
      if (i + 1 < n && s[i + 1] == '}') {
        rc = put(x, at, &b, "}", 1);
        i += 2;
        continue;
      }
      rc = jx_fail(x, at, "Single '}' encountered in format string");
      break;
    }
    if (c != '{') {
      size_t j = i;
      while (j < n && s[j] != '{' && s[j] != '}')
        j++;
      rc = put(x, at, &b, s + i, j - i);
      i = j;
      continue;
    }
    if (i + 1 < n && s[i + 1] == '{') {
      rc = put(x, at, &b, "{", 1);
      i += 2;
      continue;
    }
    const char *close = memchr(s + i, '}', n - i);
    if (!close) {
      rc = jx_fail(x, at, "Single '{' encountered in format string");
      break;
    }
    size_t fb = i + 1, fe = (size_t)(close - s);
    if (memchr(s + fb, '{', fe - fb)) {
      rc = jx_fail(x, at, "unsupported construct 'nested fields in str.format'");
      break;
    }
    const char *colon = memchr(s + fb, ':', fe - fb), *bang = memchr(s + fb, '!', fe - fb);
    if (bang && colon && bang > colon)
      bang = NULL;
    size_t ne = bang ? (size_t)(bang - s) : colon ? (size_t)(colon - s) : fe;
    /* field name: an index or a name, then .attr / [key] parts */
    size_t k = fb;
    while (k < ne && s[k] != '.' && s[k] != '[')
      k++;
    jv val;
    if (k == fb) {
      if (manual) {
        rc = jx_fail(x, at,
                     "cannot switch from manual field specification to automatic field numbering");
        break;
      }
      automatic = 1;
      if (auto_i >= nargs) {
        rc = jx_fail(x, at, "Replacement index %zu out of range for positional args tuple", auto_i);
        break;
      }
      val = args[auto_i++];
    } else if (s[fb] >= '0' && s[fb] <= '9') {
      if (automatic) {
        rc = jx_fail(x, at,
                     "cannot switch from automatic field numbering to manual field specification");
        break;
      }
      manual = 1;
      size_t idx = 0;
      for (size_t q = fb; q < k; q++)
        idx = idx * 10 + (size_t)(s[q] - '0');
      if (idx >= nargs) {
        rc = jx_fail(x, at, "Replacement index %zu out of range for positional args tuple", idx);
        break;
      }
      val = args[idx];
    } else {
      size_t q = 0;
      while (q < nkw && !(strlen(kwn[q]) == k - fb && !memcmp(kwn[q], s + fb, k - fb)))
        q++;
      if (q == nkw) {
        rc = jx_fail(x, at, "KeyError: '%.*s'", (int)(k - fb > 60 ? 60 : k - fb), s + fb);
        break;
      }
      val = kwv[q];
    }
    while (!rc && k < ne) {
      jv next;
      if (s[k] == '.') {
        size_t e = k + 1;
        while (e < ne && s[e] != '.' && s[e] != '[')
          e++;
        rc = jx_get_attr(x, at, &val, s + k + 1, e - k - 1, &next);
        k = e;
      } else {
        const char *rb = memchr(s + k, ']', ne - k);
        if (!rb) {
          rc = jx_fail(x, at, "Missing ']' in format string");
          break;
        }
        jv key = jv_str(s + k + 1, (size_t)(rb - s) - k - 1);
        int dig = key.u.s.n > 0;
        for (size_t q = 0; q < key.u.s.n; q++)
          dig &= key.u.s.p[q] >= '0' && key.u.s.p[q] <= '9';
        if (dig && key.u.s.n < 18) {
          int64_t v = 0;
          for (size_t q = 0; q < key.u.s.n; q++)
            v = v * 10 + (key.u.s.p[q] - '0');
          key = jv_int(v);
        }
        rc = jx_get_item(x, at, &val, &key, &next);
        k = (size_t)(rb - s) + 1;
      }
      val = next;
    }
    if (rc)
      break;
    if (bang) {
      char conv = (size_t)(bang - s) + 1 < fe ? bang[1] : 0;
      jbuf tmp = jx_buf(x);
      if (conv == 's')
        rc = jv_stringify(x, at, &val, &val);
      else if (conv == 'r' || conv == 'a')
        rc = jv_repr(x, at, &val, &tmp) || jx_take_str(x, at, &tmp, 0, &val);
      else
        rc = jx_fail(x, at, "Unknown conversion specifier %c", conv ? conv : '?');
      jb_free(&tmp);
      if (rc)
        break;
    }
    spec sp;
    rc = parse_spec(x, at, colon ? colon + 1 : "", colon ? fe - (size_t)(colon - s) - 1 : 0, &sp);
    if (!rc && fmt->safe && val.kind == JV_STR)
      rc = jf_markup_operand(x, at, &val, &val);
    if (!rc)
      rc = format_value(x, at, &val, &sp, &b);
    i = fe + 1;
  }
  if (rc) {
    jb_free(&b);
    return -1;
  }
  if (jx_take_str(x, at, &b, 0, out))
    return -1;
  out->safe = fmt->safe;
  return jx_work(x, at, n);
}
