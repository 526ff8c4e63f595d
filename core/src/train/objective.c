/* The objective plugin, as the step loop uses it (objective.h). */
#include "train/objective.h"

#include <ctype.h>
#include <string.h>

#include "config/opts.h"
#include "plugin/plugin_lib.h"

static fsdpc_status create(const fsdpc_config *cfg, fsdpc_train_objective *o, fsdpc_err *err) {
  const fsdpc_objective_v1 *v = o->comp->vtable;
  fsdpc_objective_init init = {.struct_size = sizeof init,
                               .opts = cfg->objective.options,
                               .host = o->comp->host,
                               .beta = cfg->objective.beta,
                               .label_smoothing = cfg->objective.label_smoothing,
                               .gamma = cfg->objective.gamma,
                               .device = cfg->train.device};
  fsdpc__plugin_lib_take_error(o->comp->lib, NULL, NULL, 0); /* drop stale messages */
  int32_t r = v->create(&init, &o->obj);
  if (r != FSDPC_OK) {
    o->obj = NULL;
    fsdpc__plugin_fail(o->comp, r, err);
    return fsdpc__err_prefix(err, "objective.name");
  }
  return FSDPC_OK;
}

/* The plugin's metric names: plain keys (they go into the log line and
 * metrics.jsonl as they are), at most FSDPC_OBJ_MAX_METRICS. */
static fsdpc_status metric_names(fsdpc_train_objective *o, fsdpc_err *err) {
  const fsdpc_objective_v1 *v = o->comp->vtable;
  uint32_t n = v->n_metrics(o->obj);
  if (n > FSDPC_OBJ_MAX_METRICS)
    return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                       "objective.name: objective '%s' has %u metrics, this fsdpc logs at most %d",
                       o->comp->desc->name, n, FSDPC_OBJ_MAX_METRICS);
  for (uint32_t i = 0; i < n; i++) {
    const char *name = v->metric_name(o->obj, i);
    size_t len = name ? strlen(name) : 0;
    int ok = len > 0 && len <= 64;
    for (size_t k = 0; ok && k < len; k++)
      ok = isalnum((unsigned char)name[k]) || strchr("_/.-", name[k]);
    if (!ok)
      return fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                         "objective.name: objective '%s' names its metric %u %s: a metric name "
                         "is 1 to 64 of [A-Za-z0-9_/.-] (a bug in the plugin)",
                         o->comp->desc->name, i, name ? "with other characters" : "NULL");
    o->metric_names[i] = name;
  }
  o->n_metrics = n;
  return FSDPC_OK;
}

/* What the step loop for sequence log-probs supports (docs/objectives.md,
 * 'Status'): a reference from LoRA's base or precomputed, on any device
 * whose ops table has lmhead_xent_rows (the head refuses the others). */
static fsdpc_status seq_supported(const fsdpc_config *cfg, fsdpc_train_objective *o,
                                  const char *who, fsdpc_err *err) {
  const fsdpc_objective_v1 *v = o->comp->vtable;
  o->seq = 1;
  o->needs_ref = v->needs_ref != 0;
  o->precompute = o->needs_ref && cfg->objective.reference == FSDPC_OBJ_REF_PRECOMPUTE;
  if (o->needs_ref && !o->precompute && cfg->peft.method != FSDPC_PEFT_LORA)
    return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                       "objective.name: %s needs a reference model: with a full fine-tune set "
                       "objective.reference: precompute (reference log-probs from the initial "
                       "weights before the first step), or train LoRA adapters (peft.method: "
                       "lora; the reference is the base with the adapters off)",
                       who);
  return FSDPC_OK;
}

fsdpc_status fsdpc__objective_open(const fsdpc_config *cfg, fsdpc_registry *reg,
                                   fsdpc_train_objective *out, fsdpc_err *err) {
  memset(out, 0, sizeof *out);
  const char *name = cfg->objective.name;
  if (fsdpc__registry_select(reg, FSDPC_KIND_OBJECTIVE, name, NULL, &out->comp, err) != FSDPC_OK)
    return fsdpc__err_prefix(err, "objective.name");
  const fsdpc_component_desc *d = out->comp->desc;
  char who[96];
  snprintf(who, sizeof who, "objective '%s'", d->name);
  if (cfg->objective.options)
    FSDPC_TRY(fsdpc__opts_validate(cfg->objective.options, d->options, d->n_options, who, err));
  const fsdpc_objective_v1 *v = out->comp->vtable;
  if (v->input == FSDPC_OBJ_INPUT_SEQ_LOGPS)
    FSDPC_TRY(seq_supported(cfg, out, who, err));
  if (v->input != FSDPC_OBJ_INPUT_TOKENS && v->input != FSDPC_OBJ_INPUT_SEQ_LOGPS)
    return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                       "objective.name: %s asks for input %d, which this fsdpc does not know "
                       "(from %s): update fsdpc",
                       who, (int)v->input, out->comp->path);
  FSDPC_TRY(create(cfg, out, err));
  return metric_names(out, err);
}

void fsdpc__objective_close(fsdpc_train_objective *o) {
  if (o->comp && o->obj)
    ((const fsdpc_objective_v1 *)o->comp->vtable)->destroy(o->obj);
  o->obj = NULL;
}

static fsdpc_status token_call(const fsdpc_train_objective *o, int32_t want, double loss_sum,
                               int64_t n_tokens, double *metrics, fsdpc_obj_result *res,
                               fsdpc_err *err) {
  const fsdpc_objective_v1 *v = o->comp->vtable;
  fsdpc_obj_batch in = {
      .struct_size = sizeof in, .want = want, .token_loss_sum = loss_sum, .n_tokens = n_tokens};
  *res = (fsdpc_obj_result){.struct_size = sizeof *res, .metrics = metrics};
  int32_t r = v->compute(o->obj, &in, res);
  return r == FSDPC_OK ? FSDPC_OK : fsdpc__plugin_fail(o->comp, r, err);
}

fsdpc_status fsdpc__objective_token_weight(const fsdpc_train_objective *o, int64_t n_tokens,
                                           double *weight, fsdpc_err *err) {
  fsdpc_obj_result res;
  FSDPC_TRY(token_call(o, FSDPC_OBJ_WANT_SEED, 0.0, n_tokens, NULL, &res, err));
  *weight = res.token_weight;
  return FSDPC_OK;
}

fsdpc_status fsdpc__objective_token_loss(fsdpc_train_objective *o, double loss_sum,
                                         int64_t n_tokens, double *loss, fsdpc_err *err) {
  fsdpc_obj_result res;
  memset(o->metrics, 0, sizeof o->metrics);
  o->have_metrics = 0;
  FSDPC_TRY(token_call(o, FSDPC_OBJ_WANT_LOSS, loss_sum, n_tokens, o->metrics, &res, err));
  *loss = res.loss;
  o->have_metrics = o->n_metrics > 0;
  return FSDPC_OK;
}

fsdpc_status fsdpc__objective_seq(const fsdpc_train_objective *o, const fsdpc_obj_batch *in,
                                  double *loss, double *dlogps, double *metrics, fsdpc_err *err) {
  const fsdpc_objective_v1 *v = o->comp->vtable;
  fsdpc_obj_result res = {.struct_size = sizeof res, .dlogps = dlogps, .metrics = metrics};
  int32_t r = v->compute(o->obj, in, &res);
  if (r != FSDPC_OK)
    return fsdpc__plugin_fail(o->comp, r, err);
  *loss = res.loss;
  return FSDPC_OK;
}
