/* Resolving a run: groups, batch geometry and precision (the modes), then
 * the model, the plugins with their options checked, the wrap plan, the
 * optimizer's state planes and the attention sizes. */
#include "runplan/runplan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/opts.h"
#include "model/family.h"
#include "ops/ops.h"
#include "plugin/call.h"
#include "plugin/plugin_lib.h"
#include "util/log.h"

void fsdpc__run_shape_from_config(const fsdpc_config *c, fsdpc_model_shape *sh) {
  const fsdpc_config_model *m = &c->model;
  memset(sh, 0, sizeof *sh);
  sh->V = (int)m->vocab_size;
  sh->C = (int)m->hidden_size;
  sh->F = (int)m->intermediate_size;
  sh->L = (int)m->num_hidden_layers;
  sh->NH = (int)m->num_attention_heads;
  sh->KVH = (int)m->num_key_value_heads;
  sh->HD = (int)m->head_dim;
  sh->max_pos = (int)m->max_position_embeddings;
  sh->eps = (float)m->rms_norm_eps;
  sh->tied = m->tie_word_embeddings;
  sh->bos_id = (int)m->bos_token_id;
  sh->eos_id = (int)m->eos_token_id;
  fsdpc__family_resolve(c, sh); /* the family's switches and RoPE (model/family_resolve.c) */
}

fsdpc_status fsdpc__run_shard_size(fsdpc_strategy strategy, const fsdpc_run_world *w,
                                   int64_t hybrid_shard_size, int *S, fsdpc_err *err) {
  int world = w->world_size;
  if (world < 1)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "the world size must be at least 1 (got %d)",
                       world);
  int s = world;
  if (world == 1 || strategy == FSDPC_NO_SHARD) {
    s = 1;
  } else if (strategy == FSDPC_HYBRID_SHARD) {
    if (hybrid_shard_size > 0)
      s = (int)hybrid_shard_size;
    else if (w->nproc_per_node > 0)
      s = w->nproc_per_node;
    else
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "HYBRID_SHARD: set fsdp.hybrid_shard_size (the ranks per node, its "
                         "default, are not known here)");
  }
  if (s < 1 || world % s != 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "HYBRID_SHARD: the shard group size (%d) must divide the world size (%d); "
                       "set fsdp.hybrid_shard_size to a divisor of it",
                       s, world);
  *S = s;
  return FSDPC_OK;
}

/* optim.in_backward updates unit u as soon as its gradients are reduced,
 * before the other units' exist: what needs every gradient first, or
 * gradients that live past one backward, cannot be honoured (torchtune's
 * optimizer_in_bwd refuses the same). One line each, naming the key. */
static fsdpc_status in_bwd_check(const fsdpc_config *c, const fsdpc_run_modes *m, fsdpc_err *err) {
  const char *what = NULL, *fix = NULL;
  char buf[160];
  if (c->train.max_grad_norm > 0.0) {
    snprintf(buf, sizeof buf,
             "clipping by the global gradient norm (train.max_grad_norm is %g) needs every "
             "gradient before the first update",
             c->train.max_grad_norm);
    what = buf;
    fix = "set train.max_grad_norm: 0";
  } else if (m->batch.accum > 1) {
    snprintf(buf, sizeof buf,
             "gradient accumulation (%lld micro-batches a step) keeps gradients across "
             "micro-batches",
             (long long)m->batch.accum);
    what = buf;
    fix = "use one micro-batch a step (train.grad_accum_steps: 1 and train.global_batch_size "
          "0 or micro_batch_size x ranks)";
  } else if (m->cpu_offload_asked) {
    what = "fsdp.cpu_offload keeps the gradient shards in host memory and already updates each "
           "unit during the backward when nothing is clipped";
    fix = "drop one of the two";
  } else if (m->offload_optim) {
    what = "fsdp.offload.optimizer streams the optimizer state through the step's end";
    fix = "drop one of the two";
  }
  if (!what)
    return FSDPC_OK;
  return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                     "%s: optim.in_backward cannot be honoured: %s; %s, or set "
                     "optim.in_backward: false",
                     c->source, what, fix);
}

