/* The job token (see job_token.h). */
#define _GNU_SOURCE
#include "dist/job_token.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "util/log.h"

static int valid(const char *t, size_t n) {
  if (n == 0 || n >= FSDPC_JOB_TOKEN_CAP)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (t[i] <= ' ' || t[i] > '~')
      return 0;
  return 1;
}

fsdpc_status fsdpc__job_token_random(char out[FSDPC_JOB_TOKEN_CAP], fsdpc_err *err) {
  unsigned char b[16];
  size_t got = 0;
  while (got < sizeof b) {
    ssize_t r = getrandom(b + got, sizeof b - got, 0);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "job token: getrandom: %s", strerror(errno));
    got += (size_t)r;
  }
  for (size_t i = 0; i < sizeof b; i++)
    snprintf(out + 2 * i, 3, "%02x", b[i]);
  return FSDPC_OK;
}

/* Reads the first line of a private file (regular, this user's, mode
 * 600 or stricter) into out (1..cap-1 printable characters). `name` says
 * where the path came from, for messages. */
static fsdpc_status read_private(const char *name, const char *path, char *out, size_t cap,
                                 fsdpc_err *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  struct stat st;
  if (fd < 0)
    return fsdpc__fail(err, errno == ENOENT ? FSDPC_INVALID_USAGE : FSDPC_SYSTEM_ERROR,
                       "%s=%s: cannot open: %s", name, path, strerror(errno));
  if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
    close(fd);
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s=%s: not a regular file", name, path);
  }
  if (st.st_uid != geteuid() || (st.st_mode & 077)) {
    close(fd);
    return fsdpc__fail(
        err, FSDPC_INVALID_USAGE,
        "%s=%s: %s, so others could learn the job token: chmod 600 it (and own "
        "it)",
        name, path, st.st_uid != geteuid() ? "belongs to another user" : "is readable by others");
  }
  char buf[FSDPC_JOB_TOKEN_CAP + 2];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n < 0)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s=%s: %s", name, path, strerror(errno));
  buf[n] = '\0';
  size_t len = strcspn(buf, "\r\n");
  if (len >= cap || !valid(buf, len))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s=%s: the first line must be 1..%zu printable characters without spaces",
                       name, path, cap - 1);
  memcpy(out, buf, len);
  out[len] = '\0';
  return FSDPC_OK;
}

/* mkdir -p of path's folder, each new folder private (0700). */
static void make_parents(const char *path) {
  char d[4096];
  snprintf(d, sizeof d, "%s", path);
  for (char *p = d + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    mkdir(d, 0700); /* EEXIST is fine; a real failure shows at the open */
    *p = '/';
  }
}

/* The user's secret (job_token.h), made on first use: written to a private
 * temporary file, then linked to its name, so that ranks (or nodes on a
 * shared home folder) racing to make it all end up with the one that won. */
static fsdpc_status user_secret(char out[FSDPC_JOB_TOKEN_CAP], fsdpc_err *err) {
  char path[4096];
  const char *name = "FSDPC_SECRET_FILE", *f = getenv(name), *home = getenv("HOME");
  if (f && *f) {
    snprintf(path, sizeof path, "%s", f);
  } else if (home && *home) {
    snprintf(path, sizeof path, "%s/.config/fsdpc/job-secret", home);
    name = "the job secret";
  } else {
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "no job token: set FSDPC_JOB_TOKEN to the same random value on every "
                       "rank (e.g. export FSDPC_JOB_TOKEN=$(openssl rand -hex 16)), or HOME or "
                       "FSDPC_SECRET_FILE for a per-user secret");
  }
  struct stat st;
  if (lstat(path, &st) != 0 && errno == ENOENT) {
    char tmp[4200], secret[FSDPC_JOB_TOKEN_CAP];
    FSDPC_TRY(fsdpc__job_token_random(secret, err));
    make_parents(path);
    snprintf(tmp, sizeof tmp, "%s.tmp-%d-%.8s", path, (int)getpid(), secret);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                         "%s: cannot create %s: %s (set FSDPC_JOB_TOKEN, or FSDPC_SECRET_FILE to a "
                         "writable place)",
                         name, tmp, strerror(errno));
    char line[FSDPC_JOB_TOKEN_CAP + 1];
    int len = snprintf(line, sizeof line, "%s\n", secret);
    int ok = write(fd, line, (size_t)len) == len && fsync(fd) == 0;
    close(fd);
    if (ok && link(tmp, path) != 0 && errno != EEXIST)
      ok = 0;
    int e = errno;
    unlink(tmp);
    if (!ok)
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: cannot write %s: %s", name, path,
                         strerror(e));
  }
  return read_private(name, path, out, FSDPC_JOB_TOKEN_CAP, err);
}

