/* The training objective (fsdpc/plugin.h, kind objective; docs/objectives.md):
 * objective.name selects a plugin, which the step loop asks for the
 * gradient seed before the backward and for the loss after it. The
 * evaluation loss stays the token cross-entropy whatever the objective. */
#ifndef FSDPC_TRAIN_OBJECTIVE_H
#define FSDPC_TRAIN_OBJECTIVE_H

#include "config/config.h"
#include "plugin/registry.h"

enum { FSDPC_OBJ_MAX_METRICS = 16 };

typedef struct fsdpc_train_objective {
  const fsdpc_component *comp; /* owned by the registry */
  fsdpc_objective *obj;        /* created by comp */
  uint32_t n_metrics;          /* the plugin's metrics, at most FSDPC_OBJ_MAX_METRICS */
  const char *metric_names[FSDPC_OBJ_MAX_METRICS]; /* the plugin's strings */
  double metrics[FSDPC_OBJ_MAX_METRICS];           /* the last step's values */
  int have_metrics; /* the last step computed them (not a skipped step) */
  int seq;          /* input FSDPC_OBJ_INPUT_SEQ_LOGPS (train/pref_step.c) */
  int needs_ref;    /* seq: the objective wants reference log-probs */
  int precompute;   /* seq: objective.reference precompute */
} fsdpc_train_objective;

/* Selects objective.name from reg, validates objective.options and
 * creates the objective. Refuses, in one line, an objective on sequence
 * log-probs off the CPU, or one that needs a reference for a full
 * fine-tune without objective.reference: precompute. */
fsdpc_status fsdpc__objective_open(const fsdpc_config *cfg, fsdpc_registry *reg,
                                   fsdpc_train_objective *out, fsdpc_err *err);
void fsdpc__objective_close(fsdpc_train_objective *o);

/* Token objectives: the seed of each target token's gradient for a step
 * of n_tokens target tokens (every rank), and the step's loss from the
 * summed token cross-entropy (and the step's metrics, kept in o). */
fsdpc_status fsdpc__objective_token_weight(const fsdpc_train_objective *o, int64_t n_tokens,
                                           double *weight, fsdpc_err *err);
fsdpc_status fsdpc__objective_token_loss(fsdpc_train_objective *o, double loss_sum,
                                         int64_t n_tokens, double *loss, fsdpc_err *err);

/* Sequence objectives: one call (in->want says what), the call's share
 * of the loss, dlogps (n_seqs) and metric sums (n_metrics) into the
 * caller's arrays. */
fsdpc_status fsdpc__objective_seq(const fsdpc_train_objective *o, const fsdpc_obj_batch *in,
                                  double *loss, double *dlogps, double *metrics, fsdpc_err *err);

#endif