fsdpc_status fsdpc__run_modes_resolve(const fsdpc_config *c, const fsdpc_run_variant *v,
                                      const fsdpc_run_world *w, fsdpc_run_modes *out,
                                      fsdpc_err *err) {
  memset(out, 0, sizeof *out);
  out->world = *w;
  int world = w->world_size;
  out->strategy = (fsdpc_strategy)(v && v->strategy >= 0 ? v->strategy : c->fsdp.sharding_strategy);
  FSDPC_TRY(fsdpc__run_shard_size(out->strategy, w, c->fsdp.hybrid_shard_size, &out->S, err));
  out->R = world / out->S;
  out->reshard_after_forward = fsdpc__strategy_reshards(out->strategy);

  fsdpc_run_batch *b = &out->batch;
  b->micro = c->train.micro_batch_size;
  b->seq_len = c->data.seq_len;
  b->global = c->train.global_batch_size > 0 ? c->train.global_batch_size
                                             : b->micro * c->train.grad_accum_steps * world;
  if (b->global % (b->micro * world) != 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "train.global_batch_size (%lld) must be a multiple of "
                       "train.micro_batch_size (%lld) x world size (%d)",
                       (long long)b->global, (long long)b->micro, world);
  b->accum = b->global / (b->micro * world);
  b->steps_per_epoch = -1;
  b->max_steps = c->train.max_steps;

  /* Precision: the CPU is the fp32 reference; CUDA computes in bf16 with
   * fp32 master weights, gradients and optimizer state. */
  out->device = c->train.device;
  int want = c->fsdp.mixed_precision.param_dtype;
  if (out->device == FSDPC_DEVICE_CPU) {
    if (want == FSDPC_DTYPE_BF16)
      return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                         "%s: fsdp.mixed_precision.param_dtype=bf16 needs train.device: cuda; the "
                         "CPU path is the fp32 reference",
                         c->source);
    out->compute_dtype = FSDPC_DTYPE_F32;
  } else {
    if (want == FSDPC_DTYPE_F32)
      return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                         "%s: the CUDA path computes in bf16 (with fp32 master weights, gradients "
                         "and optimizer state); set fsdp.mixed_precision.param_dtype to bf16 or "
                         "auto",
                         c->source);
    out->compute_dtype = FSDPC_DTYPE_BF16;
  }
  out->reduce_dtype = c->fsdp.mixed_precision.reduce_dtype;
  out->logits_dtype = c->fsdp.mixed_precision.logits_dtype; /* auto: the device's own */
  if (out->logits_dtype < 0)
    out->logits_dtype = out->device == FSDPC_DEVICE_CPU ? FSDPC_DTYPE_F32 : FSDPC_DTYPE_BF16;
  out->linear_fp8 = c->fsdp.mixed_precision.linear ? c->fsdp.mixed_precision.fp8_recipe : 0;

  out->cpu_offload_asked = v && v->cpu_offload >= 0 ? v->cpu_offload : c->fsdp.cpu_offload;
  out->cpu_offload = out->cpu_offload_asked && out->device != FSDPC_DEVICE_CPU;
  /* Refused here, where the engine's plan and every `fsdpc plan` variant
   * resolve their modes, so the planner never offers what the engine
   * refuses. */
  if (out->cpu_offload && c->peft.method == FSDPC_PEFT_LORA &&
      c->quantization.method == FSDPC_QUANT_NF4)
    return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                       "%s: quantization.method nf4 with fsdp.cpu_offload: not supported yet; set "
                       "fsdp.cpu_offload: false (the 4-bit base is small enough to stay resident)",
                       c->source);
  out->activation_checkpointing = v && v->activation_checkpointing >= 0
                                      ? v->activation_checkpointing
                                      : c->fsdp.activation_checkpointing;
  if (out->activation_checkpointing)
    out->activation_checkpointing = c->fsdp.activation_checkpointing_policy;
  int optim_asked =
      v && v->offload_optimizer >= 0 ? v->offload_optimizer : c->fsdp.offload.optimizer;
  out->offload_optim = optim_asked && !out->cpu_offload_asked;
  out->offload_buffer_bytes = (uint64_t)(c->fsdp.offload.buffer_mib * 1048576.0);
  out->no_sync = c->fsdp.no_sync;
  out->align = (int)c->fsdp.align;
  out->forward_prefetch = c->fsdp.forward_prefetch;
  out->param_copy = c->fsdp.param_copy && out->device != FSDPC_DEVICE_CPU && !out->cpu_offload;
  out->param_copy_max_bytes = c->fsdp.param_copy_max_mib * 1048576;
  out->backward_prefetch = c->fsdp.backward_prefetch;
  /* auto: the first blocks' units under cpu_offload, whose gathers are
   * uploads from host memory (bench/results/2026-11-24-cpuoffload2.md) */
  out->keep_params = c->fsdp.keep_params >= 0
                         ? c->fsdp.keep_params
                         : (out->cpu_offload ? FSDPC_KEEP_FIRST : FSDPC_KEEP_NONE);
  out->in_bwd = c->optim.in_backward;
  return out->in_bwd ? in_bwd_check(c, out, err) : FSDPC_OK;
}

