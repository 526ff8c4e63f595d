/* JSONL line reader over zlib's gzFile (plain files pass through). The
 * buffer holds whole lines; a line longer than the buffer grows it. */
#include "data/jsonl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

struct fsdpc_jsonl {
  char *path;
  gzFile gz;
  char *buf;
  size_t cap, len, pos; /* valid bytes [pos, len) not yet returned */
  int eof;
  int64_t line_no;
  uint64_t bytes;
};

fsdpc_status fsdpc__jsonl_open(const char *path, fsdpc_jsonl **out, fsdpc_err *err) {
  *out = NULL;
  fsdpc_jsonl *r = calloc(1, sizeof *r);
  if (!r || !(r->path = strdup(path)) || !(r->buf = malloc(r->cap = 8u << 20))) {
    fsdpc__jsonl_close(r);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", path);
  }
  errno = 0;
  if (!(r->gz = gzopen(path, "rb"))) {
    int e = errno;
    fsdpc__jsonl_close(r);
    return fsdpc__fail(err, e == ENOENT ? FSDPC_INVALID_USAGE : FSDPC_SYSTEM_ERROR,
                       "%s: cannot open dataset: %s", path, e ? strerror(e) : "zlib failed");
  }
  gzbuffer(r->gz, 1u << 20);
  *out = r;
  return FSDPC_OK;
}

/* Moves the unread tail to the front and reads more. */
static fsdpc_status fill(fsdpc_jsonl *r, fsdpc_err *err) {
  memmove(r->buf, r->buf + r->pos, r->len - r->pos);
  r->len -= r->pos;
  r->pos = 0;
  if (r->len + 1 >= r->cap) {
    char *b = realloc(r->buf, r->cap * 2);
    if (!b)
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory for a long line", r->path);
    r->buf = b, r->cap *= 2;
  }
  size_t want = r->cap - r->len - 1; /* room for a final NUL */
  if (want > (1u << 30))
    want = 1u << 30;
  int got = gzread(r->gz, r->buf + r->len, (unsigned)want);
  if (got < 0) {
    int code;
    const char *msg = gzerror(r->gz, &code);
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: cannot read: %s (corrupt gzip file?)",
                       r->path, code == Z_ERRNO ? strerror(errno) : msg);
  }
  if (got == 0) {
    int code;
    const char *msg = gzerror(r->gz, &code);
    if (code != Z_OK && code != Z_STREAM_END)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: cannot read: %s (corrupt gzip file?)",
                         r->path, msg);
    r->eof = 1;
  }
  r->len += (size_t)got;
  r->bytes += (uint64_t)got;
  return FSDPC_OK;
}

static int blank(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
      return 0;
  return 1;
}

fsdpc_status fsdpc__jsonl_next(fsdpc_jsonl *r, fsdpc_jsonl_line *lines, int max_lines, int *n,
                               fsdpc_err *err) {
  *n = 0;
  /* Lines returned last time live in [0, pos): drop them before reading on. */
  while (*n < max_lines) {
    char *start = r->buf + r->pos;
    char *nl = memchr(start, '\n', r->len - r->pos);
    if (!nl) {
      if (r->eof) {
        if (r->pos == r->len)
          break;
        nl = r->buf + r->len; /* last line without '\n': the NUL goes at len */
      } else {
        if (*n > 0)
          break; /* return what we have; the buffer must not move under it */
        FSDPC_TRY(fill(r, err));
        continue;
      }
    }
    size_t len = (size_t)(nl - start);
    r->pos += len + (nl < r->buf + r->len);
    r->line_no++;
    *nl = '\0';
    if (len && start[len - 1] == '\r')
      start[--len] = '\0';
    if (blank(start, len))
      continue;
    lines[*n].text = start;
    lines[*n].len = len;
    lines[*n].line_no = r->line_no;
    (*n)++;
  }
  return FSDPC_OK;
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
  free(r->path);
  free(r);
}
