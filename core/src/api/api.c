/* The public API (include/fsdpc/fsdpc.h) over the internal modules: config
 * loading, the run plan, and the trainer (a training session run step by
 * step). Only the functions marked FSDPC_API leave libfsdpc.so. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_fill.h"
#include "config/config.h"
#include "dist/env.h"
#include "dist/save_notify.h"
#include "runplan/runplan.h"
#include "train/session.h"
#include "util/log.h"

struct fsdpc_trainer {
  fsdpc_session *s;
  int finished; /* the final checkpoint and summary are written */
};

FSDPC_API fsdpc_status fsdpc_config_load(const char *path, const char *const *overrides,
                                         int32_t n_overrides, fsdpc_config **out, fsdpc_err *err) {
  if (!path || !out || n_overrides < 0 || (n_overrides > 0 && !overrides))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_config_load: NULL path or out");
  return fsdpc__config_load(path, overrides, n_overrides, out, err);
}

FSDPC_API fsdpc_status fsdpc_config_parse(const char *yaml, const char *name,
                                          const char *const *overrides, int32_t n_overrides,
                                          fsdpc_config **out, fsdpc_err *err) {
  if (!yaml || !out || n_overrides < 0 || (n_overrides > 0 && !overrides))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_config_parse: NULL text or out");
  return fsdpc__config_from_string(yaml, name ? name : "<string>", overrides, n_overrides, out,
                                   err);
}

FSDPC_API void fsdpc_config_destroy(fsdpc_config *cfg) {
  fsdpc__config_destroy(cfg);
}

FSDPC_API fsdpc_status fsdpc_plan_create(const fsdpc_config *cfg, int32_t world_size,
                                         int32_t nproc_per_node, fsdpc_run_plan **out,
                                         fsdpc_err *err) {
  if (!cfg || !out)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_plan_create: NULL config or out");
  fsdpc_run_world w = {.world_size = world_size,
                       .nproc_per_node = nproc_per_node > 0 ? nproc_per_node : world_size};
  return fsdpc__run_plan_create(cfg, &w, FSDPC_RUN_PLAN_OFFLINE, out, err);
}

FSDPC_API fsdpc_status fsdpc_plan_summarize(const fsdpc_run_plan *p, fsdpc_plan_summary *out,
                                            fsdpc_err *err) {
  if (!p || !FSDPC_API_SIZED(out))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "fsdpc_plan_summarize: NULL plan or out, or out->struct_size unset");
  /* Fill a full copy, hand back as much as the caller's struct holds. */
  const fsdpc_run_modes *m = &p->modes;
  fsdpc_plan_summary full = {.n_params = p->numel,
                             .strategy = (int32_t)m->strategy,
                             .world_size = m->world.world_size,
                             .shard_size = m->S,
                             .replica_size = m->R,
                             .n_units = (int32_t)p->n_units,
                             .global_batch = m->batch.global,
                             .micro_batch = m->batch.micro,
                             .grad_accum = m->batch.accum,
                             .seq_len = m->batch.seq_len,
                             .device = m->device,
                             .activation_checkpointing = m->activation_checkpointing,
                             .cpu_offload = m->cpu_offload,
                             .strategy_name = fsdpc__strategy_name(m->strategy),
                             .attention = p->attn ? p->attn->desc->name : "",
                             .optim = p->optim ? p->optim->desc->name : "",
                             .wrap = p->wrap ? p->wrap->desc->name : "",
                             .steps_per_epoch = m->batch.steps_per_epoch,
                             .max_steps = m->batch.max_steps};
  FSDPC_API_FILL(out, full);
  return FSDPC_OK;
}

FSDPC_API void fsdpc_plan_destroy(fsdpc_run_plan *p) {
  fsdpc__run_plan_destroy(p);
}

FSDPC_API fsdpc_status fsdpc_trainer_create(const fsdpc_config *cfg, fsdpc_trainer **out,
                                            fsdpc_err *err) {
  if (!cfg || !out)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_trainer_create: NULL config or out");
  *out = NULL;
  fsdpc_dist_env env;
  FSDPC_TRY(fsdpc__dist_env_detect(&env, err));
  if (env.world_size > 1)
    fsdpc_set_log_rank(env.rank);
  if (env.rank == 0)
    FSDPC_LOGI("fsdpc %s: %s, world %d (%s), %s", fsdpc_version(), cfg->source, env.world_size,
               env.source, fsdpc__strategy_name((fsdpc_strategy)cfg->fsdp.sharding_strategy));
  fsdpc_trainer *t = calloc(1, sizeof *t);
  if (!t)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  /* The session only reads the config (the steps train.epochs resolves to
   * live in the run plan: fsdpc_run_batch.max_steps). */
  fsdpc_status st = fsdpc__session_create((fsdpc_config *)cfg, &env, &t->s, err);
  if (st != FSDPC_OK) {
    /* a refusal at start-up (the memory plan, a plugin...) comes before the
     * failure protocol: tell fsdpc's launcher, which names it in its last
     * line (dist/save_notify.h) */
    if (env.world_size > 1)
      fsdpc__error_notify(env.rank, err->msg);
    free(t);
    return st;
  }
  *out = t;
  return FSDPC_OK;
}

