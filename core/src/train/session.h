/* A training session: everything one rank builds from a config, then the
 * step loop. setup.c builds and tears down; loop.c trains, evaluates and
 * generates; report.c writes logs, metrics.jsonl and the progress bar. */
#ifndef FSDPC_TRAIN_SESSION_H
#define FSDPC_TRAIN_SESSION_H

#include <stdio.h>

#include "ckpt/train_hooks.h"
#include "config/config.h"
#include "data/loader.h"
#include "data/tokenizer.h"
#include "dist/job.h"
#include "fsdp/engine.h"
#include "runplan/runplan.h"
#include "train/objective.h"
#include "train/schedule.h"
#include "util/clock.h"
#include "util/mem.h"

typedef struct fsdpc_tb fsdpc_tb;
typedef struct cJSON cJSON;

/* Start-up phases, seconds each: from launch (the process, or the launcher
 * that started it) to the session, then each part of building it. */
typedef struct fsdpc_startup {
  double launch;  /* exec, dynamic loading, config, until session create */
  double device;  /* CUDA context, streams, cuBLASLt handle */
  double plugins; /* run plan: plugin search, probe and load, wrap plan */
  double comm;    /* rendezvous and communicators (world > 1) */
  double alloc;   /* engine: shard memory, optimizer state */
  double weights; /* random init, HF load or (later) a checkpoint's */
  double model;   /* activations, attention plugin state */
  double data;    /* data, tokenizer, schedule, checkpoint setup, logs */
  double t_ready; /* fsdpc__now() when the session was built */
  const char *weights_how;
} fsdpc_startup;

typedef struct fsdpc_pref_state fsdpc_pref_state;

typedef struct fsdpc_session {
  fsdpc_config *cfg;           /* borrowed */
  fsdpc_run_plan *plan;        /* what this run is: shape, plugins, groups, batch geometry */
  fsdpc_dist_env env;
  fsdpc_dist_job *job;         /* NULL at world size 1 */
  fsdpc_store_v1 store_v1;
  fsdpc_dist dist;
  fsdpc_engine *eng;
  fsdpc_model_ctx *mctx;

  fsdpc_tokenizer *tok;
  fsdpc_tokfile *train_tf, *eval_tf;
  fsdpc_loader *train_ld, *eval_ld; /* eval_ld NULL = no evaluation */
  fsdpc_schedule sched;
  fsdpc_train_objective objective; /* objective.name (not for evaluation-only sessions) */
  fsdpc_pref_state *pref;          /* sequence objectives' step buffers (pref_step.c), or NULL */
  int32_t *tokens, *labels, *doc_ids; /* (micro, seq_len) */
  int use_doc_ids; /* document masking: data.document_masking or packed examples */
  int examples;    /* whole examples (packing examples/none): no EOS before a prompt */
  int eval_doc_ids; /* use_doc_ids for the eval data (its own packing: a prepared JSONL) */
  int eval_reported; /* the first evaluation's counts were logged */

  fsdpc_ckpt_train ckpt; /* checkpointing; ckpt.start_step: first step to run */

  fsdpc_comm_bytes last_comm;   /* collective bytes of the last step */
  const fsdpc_ops *ops;         /* the device this rank computes on */
  fsdpc_ops ops_dev;            /* its table (on the CPU: with cpu_threads) */
  void *cuda;                   /* fsdpc_cuda_ctx, with train.device cuda */
  fsdpc_mem_stats run_peak;     /* per-category peaks over every step so far */
  double comm_s_total;          /* seconds inside collectives, all steps */
  FILE *metrics;               /* rank 0: log.dir/metrics.jsonl */
  int progress;                /* draw a progress bar */
  double t_start;
  int cpu_threads;             /* train.threads: the CPU ops' team size (0: OpenMP's default) */
  int64_t next_step;           /* 0-based index of the next step to run */
  int started;                 /* the start memory report was written */
  fsdpc_tb *tb;                /* rank 0, log.tensorboard: the event file */
  double t_loop;               /* when this start's first step began (0: not yet) */
  int64_t skipped_steps; /* steps whose global batch had no target token */
  int metrics_failed;    /* a write to metrics.jsonl failed (reported once) */
  fsdpc_startup startup; /* this start's phases, logged after its first step */
} fsdpc_session;

/* What one step reports (fsdpc__session_step). */
typedef struct fsdpc_session_step {
  int64_t step;                                  /* 1-based: steps done */
  double loss, lr, grad_norm, step_s, eval_loss; /* eval_loss NaN when not evaluated */
} fsdpc_session_step;

/* Builds the session for this rank (env says which). */
fsdpc_status fsdpc__session_create(fsdpc_config *cfg, const fsdpc_dist_env *env,
                                   fsdpc_session **out, fsdpc_err *err);
/* The same for fsdpc eval: no steps will run, so a session that starts from
 * weights (not resuming a sharded checkpoint) holds no gradient or
 * optimizer state. */
fsdpc_status fsdpc__session_create_eval(fsdpc_config *cfg, const fsdpc_dist_env *env,
                                        fsdpc_session **out, fsdpc_err *err);
void fsdpc__session_destroy(fsdpc_session *s);

/* One optimizer step (the next one), its evaluation, report and checkpoint
 * hooks; *stop = 1 when a stop signal made it save and the run must end. */
