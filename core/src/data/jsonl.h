/* Line reader for JSONL datasets, plain or gzip-compressed (zlib's gzread
 * reads both, so `.jsonl.gz` needs nothing else). Lines come in batches so
 * that the caller can process them on several threads. */
#ifndef FSDPC_DATA_JSONL_H
#define FSDPC_DATA_JSONL_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

typedef struct fsdpc_jsonl fsdpc_jsonl;

typedef struct fsdpc_jsonl_line {
  char *text;      /* NUL-terminated, without the '\n' (and a trailing '\r') */
  size_t len;      /* bytes before the NUL */
  int64_t line_no; /* 1-based line number in the file */
} fsdpc_jsonl_line;

fsdpc_status fsdpc__jsonl_open(const char *path, fsdpc_jsonl **out, fsdpc_err *err);
/* Reads up to max_lines more lines that are not blank (blank lines are
 * skipped but counted in line numbers) into lines (max_lines). *n = 0 at the
 * end of the file. The texts stay valid until the next call. */
fsdpc_status fsdpc__jsonl_next(fsdpc_jsonl *r, fsdpc_jsonl_line *lines, int max_lines, int *n,
                               fsdpc_err *err);
/* Uncompressed bytes read so far. */
uint64_t fsdpc__jsonl_bytes(const fsdpc_jsonl *r);
void fsdpc__jsonl_close(fsdpc_jsonl *r); /* NULL is a no-op */

#endif
