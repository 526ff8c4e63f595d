/* One JSON value parsed as Python's json.loads parses it (jsonl.h): cJSON
 * does the parsing; a scan before it refuses what cJSON would let through
 * and Python does not (invalid UTF-8, raw control characters, numbers such
 * as 01, +1, .5 or 1.), and the checks after it refuse text after the value
 * and resolve duplicate keys as a dict does (the last value, at the first
 * key's place). Numbers keep their literal text for the templates
 * (template/jinja.h). Every pass is linear in the text (duplicates: n log n
 * per object). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/jsonl.h"
#include "template/jinja.h"
#include "util/escape.h"

/* Length of the valid UTF-8 sequence at p (n bytes left) as Python's strict
 * decoder takes it (no overlong forms, surrogates or code points past
 * U+10FFFF), or 0. */
static size_t utf8_len(const unsigned char *p, size_t n) {
  unsigned c = p[0];
  size_t len = c < 0x80                ? 1
               : c >= 0xc2 && c < 0xe0 ? 2
               : c >= 0xe0 && c < 0xf0 ? 3
               : c >= 0xf0 && c < 0xf5 ? 4
                                       : 0;
  if (len == 0 || len > n)
    return 0;
  for (size_t i = 1; i < len; i++)
    if ((p[i] & 0xc0) != 0x80)
      return 0;
  if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0) || (c == 0xf0 && p[1] < 0x90) ||
      (c == 0xf4 && p[1] >= 0x90))
    return 0;
  return len;
}

/* Length of a JSON number at p (n bytes), or 0 when the characters there do
 * not form one: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static size_t number_len(const char *p, size_t n) {
  size_t i = 0;
  if (i < n && p[i] == '-')
    i++;
  if (i < n && p[i] == '0')
    i++;
  else if (i < n && p[i] >= '1' && p[i] <= '9')
    while (i < n && p[i] >= '0' && p[i] <= '9')
      i++;
  else
    return 0;
  if (i < n && p[i] == '.') {
    size_t d = ++i;
    while (i < n && p[i] >= '0' && p[i] <= '9')
      i++;
    if (i == d)
      return 0;
  }
  if (i < n && (p[i] == 'e' || p[i] == 'E')) {
    i++;
    if (i < n && (p[i] == '+' || p[i] == '-'))
      i++;
    size_t d = i;
    while (i < n && p[i] >= '0' && p[i] <= '9')
      i++;
    if (i == d)
      return 0;
  }
  /* what follows must end the number: a digit or letter would extend it */
  if (i < n && (p[i] == '.' || p[i] == '+' || p[i] == '-' || (p[i] >= '0' && p[i] <= '9') ||
                p[i] == 'e' || p[i] == 'E'))
    return 0;
  return i;
}

/* First byte of text that Python refuses and cJSON might not, with the
 * reason; len when there is none. */
static size_t prescan(const char *text, size_t len, const char **why) {
  const unsigned char *p = (const unsigned char *)text;
  int in_str = 0, esc = 0;
  for (size_t i = 0; i < len;) {
    unsigned char c = p[i];
    size_t k = utf8_len(p + i, len - i);
    if (!k) {
      *why = "invalid UTF-8 (the file must be UTF-8, as Python reads it)";
      return i;
    }
    if (in_str && c < 0x20) {
      *why = "a raw control character inside a string (write it as an escape such as \\n "
             "or \\u0001)";
      return i;
    }
    int string = fsdpc__json_string_byte((char)c, &in_str, &esc);
    if (!string && c < 0x20 && c != ' ' && c != '\t' && c != '\n' && c != '\r') {
      *why = "a control character outside a string";
      return i;
    } else if (!string && (c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9'))) {
      size_t n = number_len(text + i, len - i);
      if (!n) {
        *why = "an invalid number (JSON numbers have no leading zeros, '+' or bare '.')";
        return i;
      }
      i += n;
      continue;
    }
    i += k;
  }
  return len;
}

/* Line and column (characters, 1-based) of text[off], from the value's own
 * position in its file. */
static void position(const fsdpc_jsonl_line *l, size_t off, long long *line, long long *col) {
  *line = l->line_no;
  *col = l->col;
  for (size_t i = 0; i < off && i < l->len; i++) {
    unsigned char c = (unsigned char)l->text[i];
    if (c == '\n' && i > 0 && l->text[i - 1] == '\r')
      continue;
    if (c == '\n' || c == '\r') {
      ++*line;
      *col = 1;
    } else if ((c & 0xc0) != 0x80) {
      ++*col;
    }
  }
}

static fsdpc_status fail_at(const char *file, const fsdpc_jsonl_line *l, size_t off,
                            const char *what, int near, fsdpc_err *err) {
  long long line, col;
  position(l, off, &line, &col);
  char snip[96] = "";
  if (near) {
    size_t n = l->len - off < 20 ? l->len - off : 20;
    fsdpc__escape(snip, sizeof snip, l->text + off, n);
  }
  return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s:%lld: column %lld: %s%s%s%s", file, line, col,
                     what, near ? " near '" : "", near ? (off < l->len ? snip : "end of line") : "",
                     near ? "'" : "");
}

