/* The planner's view of a config: the same plugins the trainer would load
 * (wrap plan, optimizer state planes, attention sizes), loaded once, then
 * the memory model for any strategy / checkpointing / offload variant. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/opts.h"
#include "plan/plan.h"
#include "train/session.h"
#include "util/log.h"

struct fsdpc_plan_ctx {
  const fsdpc_config *cfg; /* borrowed */
  fsdpc_registry *reg;
  fsdpc_model_shape shape;
  fsdpc_param_info *params;
  int n_params;
  uint32_t *unit_of_param;
  uint32_t n_units;
  uint32_t n_slots;
  fsdpc_attn_sizes attn;
};

static fsdpc_status optim_slots(fsdpc_plan_ctx *p, const fsdpc_component *optim, fsdpc_err *err) {
  const fsdpc_config *c = p->cfg;
  fsdpc_optim_init oi = {.struct_size = sizeof oi,
                         .opts = c->optim.options,
                         .weight_decay = c->optim.weight_decay,
                         .beta1 = c->optim.betas[0],
                         .beta2 = c->optim.betas[1],
                         .eps = c->optim.eps,
                         .momentum = c->optim.momentum,
                         .nesterov = c->optim.nesterov,
                         .device = c->train.device};
  const fsdpc_optim_v1 *ov = optim->vtable;
  fsdpc_optimizer *opt = NULL;
  int32_t r = ov->create(&oi, &opt);
  if (r != FSDPC_OK)
    return fsdpc__plugin_fail(optim, r, err);
  p->n_slots = ov->n_slots(opt);
  ov->destroy(opt);
  return FSDPC_OK;
}

static fsdpc_status attn_sizes(fsdpc_plan_ctx *p, const fsdpc_component *attn, fsdpc_err *err) {
  const fsdpc_config *c = p->cfg;
  const fsdpc_attention_v1 *av = attn->vtable;
  fsdpc_attn_ctx *actx = NULL;
  int32_t r;
  if (av->create && (r = av->create(c->attention.options, c->train.device, -1, &actx)) != FSDPC_OK)
    return fsdpc__plugin_fail(attn, r, err);
  fsdpc_attn_shape sh = {.struct_size = sizeof sh,
                         .B = (int)c->train.micro_batch_size,
                         .T = (int)c->data.seq_len,
                         .NH = p->shape.NH,
                         .KVH = p->shape.KVH,
                         .HD = p->shape.HD,
                         .causal = 1,
                         .scale = 1.0f,
                         .dtype = c->train.device == FSDPC_DEVICE_CUDA ? FSDPC_DTYPE_BF16
                                                                       : FSDPC_DTYPE_F32,
                         .device = c->train.device};
  p->attn.struct_size = sizeof p->attn;
  r = av->sizes(actx, &sh, &p->attn);
  if (actx && av->destroy)
    av->destroy(actx);
  return r == FSDPC_OK ? FSDPC_OK : fsdpc__plugin_fail(attn, r, err);
}

/* Selects a plugin as the trainer does, and checks (and defaults) the
 * options the config gives it. */
static fsdpc_status select_plugin(fsdpc_plan_ctx *p, int32_t kind, const char *name,
                                  fsdpc_opts *opts, const char *section, const fsdpc_situation *sit,
                                  const fsdpc_component **out, fsdpc_err *err) {
  /* Planning a GPU run may happen on a machine without the GPU, where a
   * plugin's supports() (rightly) refuses; a pinned plugin is then looked up
   * by name: the plan needs its sizes, not this machine's ability to run it. */
  const fsdpc_component *found = NULL;
  if (sit->device != FSDPC_DEVICE_CPU && name && strcmp(name, "auto") != 0)
    found = fsdpc__registry_find(p->reg, kind, name);
  if (found)
    *out = found;
  else if (fsdpc__registry_select(p->reg, kind, name, sit, out, err) != FSDPC_OK)
    return fsdpc__err_prefix(err, "%s", section);
  const fsdpc_component_desc *d = (*out)->desc;
  char who[96];
  snprintf(who, sizeof who, "%s '%s'", fsdpc__kind_name(kind), d->name);
  return fsdpc__opts_validate(opts, d->options, d->n_options, who, err);
}

