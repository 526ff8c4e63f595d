/* What a run tells its user: a log line every log.every steps, one JSON
 * object per logged step in log.dir/metrics.jsonl, a progress bar with ETA
 * on stderr when it is a terminal, and per-rank memory in the seed's "before /
 * consumed / peak" style. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fsdp/memplan.h"
#include "train/session.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/mem.h"
#ifdef FSDPC_WITH_CUDA
#include "ops/cuda/cuda_ctx.h"
#endif

/* Memory of the device this rank computes on: the host allocator's tracked
 * categories on the CPU; the CUDA pools' allocated bytes (and reserved, in
 * *reserved_peak, -1 on the CPU) on a GPU. */
void fsdpc__session_mem(fsdpc_session *s, fsdpc_mem_stats *ms, int64_t *reserved_peak) {
  if (reserved_peak) *reserved_peak = -1;
#ifdef FSDPC_WITH_CUDA
  fsdpc_cuda_mem_stats cs;
  fsdpc_err err;
  if (s->cuda && fsdpc__cuda_mem_stats(s->cuda, &cs, &err) == FSDPC_OK) {
    for (int c = 0; c < FSDPC_MEM_NCAT; c++) {
      ms->current[c] = cs.allocated[c];
      ms->peak[c] = cs.allocated_peak[c];
    }
    ms->total_current = cs.total_allocated;
    ms->total_peak = cs.total_allocated_peak;
    if (reserved_peak) *reserved_peak = cs.total_reserved_peak;
    return;
  }
#endif
  fsdpc__mem_stats(ms);
}

void fsdpc__session_mem_reset_peak(fsdpc_session *s) {
  fsdpc__mem_reset_peak();
#ifdef FSDPC_WITH_CUDA
  fsdpc_err err;
  if (s->cuda) fsdpc__cuda_mem_reset_peak(s->cuda, &err);
#endif
}

static double mib(int64_t b) { return (double)b / 1048576.0; }

void fsdpc__report_memory(fsdpc_session *s, const char *when) {
  fsdpc_engine_bytes eb;
  fsdpc_mem_stats ms;
  int64_t rss, hwm;
  fsdpc__engine_bytes(s->eng, &eb);
  fsdpc__session_mem(s, &ms, NULL);
  fsdpc__mem_rss(&rss, &hwm);
  char cats[512];
  int n = 0;
  for (int c = 0; c < FSDPC_MEM_NCAT; c++)
    n += snprintf(cats + n, sizeof cats - (size_t)n, "%s%s %.2f/%.2f", c ? ", " : "",
                  fsdpc__mem_cat_name((fsdpc_mem_cat)c), mib(ms.current[c]), mib(ms.peak[c]));
  FSDPC_LOGI("memory (%s): shards params %.2f + grads %.2f + optim %.2f = %.2f MiB; "
             "tracked now/peak MiB: %s; total %.2f/%.2f; host RSS %.1f MiB, peak %.1f MiB",
             when, mib((int64_t)eb.params), mib((int64_t)eb.grads), mib((int64_t)eb.optim),
             mib((int64_t)(eb.params + eb.grads + eb.optim)), cats, mib(ms.total_current),
             mib(ms.total_peak), mib(rss), mib(hwm));
}

int fsdpc__progress_wanted(const fsdpc_config *c, const fsdpc_dist_env *env) {
  if (c->log.progress != FSDPC_PROGRESS_AUTO)
    return c->log.progress == FSDPC_PROGRESS_ON;
  /* mpirun and srun --pty give every rank a terminal whose output is then
   * collected into one log: a bar there is a flood of \r lines. */
  int pty_launcher = strcmp(env->source, "mpi") == 0 || strcmp(env->source, "slurm") == 0;
  return isatty(STDERR_FILENO) && !pty_launcher;
}

/* Seconds left: the time per step of this start's steps only (a resumed
 * run's earlier steps took no time here). */
static double eta_s(const fsdpc_session *s, int64_t step) {
  int64_t done = step - s->ckpt.start_step, left = s->plan->modes.batch.max_steps - step;
  if (done <= 0 || s->t_loop <= 0)
    return NAN;
  return (fsdpc__now() - s->t_loop) / (double)done * (double)left;
}

static void fmt_dur(char *out, size_t cap, double sec) {
  if (isnan(sec))
    snprintf(out, cap, "?");
  else if (sec < 60)
    snprintf(out, cap, "%.0fs", sec);
  else if (sec < 3600)
    snprintf(out, cap, "%dm%02ds", (int)sec / 60, (int)sec % 60);
  else
    snprintf(out, cap, "%dh%02dm", (int)sec / 3600, (int)sec % 3600 / 60);
}

