#include "config/scalar.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool fsdpc__parse_bool(const char *s, bool *out) {
  static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"};
  static const char *const no[] = {"false", "False", "FALSE", "no", "No",
                                   "NO",    "off",   "Off",   "OFF"};
  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
    if (strcmp(s, yes[i]) == 0) {
      *out = true;
      return true;
    }
    if (strcmp(s, no[i]) == 0) {
      *out = false;
      return true;
    }
  }
  return false;
}

bool fsdpc__parse_float(const char *s, double *out) {
  if (s[0] == '\0' || strchr(" \t\n", s[0]))
    return false;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (*end != '\0' || errno == ERANGE || !isfinite(v))
    return false;
  /* strtod also reads hex floats and "infinity"; the isfinite check above
   * drops the latter, and hex is harmless. */
  *out = v;
  return true;
}

bool fsdpc__parse_int(const char *s, int64_t *out) {
  if (s[0] == '\0' || strchr(" \t\n", s[0]))
    return false;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (*end == '\0' && errno == 0) {
    *out = v;
    return true;
  }
  /* Accept 1e6 and 4096.0: integral values written as numbers. */
  double d;
  if (!fsdpc__parse_float(s, &d))
    return false;
  if (d != floor(d) || fabs(d) > 9007199254740992.0)
    return false;
  *out = (int64_t)d;
  return true;
}

void fsdpc__format_float(double v, char *buf, size_t cap) {
  if (v == floor(v) && fabs(v) < 1e15) { /* 100.0, not 1e+02 */
    snprintf(buf, cap, "%.1f", v);
    return;
  }
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, cap, "%.*g", prec, v);
    if (strtod(buf, NULL) == v)
      break;
  }
  /* YAML 1.1 readers (PyYAML) take 1e-05 for a string: write 1.0e-05. */
  char *e = strchr(buf, 'e');
  if (e && !strchr(buf, '.') && strlen(buf) + 3 <= cap) {
    memmove(e + 2, e, strlen(e) + 1);
    e[0] = '.';
    e[1] = '0';
  }
}

static void num(char *buf, size_t cap, double v) { fsdpc__format_float(v, buf, cap); }

bool fsdpc__check_range(double v, bool has_min, double min, bool min_excl, bool has_max, double max,
                        bool max_excl, char *why, size_t cap) {
  bool ok = true;
  if (has_min && (min_excl ? !(v > min) : !(v >= min)))
    ok = false;
  if (has_max && (max_excl ? !(v < max) : !(v <= max)))
    ok = false;
  if (ok)
    return true;
  char lo[32], hi[32];
  num(lo, sizeof lo, min);
  num(hi, sizeof hi, max);
  /* Integral bounds read better without ".0". */
  if (min == floor(min) && fabs(min) < 1e15)
    snprintf(lo, sizeof lo, "%.0f", min);
  if (max == floor(max) && fabs(max) < 1e15)
    snprintf(hi, sizeof hi, "%.0f", max);
  if (has_min && has_max)
    snprintf(why, cap, "must be in %c%s, %s%c", min_excl ? '(' : '[', lo, hi, max_excl ? ')' : ']');
  else if (has_min)
    snprintf(why, cap, "must be %s %s", min_excl ? ">" : ">=", lo);
  else
    snprintf(why, cap, "must be %s %s", max_excl ? "<" : "<=", hi);
  return false;
}

void fsdpc__format_where(char *buf, size_t cap, const char *file, int line, int col) {
  if (line > 0)
    snprintf(buf, cap, "%s:%d:%d", file, line, col);
  else
    snprintf(buf, cap, "%s", file);
}

void fsdpc__one_line(char *msg, size_t cap) {
  char out[2048];
  size_t o = 0;
  for (const unsigned char *p = (const unsigned char *)msg; *p && o + 5 < sizeof out; p++) {
    if (*p == '\n') {
      out[o++] = '\\';
      out[o++] = 'n';
    } else if (*p == '\t') {
      out[o++] = '\\';
      out[o++] = 't';
    } else if (*p < 0x20 || *p == 0x7f) {
      o += (size_t)snprintf(out + o, sizeof out - o, "\\x%02x", *p);
    } else {
      out[o++] = (char)*p;
    }
  }
  out[o] = '\0';
  snprintf(msg, cap, "%s", out);
}
