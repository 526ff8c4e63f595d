/* JSONL lines and JSON-array elements over zlib's gzFile (plain files pass
 * through). The buffer holds whole values; a value longer than the buffer
 * grows it, up to max_line_bytes. Line ends are LF, CRLF or a lone CR, as
 * Python's universal newlines read them. Parsing is in jsonl_parse.c. */
#include "data/jsonl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

enum { ARR_OPEN, ARR_FIRST, ARR_AFTER, ARR_NEXT, ARR_DONE }; /* array layout states */

struct fsdpc_jsonl {
  char *path;
  gzFile gz;
  char *buf;
  size_t cap, len, pos; /* valid bytes [pos, len) not yet returned */
  int eof;
  uint64_t bytes, max_line, max_input;
  int array; /* 1: a JSON array of objects, 0: JSONL */
  /* JSONL: lines completed so far. Array: the line and column at pos. */
  int64_t line_no, col;
  int cr;    /* the byte before pos was a CR: a LF at pos ends no line of its own */
  int state; /* ARR_* */
  int64_t n_elements;
  char *arena; /* the array elements handed out by the last call, NUL-terminated */
  size_t arena_cap;
};

static int is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Moves the unread tail to the front and reads more (at least one byte of
 * room is kept for a final NUL). */
static fsdpc_status fill(fsdpc_jsonl *r, fsdpc_err *err) {
  memmove(r->buf, r->buf + r->pos, r->len - r->pos);
  r->len -= r->pos;
  r->pos = 0;
  if (r->len + 2 > r->cap) { /* only while len <= max_line: the callers check */
    size_t cap = r->cap * 2 < r->max_line + 2 ? r->cap * 2 : (size_t)r->max_line + 2;
    char *b = cap > r->cap ? realloc(r->buf, cap) : NULL;
    if (!b)
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory for a long line", r->path);
    r->buf = b, r->cap = cap;
  }
  size_t want = r->cap - r->len - 1;
  if (want > (1u << 30))
    want = 1u << 30;
  int got = gzread(r->gz, r->buf + r->len, (unsigned)want);
  int code = Z_OK;
  const char *msg = got <= 0 ? gzerror(r->gz, &code) : NULL;
  if (got < 0 || (got == 0 && code != Z_OK && code != Z_STREAM_END))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: cannot read: %s (corrupt gzip file?)",
                       r->path, code == Z_ERRNO ? strerror(errno) : msg);
  if (got == 0)
    r->eof = 1;
  r->len += (size_t)got;
  r->bytes += (uint64_t)got;
  if (r->bytes > r->max_input)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: more than %llu bytes after decompression (data.max_input_bytes): a "
                       "compressed file that expands without end, or raise the limit",
                       r->path, (unsigned long long)r->max_input);
  return FSDPC_OK;
}

/* Counts the lines and columns (characters) of bytes [from, to) into
 * line_no / col (array layout). */
static void advance(fsdpc_jsonl *r, size_t from, size_t to) {
  for (size_t i = from; i < to; i++) {
    unsigned char c = (unsigned char)r->buf[i];
    if (c == '\n' && r->cr) {
      r->cr = 0;
      continue; /* the LF of a CRLF */
    }
    r->cr = c == '\r';
    if (c == '\n' || c == '\r') {
      r->line_no++;
      r->col = 1;
    } else if ((c & 0xc0) != 0x80) {
      r->col++;
    }
  }
}

/* Picks the layout from the first byte that is not white space; leading
 * blank lines stay unread for JSONL, so that line numbers count them. */
static fsdpc_status detect(fsdpc_jsonl *r, fsdpc_err *err) {
  for (;;) {
    size_t i = r->pos;
    while (i < r->len && is_ws(r->buf[i]))
      i++;
    if (r->len >= 3 && memcmp(r->buf, "\xef\xbb\xbf", 3) == 0)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: starts with a UTF-8 byte order mark, which Python's json refuses "
                         "too; save the file as UTF-8 without one",
                         r->path);
    if (i < r->len || r->eof) {
      r->array = i < r->len && r->buf[i] == '[';
      if (r->array) { /* consume the white space and the '[' */
        advance(r, r->pos, i + 1);
        r->pos = i + 1;
        r->state = ARR_FIRST;
      }
      return FSDPC_OK;
    }
    if (r->len - r->pos > r->max_line)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: more than %llu bytes of white space before the first value "
                         "(data.max_line_bytes)",
                         r->path, (unsigned long long)r->max_line);
    FSDPC_TRY(fill(r, err));
  }
}

