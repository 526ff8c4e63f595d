/* Learning-rate schedules: constant, linear and cosine, each after a linear
 * warmup, with the exact formulas of Hugging Face transformers'
 * get_{constant,linear,cosine}_schedule_with_warmup (and
 * get_cosine_with_min_lr_schedule_with_warmup for a floor). docs/optim.md
 * has the formulas.
 *
 * Steps are 0-based: fsdpc__schedule_lr(s, k) is the lr of optimizer step k,
 * the (k+1)-th update (the optimizer plugin sees step count k+1). As in HF,
 * step 0 of a warmup runs with lr 0. */
#ifndef FSDPC_TRAIN_SCHEDULE_H
#define FSDPC_TRAIN_SCHEDULE_H

#include <stdint.h>

#include "util/err.h"

typedef enum fsdpc_schedule_kind {
  FSDPC_SCHEDULE_CONSTANT = 0,
  FSDPC_SCHEDULE_LINEAR = 1,
  FSDPC_SCHEDULE_COSINE = 2
} fsdpc_schedule_kind;

/* Plain value; filled by fsdpc__schedule_init, read-only afterwards. */
typedef struct fsdpc_schedule {
  fsdpc_schedule_kind kind;
  double base_lr;
  double min_lr_rate;   /* floor as a fraction of base_lr (0 = decay to 0) */
  int64_t max_steps;    /* total optimizer steps T */
  int64_t warmup_steps; /* W, resolved from warmup_steps or warmup_ratio */
} fsdpc_schedule;

/* name: "constant", "linear" or "cosine". warmup_steps > 0 wins over
 * warmup_ratio; otherwise W = ceil(warmup_ratio * max_steps) as HF's
 * TrainingArguments.get_warmup_steps computes it (in double). The floor is
 * min_lr, or min_lr_ratio * base_lr when min_lr is 0 (give at most one; not
 * with "constant"). Fails on an unknown name, negative or non-finite values,
 * max_steps < 1, W >= max_steps, a ratio above 1 or min_lr > base_lr. */
fsdpc_status fsdpc__schedule_init(fsdpc_schedule *s, const char *name, double base_lr,
                                  int64_t max_steps, int64_t warmup_steps, double warmup_ratio,
                                  double min_lr, double min_lr_ratio, fsdpc_err *err);

/* The lr of 0-based step `step`. Steps below 0 count as 0; steps at or past
 * max_steps keep the final value (min_lr for linear and cosine). */
double fsdpc__schedule_lr(const fsdpc_schedule *s, int64_t step);

/* "constant", "linear" or "cosine". */
const char *fsdpc__schedule_name(const fsdpc_schedule *s);

#endif
