/* A training session: everything one rank builds from a config, then the
 * step loop. setup.c builds and tears down; loop.c trains, evaluates and
 * generates; report.c writes logs, metrics.jsonl and the progress bar. */
#ifndef FSDPC_TRAIN_SESSION_H
#define FSDPC_TRAIN_SESSION_H

#include <stdio.h>

#include "config/config.h"
#include "data/loader.h"
#include "data/tokenizer.h"
#include "dist/job.h"
#include "fsdp/engine.h"
#include "train/schedule.h"
#include "util/mem.h"

typedef struct fsdpc_ckpt_run fsdpc_ckpt_run;

typedef struct fsdpc_session {
  fsdpc_config *cfg;           /* borrowed */
  fsdpc_dist_env env;
  fsdpc_dist_job *job;         /* NULL at world size 1 */
  fsdpc_store_v1 store_v1;
  fsdpc_registry *reg;
  const fsdpc_component *attn, *optim, *wrap, *coll;
  fsdpc_model_shape shape;
  fsdpc_param_info *params;
  int n_params;
  uint32_t *unit_of_param;
  uint32_t n_units;
  fsdpc_dist dist;
  fsdpc_engine *eng;
  fsdpc_model_ctx *mctx;

  fsdpc_tokenizer *tok;
  fsdpc_tokfile *train_tf, *eval_tf;
  fsdpc_loader *train_ld, *eval_ld; /* eval_ld NULL = no evaluation */
  fsdpc_schedule sched;
  int64_t G, accum, mb, T;
  int32_t *tokens, *labels, *doc_ids; /* (mb, T) */
  int use_doc_ids;  /* document masking: data.document_masking or packed examples */
  int examples;     /* whole examples (packing examples/none): no EOS before a prompt */

  int64_t start_step;          /* first step to run (> 0 after a resume) */
  struct fsdpc_ckpt_run *ckpt; /* checkpointing (ckpt/train.c) */

  fsdpc_comm_bytes last_comm;   /* collective bytes of the last step */
  const fsdpc_ops *ops;         /* the device this rank computes on */
  fsdpc_ops ops_dev;            /* its table, when not the CPU */
  void *cuda;                   /* fsdpc_cuda_ctx, with train.device cuda */
  fsdpc_mem_stats run_peak;     /* per-category peaks over every step so far */
  double comm_s_total;          /* seconds inside collectives, all steps */
  FILE *metrics;               /* rank 0: log.dir/metrics.jsonl */
  int progress;                /* draw a progress bar */
  double t_start;
  int64_t skipped_steps; /* steps whose global batch had no target token */
  int metrics_failed;    /* a write to metrics.jsonl failed (reported once) */
} fsdpc_session;

/* Builds the session for this rank (env says which). */
fsdpc_status fsdpc__session_create(fsdpc_config *cfg, const fsdpc_dist_env *env,
                                   fsdpc_session **out, fsdpc_err *err);
void fsdpc__session_destroy(fsdpc_session *s);

/* Trains cfg->train.max_steps steps, evaluating and logging as configured,
 * then runs the generation prompts. */
fsdpc_status fsdpc__session_train(fsdpc_session *s, fsdpc_err *err);

/* Mean loss over the evaluation batches; collective. */
fsdpc_status fsdpc__session_eval(fsdpc_session *s, double *loss, fsdpc_err *err);

/* Greedy completion of prompt (max new tokens n); collective; out gets the
 * decoded completion. */
fsdpc_status fsdpc__session_generate(fsdpc_session *s, const char *prompt, int n, char *out,
                                     size_t cap, fsdpc_err *err);

/* The model shape a config describes (setup.c). */
void fsdpc__session_shape_from_config(const fsdpc_config *c, fsdpc_model_shape *sh);

/* report.c */
void fsdpc__session_mem(fsdpc_session *s, fsdpc_mem_stats *ms, int64_t *reserved_peak);
void fsdpc__session_mem_reset_peak(fsdpc_session *s);
double fsdpc__now(void);
void fsdpc__report_memory(fsdpc_session *s, const char *when);
void fsdpc__report_step(fsdpc_session *s, int64_t step, double loss, double lr, double gnorm,
                        double step_s, double eval_loss);
/* Every rank: writes log.dir/rank<R>.json with its peak memory by category
 * over the run, host RSS peak, shard bytes and communication totals (what
 * `fsdpc bench` reads). */
fsdpc_status fsdpc__report_rank_summary(fsdpc_session *s, fsdpc_err *err);

#endif
