/* Checkpoint folders on disk: names, the latest complete one, rotation,
 * removal, fsync of folders, and the per-rank checksum manifests.
 *
 * Completeness is carried by the rename: a save writes everything into
 * .tmp-<name>, fsyncs each file, and only then renames the folder, so a
 * folder named step-N is complete by construction and a crash mid-save
 * leaves only a .tmp-* folder that nothing loads. */
#define _GNU_SOURCE /* nftw flags */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt_internal.h"
#include "ckpt/diverge.h"
#include "data/crc32.h"
#include "io/fileio.h"
#include "util/fs.h"

void fsdpc__ckpt_step_name(int64_t step, char *buf, size_t cap) {
  snprintf(buf, cap, FSDPC_CKPT_STEP_PREFIX "%06lld", (long long)step);
}

/* step-<digits> -> step; -1 for any other name. */
static int64_t parse_step(const char *name) {
  size_t n = strlen(FSDPC_CKPT_STEP_PREFIX);
  if (strncmp(name, FSDPC_CKPT_STEP_PREFIX, n) != 0 || !name[n])
    return -1;
  int64_t v = 0;
  for (const char *p = name + n; *p; p++) {
    if (*p < '0' || *p > '9' || v > INT64_MAX / 10 - 10)
      return -1;
    v = v * 10 + (*p - '0');
  }
  return v;
}

static int is_dir(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

typedef struct step_dir {
  int64_t step;
  char name[256];
} step_dir;

static int step_cmp(const void *a, const void *b) {
  int64_t x = ((const step_dir *)a)->step, y = ((const step_dir *)b)->step;
  return x < y ? -1 : x > y;
}

/* The step-* folders under root, sorted by step. */
static fsdpc_status list_steps(const char *root, step_dir **out, int *n, fsdpc_err *err) {
  *out = NULL;
  *n = 0;
  DIR *d = opendir(root);
  if (!d) {
    if (errno == ENOENT)
      return FSDPC_OK;
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cannot list checkpoint folder %s: %s", root,
                       strerror(errno));
  }
  int cap = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    int64_t s = parse_step(de->d_name);
    if (s < 0 || strlen(de->d_name) >= sizeof((step_dir *)0)->name)
      continue;
    char *p = fsdpc__path_join(root, de->d_name);
    int ok = p && is_dir(p);
    free(p);
    if (!ok)
      continue;
    if (*n == cap) {
      cap = cap ? 2 * cap : 16;
      step_dir *v = realloc(*out, (size_t)cap * sizeof *v);
      if (!v) {
        closedir(d);
        return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
      }
      *out = v;
    }
    (*out)[*n].step = s;
    snprintf((*out)[*n].name, sizeof(*out)[*n].name, "%s", de->d_name);
    (*n)++;
  }
  closedir(d);
  if (*n)
    qsort(*out, (size_t)*n, sizeof **out, step_cmp);
  return FSDPC_OK;
}

fsdpc_status fsdpc__ckpt_latest(const char *root, char *out, size_t cap, int *found,
                                fsdpc_err *err) {
  step_dir *v;
  int n;
  *found = 0;
  FSDPC_TRY(list_steps(root, &v, &n, err));
  if (n > 0) {
    snprintf(out, cap, "%s/%s", root, v[n - 1].name);
    *found = 1;
  }
  free(v);
  return FSDPC_OK;
}

fsdpc_status fsdpc__ckpt_nth_latest(const char *root, int k, char *out, size_t cap, int *found,
                                    fsdpc_err *err) {
  step_dir *v;
  int n;
  *found = 0;
  FSDPC_TRY(list_steps(root, &v, &n, err));
  if (k >= 0 && k < n) {
    snprintf(out, cap, "%s/%s", root, v[n - 1 - k].name);
    *found = 1;
  }
  free(v);
  return FSDPC_OK;
}

fsdpc_status fsdpc__ckpt_rotate(const char *root, int64_t keep, fsdpc_err *err) {
  if (keep <= 0)
    return FSDPC_OK;
  step_dir *v;
  int n;
  FSDPC_TRY(list_steps(root, &v, &n, err));
  fsdpc_status st = FSDPC_OK;
  /* The newest checkpoint whose loss was not diverging stays, wherever it
   * is: after a divergence it is the one to resume from. */
  int good = -1;
  for (int i = n - 1; i >= 0 && good < 0; i--) {
    char *p = fsdpc__path_join(root, v[i].name);
    if (p && !fsdpc__diverge_marked(p))
      good = i;
    free(p);
  }
  for (int i = 0; i + keep < n && st == FSDPC_OK; i++) {
    if (i == good)
      continue;
    char *p = fsdpc__path_join(root, v[i].name);
    st = p ? fsdpc__ckpt_rm_rf(p, err) : fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    free(p);
  }
  free(v);
  if (st == FSDPC_OK)
    fsdpc__ckpt_fsync_dir(root);
  return st;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  return remove(path) != 0 && errno != ENOENT ? -1 : 0;
}

