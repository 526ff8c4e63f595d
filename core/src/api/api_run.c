/* The public API of whole runs beside training: a rank's place and the
 * local launcher, evaluation, checkpoint conversion, the bench, run
 * metrics and their plot (fsdpc eval, convert, bench, metrics, plot and the
 * launcher of fsdpc train). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_fill.h"
#include "bench/bench.h"
#include "ckpt/convert.h"
#include "config/config.h"
#include "dist/env.h"
#include "dist/launch.h"
#include "obs/metrics.h"
#include "obs/plot.h"
#include "train/session.h"
#include "util/fs.h"
#include "util/mem.h"

/* ---- jobs --------------------------------------------------------------- */

FSDPC_API fsdpc_status fsdpc_job_place_detect(fsdpc_job_place *out, fsdpc_err *err) {
  if (!FSDPC_API_SIZED(out))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_job_place_detect: out->struct_size unset");
  fsdpc_dist_env env;
  FSDPC_TRY(fsdpc__dist_env_detect(&env, err));
  fsdpc_job_place full = {.rank = env.rank,
                          .world_size = env.world_size,
                          .local_rank = env.local_rank,
                          .local_world_size = env.local_world_size,
                          .node_rank = env.node_rank,
                          .nnodes = env.nnodes,
                          .source = env.source};
  FSDPC_API_FILL(out, full);
  return FSDPC_OK;
}

FSDPC_API fsdpc_status fsdpc_launch(const fsdpc_launcher_args *a, int32_t *exit_code,
                                    fsdpc_err *err) {
  if (!a || a->struct_size < sizeof *a || !a->argv || !a->argv[0] || !exit_code)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "fsdpc_launch: NULL argv or exit_code, or struct_size unset");
  fsdpc_launch_opts o;
  fsdpc__launch_opts_default(&o);
  if (a->nproc_per_node < 1 || a->nproc_per_node > 1024 || a->nnodes < 1 || a->nnodes > 100000 ||
      a->node_rank < 0 || a->node_rank >= a->nnodes || a->master_port < 0 ||
      a->master_port > 65535 || a->grace_ms < 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "launch: nproc_per_node %d (1..1024), nnodes %d, node_rank %d (below "
                       "nnodes) or master_port %d (0..65535) out of range",
                       (int)a->nproc_per_node, (int)a->nnodes, (int)a->node_rank,
                       (int)a->master_port);
  if (a->master_addr && (!a->master_addr[0] || strlen(a->master_addr) >= sizeof o.master_addr))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "launch: master address '%s' is not a host",
                       a->master_addr);
  o.nproc_per_node = a->nproc_per_node;
  o.nnodes = a->nnodes;
  o.node_rank = a->node_rank;
  if (a->master_addr)
    snprintf(o.master_addr, sizeof o.master_addr, "%s", a->master_addr);
  if (a->master_port > 0) {
    o.master_port = a->master_port;
    o.port_given = 1;
  }
  if (a->grace_ms > 0)
    o.grace_ms = a->grace_ms;
  o.argv = (char *const *)a->argv;
  int code = 1;
  fsdpc_status st = fsdpc__launch(&o, &code, err);
  *exit_code = st == FSDPC_OK ? 0 : code ? code : 1;
  return st;
}

/* ---- evaluation --------------------------------------------------------- */

FSDPC_API fsdpc_status fsdpc_eval_config(const fsdpc_eval_args *a, fsdpc_config **out,
                                         fsdpc_err *err) {
  if (!a || a->struct_size < sizeof *a || !a->model || !a->data || !a->log_dir || !out ||
      a->n_overrides < 0 || (a->n_overrides && !a->overrides))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "fsdpc_eval_config: model, data, log_dir and out are needed");
  return fsdpc__eval_config(a->model, a->data, a->log_dir, a->overrides, a->n_overrides, out, err);
}

static void eval_result(fsdpc_session *s, const double r[5], fsdpc_eval_result *out) {
  fsdpc_eval_result full = {.loss = r[0],
                            .perplexity = exp(r[0]),
                            .token_accuracy = r[2],
                            .tokens = (int64_t)r[1],
                            .batches = (int64_t)r[3],
                            .sequences = (int64_t)r[4],
                            .world_size = s->env.world_size};
  fsdpc_mem_stats ms; /* this rank's device (host for the CPU), setup included */
  fsdpc__session_mem(s, &ms, NULL);
  full.peak_device_bytes = ms.total_peak;
  for (int c = 0; c < FSDPC_MEM_NCAT; c++)
    full.peak_device_by_category[c] = ms.peak[c];
  int64_t rss;
  fsdpc__mem_rss(&rss, &full.peak_host_rss_bytes);
  FSDPC_API_FILL(out, full);
}

FSDPC_API fsdpc_status fsdpc_evaluate(const fsdpc_config *cfg, fsdpc_eval_result *out,
                                      fsdpc_err *err) {
  if (!cfg || !FSDPC_API_SIZED(out))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "fsdpc_evaluate: NULL config, or out->struct_size unset");
  fsdpc_dist_env env;
  FSDPC_TRY(fsdpc__dist_env_detect(&env, err));
  if (env.world_size > 1)
    fsdpc_set_log_rank(env.rank);
  fsdpc_session *s = NULL;
  double r[5];
  /* The session only reads the config. */
  fsdpc_status st = fsdpc__session_create_eval((fsdpc_config *)cfg, &env, &s, err);
  if (st == FSDPC_OK && (st = fsdpc__eval_run(s, r, err)) == FSDPC_OK)
    eval_result(s, r, out);
  /* The other ranks learn of a failure through the store at once. */
  if (st != FSDPC_OK && s && s->job)
    fsdpc__dist_post_abort(s->job->store, err ? err->msg : "", NULL);
  fsdpc__session_destroy(s);
  return st;
}

