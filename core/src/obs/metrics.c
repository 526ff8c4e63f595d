/* metrics.jsonl across restarts: the writer's resume trimming and run
 * records, and the reader behind `fsdpc metrics` and `fsdpc plot`. */
#define _GNU_SOURCE
#include "obs/metrics.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/escape.h"
#include "util/fs.h"
#include "util/log.h"

typedef struct lines {
  char **v;
  size_t n, cap;
  int partial; /* the last line had no newline (a writer was killed mid-line) */
} lines;

static void lines_free(lines *l) {
  for (size_t i = 0; i < l->n; i++)
    free(l->v[i]);
  free(l->v);
}

/* Reads every line of path; a missing file is no lines. With own set the
 * file is one fsdpc writes (log.dir/metrics.jsonl): a link there, or
 * anything but a regular file, is refused before it is read. Otherwise a
 * FIFO or device is refused too (it would never end). */
static fsdpc_status read_lines(const char *path, int own, lines *out, fsdpc_err *err) {
  memset(out, 0, sizeof *out);
  int fd = own ? fsdpc__open_regular_nofollow(path, 0) : fsdpc__open_regular(path, 0);
  if (fd == -1 && errno == ENOENT)
    return FSDPC_OK;
  if (fd == -1 && errno == ELOOP)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s is a symbolic link; fsdpc does not write through links it did not "
                       "make (remove it, or choose another log.dir)",
                       path);
  if (fd == -2)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s exists and is not a regular file (a FIFO, device or folder); remove "
                       "it, or choose another log.dir",
                       path);
  FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
  if (!f) {
    int e = errno;
    if (fd >= 0)
      close(fd);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cannot read %s: %s", path, strerror(e));
  }
  char *buf = NULL;
  size_t bcap = 0;
  ssize_t len;
  fsdpc_status st = FSDPC_OK;
  while ((len = getline(&buf, &bcap, f)) > 0) {
    int nl = buf[len - 1] == '\n';
    if (nl)
      buf[--len] = '\0';
    out->partial = !nl;
    if (out->n == out->cap) {
      size_t nc = out->cap ? 2 * out->cap : 256;
      char **nv = realloc(out->v, nc * sizeof *nv);
      if (!nv) {
        st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory reading %s", path);
        break;
      }
      out->v = nv;
      out->cap = nc;
    }
    if (!(out->v[out->n] = strdup(buf))) {
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory reading %s", path);
      break;
    }
    out->n++;
  }
  free(buf);
  fclose(f);
  if (st != FSDPC_OK)
    lines_free(out);
  return st;
}

enum { REC_OTHER, REC_START, REC_STEP, REC_BAD };

/* Kind of one line; *step / *resumed get its step or resumed_from. */
static int classify(const char *line, int64_t *step, int64_t *resumed) {
  cJSON *o = cJSON_Parse(line);
  if (!o || !cJSON_IsObject(o)) {
    cJSON_Delete(o);
    return REC_BAD;
  }
  int kind = REC_OTHER;
  const cJSON *ev = cJSON_GetObjectItemCaseSensitive(o, "event");
  const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "step");
  if (cJSON_IsString(ev) && strcmp(ev->valuestring, "start") == 0) {
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "resumed_from");
    *resumed = cJSON_IsNumber(r) ? (int64_t)r->valuedouble : 0;
    kind = REC_START;
  } else if (cJSON_IsNumber(st)) {
    *step = (int64_t)st->valuedouble;
    kind = REC_STEP;
  }
  cJSON_Delete(o);
  return kind;
}

/* Index of the last fresh start record (0 if none): the current run. */
static size_t last_fresh_start(const lines *l) {
  size_t at = 0;
  for (size_t i = 0; i < l->n; i++) {
    int64_t s = 0, r = 0;
    if (classify(l->v[i], &s, &r) == REC_START && r == 0)
      at = i;
  }
  return at;
}

/* Writes the kept lines to path through a private temporary file. */
static fsdpc_status rewrite(const char *path, const lines *l, const char *keep, fsdpc_err *err) {
  fsdpc_out_file out;
  FSDPC_TRY(fsdpc__out_create(path, &out, err));
  int fd = dup(out.fd);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  int ok = f != NULL;
  for (size_t i = 0; ok && i < l->n; i++)
    if (keep[i])
      ok = fprintf(f, "%s\n", l->v[i]) >= 0;
  if (f && fclose(f) != 0)
    ok = 0;
  else if (!f && fd >= 0)
    close(fd);
  if (!ok) {
    int e = errno;
    fsdpc__out_abort(&out);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cannot rewrite %s: %s (check log.dir)", path,
                       strerror(e));
  }
  return fsdpc__out_commit(&out, err);
}