fsdpc_status fsdpc__session_step(fsdpc_session *s, fsdpc_session_step *out, int *stop,
                                 fsdpc_err *err);
/* After the last step: the final checkpoint, the memory report and
 * log.dir/rank<R>.json. */
fsdpc_status fsdpc__session_finish(fsdpc_session *s, fsdpc_err *err);
/* The config's generation prompts, answers on stdout (rank 0). */
fsdpc_status fsdpc__session_generate_prompts(fsdpc_session *s, fsdpc_err *err);

/* A call on this session failed with (st, err): the job's failure protocol
 * (dist/job.h): published to the job, the communicators aborted, err
 * rewritten to name the job's first failure. Returns st. */
fsdpc_status fsdpc__session_failed(fsdpc_session *s, fsdpc_status st, fsdpc_err *err);
/* The exit code of a rank whose run failed with err (s may be NULL: it
 * failed to build): 1 when its own failure is the job's first (or it is a
 * one-rank job), 3 when another rank's, a node's or the store's came first
 * (docs/dist.md). */
int fsdpc__session_exit_code(const fsdpc_session *s, const fsdpc_err *err);

/* Trains the run plan's max_steps steps, evaluating and logging as configured,
 * then runs the generation prompts. */
fsdpc_status fsdpc__session_train(fsdpc_session *s, fsdpc_err *err);

/* Mean loss over the evaluation batches; collective. */
fsdpc_status fsdpc__session_eval(fsdpc_session *s, double *loss, fsdpc_err *err);
/* The evaluation itself, for fsdpc__session_eval and fsdpc eval: the
 * forward of every window of the eval data (train.eval_batches 0) or of the
 * first train.eval_batches global batches, the last batch smaller when the
 * windows do not fill it (no LoRA dropout), summed over the world into
 * sums[0] (loss sum) and sums[1] (counted target tokens). per_micro (may be
 * NULL) runs after each micro-batch's forward and adds its own figure to
 * sums[2]. *batches: how many ran; *windows: the sequences evaluated. */
typedef fsdpc_status (*fsdpc__eval_hook)(fsdpc_session *s, double *sum, fsdpc_err *err);
fsdpc_status fsdpc__session_eval_sums(fsdpc_session *s, fsdpc__eval_hook per_micro, double sums[3],
                                      int64_t *batches, int64_t *windows, fsdpc_err *err);
/* eval.c, for fsdpc eval (a session made by fsdpc__session_create_eval):
 * out = {loss, target tokens, token accuracy, batches, sequences} over
 * every rank; collective. The loss is computed exactly as train's
 * evaluation. */
fsdpc_status fsdpc__eval_run(fsdpc_session *s, double out[5], fsdpc_err *err);
/* The config of fsdpc eval on model (an HF folder, a PEFT adapter folder
 * over its base, or an fsdpc checkpoint) and data: the folder's own config
 * (config.yaml, else defaults and its config.json), its weights, data as
 * data.eval (whatever the run held out), no checkpoints, logs in log_dir,
 * the folder's tokenizer; then overrides (eval.c). */
fsdpc_status fsdpc__eval_config(const char *model, const char *data, const char *log_dir,
                                const char *const *overrides, int n_overrides, fsdpc_config **out,
                                fsdpc_err *err);

/* Greedy completion of prompt (max new tokens n); collective; out gets the
 * decoded completion. */
fsdpc_status fsdpc__session_generate(fsdpc_session *s, const char *prompt, int n, char *out,
                                     size_t cap, fsdpc_err *err);

/* metrics.c (rank 0): opens metrics.jsonl (run record; a resume drops the
 * steps after its checkpoint) and the TensorBoard event file; writes one
 * step's record to both; closes them. */
fsdpc_status fsdpc__session_open_logs(fsdpc_session *s, fsdpc_err *err);
void fsdpc__session_log_record(fsdpc_session *s, int64_t step, const cJSON *rec);
void fsdpc__session_close_logs(fsdpc_session *s);

/* report.c */
/* log.progress: on; or auto and stderr is a terminal and no launcher that
 * gives each rank a pty (mpirun, srun) started this process. */
int fsdpc__progress_wanted(const fsdpc_config *c, const fsdpc_dist_env *env);
void fsdpc__session_mem(fsdpc_session *s, fsdpc_mem_stats *ms, int64_t *reserved_peak);
void fsdpc__session_mem_reset_peak(fsdpc_session *s);
void fsdpc__report_memory(fsdpc_session *s, const char *when);
void fsdpc__report_step(fsdpc_session *s, int64_t step, double loss, double lr, double gnorm,
                        double step_s, double eval_loss);
/* Every rank: writes log.dir/rank<R>.json with its peak memory by category
 * over the run, host RSS peak, shard bytes and communication totals (what
 * `fsdpc bench` reads). */
fsdpc_status fsdpc__report_rank_summary(fsdpc_session *s, fsdpc_err *err);

/* pref_step.c: one optimizer step of an objective on sequence log-probs
 * (preference pairs), and its buffers' release. */
fsdpc_status fsdpc__pref_train_step(fsdpc_session *s, int64_t step, double *loss, double *lr,
                                    double *gnorm, fsdpc_err *err);
void fsdpc__pref_free(fsdpc_pref_state *p);

#endif