fsdpc_status fsdpc__plan_ctx_create(const fsdpc_config *cfg, fsdpc_plan_ctx **out, fsdpc_err *err) {
  fsdpc_plan_ctx *p = calloc(1, sizeof *p);
  if (!p)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  p->cfg = cfg;
  fsdpc_status st;
  const fsdpc_component *attn, *optim, *wrap;
  fsdpc__session_shape_from_config(cfg, &p->shape);
  if ((st = fsdpc__model_params(&p->shape, &p->params, &p->n_params, err)) != FSDPC_OK)
    goto fail;
  if ((st = fsdpc__registry_create((const char *const *)cfg->plugins.paths.items,
                                   cfg->plugins.paths.n, &p->reg, err)) != FSDPC_OK)
    goto fail;
  /* The situation of one rank; world size does not change which attention,
   * optimizer or wrap plugin `auto` picks. */
  fsdpc_situation sit = {.struct_size = sizeof sit,
                         .device = cfg->train.device,
                         .dtype = cfg->train.device == FSDPC_DEVICE_CUDA ? FSDPC_DTYPE_BF16 : FSDPC_DTYPE_F32,
                         .world_size = 1,
                         .num_heads = p->shape.NH,
                         .num_kv_heads = p->shape.KVH,
                         .head_dim = p->shape.HD,
                         .max_seq_len = (int)cfg->data.seq_len};
  if ((st = select_plugin(p, FSDPC_KIND_ATTENTION, cfg->attention.impl, cfg->attention.options,
                          "attention.impl", &sit, &attn, err)) != FSDPC_OK ||
      (st = select_plugin(p, FSDPC_KIND_OPTIM, cfg->optim.name, cfg->optim.options, "optim.name",
                          &sit, &optim, err)) != FSDPC_OK ||
      (st = select_plugin(p, FSDPC_KIND_WRAP, cfg->fsdp.wrap.policy, cfg->fsdp.wrap.options,
                          "fsdp.wrap.policy", &sit, &wrap, err)) != FSDPC_OK)
    goto fail;
  if ((st = fsdpc__wrap_plan(wrap, p->cfg->fsdp.wrap.options, p->params, p->n_params,
                             &p->unit_of_param, &p->n_units, err)) != FSDPC_OK)
    goto fail;
  if ((st = optim_slots(p, optim, err)) != FSDPC_OK)
    goto fail;
  if ((st = attn_sizes(p, attn, err)) != FSDPC_OK)
    goto fail;
  *out = p;
  return FSDPC_OK;
fail:
  fsdpc__plan_ctx_destroy(p);
  return st;
}

void fsdpc__plan_ctx_destroy(fsdpc_plan_ctx *p) {
  if (!p)
    return;
  free(p->unit_of_param);
  free(p->params);
  fsdpc__registry_destroy(p->reg);
  free(p);
}

fsdpc_status fsdpc__plan_config(const fsdpc_plan_ctx *p, const fsdpc_plan_variant *v, int world,
                                int nproc_per_node, fsdpc_plan_mem *out, fsdpc_err *err) {
  const fsdpc_config *c = p->cfg;
  int strategy = v && v->strategy >= 0 ? v->strategy : c->fsdp.sharding_strategy;
  int mb = (int)c->train.micro_batch_size;
  int64_t G = c->train.global_batch_size > 0 ? c->train.global_batch_size
                                             : mb * c->train.grad_accum_steps * world;
  if (G % ((int64_t)mb * world) != 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "train.global_batch_size (%lld) must be a multiple of "
                       "train.micro_batch_size (%d) x world size (%d)",
                       (long long)G, mb, world);
  fsdpc_plan_in in = {
      .shape = &p->shape,
      .params = p->params,
      .n_params = p->n_params,
      .unit_of_param = p->unit_of_param,
      .n_units = p->n_units,
      .align = (int)c->fsdp.align,
      .n_slots = p->n_slots,
      .strategy = strategy,
      .world = world,
      .shard_size =
          fsdpc__plan_shard_size(strategy, world, nproc_per_node, (int)c->fsdp.hybrid_shard_size),
      .no_sync = c->fsdp.no_sync,
      .accum = (int)(G / ((int64_t)mb * world)),
      .B = mb,
      .T = (int)c->data.seq_len,
      .activation_checkpointing = v && v->activation_checkpointing >= 0
                                      ? v->activation_checkpointing
                                      : c->fsdp.activation_checkpointing,
      .cpu_offload = v && v->cpu_offload >= 0 ? v->cpu_offload : c->fsdp.cpu_offload,
      .reduce_dtype = c->fsdp.mixed_precision.reduce_dtype,
      .attn = p->attn};
  fsdpc__plan_device_default(c->train.device, &in.dev);
  return fsdpc__plan_memory(&in, out, err);
}

uint64_t fsdpc__plan_numel(const fsdpc_plan_ctx *p) {
  return fsdpc__model_numel(&p->shape);
}
const fsdpc_model_shape *fsdpc__plan_shape(const fsdpc_plan_ctx *p) {
  return &p->shape;
}
const fsdpc_param_info *fsdpc__plan_params(const fsdpc_plan_ctx *p, int *n_params,
                                           const uint32_t **unit_of_param, uint32_t *n_units) {
  *n_params = p->n_params;
  *unit_of_param = p->unit_of_param;
  *n_units = p->n_units;
  return p->params;
}
