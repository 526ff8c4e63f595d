/* The training loop's checkpoint hooks (ckpt/train.c). setup.c calls
 * fsdpc__ckpt_session_setup once the engine, data and schedule exist;
 * loop.c calls fsdpc__ckpt_after_step after every step and
 * fsdpc__ckpt_final at the end. All are collective.
 *
 * The hooks see a run through fsdpc_ckpt_train: what checkpoints need from
 * a training session and nothing else (ckpt/ sits below train/). */
#ifndef FSDPC_CKPT_TRAIN_HOOKS_H
#define FSDPC_CKPT_TRAIN_HOOKS_H

#include "data/loader.h"
#include "fsdp/engine.h"
#include "runplan/runplan.h"

typedef struct fsdpc_ckpt_run fsdpc_ckpt_run;

typedef struct fsdpc_ckpt_train {
  const fsdpc_config *cfg;
  const fsdpc_run_plan *plan; /* shape, batch geometry, world, strategy, plugins */
  int rank;
  fsdpc_engine *eng;
  fsdpc_dist *dist;
  fsdpc_loader *train_ld;
  int weights_only; /* an evaluation: a resume reads the weights; the data position and
                     * batch geometry it saved do not apply */
  struct { /* the learning-rate schedule, as the checkpoint records it */
    const char *name;
    double base_lr, min_lr_rate;
    int64_t warmup_steps, max_steps;
  } lr;
  int64_t start_step;  /* out: the first step to run (> 0 after a resume) */
  fsdpc_ckpt_run *run; /* checkpointing state (ckpt/train.c) */
  int stopped_by;      /* out: the signal that stopped the run early (0: none) */
  int stop_saved;      /* out: ... and a checkpoint to resume from was saved */
} fsdpc_ckpt_train;

/* Selects the statedict plugins, builds the host over the engine, installs
 * the SIGTERM/SIGUSR1 handlers and resumes (checkpoint.resume), setting
 * s->start_step. */
fsdpc_status fsdpc__ckpt_session_setup(fsdpc_ckpt_train *s, fsdpc_err *err);
/* After `done` steps: the periodic save, and the agreed stop on a signal
 * (a save, then *stop = 1: the caller returns OK at once). A signal that
 * arrives during the periodic save stops the run after it: that save is
 * the stop checkpoint. */
fsdpc_status fsdpc__ckpt_after_step(fsdpc_ckpt_train *s, int64_t done, int *stop, fsdpc_err *err);
/* The loss of a step that trained (not a skipped one), for the divergence
 * rule of rotation (ckpt/diverge.h). */
void fsdpc__ckpt_note_loss(fsdpc_ckpt_train *s, double loss);
/* A checkpoint of `done` steps now (checkpoint.intermediate_format into
 * checkpoint.dir), unless that step is saved already. */
fsdpc_status fsdpc__ckpt_save_now(fsdpc_ckpt_train *s, int64_t done, fsdpc_err *err);
/* The final checkpoint (checkpoint.final_format) into checkpoint.dir/final. */
fsdpc_status fsdpc__ckpt_final(fsdpc_ckpt_train *s, fsdpc_err *err);
void fsdpc__ckpt_session_destroy(fsdpc_ckpt_train *s);
/* The folder checkpoint.resume points at (*found 0: none, start fresh), so
 * that setup can skip the random init a resume would overwrite. */
fsdpc_status fsdpc__ckpt_resume_dir(const fsdpc_config *c, char *dir, size_t cap, int *found,
                                    fsdpc_err *err);
/* The HF folder rules (model/hf_rules.h) for the plan's shape and
 * seq_len, then fsdpc__engine_load_hf plus the per-rank peak host memory
 * check (logged). */
fsdpc_status fsdpc__ckpt_load_hf_checked(fsdpc_engine *eng, const fsdpc_run_plan *plan,
                                         const char *dir, fsdpc_err *err);

#endif
