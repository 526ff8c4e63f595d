/* Reading JSON datasets as Python reads them: JSONL (one JSON value a line,
 * `for line in open(f): json.loads(line)`) or a JSON array of objects (the
 * alpaca_data.json layout, `json.load(open(f))`), plain or gzip-compressed
 * (zlib's gzread reads both). The values come in batches so that the caller
 * can parse and convert them on several threads (fsdpc__jsonl_parse).
 *
 * What Python does, fsdpc does (docs/data.md, "What a line may hold"):
 * - lines end at LF, CRLF or a lone CR (Python's universal newlines);
 * - a line holds exactly one JSON value: text after it that is not white
 *   space is an error naming the line and column (`{...}{...}`);
 * - duplicate keys: the last one wins, at every depth;
 * - the file must be UTF-8 (no byte order mark), and strings hold no raw
 *   control characters (json.loads' strict mode).
 * Limits, each a one-line error: the longest line (or array element),
 * max_line_bytes, and the file's size after decompression, max_input_bytes
 * (a .jsonl.gz of a few MB can expand to many GB). Memory stays within a
 * few times max_line_bytes whatever the input. */
#ifndef FSDPC_DATA_JSONL_H
#define FSDPC_DATA_JSONL_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define FSDPC_JSONL_MAX_LINE_DEFAULT ((uint64_t)32 << 20) /* 32 MiB */
#define FSDPC_JSONL_MAX_INPUT_DEFAULT ((uint64_t)1 << 40) /* 1 TiB */

typedef struct fsdpc_jsonl fsdpc_jsonl;

typedef struct fsdpc_jsonl_opts {
  uint64_t max_line_bytes;  /* 0 = FSDPC_JSONL_MAX_LINE_DEFAULT */
  uint64_t max_input_bytes; /* uncompressed; 0 = FSDPC_JSONL_MAX_INPUT_DEFAULT */
} fsdpc_jsonl_opts;

typedef struct fsdpc_jsonl_line {
  char *text;      /* NUL-terminated: a JSONL line without its end, or one array element */
  size_t len;      /* bytes before the NUL */
  int64_t line_no; /* 1-based line of text[0] in the file */
  int64_t col;     /* 1-based column (in characters) of text[0]: 1 for JSONL */
} fsdpc_jsonl_line;

/* opts may be NULL (defaults). Decides the layout from the first byte that
 * is not white space: '[' is a JSON array, anything else JSONL. */
fsdpc_status fsdpc__jsonl_open(const char *path, const fsdpc_jsonl_opts *opts, fsdpc_jsonl **out,
                               fsdpc_err *err);
/* Reads up to max_lines more values into lines (max_lines): JSONL lines that
 * are not blank (blank lines are skipped but counted in line numbers), or
 * array elements. *n = 0 at the end of the file. The texts stay valid until
 * the next call. */
fsdpc_status fsdpc__jsonl_next(fsdpc_jsonl *r, fsdpc_jsonl_line *lines, int max_lines, int *n,
                               fsdpc_err *err);
/* 1 when the file is a JSON array. */
int fsdpc__jsonl_is_array(const fsdpc_jsonl *r);
/* Uncompressed bytes read so far. */
uint64_t fsdpc__jsonl_bytes(const fsdpc_jsonl *r);
void fsdpc__jsonl_close(fsdpc_jsonl *r); /* NULL is a no-op */

/* One byte of a JSON text through the string scanner both readers share:
 * returns 1 when c belongs to a string (its quotes included), keeping the
 * state in *in_str and *esc. */
static inline int fsdpc__json_string_byte(char c, int *in_str, int *esc) {
  if (*in_str) {
    if (*esc)
      *esc = 0;
    else if (c == '\\')
      *esc = 1;
    else if (c == '"')
      *in_str = 0;
    return 1;
  }
  *in_str = c == '"';
  return *in_str;
}

/* Parses one value as Python's json.loads would (see the file comment):
 * *out is the value (the caller cJSON_Deletes it) with duplicate keys
 * resolved to their last occurrence. On failure, one line in err:
 * "FILE:LINE: column C: what" (the column in characters, as Python counts
 * it). Thread-safe. */
fsdpc_status fsdpc__jsonl_parse(const char *file, const fsdpc_jsonl_line *line, cJSON **out,
                                fsdpc_err *err);

#endif