/* ---- conversion, bench -------------------------------------------------- */

FSDPC_API fsdpc_status fsdpc_convert(const fsdpc_convert_args *a, fsdpc_err *err) {
  if (!a || a->struct_size < sizeof *a || !a->src || !a->dst || !a->to || a->n_overrides < 0 ||
      (a->n_overrides && !a->overrides))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_convert: src, dst and to are needed");
  const char *dt = a->dtype ? a->dtype : "bf16";
  if (strcmp(dt, "bf16") != 0 && strcmp(dt, "fp32") != 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "convert: dtype '%s': expected fp32 or bf16", dt);
  fsdpc_convert_opts o = {.src = a->src,
                          .dst = a->dst,
                          .to = strcmp(a->to, "hf") == 0 ? "full" : a->to,
                          .dtype = strcmp(dt, "fp32") == 0 ? FSDPC_DTYPE_F32 : FSDPC_DTYPE_BF16,
                          .world = a->world > 0 ? a->world : 1,
                          .strategy = a->strategy ? a->strategy : "FULL_SHARD",
                          .hybrid_shard_size = a->hybrid_shard_size,
                          .config = a->config,
                          .overrides = a->overrides,
                          .n_overrides = a->n_overrides};
  return fsdpc__convert(&o, err);
}

FSDPC_API fsdpc_status fsdpc_bench(const fsdpc_bench_args *a, int32_t *failed, fsdpc_err *err) {
  if (!a || a->struct_size < sizeof *a || !a->path || a->n_sets < 0 || (a->n_sets && !a->sets))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "fsdpc_bench: a bench file is needed (struct_size set)");
  return fsdpc__bench_drive(a, failed, err);
}

/* ---- run metrics -------------------------------------------------------- */

static void summarize(const fsdpc_metrics_run *r, fsdpc_run_summary *s) {
  const fsdpc_metrics_point *p = r->pts, *last = &r->pts[r->n - 1];
  double tok = 0, step = 0;
  int nt = 0;
  snprintf(s->run_id, sizeof s->run_id, "%s", r->run_id);
  s->world = r->world;
  s->n_starts = r->n_starts;
  s->n_older = r->n_older;
  s->last_resumed_from = r->last_resumed_from;
  s->n_steps = r->n;
  s->first_step = p[0].step;
  s->last_step = last->step;
  s->first_loss = p[0].loss;
  s->last_loss = last->loss;
  s->min_loss = INFINITY;
  s->last_eval_loss = NAN;
  s->last_lr = last->lr;
  for (int i = 0; i < r->n; i++) {
    if (p[i].loss < s->min_loss) {
      s->min_loss = p[i].loss;
      s->min_loss_step = p[i].step;
    }
    if (!isnan(p[i].eval_loss)) {
      s->last_eval_loss = p[i].eval_loss;
      s->last_eval_step = p[i].step;
    }
    if (p[i].tok_s > 0 && p[i].step_s > 0) {
      tok += p[i].tok_s;
      step += p[i].step_s;
      nt++;
    }
    if (p[i].peak_bytes > s->peak_bytes)
      s->peak_bytes = p[i].peak_bytes;
  }
  s->tokens_per_s = nt ? tok / nt : 0;
  s->step_s = nt ? step / nt : 0;
}

FSDPC_API fsdpc_status fsdpc_metrics_summary(const char *dir, fsdpc_run_summary *out,
                                             fsdpc_err *err) {
  if (!dir || !FSDPC_API_SIZED(out))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "fsdpc_metrics_summary: NULL dir, or out->struct_size unset");
  fsdpc_metrics_run r;
  FSDPC_TRY(fsdpc__metrics_read(dir, &r, err));
  fsdpc_run_summary full = {0};
  summarize(&r, &full);
  fsdpc__metrics_run_free(&r);
  FSDPC_API_FILL(out, full);
  return FSDPC_OK;
}

FSDPC_API fsdpc_status fsdpc_plot(const char *const *dirs, int32_t n, const char *title,
                                  const char *out, fsdpc_err *err) {
  if (!dirs || n < 1 || !out)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_plot: no runs or no output file");
  fsdpc_metrics_run *runs = calloc((size_t)n, sizeof *runs);
  char(*labels)[320] = calloc((size_t)n, sizeof *labels);
  const char **lp = calloc((size_t)n, sizeof *lp);
  int nr = 0;
  fsdpc_status st =
      runs && labels && lp ? FSDPC_OK : fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  for (; st == FSDPC_OK && nr < n; nr++) {
    if ((st = fsdpc__metrics_read(dirs[nr], &runs[nr], err)) != FSDPC_OK)
      break;
    const fsdpc_metrics_run *r = &runs[nr];
    snprintf(labels[nr], sizeof labels[nr], "%s (world %d, %d steps%s)", dirs[nr], r->world,
             (int)r->pts[r->n - 1].step, r->n_starts > 1 ? ", resumed" : "");
    lp[nr] = labels[nr];
  }
  char deftitle[256];
  snprintf(deftitle, sizeof deftitle, "fsdpc: %s%s", dirs[0], n > 1 ? " and others" : "");
  if (st == FSDPC_OK && (st = fsdpc__mkdir_parent(out, err)) == FSDPC_OK)
    st = fsdpc__plot_runs(runs, lp, n, title ? title : deftitle, out, err);
  for (int i = 0; i < nr; i++)
    fsdpc__metrics_run_free(&runs[i]);
  free(runs);
  free(labels);
  free(lp);
  return st;
}
