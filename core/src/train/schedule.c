/* Learning-rate schedules with the formulas of Hugging Face transformers
 * (optimization.py), so a run here and a run of HF Trainer with the same
 * settings see the same lr at every step. Where HF has no such schedule
 * (linear decay to a floor) the floor enters the way HF's cosine-with-min-lr
 * does: factor * (1 - rate) + rate. */
#include "train/schedule.h"

#include <math.h>
#include <string.h>

static const char *const kind_names[] = {"constant", "linear", "cosine"};

fsdpc_status fsdpc__schedule_init(fsdpc_schedule *s, const char *name, double base_lr,
                                  int64_t max_steps, int64_t warmup_steps, double warmup_ratio,
                                  double min_lr, double min_lr_ratio, fsdpc_err *err) {
  if (s == NULL)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "lr schedule: NULL schedule");
  memset(s, 0, sizeof *s);
  int kind = -1;
  for (int i = 0; name != NULL && i < (int)(sizeof kind_names / sizeof kind_names[0]); i++)
    if (strcmp(name, kind_names[i]) == 0)
      kind = i;
  if (kind < 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "lr schedule: unknown schedule '%s'; use constant, linear or cosine",
                       name ? name : "(null)");
  if (!(base_lr >= 0.0) || !isfinite(base_lr))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "lr schedule: lr = %g must be a finite number >= 0", base_lr);
  if (max_steps < 1)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "lr schedule: max_steps = %lld must be >= 1",
                       (long long)max_steps);
  if (warmup_steps < 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "lr schedule: warmup_steps = %lld must be >= 0",
                       (long long)warmup_steps);
  if (!(warmup_ratio >= 0.0 && warmup_ratio <= 1.0))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "lr schedule: warmup_ratio = %g must be in [0, 1]",
                       warmup_ratio);
  if (!(min_lr >= 0.0) || !isfinite(min_lr))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "lr schedule: min_lr = %g must be a finite number >= 0", min_lr);
  if (!(min_lr_ratio >= 0.0 && min_lr_ratio <= 1.0))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "lr schedule: min_lr_ratio = %g must be in [0, 1]",
                       min_lr_ratio);
  if (min_lr > 0.0 && min_lr_ratio > 0.0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "lr schedule: both min_lr (%g) and min_lr_ratio (%g) are set; give one",
                       min_lr, min_lr_ratio);
  if (min_lr > base_lr)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "lr schedule: min_lr = %g is above lr = %g; lower min_lr", min_lr, base_lr);
  if (kind == FSDPC_SCHEDULE_CONSTANT && (min_lr > 0.0 || min_lr_ratio > 0.0))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "lr schedule: min_lr / min_lr_ratio have no effect with schedule "
                       "'constant'; remove them or use linear or cosine");

  /* HF: warmup_steps if warmup_steps > 0 else math.ceil(max_steps * warmup_ratio),
   * the product in double (so 0.07 * 100 gives 8, as it does in HF). */
  int64_t warmup = warmup_steps;
  if (warmup == 0 && warmup_ratio > 0.0)
    warmup = (int64_t)ceil((double)max_steps * warmup_ratio);
  if (warmup >= max_steps)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "lr schedule: %lld warmup steps%s leave no step to train at max_steps = "
                       "%lld; lower the warmup",
                       (long long)warmup, warmup_steps > 0 ? "" : " (from warmup_ratio)",
                       (long long)max_steps);

  s->kind = (fsdpc_schedule_kind)kind;
  s->base_lr = base_lr;
  s->max_steps = max_steps;
  s->warmup_steps = warmup;
  /* HF: min_lr_rate = min_lr / optimizer.defaults["lr"]. */
  s->min_lr_rate = min_lr > 0.0 ? min_lr / base_lr : min_lr_ratio;
  return FSDPC_OK;
}

/* The HF lr_lambda: a multiplier of base_lr. */
static double schedule_lambda(const fsdpc_schedule *s, int64_t step) {
  const int64_t W = s->warmup_steps, T = s->max_steps;
  if (step < W)
    return (double)step / (double)(W > 1 ? W : 1);
  if (s->kind == FSDPC_SCHEDULE_CONSTANT)
    return 1.0;
  const int64_t span = T - W > 1 ? T - W : 1;
  const double rate = s->min_lr_rate;
  if (s->kind == FSDPC_SCHEDULE_LINEAR) {
    const double f = fmax(0.0, (double)(T - step) / (double)span);
    return f * (1.0 - rate) + rate; /* exactly HF's value when rate is 0 */
  }
  /* cosine, num_cycles = 0.5, written in HF's operation order. */
  const double progress = (double)(step - W) / (double)span;
  double f = 0.5 * (1.0 + cos(M_PI * 0.5 * 2.0 * progress));
  f = f * (1.0 - rate) + rate;
  return fmax(0.0, f);
}

double fsdpc__schedule_lr(const fsdpc_schedule *s, int64_t step) {
  if (step < 0)
    step = 0;
  /* Past the end HF's cosine would rise again; hold the final value. */
  if (step > s->max_steps)
    step = s->max_steps;
  return s->base_lr * schedule_lambda(s, step);
}

const char *fsdpc__schedule_name(const fsdpc_schedule *s) {
  return (unsigned)s->kind < sizeof kind_names / sizeof kind_names[0] ? kind_names[s->kind] : "?";
}
