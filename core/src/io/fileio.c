#include "io/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int fsdpc__pread_full(int fd, void *buf, size_t len, uint64_t off) {
  char *p = buf;
  while (len > 0) {
    ssize_t r = pread(fd, p, len, (off_t)off);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    if (r == 0)
      return 1;
    p += r;
    len -= (size_t)r;
    off += (uint64_t)r;
  }
  return 0;
}

int fsdpc__pwrite_full(int fd, const void *buf, size_t len, uint64_t off) {
  const char *p = buf;
  while (len > 0) {
    ssize_t r = pwrite(fd, p, len, (off_t)off);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    if (r == 0) {
      errno = ENOSPC; /* a zero-byte write means the device is full */
      return -1;
    }
    p += r;
    len -= (size_t)r;
    off += (uint64_t)r;
  }
  return 0;
}

char *fsdpc__path_join(const char *dir, const char *name) {
  size_t a = strlen(dir), b = strlen(name);
  int slash = a > 0 && dir[a - 1] != '/';
  char *s = malloc(a + (size_t)slash + b + 1);
  if (!s)
    return NULL;
  memcpy(s, dir, a);
  if (slash)
    s[a] = '/';
  memcpy(s + a + slash, name, b + 1);
  return s;
}

int fsdpc__read_small_file(const char *path, size_t max, char **out, size_t *len) {
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
  if (fd < 0)
    return -1;
  struct stat st;
  if (fstat(fd, &st) != 0)
    goto fail;
  if (!S_ISREG(st.st_mode)) {
    errno = EISDIR;
    goto fail;
  }
  if ((uint64_t)st.st_size > max) {
    errno = EFBIG;
    goto fail;
  }
  size_t n = (size_t)st.st_size;
  char *buf = malloc(n + 1);
  if (!buf)
    goto fail;
  int r = fsdpc__pread_full(fd, buf, n, 0);
  if (r != 0) {
    if (r > 0)
      errno = EIO; /* shrank while reading */
    free(buf);
    goto fail;
  }
  buf[n] = '\0';
  close(fd);
  *out = buf;
  *len = n;
  return 0;
fail:;
  int e = errno;
  close(fd);
  errno = e;
  return -1;
}

int fsdpc__write_small_file(const char *path, const char *data, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return -1;
  if (fsdpc__pwrite_full(fd, data, len, 0) != 0 || fsync(fd) != 0) {
    int e = errno;
    close(fd);
    unlink(path);
    errno = e;
    return -1;
  }
  if (close(fd) != 0) {
    int e = errno;
    unlink(path);
    errno = e;
    return -1;
  }
  return 0;
}