void fsdpc__run_exec_resolve(const fsdpc_run_plan *p, const fsdpc_run_modes *m, int inference,
                             fsdpc_run_exec *out) {
  int cpu = m->device == FSDPC_DEVICE_CPU, S = m->S;
  memset(out, 0, sizeof *out);
  out->device = m->device;
  out->S = S;
  out->R = m->R;
  out->align = fsdpc__optim_align(m->align, &p->qf);
  out->act_size = m->compute_dtype == FSDPC_DTYPE_F32 ? 4 : 2;
  out->full_is_master = S == 1 && out->act_size == 4;
  out->reshard = m->reshard_after_forward;
  out->no_sync = m->no_sync;
  out->accum = m->batch.accum > 0 ? (int)m->batch.accum : 1;
  out->keep = m->keep_params;
  /* the CPU path reduces in fp32 (the trainer's plan refuses bf16 there) */
  out->reduce_bf16 = m->reduce_dtype == FSDPC_DTYPE_BF16 && !cpu;
  out->offload = m->cpu_offload;
  /* Collectives on device memory order on a stream of their own; a plan
   * made at another world (fsdpc plan) has no collectives plugin and takes
   * the device's (NCCL on CUDA). Host collectives (Gloo) block. */
  int dev_coll =
      !p->coll || (((const fsdpc_collectives_v1 *)p->coll->vtable)->memory & FSDPC_COMM_MEM_DEVICE);
  out->overlap = !cpu && ((S > 1 && dev_coll) || (S == 1 && out->offload));
  out->d2h = S == 1 && out->offload && out->overlap;
  out->forward_prefetch = m->forward_prefetch;
  out->backward_prefetch = m->backward_prefetch;
  out->inference = inference;
  out->n_slots = inference ? 0 : p->n_slots;
  /* The host worker waits for a unit's grads through a per-unit event on
   * a device (FSDPC_OPS_UNIT_EVENTS of them); on the CPU it runs the same
   * schedule over the host shards. */
  out->host_async =
      m->cpu_offload_asked && (cpu || (out->offload && p->n_units <= FSDPC_OPS_UNIT_EVENTS));
  out->offload_optim = m->offload_optim && out->n_slots > 0;
  out->offload_buffer_bytes = m->offload_buffer_bytes;
  out->param_copy = m->param_copy && out->act_size == 2;
  out->param_copy_max_bytes = m->param_copy_max_bytes > 0 ? (uint64_t)m->param_copy_max_bytes : 0;
  out->dev_norm = !cpu && !out->offload;
  out->in_bwd = m->in_bwd && !inference;
  if (p->has_lora && p->cfg && p->cfg->quantization.method == FSDPC_QUANT_NF4) {
    out->nf4_block = (int)p->cfg->quantization.block_size;
    out->nf4_dq = p->cfg->quantization.double_quant;
  }
}

