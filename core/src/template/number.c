/* Python's numbers where C's differ: integers beyond 64 bits kept as their
 * decimal text (printed, compared and serialised exactly; arithmetic on
 * them is refused), int() and float() of strings with Python's syntax and
 * limits, and float floor division, modulo and powers with Python's
 * results and errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unictype.h>

#include "template/internal.h"

/* Python 3.11+ refuses int <-> str conversions of more digits than this
 * (sys.get_int_max_str_digits()). */
#define PY_INT_MAX_STR_DIGITS 4300

int jn_int_from_digits(jctx *x, const jnode *at, const char *s, size_t n, int neg, jv *out) {
  while (n > 1 && s[0] == '0')
    s++, n--;
  if (n > PY_INT_MAX_STR_DIGITS)
    return jx_fail(x, at, "integer string conversion exceeds Python's limit of %d digits",
                   PY_INT_MAX_STR_DIGITS);
  if (n == 1 && s[0] == '0')
    neg = 0;
  if (n < 19 ||
      (n == 19 && memcmp(s, neg ? "9223372036854775808" : "9223372036854775807", 19) <= 0)) {
    uint64_t u = 0;
    for (size_t i = 0; i < n; i++)
      u = u * 10 + (uint64_t)(s[i] - '0');
    *out = jv_int(neg ? (int64_t)(0 - u) : (int64_t)u);
    return 0;
  }
  char *p = ja_alloc(&x->arena, n + 2);
  if (!p)
    return jx_oom(x, at);
  size_t k = 0;
  if (neg)
    p[k++] = '-';
  memcpy(p + k, s, n);
  *out = (jv){.kind = JV_BIGINT};
  out->u.s.p = p;
  out->u.s.n = n + (size_t)neg;
  return 0;
}

/* sign and digits of an int or big int */
static int int_digits(const jv *v, char *tmp, const char **d, size_t *n) {
  if (v->kind == JV_BIGINT) {
    int neg = v->u.s.p[0] == '-';
    *d = v->u.s.p + neg;
    *n = v->u.s.n - (size_t)neg;
    return neg ? -1 : 1;
  }
  int64_t i = v->u.i;
  int len = snprintf(tmp, 24, "%lld", (long long)i);
  int neg = i < 0;
  *d = tmp + neg;
  *n = (size_t)len - (size_t)neg;
  return i < 0 ? -1 : i > 0 ? 1 : 0;
}

int jn_bigint_cmp(const jv *a, const jv *b) {
  char ta[24], tb[24];
  const char *da, *db;
  size_t na, nb;
  int sa = int_digits(a, ta, &da, &na), sb = int_digits(b, tb, &db, &nb);
  if (sa != sb)
    return sa < sb ? -1 : 1;
  int mag = na != nb ? (na < nb ? -1 : 1) : memcmp(da, db, na);
  mag = mag < 0 ? -1 : mag > 0 ? 1 : 0;
  return sa < 0 ? -mag : mag;
}

double jn_bigint_to_double(const jv *v) {
  char tmp[64];
  if (v->u.s.n < sizeof tmp) {
    memcpy(tmp, v->u.s.p, v->u.s.n);
    tmp[v->u.s.n] = '\0';
    return strtod(tmp, NULL);
  }
  return v->u.s.p[0] == '-' ? -HUGE_VAL : HUGE_VAL;
}

/* Python whitespace trimmed from both ends of s[0, n). */
static void py_trim(const char *s, size_t *b, size_t *e) {
  size_t l;
  while (*b < *e && ju_is_space(s + *b, *e - *b, &l))
    *b += l;
  while (*e > *b) {
    size_t p = *e - 1;
    while (p > *b && ((unsigned char)s[p] & 0xC0) == 0x80)
      p--;
    if (!ju_is_space(s + p, *e - p, &l) || p + l != *e)
      break;
    *e = p;
  }
}

int jn_parse_int(jctx *x, const jnode *at, const char *s, size_t n, jv *out) {
  size_t b = 0, e = n;
  py_trim(s, &b, &e);
  int neg = 0;
  if (b < e && (s[b] == '+' || s[b] == '-'))
    neg = s[b++] == '-';
  if (b >= e)
    return 1;
  /* digits (any Unicode decimal digit), single '_' between digits */
  char *dg = ja_alloc(&x->arena, e - b + 1);
  if (!dg)
    return jx_oom(x, at);
  size_t k = 0;
  int prev_digit = 0;
  for (size_t i = b; i < e;) {
    size_t l;
    uint32_t c = ju_decode(s, e, i, &l);
    if (c == '_') {
      if (!prev_digit || i + 1 >= e)
        return 1;
      prev_digit = 0;
    } else {
      int d = c < 0x80 ? (c >= '0' && c <= '9' ? (int)(c - '0') : -1) : uc_decimal_value(c);
      if (d < 0)
        return 1;
      dg[k++] = (char)('0' + d);
      prev_digit = 1;
    }
    i += l;
  }
  if (!prev_digit)
    return 1;
  size_t z = 0;
  while (z + 1 < k && dg[z] == '0')
    z++;
  if (k - z > PY_INT_MAX_STR_DIGITS)
    return 1; /* Python: ValueError, "Exceeds the limit (4300 digits)" */
  return jn_int_from_digits(x, at, dg, k, neg, out) ? -1 : 0;
}

static int ieq(const char *s, size_t n, const char *w) {
  if (strlen(w) != n)
    return 0;
  for (size_t i = 0; i < n; i++)
    if ((s[i] | 0x20) != w[i])
      return 0;
  return 1;
}

