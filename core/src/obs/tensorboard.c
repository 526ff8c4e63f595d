/* TensorBoard event-file writer: Event messages through libprotobuf-c,
 * framed as TFRecords with masked CRC-32C. */
#define _GNU_SOURCE
#include "obs/tensorboard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "obs/crc32c.h"
#include "obs/tb_event.pb-c.h"
#include "util/fs.h"

struct fsdpc_tb {
  FILE *f;
  char path[4096];
};

static double wall_now(void) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return (double)tv.tv_sec + 1e-6 * (double)tv.tv_usec;
}

static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

/* Serializes ev and writes it as one record. */
static fsdpc_status write_event(fsdpc_tb *tb, const FsdpcTb__Event *ev, fsdpc_err *err) {
  size_t n = fsdpc_tb__event__get_packed_size(ev);
  uint8_t *buf = malloc(n + 16);
  if (!buf)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory writing %s", tb->path);
  uint8_t head[12], tail[4];
  put_u64(head, (uint64_t)n);
  put_u32(head + 8, fsdpc__crc32c_masked(head, 8));
  fsdpc_tb__event__pack(ev, buf);
  put_u32(tail, fsdpc__crc32c_masked(buf, n));
  int ok = fwrite(head, 1, 12, tb->f) == 12 && fwrite(buf, 1, n, tb->f) == n &&
           fwrite(tail, 1, 4, tb->f) == 4 && fflush(tb->f) == 0;
  free(buf);
  if (!ok)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cannot write %s: %s (disk full? check log.dir)",
                       tb->path, strerror(errno));
  return FSDPC_OK;
}

fsdpc_status fsdpc__tb_open(const char *dir, int64_t start_step, fsdpc_tb **out, fsdpc_err *err) {
  *out = NULL;
  FSDPC_TRY(fsdpc__mkdir_p(dir, err));
  fsdpc_tb *tb = calloc(1, sizeof *tb);
  if (!tb)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  double now = wall_now();
  /* TensorBoard reads a folder's files in name order: seconds, then
   * microseconds, keep a resume after the run it continues. */
  long long sec = (long long)now, usec = (long long)((now - (double)sec) * 1e6);
  snprintf(tb->path, sizeof tb->path, "%s/events.out.tfevents.%lld.%06lld.%s.%d", dir, sec, usec,
           host, (int)getpid());
  /* a new name of our own: O_EXCL | O_NOFOLLOW never opens a planted file */
  int fd = open(tb->path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0 || !(tb->f = fdopen(fd, "wb"))) {
    fsdpc_status st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cannot create %s: %s (check log.dir)",
                                  tb->path, strerror(errno));
    if (fd >= 0)
      close(fd);
    free(tb);
    return st;
  }
  FsdpcTb__Event ev = FSDPC_TB__EVENT__INIT;
  ev.wall_time = now;
  ev.what_case = FSDPC_TB__EVENT__WHAT_FILE_VERSION;
  ev.file_version = "brain.Event:2";
  fsdpc_status st = write_event(tb, &ev, err);
  if (st == FSDPC_OK) {
    FsdpcTb__SessionLog sl = FSDPC_TB__SESSION_LOG__INIT;
    sl.status = FSDPC_TB__SESSION_LOG__STATUS__START;
    sl.msg = start_step > 0 ? "fsdpc: resumed" : "fsdpc: started";
    FsdpcTb__Event rs = FSDPC_TB__EVENT__INIT;
    rs.wall_time = now;
    rs.step = start_step + 1; /* TensorBoard keeps the older steps < this one */
    rs.what_case = FSDPC_TB__EVENT__WHAT_SESSION_LOG;
    rs.session_log = &sl;
    st = write_event(tb, &rs, err);
  }
  if (st != FSDPC_OK) {
    fsdpc__tb_close(tb);
    return st;
  }
  *out = tb;
  return FSDPC_OK;
}

fsdpc_status fsdpc__tb_scalars(fsdpc_tb *tb, int64_t step, double wall_time,
                               const char *const *tags, const double *values, int n,
                               fsdpc_err *err) {
  FsdpcTb__SummaryValue *vals = calloc((size_t)(n > 0 ? n : 1), sizeof *vals);
  FsdpcTb__SummaryValue **ptrs = calloc((size_t)(n > 0 ? n : 1), sizeof *ptrs);
  if (!vals || !ptrs) {
    free(vals);
    free(ptrs);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  }
  for (int i = 0; i < n; i++) {
    fsdpc_tb__summary_value__init(&vals[i]);
    vals[i].tag = (char *)tags[i];
    vals[i].value_case = FSDPC_TB__SUMMARY_VALUE__VALUE_SIMPLE_VALUE;
    vals[i].simple_value = (float)values[i];
    ptrs[i] = &vals[i];
  }
  FsdpcTb__Summary sum = FSDPC_TB__SUMMARY__INIT;
  sum.n_value = (size_t)n;
  sum.value = ptrs;
  FsdpcTb__Event ev = FSDPC_TB__EVENT__INIT;
  ev.wall_time = wall_time > 0 ? wall_time : wall_now();
  ev.step = step;
  ev.what_case = FSDPC_TB__EVENT__WHAT_SUMMARY;
  ev.summary = &sum;
  fsdpc_status st = write_event(tb, &ev, err);
  free(vals);
  free(ptrs);
  return st;
}

const char *fsdpc__tb_path(const fsdpc_tb *tb) {
  return tb ? tb->path : "";
}

void fsdpc__tb_close(fsdpc_tb *tb) {
  if (!tb)
    return;
  if (tb->f)
    fclose(tb->f);
  free(tb);
}
