/* Small file-system helpers. */
#ifndef FSDPC_UTIL_FS_H
#define FSDPC_UTIL_FS_H

#include <stddef.h>
#include <stdio.h>

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

/* ---- files fsdpc writes into log, output, cache and checkpoint folders ----
 * fsdpc never writes through a link it did not make, never into a file that
 * someone else created, and never blocks on a FIFO or a device:
 * - a new file is written under a private temporary name beside its target
 *   (".NAME.<16 hex>.tmp", created O_CREAT | O_EXCL | O_NOFOLLOW, mode 0644
 *   less the umask) and renamed onto NAME when it is complete, so NAME
 *   appears whole or not at all; the rename replaces a link at NAME, it
 *   never follows it;
 * - NAME, when it exists, must be a regular file or a symbolic link: a
 *   folder, FIFO, device or socket there is refused before anything opens;
 * - appending (fsdpc__open_append) refuses a link, anything that is not a
 *   regular file, and a file with other hard links. */
typedef struct fsdpc_out_file {
  int fd;     /* open on tmp for writing; -1 once closed */
  char *path; /* the target (owned) */
  char *tmp;  /* the private temporary name (owned) */
} fsdpc_out_file;

/* Creates f->tmp beside path (the folder must exist). */
fsdpc_status fsdpc__out_create(const char *path, fsdpc_out_file *f, fsdpc_err *err);
/* fsyncs, closes and renames the temporary file onto its target; frees f's
 * names. A caller that wrote through stdio may fflush, fsync and fclose the
 * descriptor itself and set f->fd = -1 first. On failure the temporary
 * file is removed. */
fsdpc_status fsdpc__out_commit(fsdpc_out_file *f, fsdpc_err *err);
/* Closes (unless f->fd is -1) and removes the temporary file, frees f's
 * names; a committed f is a no-op. */
void fsdpc__out_abort(fsdpc_out_file *f);
/* The same through stdio: fsdpc__out_create, then *s a stream on its
 * descriptor (on failure nothing is left behind). */
fsdpc_status fsdpc__out_fopen(const char *path, fsdpc_out_file *f, FILE **s, fsdpc_err *err);
/* Flushes, fsyncs and closes the stream, then commits; on any write error
 * the temporary file is removed and the target is left as it was. */
fsdpc_status fsdpc__out_fclose(FILE *s, fsdpc_out_file *f, fsdpc_err *err);
/* write(2) until all len bytes are written (EINTR retried): 0, or -1 with
 * errno set (EIO for a write of 0 bytes). */
int fsdpc__write_all(int fd, const void *data, size_t len);
/* A whole small file written the safe way (create, write, commit): 0, or -1
 * with errno set (ENOTSUP: the target is not a regular file or a link). For
 * call sites of fsdpc__write_small_file that write into output folders. */
int fsdpc__write_file_safe(const char *path, const void *data, size_t len);
/* Opens path for appending (created 0644 less the umask when missing):
 * O_APPEND | O_NOFOLLOW | O_NONBLOCK, then refuses anything but a regular
 * file with a single link. *fd is blocking again on success. */
fsdpc_status fsdpc__open_append(const char *path, int *fd, fsdpc_err *err);
/* Like fsdpc__open_regular but also refuses a symbolic link (O_NOFOLLOW):
 * for reading back files fsdpc wrote itself. Same return codes (-1 errno
 * ELOOP for a link). */
int fsdpc__open_regular_nofollow(const char *path, unsigned long long max);

/* The rate, in MiB/s, at which this process writes and fsyncs a file of
 * bytes bytes (at most 64 MiB) into folder dir, or into its nearest
 * existing parent while dir does not exist yet; the probe file is removed.
 * 0 when it cannot be measured (no writable folder, a write fails). */
double fsdpc__write_rate_mib_s(const char *dir, unsigned long long bytes);

#endif