fsdpc_status fsdpc__job_token_derive(const char *what, char out[FSDPC_JOB_TOKEN_CAP],
                                     fsdpc_err *err) {
  char secret[FSDPC_JOB_TOKEN_CAP];
  FSDPC_TRY(user_secret(secret, err));
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (!HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)what, strlen(what),
            mac, &n) ||
      n < 16)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "job token: HMAC-SHA256 failed (libcrypto)");
  for (int i = 0; i < 16; i++)
    snprintf(out + 2 * i, 3, "%02x", mac[i]);
  return FSDPC_OK;
}

/* FSDPC_JOB_TOKEN or FSDPC_JOB_TOKEN_FILE; *found 0 when neither is set. */
static fsdpc_status explicit_token(char out[FSDPC_JOB_TOKEN_CAP], int *found, fsdpc_err *err) {
  *found = 1;
  const char *v = getenv("FSDPC_JOB_TOKEN");
  if (v && *v) {
    if (!valid(v, strlen(v)))
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "FSDPC_JOB_TOKEN must be 1..64 printable characters without spaces");
    snprintf(out, FSDPC_JOB_TOKEN_CAP, "%s", v);
    return FSDPC_OK;
  }
  v = getenv("FSDPC_JOB_TOKEN_FILE");
  if (v && *v)
    return read_private("FSDPC_JOB_TOKEN_FILE", v, out, FSDPC_JOB_TOKEN_CAP, err);
  *found = 0;
  return FSDPC_OK;
}

fsdpc_status fsdpc__job_token_from_env(char out[FSDPC_JOB_TOKEN_CAP], int *found, fsdpc_err *err) {
  FSDPC_TRY(explicit_token(out, found, err));
  if (*found)
    return FSDPC_OK;
  /* A job id is public: it only names the job; the secret makes the token. */
  char id[300];
  const char *v = getenv("SLURM_JOB_ID");
  if (v && *v) {
    const char *step = getenv("SLURM_STEP_ID");
    snprintf(id, sizeof id, "slurm:%.120s.%.40s", v, step && *step ? step : "0");
  } else if ((v = getenv("TORCHELASTIC_RUN_ID")) && *v && strcmp(v, "none") != 0) {
    snprintf(id, sizeof id, "torchrun:%.200s", v);
  } else {
    return FSDPC_OK;
  }
  *found = 1;
  return fsdpc__job_token_derive(id, out, err);
}

fsdpc_status fsdpc__job_token_resolve(int single, const char *addr, int port,
                                      char out[FSDPC_JOB_TOKEN_CAP], fsdpc_err *err) {
  int found = 0;
  /* One process, or our launcher on one node (it hands the token to its
   * ranks): nobody else needs to know it. */
  FSDPC_TRY(single ? explicit_token(out, &found, err)
                   : fsdpc__job_token_from_env(out, &found, err));
  if (found)
    return FSDPC_OK;
  if (single)
    return fsdpc__job_token_random(out, err);
  char id[300];
  snprintf(id, sizeof id, "addr:%.200s:%d", addr, port);
  FSDPC_TRY(fsdpc__job_token_derive(id, out, err));
  FSDPC_LOGW("no job token or job id (FSDPC_JOB_TOKEN, FSDPC_JOB_TOKEN_FILE, SLURM_JOB_ID, "
             "TORCHELASTIC_RUN_ID): the token comes from the store address %s:%d and your "
             "secret, so two of your jobs must not share that address and port; set "
             "FSDPC_JOB_TOKEN to the same random value on every node to be sure",
             addr, port);
  return FSDPC_OK;
}