/* Appends the lines trimming does not understand to aside (never through
 * a link, util/fs.h), each after a note of where it came from. */
static fsdpc_status move_aside(const char *path, const char *aside, const lines *l, const char *bad,
                               fsdpc_err *err) {
  int fd;
  FSDPC_TRY(fsdpc__open_append(aside, &fd, err));
  FILE *f = fdopen(fd, "a");
  int ok = f != NULL;
  time_t now = time(NULL);
  for (size_t i = 0; ok && i < l->n; i++)
    if (bad[i])
      ok = fprintf(f, "# %s line %zu, moved here at %lld (not a JSON record)\n%s\n", path, i + 1,
                   (long long)now, l->v[i]) >= 0;
  if (f ? fclose(f) != 0 : close(fd) != 0)
    ok = 0;
  if (!ok)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cannot write %s: %s (check log.dir)", aside,
                       strerror(errno));
  return FSDPC_OK;
}

/* Drops the current run's step records after step k (a resume replaces
 * them). Lines it does not understand (not JSON: a line cut by a kill, or
 * someone's note) are moved to metrics.unparsed.txt beside the file, with a
 * warning, so nothing is lost and metrics.jsonl stays one record a line.
 * Rewrites the file only when a line goes or the last one lacks its
 * newline. */
static fsdpc_status trim(const char *dir, const char *path, int64_t k, fsdpc_err *err) {
  lines l;
  FSDPC_TRY(read_lines(path, 1, &l, err));
  size_t from = last_fresh_start(&l);
  char *keep = calloc(l.n ? l.n : 1, 1), *bad = calloc(l.n ? l.n : 1, 1);
  if (!keep || !bad) {
    free(keep);
    free(bad);
    lines_free(&l);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  }
  int change = l.partial;
  size_t unknown = 0, first_unknown = 0;
  for (size_t i = 0; i < l.n; i++) {
    int64_t s = 0, r = 0;
    int kind = classify(l.v[i], &s, &r);
    bad[i] = kind == REC_BAD;
    keep[i] = !bad[i] && !(i >= from && kind == REC_STEP && s > k);
    change |= !keep[i];
    if (bad[i] && !unknown++)
      first_unknown = i + 1;
  }
  fsdpc_status st = FSDPC_OK;
  if (unknown) {
    char aside[4200];
    snprintf(aside, sizeof aside, "%s/metrics.unparsed.txt", dir);
    st = move_aside(path, aside, &l, bad, err);
    if (st == FSDPC_OK)
      FSDPC_LOGW("%s: moved %zu line(s) that are not JSON records (the first was line %zu) to "
                 "%s",
                 path, unknown, first_unknown, aside);
  }
  if (st == FSDPC_OK && change)
    st = rewrite(path, &l, keep, err);
  free(keep);
  free(bad);
  lines_free(&l);
  return st;
}