typedef struct keyed {
  cJSON *item;
  size_t idx;
} keyed;

static int by_key(const void *a, const void *b) {
  const keyed *x = a, *y = b;
  int c = strcmp(x->item->string, y->item->string);
  return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

/* Resolves duplicate keys in v and everything under it: each key keeps its
 * first place and its last value. 0 when out of memory. */
static int dedup(cJSON *v) {
  size_t k = 0;
  for (cJSON *c = v->child; c; c = c->next, k++)
    if (c->child && !dedup(c))
      return 0;
  if (!cJSON_IsObject(v) || k < 2)
    return 1;
  keyed small[32], *ks = k <= 32 ? small : malloc(k * sizeof *ks);
  if (!ks)
    return 0;
  size_t i = 0;
  for (cJSON *c = v->child; c; c = c->next, i++)
    ks[i] = (keyed){c, i};
  qsort(ks, k, sizeof *ks, by_key);
  for (size_t a = 0; a < k;) {
    size_t b = a + 1;
    while (b < k && strcmp(ks[b].item->string, ks[a].item->string) == 0)
      b++;
    if (b - a > 1) {
      for (size_t j = a + 1; j + 1 < b; j++) /* the values in between */
        cJSON_Delete(cJSON_DetachItemViaPointer(v, ks[j].item));
      cJSON *last = cJSON_DetachItemViaPointer(v, ks[b - 1].item);
      cJSON_ReplaceItemViaPointer(v, ks[a].item, last); /* frees the first */
    }
    a = b;
  }
  if (ks != small)
    free(ks);
  return 1;
}

fsdpc_status fsdpc__jsonl_parse(const char *file, const fsdpc_jsonl_line *l, cJSON **out,
                                fsdpc_err *err) {
  *out = NULL;
  const char *why = NULL;
  size_t bad = prescan(l->text, l->len, &why);
  if (bad < l->len)
    return fail_at(file, l, bad, why, 1, err);
  const char *end = NULL;
  cJSON *v = cJSON_ParseWithLengthOpts(l->text, l->len, &end, 0);
  if (!v) {
    size_t off = end && end >= l->text ? (size_t)(end - l->text) : 0;
    return fail_at(file, l, off < l->len ? off : l->len, "malformed JSON", 1, err);
  }
  size_t off = (size_t)(end - l->text);
  while (off < l->len && (l->text[off] == ' ' || l->text[off] == '\t' || l->text[off] == '\r' ||
                          l->text[off] == '\n'))
    off++;
  if (off < l->len) {
    cJSON_Delete(v);
    return fail_at(file, l, off,
                   "extra data after the JSON value (one value per line, as Python's json.loads "
                   "reads it)",
                   1, err);
  }
  /* numbers keep their JSON text (big ints exact, 20.0 a float) and a NUL in
   * a string is refused with its path; walked before dedup, while the tree
   * still lists every member in the text's order */
  char jwhy[400];
  if (fsdpc__jinja_json_text(v, l->text, off, jwhy, sizeof jwhy)) {
    cJSON_Delete(v);
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s:%lld: %s", file, (long long)l->line_no, jwhy);
  }
  if (!dedup(v)) {
    cJSON_Delete(v);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s:%lld: out of memory", file,
                       (long long)l->line_no);
  }
  *out = v;
  return FSDPC_OK;
}
