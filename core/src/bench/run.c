/* One run of one variant: `fsdpc train` in fresh processes (its own process
 * group, stdout and stderr to files in its log.dir), waited for under a
 * timeout, then its logs read: metrics.jsonl from rank 0 (step times, loss,
 * communication) and rank<R>.json from every rank (peak memory). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "util/fs.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  size_t n;
  while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += n;
    if (len + 1 == cap) {
      char *b = realloc(buf, cap *= 2);
      if (!b)
        free(buf);
      buf = b;
    }
  }
  fclose(f);
  if (buf)
    buf[len] = '\0';
  return buf;
}

/* The line that says why a run failed: a rank's first "error:" line, else
 * the launcher's or the command's own error line, else the last line. */
static void failure_reason(const char *stderr_path, char *out, size_t cap) {
  char *text = read_text(stderr_path);
  snprintf(out, cap, "no error message (see %.400s)", stderr_path);
  if (!text)
    return;
  const char *rank_err = NULL, *cmd_err = NULL, *last = NULL;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    if (!line[0])
      continue;
    last = line;
    if (!rank_err && strncmp(line, "[rank ", 6) == 0 && strstr(line, "] error: "))
      rank_err = line;
    if (!cmd_err && strncmp(line, "fsdpc train: ", 13) == 0)
      cmd_err = line + 13;
  }
  const char *pick = rank_err ? rank_err : cmd_err ? cmd_err : last;
  if (pick == rank_err && rank_err) {
    /* "[rank 1] error: X" -> "rank 1: X" */
    int r = 0;
    sscanf(pick, "[rank %d]", &r);
    snprintf(out, cap, "rank %d: %s", r, strstr(pick, "] error: ") + 9);
  } else if (pick) {
    snprintf(out, cap, "%s", strncmp(pick, "error: ", 7) == 0 ? pick + 7 : pick);
  }
  free(text);
}

static fsdpc_status spawn(const fsdpc_bench_run_opts *o, pid_t *pid, fsdpc_err *err) {
  int n = 0;
  char np[16];
  snprintf(np, sizeof np, "%d", o->nproc_per_node);
  const char **argv = calloc((size_t)o->n_overrides + 10, sizeof(char *));
  if (!argv)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  argv[n++] = o->exe;
  argv[n++] = "train";
  argv[n++] = o->config;
  for (int i = 0; i < o->n_overrides; i++)
    argv[n++] = o->overrides[i];
  argv[n++] = "--nproc-per-node";
  argv[n++] = np;
  argv[n++] = "--master-port"; /* 0: a free port, so runs never collide */
  argv[n++] = "0";
  char out_path[4096], err_path[4096];
  snprintf(out_path, sizeof out_path, "%s/stdout.log", o->log_dir);
  snprintf(err_path, sizeof err_path, "%s/stderr.log", o->log_dir);
  /* util/fs.h's appends: never through a link planted in the output folder,
   * never a FIFO or device, never a file hard-linked elsewhere; emptied
   * first, as each run's logs start fresh */
  int fo = -1, fe = -1;
  fsdpc_status st = fsdpc__open_append(out_path, &fo, err);
  if (st == FSDPC_OK)
    st = fsdpc__open_append(err_path, &fe, err);
  if (st == FSDPC_OK && (ftruncate(fo, 0) != 0 || ftruncate(fe, 0) != 0))
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cannot empty %s: %s", out_path, strerror(errno));
  if (st != FSDPC_OK) {
    if (fo >= 0)
      close(fo);
    if (fe >= 0)
      close(fe);
    free(argv);
    return st;
  }
  fflush(NULL);
  *pid = fork();
  if (*pid == 0) {
    setpgid(0, 0);
    dup2(fo, STDOUT_FILENO);
    dup2(fe, STDERR_FILENO);
    execv(o->exe, (char *const *)argv);
    dprintf(STDERR_FILENO, "fsdpc train: cannot run %s: %s\n", o->exe, strerror(errno));
    _exit(127);
  }
  int e = errno;
  close(fo);
  close(fe);
  free(argv);
  if (*pid < 0)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "fork: %s", strerror(e));
  setpgid(*pid, *pid);
  return FSDPC_OK;
}

/* Waits for pid; after timeout_s asks it to stop (the launcher forwards
 * SIGTERM to its ranks), then kills its group. Returns the wait status, or
 * -1 on timeout. */
static int wait_child(pid_t pid, int timeout_s) {
  double t0 = now_s();
  int status = 0, term_sent = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid)
      return term_sent ? -1 : status;
    if (r < 0 && errno != EINTR)
      return -1;
    double el = now_s() - t0;
    if (!term_sent && el > timeout_s) {
      kill(pid, SIGTERM);
      term_sent = 1;
    } else if (term_sent && el > timeout_s + 15) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

static double num(const cJSON *o, const char *k, double def) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsNumber(v) ? v->valuedouble : def;
}