fsdpc_status fsdpc__jsonl_open(const char *path, const fsdpc_jsonl_opts *opts, fsdpc_jsonl **out,
                               fsdpc_err *err) {
  *out = NULL;
  fsdpc_jsonl *r = calloc(1, sizeof *r);
  uint64_t max_line =
      opts && opts->max_line_bytes ? opts->max_line_bytes : FSDPC_JSONL_MAX_LINE_DEFAULT;
  size_t cap = max_line + 2 < (8u << 20) ? (size_t)max_line + 2 : (8u << 20);
  if (!r || !(r->path = strdup(path)) || !(r->buf = malloc(r->cap = cap < 4096 ? 4096 : cap))) {
    fsdpc__jsonl_close(r);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", path);
  }
  r->max_line = max_line;
  r->max_input =
      opts && opts->max_input_bytes ? opts->max_input_bytes : FSDPC_JSONL_MAX_INPUT_DEFAULT;
  r->line_no = 1;
  r->col = 1;
  errno = 0;
  if (!(r->gz = gzopen(path, "rb"))) {
    int e = errno;
    fsdpc__jsonl_close(r);
    return fsdpc__fail(err, e == ENOENT ? FSDPC_INVALID_USAGE : FSDPC_SYSTEM_ERROR,
                       "%s: cannot open dataset: %s", path, e ? strerror(e) : "zlib failed");
  }
  gzbuffer(r->gz, 1u << 20);
  fsdpc_status st = detect(r, err);
  if (st != FSDPC_OK) {
    fsdpc__jsonl_close(r);
    return st;
  }
  if (!r->array)
    r->line_no = 0; /* JSONL: lines completed */
  *out = r;
  return FSDPC_OK;
}

static fsdpc_status too_long(const fsdpc_jsonl *r, const char *what, int64_t line, fsdpc_err *err) {
  return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "%s:%lld: %s longer than %llu bytes (data.max_line_bytes); raise the limit if "
                     "the example is real, or split it",
                     r->path, (long long)line, what, (unsigned long long)r->max_line);
}

static int blank(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] != ' ' && s[i] != '\t')
      return 0;
  return 1;
}

/* The next JSONL lines. */
static fsdpc_status next_lines(fsdpc_jsonl *r, fsdpc_jsonl_line *lines, int max_lines, int *n,
                               fsdpc_err *err) {
  /* Lines returned last time live in [0, pos): fill() may move them now. */
  while (*n < max_lines) {
    if (r->cr && r->pos < r->len) { /* the LF of a CRLF split by a read */
      r->pos += r->buf[r->pos] == '\n';
      r->cr = 0;
    }
    char *start = r->buf + r->pos;
    size_t avail = r->len - r->pos, len = 0;
    while (len < avail && start[len] != '\n' && start[len] != '\r')
      len++;
    if (len > r->max_line)
      return too_long(r, "a line", r->line_no + 1, err);
    if (len == avail && (!r->eof || r->cr)) {
      if (*n > 0)
        break; /* return what we have; the buffer must not move under it */
      if (r->eof) {
        r->cr = 0;
        continue;
      }
      FSDPC_TRY(fill(r, err));
      continue;
    }
    if (len == avail && avail == 0)
      break; /* the end of the file */
    size_t used = len;
    if (len < avail) {
      used++;
      if (start[len] == '\r') {
        if (len + 1 < avail)
          used += start[len + 1] == '\n';
        else
          r->cr = 1; /* a LF may come with the next read */
      }
    }
    r->pos += used;
    r->line_no++;
    start[len] = '\0'; /* over the line end, or at len (fill kept a byte free) */
    if (blank(start, len))
      continue;
    lines[*n] = (fsdpc_jsonl_line){start, len, r->line_no, 1};
    (*n)++;
  }
  return FSDPC_OK;
}

/* End of the object that starts at buf[from] ('{'): the index of its
 * closing '}', or (size_t)-1 when the buffer ends first. */
