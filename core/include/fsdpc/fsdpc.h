/* fsdpc public API: what an embedder (and the fsdpc CLI) calls.
 *
 * Every function returns an fsdpc_status (codes in plugin.h). On failure the
 * fsdpc_err passed in holds one line that says what is wrong, where and what
 * to do. Objects are made by fsdpc_x_create(..., &out) and released by
 * fsdpc_x_destroy(x); destroy(NULL) is a no-op.
 *
 * The flow (docs/api.md):
 *   fsdpc_config_load / fsdpc_config_parse    a config (file or text) + overrides
 *   fsdpc_plan_create                          what the run is, resolved, no weights read
 *   fsdpc_trainer_create                       plugins, communicators, engine, weights, data
 *   fsdpc_trainer_run                          steps, with a callback per step (metrics)
 *   fsdpc_trainer_save                         a checkpoint now
 *   fsdpc_trainer_destroy, fsdpc_config_destroy
 * Library messages go to stderr unless fsdpc_set_log_sink gives a sink.
 * libfsdpc.so exports these functions and nothing else. */
#ifndef FSDPC_FSDPC_H
#define FSDPC_FSDPC_H

#include <stdint.h>

#include "fsdpc/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FSDPC_VERSION_MAJOR 0
#define FSDPC_VERSION_MINOR 1
#define FSDPC_VERSION_PATCH 0
#define FSDPC_VERSION_STRING "0.1.0"

#if defined(__GNUC__)
#define FSDPC_API __attribute__((visibility("default")))
#else
#define FSDPC_API
#endif

/* Error detail for the call that failed. Caller-owned, reusable. */
typedef struct fsdpc_err {
  fsdpc_status status;
  char msg[1024];
} fsdpc_err;

/* "INVALID_USAGE" */
FSDPC_API const char *fsdpc_status_name(fsdpc_status s);
/* "invalid usage (a user or config error)" */
FSDPC_API const char *fsdpc_status_str(fsdpc_status s);
FSDPC_API const char *fsdpc_version(void);

/* ---- Logging ------------------------------------------------------------ */

/* A line of library output (no trailing newline) at level FSDPC_LOG_*. */
typedef void (*fsdpc_log_fn)(void *user, int32_t level, const char *line);
/* Sends every library log line to fn (NULL: back to stderr). Process-wide;
 * set it before creating objects. */
FSDPC_API void fsdpc_set_log_sink(fsdpc_log_fn fn, void *user);
/* Lines above level (FSDPC_LOG_ERROR .. FSDPC_LOG_DEBUG) are dropped. */
FSDPC_API void fsdpc_set_log_level(int32_t level);

/* ---- Config ------------------------------------------------------------- */

typedef struct fsdpc_config fsdpc_config;

/* Loads a YAML file, then applies "section.key=value" overrides (n of them,
 * may be 0), then model.config's HF config.json for unset shape keys. */
FSDPC_API fsdpc_status fsdpc_config_load(const char *path, const char *const *overrides,
                                         int32_t n_overrides, fsdpc_config **out, fsdpc_err *err);
/* The same from YAML text; name is what messages call it ("inline.yaml"). */
FSDPC_API fsdpc_status fsdpc_config_parse(const char *yaml, const char *name,
                                          const char *const *overrides, int32_t n_overrides,
                                          fsdpc_config **out, fsdpc_err *err);
FSDPC_API void fsdpc_config_destroy(fsdpc_config *cfg);

/* ---- Run plan ------------------------------------------------------------ */

/* Everything a run is, resolved from a config and a world before any weight
 * is read: plugins (options checked), shard / replica groups, batch
 * geometry, precision. */
typedef struct fsdpc_run_plan fsdpc_run_plan;

typedef struct fsdpc_plan_summary {
  uint32_t struct_size; /* set by the caller: sizeof(fsdpc_plan_summary) */
  uint64_t n_params;    /* unique parameters */
  int32_t strategy;     /* 0 FULL_SHARD, 1 SHARD_GRAD_OP, 2 NO_SHARD, 3 HYBRID_SHARD */
  int32_t world_size, shard_size, replica_size;
  int32_t n_units; /* FSDP units of the wrap plan */
  int64_t global_batch, micro_batch, grad_accum, seq_len;
  int32_t device; /* FSDPC_DEVICE_* */
  int32_t activation_checkpointing, cpu_offload;
  /* chosen plugins (owned by the plan) */
  const char *strategy_name, *attention, *optim, *wrap;
  /* Appended: steps per epoch of the training data (-1 until a trainer has
   * opened it) and the steps of the run (train.max_steps, or train.epochs x
   * steps per epoch once known). */
  int64_t steps_per_epoch, max_steps;
} fsdpc_plan_summary;

