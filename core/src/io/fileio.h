/* Whole-range pread/pwrite that retry on EINTR and short transfers, and a
 * few path helpers, shared by the safetensors reader, writer and the HF
 * checkpoint code. */
#ifndef FSDPC_IO_FILEIO_H
#define FSDPC_IO_FILEIO_H

#include <stddef.h>
#include <stdint.h>

/* 0 on success; -1 with errno set; 1 when the file ended first (read). */
int fsdpc__pread_full(int fd, void *buf, size_t len, uint64_t off);
int fsdpc__pwrite_full(int fd, const void *buf, size_t len, uint64_t off);
/* malloc'd "dir/name" (no doubled slash); NULL when out of memory. */
char *fsdpc__path_join(const char *dir, const char *name);
/* Reads a whole small file (at most max bytes) NUL-terminated; 0 on success,
 * -1 with errno (EFBIG when larger than max). */
int fsdpc__read_small_file(const char *path, size_t max, char **out, size_t *len);
/* Writes, fsyncs and closes a new file with the given bytes; -1 with errno. */
int fsdpc__write_small_file(const char *path, const char *data, size_t len);

#endif
