/* What cJSON loses of a JSON text, given back to the engine: each number's
 * literal text (Python's json keeps ints of any size exactly and tells
 * 20.0 from 20), and strings with a NUL character (cJSON's C strings would
 * cut them there), which are refused with their path.
 *
 * The text is walked beside the tree cJSON parsed from it: both list the
 * values in document order, so the k-th number literal of the text is the
 * k-th number node. The literal goes into the node's valuestring (unused
 * for numbers; cJSON_Delete frees it and cJSON_Duplicate copies it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja.h"

typedef struct walker {
  const char *s;
  size_t n, i;
  char path[256];
  size_t plen;
  char *why;
  size_t cap;
  int failed;
} walker;

static void ws(walker *w) {
  while (w->i < w->n &&
         (w->s[w->i] == ' ' || w->s[w->i] == '\t' || w->s[w->i] == '\n' || w->s[w->i] == '\r'))
    w->i++;
}

static int fail(walker *w, const char *what) {
  if (!w->failed)
    snprintf(w->why, w->cap, "%s%s%s", w->plen ? w->path : "", w->plen ? ": " : "", what);
  w->failed = 1;
  return -1;
}

/* A string literal at w->i; refuses "\u0000" (a NUL the C string loses). */
static int string(walker *w) {
  if (w->i >= w->n || w->s[w->i] != '"')
    return fail(w, "internal error: the JSON text does not match its parse");
  for (w->i++; w->i < w->n && w->s[w->i] != '"'; w->i++) {
    if (w->s[w->i] != '\\')
      continue;
    w->i++;
    if (w->i + 4 < w->n && w->s[w->i] == 'u' && !memcmp(w->s + w->i + 1, "0000", 4))
      return fail(w, "a NUL character (\\u0000) in a string: fsdpc refuses it rather than cut "
                     "the string there; remove it from the data");
  }
  w->i++;
  return 0;
}

/* Appends ".key" or "[k]" to the path for messages; returns the old length. */
static size_t path_push(walker *w, const char *key, long idx) {
  size_t old = w->plen;
  if (w->plen < sizeof w->path - 1) {
    int k = key ? snprintf(w->path + w->plen, sizeof w->path - w->plen, "%s%.60s",
                           w->plen ? "." : "", key)
                : snprintf(w->path + w->plen, sizeof w->path - w->plen, "[%ld]", idx);
    w->plen += (size_t)k < sizeof w->path - w->plen ? (size_t)k : sizeof w->path - 1 - w->plen;
  }
  return old;
}

static int value(walker *w, cJSON *node);

static int container(walker *w, cJSON *node, char close) {
  w->i++; /* { or [ */
  long k = 0;
  for (cJSON *c = node->child; c; c = c->next, k++) {
    ws(w);
    if (close == '}') {
      size_t at = w->i;
      if (string(w))
        return -1;
      (void)at;
      ws(w);
      if (w->i >= w->n || w->s[w->i] != ':')
        return fail(w, "internal error: the JSON text does not match its parse");
      w->i++;
    }
    size_t old = path_push(w, close == '}' ? c->string : NULL, k);
    if (value(w, c))
      return -1;
    w->plen = old;
    w->path[old] = '\0';
    ws(w);
    if (w->i < w->n && w->s[w->i] == ',')
      w->i++;
  }
  ws(w);
  if (w->i >= w->n || w->s[w->i] != close)
    return fail(w, "internal error: the JSON text does not match its parse");
  w->i++;
  return 0;
}

static int value(walker *w, cJSON *node) {
  ws(w);
  if (w->i >= w->n)
    return fail(w, "internal error: the JSON text ends early");
  char c = w->s[w->i];
  if (c == '{' || c == '[')
    return container(w, node, c == '{' ? '}' : ']');
  if (c == '"')
    return string(w);
  if (c == '-' || (c >= '0' && c <= '9')) {
    size_t b = w->i;
    while (w->i < w->n && strchr("+-0123456789.eE", w->s[w->i]) && w->s[w->i])
      w->i++;
    if (cJSON_IsNumber(node) && !node->valuestring) {
      node->valuestring = malloc(w->i - b + 1);
      if (!node->valuestring)
        return fail(w, "out of memory");
      memcpy(node->valuestring, w->s + b, w->i - b);
      node->valuestring[w->i - b] = '\0';
    }
    return 0;
  }
  while (w->i < w->n && w->s[w->i] >= 'a' && w->s[w->i] <= 'z') /* true false null */
    w->i++;
  return 0;
}

int fsdpc__jinja_json_text(cJSON *root, const char *text, size_t len, char *why, size_t cap) {
  walker w = {.s = text, .n = len, .why = why, .cap = cap};
  if (cap)
    why[0] = '\0';
  return value(&w, root);
}