void fsdpc__run_model_opts(const fsdpc_run_plan *p, const fsdpc_run_modes *m,
                           fsdpc_model_ctx_opts *out) {
  *out = (fsdpc_model_ctx_opts){.shape = &p->shape,
                                .B = (int)m->batch.micro,
                                .T = (int)m->batch.seq_len,
                                .activation_checkpointing = m->activation_checkpointing,
                                .logits_bf16 = m->logits_dtype == FSDPC_DTYPE_BF16,
                                .linear_fp8 = m->linear_fp8,
                                .attention = p->attn,
                                .attention_opts = p->cfg ? p->cfg->attention.options : NULL,
                                .lora = p->has_lora ? &p->lora : NULL};
}

void fsdpc__run_situation(const fsdpc_run_plan *p, fsdpc_situation *sit) {
  *sit = (fsdpc_situation){.struct_size = sizeof *sit,
                           .device = p->modes.device,
                           .dtype = p->modes.compute_dtype,
                           .world_size = p->modes.world.world_size,
                           .num_heads = p->shape.NH,
                           .num_kv_heads = p->shape.KVH,
                           .head_dim = p->shape.HD,
                           .max_seq_len = (int)p->modes.batch.seq_len};
}

/* Selects a plugin and checks (and defaults) the options the config gives
 * it. */
static fsdpc_status select_plugin(fsdpc_run_plan *p, int32_t kind, const char *name,
                                  fsdpc_opts *opts, const char *section, const fsdpc_situation *sit,
                                  const fsdpc_component **out, fsdpc_err *err) {
  const fsdpc_component *found = NULL;
  if ((p->flags & FSDPC_RUN_PLAN_OFFLINE) && sit->device != FSDPC_DEVICE_CPU && name &&
      strcmp(name, "auto") != 0)
    found = fsdpc__registry_find(p->reg, kind, name);
  if (found)
    *out = found;
  else if (fsdpc__registry_select(p->reg, kind, name, sit, out, err) != FSDPC_OK)
    return fsdpc__err_prefix(err, "%s", section);
  const fsdpc_component_desc *d = (*out)->desc;
  char who[96];
  snprintf(who, sizeof who, "%s '%s'", fsdpc__kind_name(kind), d->name);
  if (opts)
    FSDPC_TRY(fsdpc__opts_validate(opts, d->options, d->n_options, who, err));
  FSDPC_LOGD("%s: %s %s from %s", section, who, d->version, (*out)->path);
  return FSDPC_OK;
}

static fsdpc_status optim_slots(fsdpc_run_plan *p, fsdpc_err *err) {
  const fsdpc_optim_v1 *ov = p->optim->vtable;
  fsdpc_optimizer *opt = NULL;
  int32_t r = fsdpc__call_optim_create(p->optim, &p->optim_init, &opt);
  if (r != FSDPC_OK && (p->flags & FSDPC_RUN_PLAN_OFFLINE) &&
      p->optim_init.device != FSDPC_DEVICE_CPU) {
    /* A plan for a GPU made where this build cannot run one (no nvcc): the
     * slots and the state format are the same on every device (the plugin
     * contract; CUDA = CPU bit for bit), so the CPU form answers. */
    fsdpc_optim_init cpu = p->optim_init;
    cpu.device = FSDPC_DEVICE_CPU;
    fsdpc__plugin_lib_take_error(p->optim->lib, NULL, NULL, 0); /* the refusal, answered */
    r = fsdpc__call_optim_create(p->optim, &cpu, &opt);
  }
  if (r != FSDPC_OK)
    return fsdpc__plugin_fail(p->optim, r, err);
  p->n_slots = ov->n_slots(opt);
  fsdpc_status st = fsdpc__qformat_get(p->optim, opt, &p->qf, err);
  ov->destroy(opt);
  return st;
}

