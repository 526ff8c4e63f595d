/* The training loop's checkpoint hooks (ckpt/train.c). setup.c calls
 * fsdpc__ckpt_session_setup once the engine, data and schedule exist;
 * loop.c calls fsdpc__ckpt_after_step after every step and
 * fsdpc__ckpt_final at the end. All are collective. */
#ifndef FSDPC_CKPT_TRAIN_HOOKS_H
#define FSDPC_CKPT_TRAIN_HOOKS_H

#include "train/session.h"

/* Selects the statedict plugins, builds the host over the engine, installs
 * the SIGTERM/SIGUSR1 handlers and resumes (checkpoint.resume), setting
 * s->start_step. */
fsdpc_status fsdpc__ckpt_session_setup(fsdpc_session *s, fsdpc_err *err);
/* After `done` steps: the periodic save, and the agreed stop on a signal
 * (a save, then *stop = 1: the caller returns OK at once). */
fsdpc_status fsdpc__ckpt_after_step(fsdpc_session *s, int64_t done, int *stop, fsdpc_err *err);
/* The final checkpoint (checkpoint.final_format) into checkpoint.dir/final. */
fsdpc_status fsdpc__ckpt_final(fsdpc_session *s, fsdpc_err *err);
void fsdpc__ckpt_session_destroy(fsdpc_session *s);
/* The folder checkpoint.resume points at (*found 0: none, start fresh), so
 * that setup can skip the random init a resume would overwrite. */
fsdpc_status fsdpc__ckpt_resume_dir(const fsdpc_config *c, char *dir, size_t cap, int *found,
                                    fsdpc_err *err);
/* fsdpc__engine_load_hf plus the per-rank peak host memory check (logged). */
fsdpc_status fsdpc__ckpt_load_hf_checked(fsdpc_session *s, const char *dir, fsdpc_err *err);

#endif
