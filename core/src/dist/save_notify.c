/* Save-in-progress records from ranks to the launcher (see save_notify.h). */
#define _GNU_SOURCE /* pipe2 */
#include "dist/save_notify.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

void fsdpc__save_notify(int rank, int begin) {
  const char *v = getenv(FSDPC_LAUNCHER_FD_ENV);
  if (!v || !*v)
    return;
  char *end;
  long fd = strtol(v, &end, 10);
  if (*end || fd < 0 || fd > 1 << 20)
    return;
  int32_t rec[2] = {(int32_t)rank, begin ? 1 : 0};
  ssize_t w;
  do {
    w = write((int)fd, rec, sizeof rec);
  } while (w < 0 && errno == EINTR);
}

int fsdpc__save_channel_open(int fds[2]) {
  if (pipe2(fds, O_CLOEXEC) != 0)
    return -1;
  /* The ranks inherit the write end across exec; the read end stays here. */
  fcntl(fds[1], F_SETFD, 0);
  fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  return 0;
}

void fsdpc__save_channel_read(int rfd, int first_rank, int n, int *saving) {
  for (;;) {
    int32_t rec[2];
    ssize_t r = read(rfd, rec, sizeof rec);
    if (r < 0 && errno == EINTR)
      continue;
    if (r != (ssize_t)sizeof rec)
      return;
    int i = rec[0] - first_rank;
    if (i >= 0 && i < n)
      saving[i] = rec[1] != 0;
  }
}