fsdpc_status fsdpc__metrics_open(const char *dir, const fsdpc_run_record *rr, char *run_id,
                                 size_t cap, FILE **out, fsdpc_err *err) {
  *out = NULL;
  FSDPC_TRY(fsdpc__mkdir_p(dir, err));
  char path[4096];
  snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
  FSDPC_TRY(trim(dir, path, rr->resumed_from > 0 ? rr->resumed_from : INT64_MAX, err));
  int fd;
  FSDPC_TRY(fsdpc__open_append(path, &fd, err));
  FILE *f = fdopen(fd, "a");
  if (!f) {
    int e = errno;
    close(fd);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cannot write %s: %s (check log.dir)", path,
                       strerror(e));
  }
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  char stamp[32], hash[24];
  strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
  snprintf(run_id, cap, "%04d%02d%02d-%02d%02d%02d-%d", tm.tm_year + 1900, tm.tm_mon + 1,
           tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)getpid());
  snprintf(hash, sizeof hash, "%016llx", (unsigned long long)rr->config_hash);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "event", "start");
  cJSON_AddStringToObject(o, "run_id", run_id);
  cJSON_AddStringToObject(o, "time", stamp);
  cJSON_AddStringToObject(o, "config", rr->config ? rr->config : "");
  cJSON_AddStringToObject(o, "config_hash", hash);
  cJSON_AddNumberToObject(o, "resumed_from", (double)rr->resumed_from);
  cJSON_AddNumberToObject(o, "world", rr->world);
  cJSON_AddNumberToObject(o, "max_steps", (double)rr->max_steps);
  cJSON_AddNumberToObject(o, "global_batch", (double)rr->global_batch);
  cJSON_AddNumberToObject(o, "tokens_per_step", (double)rr->tokens_per_step);
  char *line = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  errno = 0;
  int ok = line && fprintf(f, "%s\n", line) >= 0 && fflush(f) == 0;
  cJSON_free(line);
  /* A full disk costs the metrics, never the run: say so, go on. */
  if (!ok)
    FSDPC_LOGE("cannot write the run record to %s: %s; the run goes on (free space in log.dir)",
               path, strerror(errno ? errno : EIO));
  *out = f;
  return FSDPC_OK;
}

static double num(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

fsdpc_status fsdpc__metrics_read(const char *dir, fsdpc_metrics_run *out, fsdpc_err *err) {
  memset(out, 0, sizeof *out);
  char path[4096];
  struct stat sb;
  size_t dl = strlen(dir);
  if (stat(dir, &sb) == 0 && S_ISREG(sb.st_mode) && dl > 6 && strcmp(dir + dl - 6, ".jsonl") == 0)
    snprintf(path, sizeof path, "%s", dir);
  else
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
  if (access(path, R_OK) != 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: no metrics.jsonl there (%s); give a run's log.dir", dir,
                       strerror(errno));
  if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: not a regular file", path);
  lines l;
  FSDPC_TRY(read_lines(path, 0, &l, err));
  size_t from = last_fresh_start(&l);
  out->pts = calloc(l.n ? l.n : 1, sizeof *out->pts);
  if (!out->pts) {
    lines_free(&l);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  }
  for (size_t i = 0; i < l.n; i++) {
    cJSON *o = cJSON_Parse(l.v[i]);
    if (!o || !cJSON_IsObject(o)) {
      cJSON_Delete(o);
      continue;
    }
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(o, "event");
    int start = cJSON_IsString(ev) && strcmp(ev->valuestring, "start") == 0;
    if (start && i < from) {
      out->n_older += !(num(o, "resumed_from") > 0); /* fresh starts: runs */
    } else if (start) {
      int64_t k = (int64_t)num(o, "resumed_from");
      if (!(k > 0))
        k = 0;
      while (out->n > 0 && out->pts[out->n - 1].step > k)
        out->n--; /* a resume replaces the steps after its checkpoint */
      if (out->n_starts++ == 0) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "run_id");
        if (cJSON_IsString(id)) /* from a file: escaped before anyone prints it */
          fsdpc__escape_str(out->run_id, sizeof out->run_id, id->valuestring);
      }
      out->last_resumed_from = k;
      double w = num(o, "world");
      if (w > 0)
        out->world = (int)w;
    } else if (i >= from && !isnan(num(o, "step"))) {
      fsdpc_metrics_point *p = &out->pts[out->n++];
      p->step = (int64_t)num(o, "step");
      p->loss = num(o, "loss");
      p->eval_loss = num(o, "eval_loss");
      p->lr = num(o, "lr");
      p->grad_norm = num(o, "grad_norm");
      p->tok_s = num(o, "tok_s");
      p->step_s = num(o, "step_s");
      p->tokens = num(o, "tokens");
      p->elapsed_s = num(o, "elapsed_s");
      p->peak_bytes = num(o, "peak_bytes");
      if (out->world == 0 && num(o, "world") > 0)
        out->world = (int)num(o, "world");
    }
    cJSON_Delete(o);
  }
  lines_free(&l);
  if (out->n == 0) {
    fsdpc__metrics_run_free(out);
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: no logged steps yet", path);
  }
  return FSDPC_OK;
}

void fsdpc__metrics_run_free(fsdpc_metrics_run *r) {
  if (!r)
    return;
  free(r->pts);
  memset(r, 0, sizeof *r);
}