/* The bar goes to stderr (stdout is for results: generations, tables). */
static void progress_bar(fsdpc_session *s, int64_t step, double loss, double tok_s) {
  int64_t total = s->plan->modes.batch.max_steps;
  char el[32], eta[32];
  fmt_dur(el, sizeof el, fsdpc__now() - s->t_loop);
  fmt_dur(eta, sizeof eta, eta_s(s, step));
  int w = 30, fill = (int)(w * step / total);
  char bar[64];
  for (int i = 0; i < w; i++) bar[i] = i < fill ? '#' : '.';
  bar[w] = '\0';
  fprintf(stderr, "\r[%s] %lld/%lld loss %.4f  %.0f tok/s  %s elapsed, ETA %s ", bar,
          (long long)step, (long long)total, loss, tok_s, el, eta);
  if (step == total)
    fputc('\n', stderr);
  fflush(stderr);
}

/* The trainer resets the peak window every step; keep the run's maximum. */
static void track_run_peak(fsdpc_session *s, const fsdpc_mem_stats *ms) {
  for (int c = 0; c < FSDPC_MEM_NCAT; c++)
    if (ms->peak[c] > s->run_peak.peak[c])
      s->run_peak.peak[c] = ms->peak[c];
  if (ms->total_peak > s->run_peak.total_peak)
    s->run_peak.total_peak = ms->total_peak;
  s->comm_s_total += s->last_comm.comm_s;
}

/* One line with this start's phases (train/session.h), after its first step:
 * where the time from launch to a trained step went. */
static void report_startup(const fsdpc_session *s, double step_s) {
  const fsdpc_startup *u = &s->startup;
  double now = fsdpc__now(), before = now - step_s - u->t_ready;
  FSDPC_LOGI("startup: launch %.2fs, device %.2fs, plugins %.2fs, comm %.2fs, alloc %.2fs, "
             "weights %.2fs (%s), model %.2fs, data %.2fs, until step %.2fs, first step %.2fs; "
             "launch to first step %.2fs",
             u->launch, u->device, u->plugins, u->comm, u->alloc, u->weights,
             u->weights_how ? u->weights_how : "none", u->model, u->data, before > 0 ? before : 0.0,
             step_s, u->launch + (now - s->t_start));
}

void fsdpc__report_step(fsdpc_session *s, int64_t step, double loss, double lr, double gnorm,
                        double step_s, double eval_loss) {
  fsdpc_mem_stats ms;
  fsdpc__session_mem(s, &ms, NULL);
  track_run_peak(s, &ms);
  if (s->env.rank != 0) return;
  const fsdpc_config *c = s->cfg;
  double tok = (double)(s->plan->modes.batch.global * s->plan->modes.batch.seq_len);
  double tok_s = step_s > 0 ? tok / step_s : 0.0;
  double el = fsdpc__now() - s->t_start;
  if (s->t_loop <= 0) {
    s->t_loop = fsdpc__now() - step_s; /* this start's first step began */
    report_startup(s, step_s);
  }
  const fsdpc_comm_bytes cb = s->last_comm;
  const int64_t max_steps = s->plan->modes.batch.max_steps;
  int log_now = step % c->train.log_every == 0 || step == max_steps;
  if (log_now) {
    char ev[64 + FSDPC_OBJ_MAX_METRICS * 80] = "";
    size_t evn = 0;
    if (!isnan(eval_loss)) evn += (size_t)snprintf(ev, sizeof ev, " eval_loss %.4f", eval_loss);
    const fsdpc_train_objective *ob = &s->objective;
    for (uint32_t i = 0; ob->have_metrics && i < ob->n_metrics && evn < sizeof ev; i++)
      evn += (size_t)snprintf(ev + evn, sizeof ev - evn, " %s %.4f", ob->metric_names[i],
                              ob->metrics[i]);
    if (s->progress)
      fputc('\n', stderr);
    char eta[32];
    fmt_dur(eta, sizeof eta, eta_s(s, step));
    FSDPC_LOGI("step %lld/%lld loss %.4f%s lr %.3e grad_norm %.4f tok/s %.0f (%.0f per rank) "
               "step %.3fs elapsed %.1fs ETA %s peak %.1f MiB",
               (long long)step, (long long)max_steps, loss, ev, lr, gnorm, tok_s,
               tok_s / s->env.world_size, step_s, el, eta, mib(ms.total_peak));
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "step", (double)step);
    cJSON_AddNumberToObject(o, "loss", loss);
    if (!isnan(eval_loss)) cJSON_AddNumberToObject(o, "eval_loss", eval_loss);
    cJSON_AddNumberToObject(o, "lr", lr);
    cJSON_AddNumberToObject(o, "grad_norm", gnorm);
    cJSON_AddNumberToObject(o, "tok_s", tok_s);
    cJSON_AddNumberToObject(o, "step_s", step_s);
    cJSON_AddNumberToObject(o, "elapsed_s", el);
    cJSON_AddNumberToObject(o, "peak_bytes", (double)ms.total_peak);
    cJSON_AddNumberToObject(o, "all_gather_bytes", (double)cb.all_gather);
    cJSON_AddNumberToObject(o, "reduce_scatter_bytes", (double)cb.reduce_scatter);
    cJSON_AddNumberToObject(o, "all_reduce_bytes", (double)cb.all_reduce);
    cJSON_AddNumberToObject(o, "comm_s", cb.comm_s);
    cJSON_AddNumberToObject(o, "tokens", tok);
    cJSON_AddNumberToObject(o, "world", s->env.world_size);
    cJSON_AddNumberToObject(o, "skipped_steps", (double)s->skipped_steps);
    for (int k = 0; k < FSDPC_MEM_NCAT; k++) {
      char key[48];
      snprintf(key, sizeof key, "peak_%s_bytes", fsdpc__mem_cat_name((fsdpc_mem_cat)k));
      cJSON_AddNumberToObject(o, key, (double)ms.peak[k]);
    }
    /* the objective's metrics last; a name the record already has (a
     * plugin's "loss") would make a second key, so it stays in the log line */
    for (uint32_t i = 0; ob->have_metrics && i < ob->n_metrics; i++)
      if (!cJSON_HasObjectItem(o, ob->metric_names[i]))
        cJSON_AddNumberToObject(o, ob->metric_names[i], ob->metrics[i]);
    fsdpc__session_log_record(s, step, o);
    cJSON_Delete(o);
  }
  if (s->progress)
    progress_bar(s, step, loss, tok_s);
}