fsdpc_status fsdpc__run_attn_sizes(const fsdpc_run_plan *p, int B, int T, fsdpc_attn_sizes *out,
                                   fsdpc_err *err) {
  const fsdpc_config *c = p->cfg;
  const fsdpc_attention_v1 *av = p->attn->vtable;
  fsdpc_attn_ctx *actx = NULL;
  int32_t r = fsdpc__call_attn_create(p->attn, c->attention.options, p->modes.device, -1, &actx);
  if (r != FSDPC_OK)
    return fsdpc__plugin_fail(p->attn, r, err);
  fsdpc_attn_shape sh = {.struct_size = sizeof sh,
                         .B = B,
                         .T = T,
                         .NH = p->shape.NH,
                         .KVH = p->shape.KVH,
                         .HD = p->shape.HD,
                         .causal = 1,
                         .scale = 1.0f,
                         .dtype = p->modes.compute_dtype,
                         .device = p->modes.device,
                         .host = p->attn->host};
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  r = av->sizes(actx, &sh, out);
  if (actx && av->destroy)
    av->destroy(actx);
  return r == FSDPC_OK ? FSDPC_OK : fsdpc__plugin_fail(p->attn, r, err);
}

static fsdpc_status select_all(fsdpc_run_plan *p, fsdpc_err *err) {
  const fsdpc_config *c = p->cfg;
  fsdpc_situation sit;
  fsdpc__run_situation(p, &sit);
  FSDPC_TRY(select_plugin(p, FSDPC_KIND_ATTENTION, c->attention.impl, c->attention.options,
                          "attention.impl", &sit, &p->attn, err));
  FSDPC_TRY(select_plugin(p, FSDPC_KIND_OPTIM, c->optim.name, c->optim.options, "optim.name", &sit,
                          &p->optim, err));
  FSDPC_TRY(select_plugin(p, FSDPC_KIND_WRAP, c->fsdp.wrap.policy, c->fsdp.wrap.options,
                          "fsdp.wrap.policy", &sit, &p->wrap, err));
  FSDPC_TRY(fsdpc__wrap_plan(p->wrap, c->fsdp.wrap.options, p->params, p->n_base_params,
                             &p->unit_of_param, &p->n_units, err));
  if (p->has_lora) { /* one adapter unit per layer, after the base's units */
    uint32_t *u = realloc(p->unit_of_param, (size_t)p->n_params * sizeof *u);
    if (!u)
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory for the wrap plan");
    p->unit_of_param = u;
    for (int i = p->n_base_params; i < p->n_params; i++)
      u[i] = p->n_units + (uint32_t)p->params[i].layer;
    p->n_units += (uint32_t)p->shape.L;
  }
  if (p->modes.world.world_size > 1)
    FSDPC_TRY(select_plugin(p, FSDPC_KIND_COLLECTIVES, c->collectives.impl, c->collectives.options,
                            "collectives.impl", &sit, &p->coll, err));
  else if (strcmp(c->collectives.impl, "auto") != 0 &&
           fsdpc__registry_select(p->reg, FSDPC_KIND_COLLECTIVES, c->collectives.impl, NULL,
                                  &(const fsdpc_component *){NULL}, err) != FSDPC_OK)
    return fsdpc__err_prefix(err, "collectives.impl"); /* unused at world 1, but must exist */
  p->optim_init = (fsdpc_optim_init){.struct_size = sizeof p->optim_init,
                                     .opts = c->optim.options,
                                     .weight_decay = c->optim.weight_decay,
                                     .beta1 = c->optim.betas[0],
                                     .beta2 = c->optim.betas[1],
                                     .eps = c->optim.eps,
                                     .momentum = c->optim.momentum,
                                     .nesterov = c->optim.nesterov,
                                     .device = p->modes.device};
  FSDPC_TRY(optim_slots(p, err));
  return fsdpc__run_attn_sizes(p, (int)p->modes.batch.micro, (int)p->modes.batch.seq_len,
                               &p->attn_sizes, err);
}

