#include "util/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/clock.h"

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

fsdpc_status fsdpc__mkdir_parent(const char *file_path, fsdpc_err *err) {
  const char *slash = strrchr(file_path, '/');
  if (!slash || slash == file_path)
    return FSDPC_OK; /* the current folder, or / */
  char dir[4096];
  size_t n = (size_t)(slash - file_path);
  if (n >= sizeof dir)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "path too long: '%s'", file_path);
  memcpy(dir, file_path, n);
  dir[n] = '\0';
  return fsdpc__mkdir_p(dir, err);
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

double fsdpc__write_rate_mib_s(const char *dir, unsigned long long bytes) {
  enum { CHUNK = 4 << 20 };
  const unsigned long long cap = 64ull << 20;
  if (bytes > cap)
    bytes = cap;
  if (bytes == 0 || !dir || !*dir)
    return 0.0;
  char path[4200];
  snprintf(path, sizeof path, "%s", dir);
  for (;;) { /* dir, or its nearest existing parent */
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
      break;
    char *slash = strrchr(path, '/');
    if (!slash) {
      snprintf(path, sizeof path, ".");
      break;
    }
    if (slash == path) {
      path[1] = '\0';
      break;
    }
    *slash = '\0';
  }
  char probe[4300];
  snprintf(probe, sizeof probe, "%s/.fsdpc-write-probe-XXXXXX", path);
  int fd = mkstemp(probe);
  if (fd < 0)
    return 0.0;
  char *buf = calloc(1, CHUNK);
  double t0 = fsdpc__now(), rate = 0.0;
  unsigned long long done = 0;
  while (buf && done < bytes) {
    size_t n = bytes - done < CHUNK ? (size_t)(bytes - done) : CHUNK;
    ssize_t w = write(fd, buf, n);
    if (w <= 0 && errno != EINTR)
      break;
    if (w > 0)
      done += (unsigned long long)w;
  }
  if (done == bytes && fsync(fd) == 0) {
    double dt = fsdpc__now() - t0;
    rate = (double)bytes / 1048576.0 / (dt > 1e-6 ? dt : 1e-6);
  }
  free(buf);
  close(fd);
  unlink(probe);
  return rate;
}