FSDPC_API const fsdpc_run_plan *fsdpc_trainer_plan(const fsdpc_trainer *t) {
  return t ? t->s->plan : NULL;
}

FSDPC_API int64_t fsdpc_trainer_step(const fsdpc_trainer *t) {
  return t ? t->s->next_step : 0;
}

FSDPC_API int32_t fsdpc_trainer_stop_signal(const fsdpc_trainer *t, int32_t *saved) {
  if (saved)
    *saved = t ? t->s->ckpt.stop_saved : 0;
  return t ? t->s->ckpt.stopped_by : 0;
}

FSDPC_API int32_t fsdpc_trainer_exit_code(const fsdpc_trainer *t, const fsdpc_err *err) {
  return fsdpc__session_exit_code(t ? t->s : NULL, err);
}

/* The other ranks learn of a failure through the store at once; err names
 * the job's first failure (dist/job.h). */
static fsdpc_status failed(fsdpc_trainer *t, fsdpc_status st, fsdpc_err *err) {
  return fsdpc__session_failed(t->s, st, err);
}

FSDPC_API fsdpc_status fsdpc_trainer_run(fsdpc_trainer *t, int64_t n_steps, fsdpc_step_fn fn,
                                         void *user, fsdpc_err *err) {
  if (!t)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_trainer_run: NULL trainer");
  fsdpc_session *s = t->s;
  int64_t max = s->plan->modes.batch.max_steps;
  int64_t end = n_steps > 0 && s->next_step + n_steps < max ? s->next_step + n_steps : max;
  fsdpc_status st;
  while (s->next_step < end) {
    fsdpc_session_step m;
    int stop = 0;
    if ((st = fsdpc__session_step(s, &m, &stop, err)) != FSDPC_OK)
      return failed(t, st, err);
    fsdpc_step_metrics pm = {.struct_size = sizeof pm,
                             .step = m.step,
                             .max_steps = max,
                             .loss = m.loss,
                             .lr = m.lr,
                             .grad_norm = m.grad_norm,
                             .step_s = m.step_s,
                             .eval_loss = m.eval_loss,
                             .tokens = s->plan->modes.batch.global * s->plan->modes.batch.seq_len};
    int user_stop = fn ? fn(user, &pm) != 0 : 0;
    if (stop || user_stop)
      return FSDPC_OK;
  }
  /* The end of the run: the final checkpoint, then the generation
   * prompts (not after a stop on a signal, which returned above). */
  if (s->next_step == max && !t->finished) {
    if ((st = fsdpc__session_finish(s, err)) != FSDPC_OK)
      return failed(t, st, err);
    t->finished = 1;
    if ((st = fsdpc__session_generate_prompts(s, err)) != FSDPC_OK)
      return failed(t, st, err);
  }
  return FSDPC_OK;
}

FSDPC_API fsdpc_status fsdpc_trainer_eval(fsdpc_trainer *t, double *loss, fsdpc_err *err) {
  if (!t || !loss)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_trainer_eval: NULL trainer or loss");
  if (!t->s->eval_ld)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: no evaluation data; set data.eval or data.eval_fraction",
                       t->s->cfg->source);
  fsdpc_status st = fsdpc__session_eval(t->s, loss, err);
  return st == FSDPC_OK ? st : failed(t, st, err);
}

FSDPC_API fsdpc_status fsdpc_trainer_save(fsdpc_trainer *t, fsdpc_err *err) {
  if (!t)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_trainer_save: NULL trainer");
  fsdpc_status st = fsdpc__ckpt_save_now(&t->s->ckpt, t->s->next_step, err);
  return st == FSDPC_OK ? st : failed(t, st, err);
}

FSDPC_API void fsdpc_trainer_destroy(fsdpc_trainer *t) {
  if (!t)
    return;
  fsdpc__session_destroy(t->s);
  free(t);
}