fsdpc_status fsdpc__run_plan_create(const fsdpc_config *cfg, const fsdpc_run_world *w,
                                    unsigned flags, fsdpc_run_plan **out, fsdpc_err *err) {
  fsdpc_run_plan *p = calloc(1, sizeof *p);
  if (!p)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  p->cfg = cfg;
  p->flags = flags;
  fsdpc_status st;
  fsdpc_run_world one = {1, 1};
  if (!(flags & FSDPC_RUN_PLAN_MODEL_ONLY) &&
      (st = fsdpc__run_modes_resolve(cfg, NULL, w ? w : &one, &p->modes, err)) != FSDPC_OK)
    goto fail;
  /* A plan for planning answers what bf16 reduction would cost on a GPU;
   * a run on the CPU (the fp32 reference; Gloo reduces fp32) refuses it. */
  if (!(flags & (FSDPC_RUN_PLAN_MODEL_ONLY | FSDPC_RUN_PLAN_OFFLINE)) &&
      p->modes.device == FSDPC_DEVICE_CPU && p->modes.reduce_dtype == FSDPC_DTYPE_BF16) {
    st = fsdpc__fail(err, FSDPC_UNSUPPORTED,
                     "fsdp.mixed_precision.reduce_dtype=bf16 needs train.device: cuda; the CPU "
                     "path reduces gradients in fp32 (set it to fp32)");
    goto fail;
  }
  fsdpc__run_shape_from_config(cfg, &p->shape);
  p->numel = fsdpc__model_numel(&p->shape);
  if ((st = fsdpc__model_params(&p->shape, &p->params, &p->n_params, err)) != FSDPC_OK)
    goto fail;
  p->n_base_params = p->n_params;
  if ((st = fsdpc__lora_from_config(cfg, &p->lora, &p->has_lora, err)) != FSDPC_OK ||
      (p->has_lora && (st = fsdpc__lora_add_params(&p->shape, &p->lora, &p->params, &p->n_params,
                                                   err)) != FSDPC_OK))
    goto fail;
  if ((st = fsdpc__registry_create((const char *const *)cfg->plugins.paths.items,
                                   cfg->plugins.paths.n, &p->reg, err)) != FSDPC_OK)
    goto fail;
  if (!(flags & FSDPC_RUN_PLAN_MODEL_ONLY) && (st = select_all(p, err)) != FSDPC_OK)
    goto fail;
  if (!(flags & FSDPC_RUN_PLAN_MODEL_ONLY))
    fsdpc__run_exec_resolve(p, &p->modes, (flags & FSDPC_RUN_PLAN_EVAL) != 0, &p->exec);
  *out = p;
  return FSDPC_OK;
fail:
  fsdpc__run_plan_destroy(p);
  return st;
}

void fsdpc__run_plan_destroy(fsdpc_run_plan *p) {
  if (!p)
    return;
  free(p->unit_of_param);
  free(p->params);
  fsdpc__registry_destroy(p->reg);
  free(p);
}

fsdpc_status fsdpc__run_check_vocab(const fsdpc_run_plan *p, const char *what, const char *path,
                                    int64_t vocab, fsdpc_err *err) {
  if (vocab <= p->shape.V)
    return FSDPC_OK;
  return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: %s (%lld) is larger than model.vocab_size (%d)",
                     path, what, (long long)vocab, p->shape.V);
}

double fsdpc__run_flops_per_token(const fsdpc_model_shape *s, int T) {
  double n = (double)fsdpc__model_numel(s), embed = (double)s->V * (double)s->C;
  return 6.0 * (n - embed) + 12.0 * (double)s->L * (double)s->C * (double)T;
}