fsdpc_status fsdpc__report_rank_summary(fsdpc_session *s, fsdpc_err *err) {
  fsdpc_engine_bytes eb;
  int64_t rss, hwm;
  fsdpc__engine_bytes(s->eng, &eb);
  fsdpc__mem_rss(&rss, &hwm);
  cJSON *o = cJSON_CreateObject(), *pk = cJSON_CreateObject(), *sh = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "rank", s->env.rank);
  cJSON_AddNumberToObject(o, "world", s->env.world_size);
  cJSON_AddNumberToObject(o, "shard_size", s->dist.shard_size);
  cJSON_AddStringToObject(o, "device", "cpu");
  cJSON_AddNumberToObject(o, "steps", (double)s->plan->modes.batch.max_steps);
  for (int k = 0; k < FSDPC_MEM_NCAT; k++)
    cJSON_AddNumberToObject(pk, fsdpc__mem_cat_name((fsdpc_mem_cat)k), (double)s->run_peak.peak[k]);
  cJSON_AddNumberToObject(pk, "total", (double)s->run_peak.total_peak);
  cJSON_AddItemToObject(o, "peak_bytes", pk);
  cJSON_AddNumberToObject(sh, "params", (double)eb.params);
  cJSON_AddNumberToObject(sh, "grads", (double)eb.grads);
  cJSON_AddNumberToObject(sh, "optim", (double)eb.optim);
  cJSON_AddNumberToObject(sh, "max_unit_full", (double)eb.max_unit_full);
  cJSON_AddItemToObject(o, "shard_bytes", sh);
  cJSON_AddNumberToObject(o, "activation_ctx_bytes", (double)fsdpc__model_ctx_bytes(s->mctx));
  /* the one reservation the engine planned (fsdp/memplan.h) */
  cJSON_AddNumberToObject(o, "arena_bytes", (double)fsdpc__engine_memplan(s->eng)->arena_bytes);
  /* CPU: device memory is host memory and malloc keeps no cache; the GPU
   * path reports its allocator's reserved bytes here. */
  fsdpc_mem_stats now;
  int64_t reserved_peak;
  fsdpc__session_mem(s, &now, &reserved_peak);
  if (reserved_peak >= 0)
    cJSON_AddNumberToObject(o, "reserved_bytes", (double)reserved_peak);
  else
    cJSON_AddNullToObject(o, "reserved_bytes");
  cJSON_AddNumberToObject(o, "host_rss_peak_bytes", (double)hwm);
  cJSON_AddNumberToObject(o, "host_pinned_bytes", (double)fsdpc__engine_host_pinned(s->eng));
  cJSON_AddNumberToObject(o, "comm_s_total", s->comm_s_total);
  char *text = cJSON_Print(o);
  cJSON_Delete(o);
  if (!text)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  char path[4096];
  snprintf(path, sizeof path, "%s/rank%d.json", s->cfg->log.dir, s->env.rank);
  fsdpc_status st = fsdpc__mkdir_p(s->cfg->log.dir, err);
  size_t n = strlen(text);
  char *line = malloc(n + 2);
  if (st == FSDPC_OK && !line)
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  /* a private temporary file renamed into place: never written through a
   * link someone planted at rankN.json */
  if (st == FSDPC_OK) {
    memcpy(line, text, n);
    line[n] = '\n';
    if (fsdpc__write_file_safe(path, line, n + 1) != 0)
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cannot write %s: %s (check log.dir)", path,
                       strerror(errno));
  }
  free(line);
  cJSON_free(text);
  return st;
}
