/* Records from ranks to their launcher (see save_notify.h). */
#define _GNU_SOURCE /* pipe2 */
#include "dist/save_notify.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_TEXT 1000

static void send_record(int rank, int kind, const char *text) {
  const char *v = getenv(FSDPC_LAUNCHER_FD_ENV);
  if (!v || !*v)
    return;
  char *end;
  long fd = strtol(v, &end, 10);
  if (*end || fd < 0 || fd > 1 << 20)
    return;
  size_t len = text ? strlen(text) : 0;
  if (len > MAX_TEXT)
    len = MAX_TEXT;
  uint8_t rec[12 + MAX_TEXT];
  int32_t h[3] = {(int32_t)rank, (int32_t)kind, (int32_t)len};
  memcpy(rec, h, sizeof h);
  if (len)
    memcpy(rec + 12, text, len);
  ssize_t w;
  do {
    w = write((int)fd, rec, 12 + len); /* one write: atomic under PIPE_BUF */
  } while (w < 0 && errno == EINTR);
}

void fsdpc__save_notify(int rank, int begin) {
  send_record(rank, begin ? 1 : 0, NULL);
}

void fsdpc__fail_notify(int culprit, const char *first) {
  send_record(culprit, 2, first);
}

void fsdpc__error_notify(int rank, const char *msg) {
  send_record(rank, 3, msg);
}

int fsdpc__save_channel_open(int fds[2]) {
  if (pipe2(fds, O_CLOEXEC) != 0)
    return -1;
  /* The ranks inherit the write end across exec; the read end stays here. */
  fcntl(fds[1], F_SETFD, 0);
  fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  return 0;
}

/* Acts on the whole records at the front of in->buf; keeps the rest. */
static void parse(fsdpc_launcher_inbox *in, int first_rank, int n, int *saving) {
  size_t off = 0;
  while (in->len - off >= 12) {
    int32_t h[3];
    memcpy(h, in->buf + off, sizeof h);
    if (h[2] < 0 || h[2] > MAX_TEXT) { /* not ours: drop what we have */
      in->len = off = 0;
      break;
    }
    if (in->len - off < 12 + (size_t)h[2])
      break;
    int i = h[0] - first_rank;
    if ((h[1] == 0 || h[1] == 1) && i >= 0 && i < n)
      saving[i] = h[1];
    char *text = h[1] == 2 && !in->first[0] ? in->first : h[1] == 3 && !in->own[0] ? in->own : NULL;
    if (text) {
      snprintf(text, sizeof in->first, "%.*s", (int)h[2], (const char *)in->buf + off + 12);
      for (char *p = text; *p; p++) /* one line, whatever a rank sent */
        if ((unsigned char)*p < ' ')
          *p = ' ';
      *(text == in->first ? &in->first_rank : &in->own_rank) = h[0];
    }
    off += 12 + (size_t)h[2];
  }
  memmove(in->buf, in->buf + off, in->len - off);
  in->len -= off;
}

void fsdpc__save_channel_read(int rfd, fsdpc_launcher_inbox *in, int first_rank, int n,
                              int *saving) {
  for (;;) {
    ssize_t r = read(rfd, in->buf + in->len, sizeof in->buf - in->len);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return;
    in->len += (size_t)r;
    parse(in, first_rank, n, saving);
  }
}