/* The plan of cfg at world_size ranks, nproc_per_node per node (0 = all on
 * one node). cfg must outlive the plan. */
FSDPC_API fsdpc_status fsdpc_plan_create(const fsdpc_config *cfg, int32_t world_size,
                                         int32_t nproc_per_node, fsdpc_run_plan **out,
                                         fsdpc_err *err);
FSDPC_API fsdpc_status fsdpc_plan_summarize(const fsdpc_run_plan *plan, fsdpc_plan_summary *out,
                                            fsdpc_err *err);
FSDPC_API void fsdpc_plan_destroy(fsdpc_run_plan *plan);

/* ---- Trainer ------------------------------------------------------------- */

typedef struct fsdpc_trainer fsdpc_trainer;

typedef struct fsdpc_step_metrics {
  uint32_t struct_size; /* sizeof(fsdpc_step_metrics) as this library knows it */
  int64_t step;         /* 1-based: steps done */
  int64_t max_steps;    /* steps of the run: train.max_steps, or train.epochs x steps per epoch */
  double loss;          /* mean over the global batch; NaN for a skipped step (a global
                         * batch without a target token) */
  double lr, grad_norm; /* grad_norm before clipping */
  double step_s;        /* wall time of the step */
  double eval_loss;     /* NaN when this step did not evaluate */
  int64_t tokens;       /* tokens of the global batch */
} fsdpc_step_metrics;

/* Called after every step on every rank; a non-zero return stops the run
 * after this step (fsdpc_trainer_run then returns FSDPC_OK). */
typedef int32_t (*fsdpc_step_fn)(void *user, const fsdpc_step_metrics *m);

/* Builds a trainer for this process: a single process, or one rank of a
 * job when the environment says so (RANK, WORLD_SIZE, ... as torchrun sets
 * them). Reads the initial weights (or resumes) and opens the data. cfg
 * must outlive the trainer and is only read: with train.epochs set, the
 * run's step count (epochs x steps per epoch) is resolved into the run
 * plan, and reported as fsdpc_step_metrics.max_steps. */
FSDPC_API fsdpc_status fsdpc_trainer_create(const fsdpc_config *cfg, fsdpc_trainer **out,
                                            fsdpc_err *err);
/* The trainer's run plan (owned by it). */
FSDPC_API const fsdpc_run_plan *fsdpc_trainer_plan(const fsdpc_trainer *t);
/* Runs up to n_steps more steps (n_steps <= 0: until the run's last step,
 * train.max_steps or what train.epochs resolves to), evaluating and
 * checkpointing as the config says; at the last step also the final
 * checkpoint. fn may be NULL. Collective. */
FSDPC_API fsdpc_status fsdpc_trainer_run(fsdpc_trainer *t, int64_t n_steps, fsdpc_step_fn fn,
                                         void *user, fsdpc_err *err);
/* Steps done so far (a resumed run starts at its checkpoint's step). */
FSDPC_API int64_t fsdpc_trainer_step(const fsdpc_trainer *t);
/* How the run stopped early: the signal (SIGTERM, SIGUSR1) after which every
 * rank stopped, 0 when no signal stopped it; *saved (may be NULL) is 1 when
 * a checkpoint to resume from was written at that stop. A process that
 * stopped without a checkpoint should exit with 128 + the signal. */
FSDPC_API int32_t fsdpc_trainer_stop_signal(const fsdpc_trainer *t, int32_t *saved);
/* Mean loss over the evaluation batches (data.eval or data.eval_fraction). */
FSDPC_API fsdpc_status fsdpc_trainer_eval(fsdpc_trainer *t, double *loss, fsdpc_err *err);
/* Writes a checkpoint of the current step into checkpoint.dir (in
 * checkpoint.intermediate_format), resumable. Collective. */
FSDPC_API fsdpc_status fsdpc_trainer_save(fsdpc_trainer *t, fsdpc_err *err);
FSDPC_API void fsdpc_trainer_destroy(fsdpc_trainer *t);

#ifdef __cplusplus
}
#endif
#endif /* FSDPC_FSDPC_H */
