#define _GNU_SOURCE
#include "util/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
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

static int open_regular_flags(const char *path, unsigned long long max, int extra) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | extra);
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

int fsdpc__open_regular(const char *path, unsigned long long max) {
  return open_regular_flags(path, max, 0);
}

int fsdpc__open_regular_nofollow(const char *path, unsigned long long max) {
  return open_regular_flags(path, max, O_NOFOLLOW);
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

/* ---- files written into log, output, cache and checkpoint folders ---- */

/* 0 when path is absent, a regular file or a link (which a rename replaces);
 * else the one-line reason in err. */
static fsdpc_status target_ok(const char *path, fsdpc_err *err) {
  struct stat sb;
  if (lstat(path, &sb) != 0) {
    if (errno == ENOENT)
      return FSDPC_OK;
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: cannot check it: %s", path, strerror(errno));
  }
  if (S_ISREG(sb.st_mode) || S_ISLNK(sb.st_mode))
    return FSDPC_OK;
  return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "%s exists and is %s; fsdpc writes only regular files there (remove it or "
                     "choose another name)",
                     path,
                     S_ISDIR(sb.st_mode)    ? "a folder"
                     : S_ISFIFO(sb.st_mode) ? "a FIFO"
                     : S_ISSOCK(sb.st_mode) ? "a socket"
                                            : "a device");
}

/* 16 hex digits no other process can guess in advance. */
static void random_hex(char out[17]) {
  unsigned long long r = 0;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    r = ((unsigned long long)ts.tv_nsec << 20) ^ (unsigned long long)ts.tv_sec ^
        ((unsigned long long)getpid() << 40) ^ (unsigned long long)(uintptr_t)out;
  }
  snprintf(out, 17, "%016llx", r);
}

fsdpc_status fsdpc__out_create(const char *path, fsdpc_out_file *f, fsdpc_err *err) {
  memset(f, 0, sizeof *f);
  f->fd = -1;
  FSDPC_TRY(target_ok(path, err));
  const char *slash = strrchr(path, '/');
  int dir_len = slash ? (int)(slash - path + 1) : 0;
  const char *base = slash ? slash + 1 : path;
  if (!*base)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "'%s' names a folder, not a file", path);
  if (!(f->path = strdup(path)))
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", path);
  for (int attempt = 0; attempt < 32; attempt++) {
    char hex[17];
    random_hex(hex);
    free(f->tmp);
    if (asprintf(&f->tmp, "%.*s.%s.%s.tmp", dir_len, path, base, hex) < 0) {
      f->tmp = NULL;
      break;
    }
    /* O_EXCL: a name that exists (a planted link included) is never opened. */
    f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (f->fd >= 0)
      return FSDPC_OK;
    if (errno != EEXIST) {
      int e = errno;
      fsdpc_status st = fsdpc__fail(
          err, e == ENOENT || e == EACCES || e == EROFS ? FSDPC_INVALID_USAGE : FSDPC_SYSTEM_ERROR,
          "%s: cannot create: %s", path, strerror(e));
      fsdpc__out_abort(f);
      return st;
    }
  }
  fsdpc__out_abort(f);
  return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: cannot create a temporary file beside it", path);
}

void fsdpc__out_abort(fsdpc_out_file *f) {
  if (f->fd >= 0)
    close(f->fd);
  if (f->tmp)
    unlink(f->tmp);
  free(f->tmp);
  free(f->path);
  f->tmp = f->path = NULL;
  f->fd = -1;
}

fsdpc_status fsdpc__out_commit(fsdpc_out_file *f, fsdpc_err *err) {
  fsdpc_status st = FSDPC_OK;
  if (!f->tmp)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "commit of a file that is not open");
  if (f->fd >= 0) {
    int rc = fsync(f->fd);
    int e = errno;
    rc |= close(f->fd);
    f->fd = -1;
    if (rc != 0)
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: write failed: %s", f->path,
                       strerror(e ? e : errno));
  }
  if (st == FSDPC_OK && (st = target_ok(f->path, err)) == FSDPC_OK && rename(f->tmp, f->path) != 0)
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: cannot rename %s into place: %s", f->path,
                     f->tmp, strerror(errno));
  if (st != FSDPC_OK)
    unlink(f->tmp);
  free(f->tmp);
  free(f->path);
  f->tmp = f->path = NULL;
  return st;
}

fsdpc_status fsdpc__out_fopen(const char *path, fsdpc_out_file *f, FILE **s, fsdpc_err *err) {
  *s = NULL;
  FSDPC_TRY(fsdpc__out_create(path, f, err));
  if (!(*s = fdopen(f->fd, "w"))) {
    fsdpc_status st =
        fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: cannot write: %s", path, strerror(errno));
    fsdpc__out_abort(f);
    return st;
  }
  return FSDPC_OK;
}

fsdpc_status fsdpc__out_fclose(FILE *s, fsdpc_out_file *f, fsdpc_err *err) {
  int bad = fflush(s) != 0 || ferror(s) || fsync(f->fd) != 0;
  int e = errno;
  bad |= fclose(s) != 0;
  f->fd = -1; /* closed with the stream */
  if (bad) {
    fsdpc_status st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: write failed: %s", f->path,
                                  strerror(e ? e : EIO));
    fsdpc__out_abort(f);
    return st;
  }
  return fsdpc__out_commit(f, err);
}

int fsdpc__write_all(int fd, const void *data, size_t len) {
  const char *p = data;
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      if (w == 0)
        errno = EIO;
      return -1;
    }
    p += w;
    len -= (size_t)w;
  }
  return 0;
}

int fsdpc__write_file_safe(const char *path, const void *data, size_t len) {
  fsdpc_out_file f;
  fsdpc_err err = {0};
  errno = 0;
  if (fsdpc__out_create(path, &f, &err) != FSDPC_OK) {
    int e = errno ? errno : EIO;
    struct stat sb;
    if (lstat(path, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISLNK(sb.st_mode))
      e = ENOTSUP;
    errno = e;
    return -1;
  }
  if (fsdpc__write_all(f.fd, data, len) != 0) {
    int e = errno;
    fsdpc__out_abort(&f);
    errno = e;
    return -1;
  }
  errno = 0;
  if (fsdpc__out_commit(&f, &err) != FSDPC_OK) {
    if (!errno)
      errno = EIO;
    return -1;
  }
  return 0;
}

fsdpc_status fsdpc__open_append(const char *path, int *fd, fsdpc_err *err) {
  *fd = -1;
  int f = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (f < 0) {
    int e = errno;
    if (e == ELOOP)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s is a symbolic link; fsdpc does not write through links it did not "
                         "make (remove it)",
                         path);
    if (e == ENXIO) /* a FIFO without a reader */
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s exists and is a FIFO; fsdpc writes only regular files there "
                         "(remove it)",
                         path);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: cannot open for writing: %s", path,
                       strerror(e));
  }
  struct stat sb;
  int stat_ok = fstat(f, &sb) == 0;
  if (!stat_ok || !S_ISREG(sb.st_mode) || sb.st_nlink != 1) {
    int bad_links = stat_ok && S_ISREG(sb.st_mode);
    close(f);
    if (bad_links)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s has %lu hard links; fsdpc appends only to a file of its own (remove "
                         "the other links, or this file)",
                         path, (unsigned long)sb.st_nlink);
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s exists and is not a regular file (a FIFO, device, socket or folder); "
                       "fsdpc writes only regular files there (remove it)",
                       path);
  }
  fcntl(f, F_SETFL, fcntl(f, F_GETFL) & ~O_NONBLOCK);
  *fd = f;
  return FSDPC_OK;
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