static size_t object_end(const char *b, size_t from, size_t to) {
  int in_str = 0, esc = 0;
  size_t depth = 0;
  for (size_t i = from; i < to; i++) {
    char c = b[i];
    if (fsdpc__json_string_byte(c, &in_str, &esc))
      continue;
    if (c == '{' || c == '[') {
      depth++;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i;
    }
  }
  return (size_t)-1;
}

static fsdpc_status array_error(const fsdpc_jsonl *r, const char *what, fsdpc_err *err) {
  return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s:%lld: column %lld: %s", r->path,
                     (long long)r->line_no, (long long)r->col, what);
}

/* The next elements of a JSON array. Each is copied into the arena, whose
 * size is fixed before the first copy (the buffer does not refill while
 * elements are out), so earlier pointers stay valid. */
static fsdpc_status next_elements(fsdpc_jsonl *r, fsdpc_jsonl_line *lines, int max_lines, int *n,
                                  fsdpc_err *err) {
  size_t used = 0;
  while (*n < max_lines) {
    size_t i = r->pos;
    while (i < r->len && is_ws(r->buf[i]))
      i++;
    advance(r, r->pos, i);
    r->pos = i;
    if (r->pos == r->len) {
      if (r->eof) {
        if (r->state != ARR_DONE)
          return array_error(r, "the file ends before the JSON array is closed (missing ']')", err);
        break;
      }
      if (*n > 0)
        break;
      FSDPC_TRY(fill(r, err));
      continue;
    }
    char c = r->buf[r->pos];
    if (r->state == ARR_DONE)
      return array_error(r, "extra data after the JSON array (one array per file)", err);
    if (r->state == ARR_AFTER || (r->state == ARR_FIRST && c == ']')) {
      if (c != ',' && c != ']')
        return array_error(r, "expected ',' or ']' after an element of the JSON array", err);
      r->state = c == ',' ? ARR_NEXT : ARR_DONE;
      advance(r, r->pos, r->pos + 1);
      r->pos++;
      continue;
    }
    if (c != '{') {
      char what[160];
      snprintf(what, sizeof what,
               "element %lld of the JSON array: expected a JSON object ({...}), got %s",
               (long long)r->n_elements,
               c == '['   ? "an array"
               : c == '"' ? "a string"
               : c == ']' ? "']' after a ','"
                          : "a number or literal");
      return array_error(r, what, err);
    }
    size_t e = object_end(r->buf, r->pos, r->len);
    size_t have = (e == (size_t)-1 ? r->len : e + 1) - r->pos;
    if (have > r->max_line)
      return too_long(r, "an element of the JSON array", r->line_no, err);
    if (e == (size_t)-1) {
      if (r->eof)
        return array_error(r, "the file ends inside this element of the JSON array", err);
      if (*n > 0)
        break;
      FSDPC_TRY(fill(r, err));
      continue;
    }
    if (*n == 0 && r->arena_cap < r->cap + (size_t)max_lines) {
      char *a = realloc(r->arena, r->cap + (size_t)max_lines);
      if (!a)
        return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", r->path);
      r->arena = a, r->arena_cap = r->cap + (size_t)max_lines;
    }
    char *text = r->arena + used;
    memcpy(text, r->buf + r->pos, have);
    text[have] = '\0';
    used += have + 1;
    lines[(*n)++] = (fsdpc_jsonl_line){text, have, r->line_no, r->col};
    advance(r, r->pos, e + 1);
    r->pos = e + 1;
    r->n_elements++;
    r->state = ARR_AFTER;
  }
  return FSDPC_OK;
}

fsdpc_status fsdpc__jsonl_next(fsdpc_jsonl *r, fsdpc_jsonl_line *lines, int max_lines, int *n,
                               fsdpc_err *err) {
  *n = 0;
  return r->array ? next_elements(r, lines, max_lines, n, err)
                  : next_lines(r, lines, max_lines, n, err);
}

int fsdpc__jsonl_is_array(const fsdpc_jsonl *r) {
  return r->array;
}

uint64_t fsdpc__jsonl_bytes(const fsdpc_jsonl *r) {
  return r->bytes;
}

void fsdpc__jsonl_close(fsdpc_jsonl *r) {
  if (!r)
    return;
  if (r->gz)
    gzclose(r->gz);
  free(r->buf);
  free(r->arena);
  free(r->path);
  free(r);
}