int jn_parse_float(const char *s, size_t n, double *out) {
  size_t b = 0, e = n;
  py_trim(s, &b, &e);
  int neg = 0;
  if (b < e && (s[b] == '+' || s[b] == '-'))
    neg = s[b++] == '-';
  if (ieq(s + b, e - b, "inf") || ieq(s + b, e - b, "infinity")) {
    *out = neg ? -HUGE_VAL : HUGE_VAL;
    return 0;
  }
  if (ieq(s + b, e - b, "nan")) {
    *out = neg ? -NAN : NAN;
    return 0;
  }
  /* digits [. digits] [e [sign] digits], '_' only between digits */
  char buf[512];
  size_t k = 0, nd = 0;
  int state = 0; /* 0 mantissa int part, 1 fraction, 2 exponent */
  int prev_digit = 0, exp_digits = 0;
  if (k < sizeof buf - 1 && neg)
    buf[k++] = '-';
  for (size_t i = b; i < e; i++) {
    char c = s[i];
    if (c >= '0' && c <= '9') {
      prev_digit = 1;
      if (state < 2)
        nd++;
      else
        exp_digits++;
    } else if (c == '_') {
      if (!prev_digit || i + 1 >= e || !(s[i + 1] >= '0' && s[i + 1] <= '9'))
        return 1;
      prev_digit = 0;
      continue;
    } else if (c == '.' && state == 0) {
      state = 1;
      prev_digit = 0;
    } else if ((c == 'e' || c == 'E') && state < 2 && nd) {
      state = 2;
      prev_digit = 0;
      if (i + 1 < e && (s[i + 1] == '+' || s[i + 1] == '-')) {
        if (k >= sizeof buf - 2)
          return 1;
        buf[k++] = c;
        c = s[++i];
      }
    } else {
      return 1;
    }
    if (k >= sizeof buf - 1)
      return 1; /* longer than any float needs: refuse rather than round twice */
    buf[k++] = c;
  }
  if (!nd || (state == 2 && !exp_digits))
    return 1;
  buf[k] = '\0';
  *out = strtod(buf, NULL);
  return 0;
}

int jn_int_from_double(jctx *x, const jnode *at, double d, jv *out) {
  if (isnan(d))
    return jx_fail(x, at, "cannot convert float NaN to integer");
  if (isinf(d))
    return jx_fail(x, at, "cannot convert float infinity to integer");
  d = trunc(d);
  if (fabs(d) < 9223372036854775808.0) {
    *out = jv_int((int64_t)d);
    return 0;
  }
  char buf[400];
  int k = snprintf(buf, sizeof buf, "%.0f", fabs(d)); /* exact for integral doubles */
  return jn_int_from_digits(x, at, buf, (size_t)k, d < 0, out);
}

/* CPython's float_floor_div / float_rem (Objects/floatobject.c). */
int jn_float_floordiv(double a, double b, double *out) {
  if (b == 0)
    return -1;
  double mod = fmod(a, b), div = (a - mod) / b;
  if (mod) {
    if ((b < 0) != (mod < 0))
      div -= 1.0;
  }
  double fl;
  if (div) {
    fl = floor(div);
    if (div - fl > 0.5)
      fl += 1.0;
  } else {
    fl = copysign(0.0, a / b);
  }
  *out = fl;
  return 0;
}

int jn_float_mod(double a, double b, double *out) {
  if (b == 0)
    return -1;
  double mod = fmod(a, b);
  if (mod) {
    if ((b < 0) != (mod < 0))
      mod += b;
  } else {
    mod = copysign(0.0, b);
  }
  *out = mod;
  return 0;
}

static double as_d(const jv *v) {
  return v->kind == JV_FLOAT ? v->u.d : v->kind == JV_INT ? (double)v->u.i : (double)v->u.b;
}

int jn_pow(jctx *x, const jnode *at, const jv *a, const jv *b, jv *out) {
  if (a->kind == JV_BIGINT || b->kind == JV_BIGINT)
    return jx_fail(x, at, "unsupported construct 'arithmetic on integers beyond 64 bits'");
  int fl = a->kind == JV_FLOAT || b->kind == JV_FLOAT;
  if (!fl) {
    int64_t base = a->kind == JV_INT ? a->u.i : a->u.b, e = b->kind == JV_INT ? b->u.i : b->u.b;
    if (e >= 0) {
      /* exact, by squaring; 0, 1 and -1 never overflow */
      if (base == 0 || base == 1) {
        *out = jv_int(e == 0 ? 1 : base);
        return 0;
      }
      if (base == -1) {
        *out = jv_int(e % 2 ? -1 : 1);
        return 0;
      }
      int64_t r = 1, p = base;
      for (;;) {
        if ((e & 1) && __builtin_mul_overflow(r, p, &r))
          return jx_fail(x, at, "unsupported construct 'integer beyond 64 bits'");
        e >>= 1;
        if (!e)
          break;
        if (__builtin_mul_overflow(p, p, &p))
          return jx_fail(x, at, "unsupported construct 'integer beyond 64 bits'");
      }
      *out = jv_int(r);
      return 0;
    }
    if (base == 0)
      return jx_fail(x, at, "0.0 cannot be raised to a negative power");
  }
  double p = as_d(a), q = as_d(b);
  if (p == 0 && q < 0)
    return jx_fail(x, at, "0.0 cannot be raised to a negative power");
  if (p < 0 && isfinite(q) && q != floor(q) && isfinite(p))
    return jx_fail(x, at,
                   "unsupported construct 'complex number' (a negative base to a "
                   "fractional power)");
  double r = pow(p, q);
  if (isinf(r) && isfinite(p) && isfinite(q))
    return jx_fail(x, at, "(34, 'Numerical result out of range')");
  *out = jv_float(r);
  return 0;
}