static int read_metrics(const char *dir, int warmup, fsdpc_bench_run *r) {
  char path[4096];
  snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
  char *text = read_text(path);
  if (!text) {
    snprintf(r->reason, sizeof r->reason, "no %.400s after the run", path);
    return 0;
  }
  int cap = 64;
  r->step_s = malloc((size_t)cap * sizeof(double));
  r->comm_s = malloc((size_t)cap * sizeof(double));
  for (char *line = strtok(text, "\n"); line && r->step_s && r->comm_s; line = strtok(NULL, "\n")) {
    cJSON *o = cJSON_Parse(line);
    if (!o)
      continue;
    double step = num(o, "step", 0);
    r->final_loss = num(o, "loss", NAN);
    r->tokens_per_step = num(o, "tokens", 0);
    r->world = (int)num(o, "world", 1);
    r->comm.all_gather = (uint64_t)num(o, "all_gather_bytes", 0);
    r->comm.reduce_scatter = (uint64_t)num(o, "reduce_scatter_bytes", 0);
    r->comm.all_reduce = (uint64_t)num(o, "all_reduce_bytes", 0);
    if (step > warmup) {
      if (r->n_steps == cap) {
        cap *= 2;
        double *a = realloc(r->step_s, (size_t)cap * sizeof(double));
        if (a)
          r->step_s = a;
        double *b = realloc(r->comm_s, (size_t)cap * sizeof(double));
        if (b)
          r->comm_s = b;
        if (!a || !b) {
          cJSON_Delete(o);
          break;
        }
      }
      r->step_s[r->n_steps] = num(o, "step_s", NAN);
      r->comm_s[r->n_steps] = num(o, "comm_s", 0);
      r->n_steps++;
    }
    cJSON_Delete(o);
  }
  free(text);
  if (r->n_steps == 0) {
    snprintf(r->reason, sizeof r->reason,
             "%.400s has no measured step (train.log_every must be 1; steps > warm-up)", path);
    return 0;
  }
  return 1;
}

static int read_ranks(const char *dir, fsdpc_bench_run *r) {
  r->reserved = -1;
  for (int rank = 0; rank < r->world; rank++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/rank%d.json", dir, rank);
    char *text = read_text(path);
    cJSON *o = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!o) {
      snprintf(r->reason, sizeof r->reason, "missing or unreadable %.400s", path);
      return 0;
    }
    const cJSON *pk = cJSON_GetObjectItemCaseSensitive(o, "peak_bytes");
    for (int c = 0; c < FSDPC_MEM_NCAT; c++) {
      int64_t v = (int64_t)num(pk, fsdpc__mem_cat_name((fsdpc_mem_cat)c), 0);
      if (v > r->peak[c])
        r->peak[c] = v;
    }
    int64_t t = (int64_t)num(pk, "total", 0), rss = (int64_t)num(o, "host_rss_peak_bytes", 0);
    int64_t res = (int64_t)num(o, "reserved_bytes", -1);
    if (t > r->total_peak)
      r->total_peak = t;
    if (rss > r->rss_peak)
      r->rss_peak = rss;
    if (res > r->reserved)
      r->reserved = res;
    if (rank == 0) {
      const cJSON *sh = cJSON_GetObjectItemCaseSensitive(o, "shard_bytes");
      r->shard_params = (uint64_t)num(sh, "params", 0);
      r->shard_grads = (uint64_t)num(sh, "grads", 0);
      r->shard_optim = (uint64_t)num(sh, "optim", 0);
    }
    cJSON_Delete(o);
  }
  return 1;
}

fsdpc_status fsdpc__bench_run(const fsdpc_bench_run_opts *o, fsdpc_bench_run *r, fsdpc_err *err) {
  memset(r, 0, sizeof *r);
  r->final_loss = NAN;
  FSDPC_TRY(fsdpc__mkdir_p(o->log_dir, err));
  pid_t pid = -1;
  double t0 = now_s();
  FSDPC_TRY(spawn(o, &pid, err));
  int status = wait_child(pid, o->timeout_s);
  r->wall_s = now_s() - t0;
  char err_path[4096];
  snprintf(err_path, sizeof err_path, "%s/stderr.log", o->log_dir);
  if (status == -1) {
    snprintf(r->reason, sizeof r->reason, "timed out after %d s (bench timeout_s)", o->timeout_s);
    return FSDPC_OK;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    failure_reason(err_path, r->reason, sizeof r->reason);
    return FSDPC_OK;
  }
  r->ok = read_metrics(o->log_dir, o->warmup_steps, r) && read_ranks(o->log_dir, r);
  return FSDPC_OK;
}

void fsdpc__bench_run_free(fsdpc_bench_run *r) {
  if (!r)
    return;
  free(r->step_s);
  free(r->comm_s);
  r->step_s = r->comm_s = NULL;
}