fsdpc_status fsdpc__ckpt_rm_rf(const char *path, fsdpc_err *err) {
  struct stat sb;
  if (lstat(path, &sb) != 0)
    return FSDPC_OK;
  if (nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cannot remove %s: %s", path, strerror(errno));
  return FSDPC_OK;
}

void fsdpc__ckpt_fsync_dir(const char *path) {
  int fd = open(path, O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    return;
  fsync(fd);
  close(fd);
}

fsdpc_status fsdpc__ckpt_file_crc(const char *path, uint32_t *crc, uint64_t *size, fsdpc_err *err) {
  int fd = fsdpc__open_regular(path, 0);
  if (fd == -2)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: not a regular file", path);
  if (fd < 0)
    return fsdpc__fail(err, errno == ENOENT ? FSDPC_INVALID_USAGE : FSDPC_SYSTEM_ERROR,
                       "%s: cannot open: %s", path, strerror(errno));
  enum { CHUNK = 4 << 20 };
  char *buf = malloc(CHUNK);
  if (!buf) {
    close(fd);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  }
  uint32_t c = 0;
  uint64_t total = 0;
  for (;;) {
    ssize_t r = read(fd, buf, CHUNK);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      int e = errno;
      free(buf);
      close(fd);
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: read failed: %s", path, strerror(e));
    }
    if (r == 0)
      break;
    c = fsdpc__crc32(c, buf, (size_t)r);
    total += (uint64_t)r;
  }
  free(buf);
  close(fd);
  *crc = c;
  *size = total;
  return FSDPC_OK;
}

#define MANIFEST_PREFIX "checksums.rank-"

fsdpc_status fsdpc__ckpt_manifest_write(const char *dir, int rank, const fsdpc_ckpt_file *files,
                                        int n, fsdpc_err *err) {
  size_t cap = 64 + (size_t)n * 300, len = 0;
  char *text = malloc(cap);
  if (!text)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  for (int i = 0; i < n; i++)
    len += (size_t)snprintf(text + len, cap - len, "%08" PRIx32 " %" PRIu64 " %s\n", files[i].crc,
                            files[i].size, files[i].name);
  char name[64], *path;
  snprintf(name, sizeof name, MANIFEST_PREFIX "%05d.txt", rank);
  fsdpc_status st = FSDPC_OK;
  if (!(path = fsdpc__path_join(dir, name)))
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  else if (fsdpc__write_file_safe(path, text, len) != 0)
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cannot write %s: %s", path, strerror(errno));
  free(path);
  free(text);
  return st;
}

static fsdpc_status parse_manifest(const char *path, fsdpc_ckpt_file **files, int *n, int *cap,
                                   fsdpc_err *err) {
  char *text;
  size_t len;
  if (fsdpc__read_small_file(path, 64u << 20, &text, &len) != 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: cannot read: %s", path, strerror(errno));
  fsdpc_status st = FSDPC_OK;
  int line = 0;
  for (char *s = text, *nl; *s && st == FSDPC_OK; s = nl + 1) {
    line++;
    nl = strchr(s, '\n');
    if (!nl) {
      st = fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s:%d: truncated line", path, line);
      break;
    }
    *nl = '\0';
    unsigned crc;
    unsigned long long size;
    int off = 0;
    if (sscanf(s, "%8x %llu %n", &crc, &size, &off) != 2 || off == 0 || !s[off] ||
        strchr(s + off, '/')) {
      st = fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s:%d: expected 'crc32 size name'", path, line);
      break;
    }
    if (*n == *cap) {
      *cap = *cap ? 2 * *cap : 16;
      fsdpc_ckpt_file *v = realloc(*files, (size_t)*cap * sizeof *v);
      if (!v) {
        st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
        break;
      }
      *files = v;
    }
    fsdpc_ckpt_file f = {.name = strdup(s + off), .crc = crc, .size = size};
    if (!f.name) {
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
      break;
    }
    (*files)[(*n)++] = f;
  }
  free(text);
  return st;
}

fsdpc_status fsdpc__ckpt_manifest_read(const char *dir, fsdpc_ckpt_file **files, int *n,
                                       fsdpc_err *err) {
  *files = NULL;
  *n = 0;
  DIR *d = opendir(dir);
  if (!d)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "checkpoint %s: cannot open the folder: %s", dir,
                       strerror(errno));
  int cap = 0;
  fsdpc_status st = FSDPC_OK;
  struct dirent *de;
  while (st == FSDPC_OK && (de = readdir(d))) {
    if (strncmp(de->d_name, MANIFEST_PREFIX, strlen(MANIFEST_PREFIX)) != 0)
      continue;
    char *p = fsdpc__path_join(dir, de->d_name);
    st = p ? parse_manifest(p, files, n, &cap, err)
           : fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    free(p);
  }
  closedir(d);
  if (st != FSDPC_OK)
    fsdpc__ckpt_files_clear(files, n);
  return st;
}
