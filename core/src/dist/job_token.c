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

static fsdpc_status from_file(const char *path, char out[FSDPC_JOB_TOKEN_CAP], fsdpc_err *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat st;
  if (fd < 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "FSDPC_JOB_TOKEN_FILE=%s: cannot open: %s", path,
                       strerror(errno));
  if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
    close(fd);
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "FSDPC_JOB_TOKEN_FILE=%s: not a regular file",
                       path);
  }
  char buf[FSDPC_JOB_TOKEN_CAP + 2];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n < 0)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "FSDPC_JOB_TOKEN_FILE=%s: %s", path,
                       strerror(errno));
  buf[n] = '\0';
  size_t len = strcspn(buf, "\r\n");
  if (!valid(buf, len))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "FSDPC_JOB_TOKEN_FILE=%s: the first line must be 1..64 printable characters "
                       "without spaces",
                       path);
  memcpy(out, buf, len);
  out[len] = '\0';
  return FSDPC_OK;
}

fsdpc_status fsdpc__job_token_from_env(char out[FSDPC_JOB_TOKEN_CAP], int *found, fsdpc_err *err) {
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
    return from_file(v, out, err);
  char buf[256];
  v = getenv("SLURM_JOB_ID");
  if (v && *v) {
    const char *step = getenv("SLURM_STEP_ID");
    snprintf(buf, sizeof buf, "slurm-%s.%s", v, step && *step ? step : "0");
  } else if ((v = getenv("TORCHELASTIC_RUN_ID")) && *v && strcmp(v, "none") != 0) {
    snprintf(buf, sizeof buf, "torchrun-%s", v);
  } else {
    *found = 0;
    return FSDPC_OK;
  }
  if (!valid(buf, strlen(buf)))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "job token '%.40s...' (from SLURM_JOB_ID or TORCHELASTIC_RUN_ID) is not "
                       "1..64 printable characters; set FSDPC_JOB_TOKEN",
                       buf);
  snprintf(out, FSDPC_JOB_TOKEN_CAP, "%s", buf);
  return FSDPC_OK;
}

fsdpc_status fsdpc__job_token_resolve(int single, const char *addr, int port,
                                      char out[FSDPC_JOB_TOKEN_CAP], fsdpc_err *err) {
  int found = 0;
  FSDPC_TRY(fsdpc__job_token_from_env(out, &found, err));
  if (found)
    return FSDPC_OK;
  if (single)
    return fsdpc__job_token_random(out, err);
  char buf[FSDPC_JOB_TOKEN_CAP];
  snprintf(buf, sizeof buf, "addr-%.40s:%d", addr, port);
  for (char *p = buf; *p; p++)
    if (*p <= ' ' || *p > '~')
      *p = '_';
  snprintf(out, FSDPC_JOB_TOKEN_CAP, "%s", buf);
  FSDPC_LOGW("no job token (FSDPC_JOB_TOKEN, FSDPC_JOB_TOKEN_FILE, SLURM_JOB_ID or "
             "TORCHELASTIC_RUN_ID): the store at %s:%d accepts any client that knows its "
             "address; set FSDPC_JOB_TOKEN to the same random value on every node",
             addr, port);
  return FSDPC_OK;
}
