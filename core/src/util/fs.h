/* Small file-system helpers. */
#ifndef FSDPC_UTIL_FS_H
#define FSDPC_UTIL_FS_H

#include "util/err.h"

/* mkdir -p: creates path and its missing parents (mode 0755). */
fsdpc_status fsdpc__mkdir_p(const char *path, fsdpc_err *err);

/* Creates the folder a file is about to be written in (mkdir -p of its
 * dirname); a bare file name needs nothing. */
fsdpc_status fsdpc__mkdir_parent(const char *file_path, fsdpc_err *err);
/* Opens path read-only as a regular file without ever blocking: a FIFO,
 * a device (/dev/zero) or a folder is refused before anything is read.
 * Returns the descriptor, -1 with errno set when open/fstat fail, or -2
 * when path is not a regular file. When max > 0, a file larger than max
 * bytes is -3. */
int fsdpc__open_regular(const char *path, unsigned long long max);
/* The one-line reason for a negative fsdpc__open_regular result (errno is
 * read for -1). */
const char *fsdpc__open_regular_why(int rc, unsigned long long max, char *buf, unsigned long cap);

/* The rate, in MiB/s, at which this process writes and fsyncs a file of
 * bytes bytes (at most 64 MiB) into folder dir, or into its nearest
 * existing parent while dir does not exist yet; the probe file is removed.
 * 0 when it cannot be measured (no writable folder, a write fails). */
double fsdpc__write_rate_mib_s(const char *dir, unsigned long long bytes);

#endif
