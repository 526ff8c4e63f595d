#include "util/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

fsdpc_status fsdpc__mkdir_p(const char *path, fsdpc_err *err) {
  char buf[4096];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "bad folder path '%s'", path);
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] != '/' && buf[i] != '\0') continue;
    char c = buf[i];
    buf[i] = '\0';
    struct stat st;
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cannot create folder '%s': %s", buf,
                         strerror(errno));
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "'%s' exists and is not a folder", buf);
    buf[i] = c;
  }
  return FSDPC_OK;
}

int fsdpc__open_regular(const char *path, unsigned long long max) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return -1;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return -2;
  }
  if (max > 0 && (unsigned long long)st.st_size > max) {
    close(fd);
    return -3;
  }
  /* Back to blocking reads (a regular file never blocks on them anyway). */
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

const char *fsdpc__open_regular_why(int rc, unsigned long long max, char *buf, unsigned long cap) {
  if (rc == -2)
    snprintf(buf, cap, "not a regular file (a FIFO, device or folder)");
  else if (rc == -3)
    snprintf(buf, cap, "larger than the limit of %llu bytes", max);
  else
    snprintf(buf, cap, "%s", strerror(errno));
  return buf;
}
