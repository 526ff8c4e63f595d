/* Unit layout (flat buffers, padding, shard ranges), shard memory, and
 * filling the master shards: seeded random init or an HF checkpoint read
 * range by range, so no rank ever holds more than its own shards. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp/hostwork.h"
#include "fsdp/internal.h"
#include "fsdp/memplan.h"
#include "fsdp/nf4_unit.h"
#include "fsdp/qstate.h"
#include "io/dtype.h"
#include "io/hf_ckpt.h"
#include "model/lora.h"
#include "plugin/call.h"
#include "runplan/runplan.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/mem.h"

/* The engine's handles against its plan: a device and a shard group other
 * than the plan's would run a different step from the one planned. */
static fsdpc_status check_env(const fsdpc_run_plan *p, const fsdpc_engine_env *env,
                              const fsdpc_ops *ops, fsdpc_err *err) {
  const fsdpc_run_exec *x = &p->exec;
  if (x->nf4_block && x->device != FSDPC_DEVICE_CPU && !ops->nf4_dequant)
    return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                       "quantization.method nf4: this device cannot dequantize a 4-bit base "
                       "(no nf4_dequant op); train on the CPU or CUDA, or with "
                       "quantization.method: none");
  if (x->nf4_block && x->offload) /* the run plan refuses it (fsdpc__run_modes_resolve) */
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "fsdp: an nf4 base with cpu_offload planned");
  if (!env->dist || env->dist->shard_size != x->S || env->dist->replica_size != x->R)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                       "fsdp: the communicators (shard group %d x %d replicas) are not the run "
                       "plan's (%d x %d)",
                       env->dist ? env->dist->shard_size : 0,
                       env->dist ? env->dist->replica_size : 0, x->S, x->R);
  if (ops->device != x->device || (int)ops->act_size != x->act_size)
    return fsdpc__fail(
        err, FSDPC_INTERNAL_ERROR,
        "fsdp: the device (%d, %zu-byte compute) is not the run plan's (%d, %d-byte)", ops->device,
        ops->act_size, x->device, x->act_size);
  if (x->offload && (!ops->alloc_host || !ops->copy_on))
    return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                       "fsdp.cpu_offload: this device has no pinned host memory; set it to false");
  if ((x->overlap && !ops->comm_stream) || (x->d2h && !ops->d2h_stream) ||
      (x->dev_norm && !ops->sumsq_f32_dev))
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                       "fsdp: the run plan needs streams or a device norm this device lacks");
  return FSDPC_OK;
}

/* The memory plan of this rank (fsdp/memplan.h) and the arena it lives in:
 * one reservation, made here, before any shard exists. */
static fsdpc_status plan_memory(fsdpc_engine *e, const fsdpc_run_plan *p, const fsdpc_layout *lay,
                                fsdpc_err *err) {
  uint64_t act = 0, tracked = 0;
  FSDPC_TRY(fsdpc__memplan_act_bytes(p, &p->modes, &e->x, &act, &tracked, err));
  fsdpc_memplan_in in = {.x = &e->x,
                         .lay = lay,
                         .params = e->params,
                         .qf = &e->qf,
                         .pieces = e->offload_optim ? &e->pieces : NULL,
                         .sbuf_bytes = e->sbuf_bytes,
                         .act_bytes = act,
                         .act_tracked = tracked};
  FSDPC_TRY(fsdpc__memplan_build(&in, &e->mp, err));
  if (!e->ops->arena_alloc)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "fsdp: this device has no arena");
  if (!(e->arena = e->ops->arena_alloc(e->ops->ctx, e->mp.arena_bytes)))
    return fsdpc__ops_oom(
        e->ops, err,
        "for the planned arena (%.2f GiB: shards %.2f, activations %.2f, "
        "transients %.2f); run `fsdpc plan` for the options that fit",
        (double)e->mp.arena_bytes / 1073741824.0, (double)e->mp.persist_bytes / 1073741824.0,
        (double)e->mp.act_bytes / 1073741824.0, (double)e->mp.trans_bytes / 1073741824.0);
  return FSDPC_OK;
}

fsdpc_status fsdpc__engine_create(const fsdpc_run_plan *p, const fsdpc_engine_env *env,
                                  fsdpc_engine **out, fsdpc_err *err) {
  const fsdpc_run_exec *x = &p->exec;
  const fsdpc_ops *ops = env->ops ? env->ops : fsdpc__ops_cpu();
  FSDPC_TRY(check_env(p, env, ops, err));
  fsdpc_engine *e = calloc(1, sizeof *e);
  if (!e) return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory for the FSDP engine");
  fsdpc_status st;
  /* The plan's resolved modes, copied: the engine decides none of them. */
  e->x = *x;
  e->shape = p->shape;
  e->ops = ops;
  e->psize = (size_t)x->act_size;
  e->strategy = p->modes.strategy;
  e->reshard_after_forward = x->reshard;
  e->no_sync = x->no_sync;
  e->threads = env->threads;
  e->dist = env->dist;
  e->S = x->S;
  e->full_is_master = x->full_is_master;
  e->reduce_bf16 = x->reduce_bf16;
  e->offload = x->offload;
  e->sops = e->offload ? fsdpc__ops_cpu() : e->ops;
  e->param_copy = x->param_copy;
  e->inference = x->inference;
  e->keep = x->keep;
  /* Overlap: device collectives (and cpu_offload's host copies) on the comm
   * stream; at S == 1 the grads' copies to the host on a stream of their own
   * where the plan says so (docs/fsdp.md, CPU offload). */
  e->comm = x->overlap ? e->ops->comm_stream(e->ops->ctx) : NULL;
  e->d2h = x->d2h ? e->ops->d2h_stream(e->ops->ctx) : e->comm;
  e->head_unit = -1; /* fsdpc__offload_setup finds it */
  e->fwd_prefetch = x->forward_prefetch;
  e->bwd_prefetch = x->backward_prefetch;
  e->decay_norm_and_bias = p->cfg ? p->cfg->optim.decay_norm_and_bias : 0;
  e->n_params = p->n_params;
  e->params = malloc((size_t)p->n_params * sizeof *e->params);
  if (!e->params) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    goto fail;
  }
  memcpy(e->params, p->params, (size_t)p->n_params * sizeof *e->params);
  e->optim = p->optim;
  e->ov = p->optim->vtable;
  /* Offloaded: the optimizer runs on the CPU over the host shards. */
  fsdpc_optim_init oinit = p->optim_init;
  oinit.device = e->offload ? FSDPC_DEVICE_CPU : e->ops->device;
  int32_t r = fsdpc__call_optim_create(p->optim, &oinit, &e->opt);
  if (r != FSDPC_OK) {
    st = fsdpc__plugin_fail(p->optim, r, err);
    goto fail;
  }
  e->n_slots = x->n_slots;
  /* Quantized state: shards padded to whole blocks (qstate.h). */
  if (!e->inference && (st = fsdpc__qformat_get(p->optim, e->opt, &e->qf, err)) != FSDPC_OK)
    goto fail;
  for (uint32_t i = 0; e->qf.block && i < e->n_slots; i++)
    snprintf(e->qslot_names[i], sizeof e->qslot_names[i], "%s.absmax", e->ov->slot_name(e->opt, i));
  fsdpc_layout lay;
  if ((st = fsdpc__layout_build(&p->shape, p->params, p->n_params, p->unit_of_param, p->n_units,
                                e->S, x->align, env->dist->shard_rank, &lay, err)) != FSDPC_OK)
    goto fail;
  fsdpc__nf4_mark_units(&lay, p->params, x->nf4_block);
  fsdpc__dynamic_map(e->nf4_map);
  /* The engine takes the layout's arrays over. */
  e->units = lay.units;
  e->n_units = lay.n_units;
  e->param_unit = lay.param_unit;
  e->param_offset = lay.param_offset;
  memcpy(e->param_of_kind, lay.param_of_kind, sizeof e->param_of_kind);
  e->layer_param = lay.layer_param;
  e->blocks = lay.blocks;
  e->n_blocks = lay.n_blocks;
  e->max_shard = lay.max_shard;
  e->max_grad_shard = lay.max_grad_shard;
  e->max_flat = lay.max_flat;

  e->otensors = calloc((size_t)e->n_params + 1, sizeof *e->otensors);
  if (!e->otensors) goto oom;
  if ((st = fsdpc__offload_setup(e, err)) != FSDPC_OK)
    goto fail;
  /* in_bwd: each unit's sum of squares, kept for the norm (offload.c frees
   * it; the run plan refuses in_bwd with cpu_offload, which has its own) */
  if (e->x.in_bwd && !e->part && !(e->part = calloc((size_t)e->n_units + 1, sizeof *e->part)))
    goto oom;
  if ((st = plan_memory(e, p, &lay, err)) != FSDPC_OK)
    goto fail;

  for (int u = 0; u < e->n_units; u++) {
    fsdpc_unit *un = &e->units[u];
    const fsdpc_mp_unit *m = &e->mp.unit[u];
    size_t sb = un->shard_numel * sizeof(float);
    if (un->frozen) { /* compute dtype or NF4 bytes, no grad, no optimizer state */
      un->nf4_shard = m->nf4_shard;
      size_t fb = un->nf4 ? un->nf4_shard : un->shard_numel * e->psize;
      if (!(un->master = fsdpc__salloc(e, FSDPC_MEM_PARAMS, m->master, fb)))
        goto oom;
      if ((st = e->sops->memset0(e->sops->ctx, un->master, fb, err)) != FSDPC_OK)
        goto fail;
      un->grad_clean = 1;
      if (fsdpc__unit_resident(e, un))
        un->full = un->master;
      continue;
    }
    un->master = fsdpc__salloc(e, FSDPC_MEM_PARAMS, m->master, sb);
    /* in_bwd: a transient of the step (REDUCE to UPDATE), none here */
    int grads = !e->inference && !e->x.in_bwd;
    un->grad = grads ? fsdpc__salloc(e, FSDPC_MEM_GRADS, m->grad, sb) : NULL;
    if (!un->master || (grads && !un->grad))
      goto oom;
    /* offload_optim: pinned host state, streamed (fsdp/offload.c) */
    if ((st = fsdpc__state_alloc(e, un, err)) != FSDPC_OK)
      goto fail;
    if ((st = e->sops->memset0(e->sops->ctx, un->master, sb, err)) != FSDPC_OK ||
        (un->grad && (st = e->sops->memset0(e->sops->ctx, un->grad, sb, err)) != FSDPC_OK))
      goto fail;
    un->grad_clean = 1;
    if (e->offload) {
      if (!(un->stage = e->ops->alloc_host(e->ops->ctx, un->shard_numel * 2))) goto oom;
      e->host_pinned += un->shard_numel * 2;
      un->stage_stale = 1;
    }
    if (e->full_is_master) un->full = un->master; /* nothing to gather or cast */
    if ((un->lp = fsdpc__arena_at(e, m->lp))) {   /* param_copy (the plan picks the units) */
      fsdpc__acct(e, FSDPC_MEM_PARAMS, (int64_t)un->shard_numel * 2);
      un->lp_stale = 1;
    }
    /* grads accumulate in the shard (offloaded: in a device buffer, then D2H) */
    if (e->S == 1 && !e->offload && !e->x.in_bwd)
      un->full_grad = un->grad;
  }
  if ((e->nf4buf = fsdpc__arena_at(e, e->mp.nf4buf)))
    fsdpc__acct(e, FSDPC_MEM_COMM, (int64_t)e->mp.nf4buf_bytes);
  e->lp_bytes = e->mp.lp_bytes;
  e->lp_units = e->mp.lp_units;
  if ((e->rs_scratch = fsdpc__arena_at(e, e->mp.rs)))
    fsdpc__acct(e, FSDPC_MEM_COMM, (int64_t)e->max_grad_shard * 4);
  if ((e->rs16 = fsdpc__arena_at(e, e->mp.rs16)))
    fsdpc__acct(e, FSDPC_MEM_COMM, (int64_t)e->max_grad_shard * 2);
  /* the global grad norm sums on the device and downloads once */
  if ((e->dnorm = fsdpc__arena_at(e, e->mp.dnorm)))
    fsdpc__acct(e, FSDPC_MEM_OTHER, (int64_t)fsdpc__mp_dnorm_bytes(&e->x, e->n_units));
  for (int k = 0; k < 2; k++) /* offload_optim's state buffers */
    if ((e->sbuf[k] = fsdpc__arena_at(e, e->mp.sbuf[k])))
      fsdpc__acct(e, FSDPC_MEM_OPTIM, (int64_t)e->sbuf_bytes);
  if (e->dist->rank == 0) {
    char names[1024];
    int n = 0;
    for (int u = 0; u < e->n_units && n < (int)sizeof names - 80; u++)
      n += snprintf(names + n, sizeof names - (size_t)n, "%s%s (%.2fM)", u ? ", " : "",
                    e->units[u].name, (double)e->units[u].numel / 1e6);
    FSDPC_LOGI("fsdp: %s, shard group %d x replicas %d, %d units: %s",
               fsdpc__strategy_name(e->strategy), e->S, e->dist->replica_size, e->n_units,
               names);
    fsdpc_engine_bytes eb;
    fsdpc__engine_bytes(e, &eb);
    FSDPC_LOGI("fsdp: per-rank shard bytes: params=%llu grads=%llu optim=%llu largest_unit=%llu",
               (unsigned long long)eb.params, (unsigned long long)eb.grads,
               (unsigned long long)eb.optim, (unsigned long long)eb.max_unit_full);
    if (e->offload)
      FSDPC_LOGI("fsdp: cpu_offload: shards in pinned host memory (%.1f MiB with the bf16 "
                 "staging copies); grad norm, clipping and the optimizer on the CPU (%d threads)",
                 (double)e->host_pinned / 1048576.0, e->threads);
    if (e->param_copy)
      FSDPC_LOGI("fsdp: param_copy: a bf16 copy of the master shard of %d of %d units (%.1f "
                 "MiB), written by the optimizer step%s; gathers read it%s",
                 e->lp_units, e->n_units, (double)e->lp_bytes / 1048576.0,
                 fsdpc__optim_writes_bf16(e) ? " in its own pass" : " (one cast after it)",
                 e->S == 1 ? " (world of one shard: no gather at all)" : "");
    uint64_t gb = 0; /* the grad shards in_bwd does not keep */
    for (int u = 0; u < e->n_units; u++)
      gb += e->units[u].frozen ? 0 : e->units[u].shard_numel * sizeof(float);
    if (e->x.in_bwd)
      FSDPC_LOGI("fsdp: optim.in_backward: each unit's optimizer update runs in the backward once "
                 "its gradients are reduced; no persistent grad shards (%.1f MiB less), the "
                 "logged grad_norm is the unclipped norm of the units' sums",
                 (double)gb / 1048576.0);
    if (e->reduce_bf16)
      FSDPC_LOGI("fsdp: gradients reduced in bf16 (reduce-scatter%s), accumulated in fp32",
                 e->dist->replica_size > 1 ? " and replica all-reduce" : "");
    const fsdpc_memplan *mp = &e->mp;
    FSDPC_LOGI("fsdp: memory plan: one arena of %.2f MiB on the %s = shards and fixed buffers "
               "%.2f + activations %.2f + transients %.2f (step %.2f, evaluation %.2f, "
               "inference %.2f, checkpoint gathers %.2f)",
               (double)mp->arena_bytes / 1048576.0,
               e->ops->device == FSDPC_DEVICE_CPU ? "host" : "device",
               (double)mp->persist_bytes / 1048576.0, (double)mp->act_bytes / 1048576.0,
               (double)mp->trans_bytes / 1048576.0, (double)mp->trans_step / 1048576.0,
               (double)mp->trans_forward / 1048576.0, (double)mp->trans_blocks / 1048576.0,
               (double)mp->trans_ckpt / 1048576.0);
  }
  *out = e;
  return FSDPC_OK;
oom:
  st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                   "out of %s memory for parameter, gradient and optimizer shards; use "
                   "more ranks or a sharded strategy",
                   e->ops->device == FSDPC_DEVICE_CPU ? "host" : "device");
fail:
  fsdpc__engine_destroy(e);
  return st;
}

void fsdpc__engine_destroy(fsdpc_engine *e) {
  if (!e) return;
  fsdpc_err ignore_q;
  (void)fsdpc__engine_quiesce(e, &ignore_q);
  fsdpc__hostwork_destroy(e->hw);
  e->hw = NULL;
  for (int u = 0; e->units && u < e->n_units; u++) {
    fsdpc_unit *un = &e->units[u];
    size_t sb = un->shard_numel * sizeof(float), fb = un->flat_numel * sizeof(float);
    size_t pb = un->flat_numel * e->psize;
    /* transients still planned in (a step that failed half way) */
    if (un->full && un->full != un->master && !fsdpc__full_is_lp(un))
      fsdpc__acct(e, FSDPC_MEM_COMM, -(int64_t)pb);
    if (un->full_grad && un->full_grad != un->grad)
      fsdpc__acct(e, FSDPC_MEM_GRADS, -(int64_t)fb);
    if (un->frozen) {
      fsdpc__sfree(e, FSDPC_MEM_PARAMS, un->master,
                   un->nf4 ? un->nf4_shard : un->shard_numel * e->psize);
      free(un->params);
      continue;
    }
    if (un->lp)
      fsdpc__acct(e, FSDPC_MEM_PARAMS, -(int64_t)un->shard_numel * 2);
    fsdpc__sfree(e, FSDPC_MEM_PARAMS, un->master, sb);
    fsdpc__sfree(e, FSDPC_MEM_GRADS, un->grad, sb);
    fsdpc__state_free(e, un);
    if (un->stage) e->ops->free_host(e->ops->ctx, un->stage);
    if (un->landing) e->ops->free_host(e->ops->ctx, un->landing);
    free(un->params);
  }
  fsdpc_err ignore;
  fsdpc__engine_host_shards_done(e, 0, &ignore);
  fsdpc__offload_teardown(e);
  if (e->opt) e->ov->destroy(e->opt);
  if (e->rs_scratch)
    fsdpc__acct(e, FSDPC_MEM_COMM, -(int64_t)e->max_grad_shard * 4);
  if (e->rs16)
    fsdpc__acct(e, FSDPC_MEM_COMM, -(int64_t)e->max_grad_shard * 2);
  if (e->dnorm)
    fsdpc__acct(e, FSDPC_MEM_OTHER, -(int64_t)sizeof(double));
  if (e->nf4buf)
    fsdpc__acct(e, FSDPC_MEM_COMM, -(int64_t)e->mp.nf4buf_bytes);
  if (e->arena)
    e->ops->arena_free(e->ops->ctx, e->arena, e->mp.arena_bytes);
  fsdpc__memplan_free(&e->mp);
  free(e->otensors);
  free(e->units);
  free(e->blocks);
  free(e->param_unit);
  free(e->param_offset);
  free(e->layer_param);
  free(e->params);
  free(e);
}

int fsdpc__engine_n_units(const fsdpc_engine *e) { return e->n_units; }
void *fsdpc__engine_act_block(fsdpc_engine *e, size_t *bytes) {
  *bytes = e->mp.act_bytes;
  return e->mp.act_bytes ? e->arena + e->mp.act_offset : NULL;
}
const fsdpc_memplan *fsdpc__engine_memplan(const fsdpc_engine *e) {
  return &e->mp;
}
int fsdpc__engine_offloaded(const fsdpc_engine *e) { return e->offload; }
const fsdpc_unit *fsdpc__engine_unit(const fsdpc_engine *e, int u) { return &e->units[u]; }
int fsdpc__engine_n_params(const fsdpc_engine *e) { return e->n_params; }
fsdpc_dist *fsdpc__engine_dist(fsdpc_engine *e) { return e->dist; }
uint32_t fsdpc__engine_n_slots(const fsdpc_engine *e) {
  return fsdpc__ckpt_slots(e);
}
const char *fsdpc__engine_slot_name(const fsdpc_engine *e, uint32_t i) {
  if (e->qf.block && i >= e->n_slots)
    return e->qslot_names[i - e->n_slots];
  return e->ov->slot_name(e->opt, i);
}

const fsdpc_param_info *fsdpc__engine_param(const fsdpc_engine *e, int p, uint64_t *unit_offset,
                                            int *unit) {
  if (unit_offset) *unit_offset = e->param_offset[p];
  if (unit) *unit = e->param_unit[p];
  return &e->params[p];
}

void fsdpc__engine_bytes(const fsdpc_engine *e, fsdpc_engine_bytes *out) {
  memset(out, 0, sizeof *out);
  for (int u = 0; u < e->n_units; u++) {
    uint64_t sb = e->units[u].shard_numel * sizeof(float);
    if (e->units[u].frozen) { /* compute dtype or NF4; no grad, no optimizer state */
      out->params += e->units[u].nf4 ? e->units[u].nf4_shard : e->units[u].shard_numel * e->psize;
      if (e->units[u].flat_numel * 4 > out->max_unit_full)
        out->max_unit_full = e->units[u].flat_numel * 4;
      continue;
    }
    out->params += sb;
    out->grads += e->inference || e->x.in_bwd ? 0 : sb;
    out->optim += fsdpc__state_bytes(e, &e->units[u]);
    if (e->units[u].flat_numel * 4 > out->max_unit_full)
      out->max_unit_full = e->units[u].flat_numel * 4;
  }
}

void fsdpc__engine_comm_bytes(const fsdpc_engine *e, fsdpc_comm_bytes *out) {
  out->all_gather = e->dist->bytes_all_gather;
  out->reduce_scatter = e->dist->bytes_reduce_scatter;
  out->all_reduce = e->dist->bytes_all_reduce;
  out->comm_s = e->dist->comm_s;
}

/* Calls fn(p, lo, hi, dst) for each parameter segment [lo, hi) (elements of
 * the parameter) that falls inside this rank's shard of unit u; dst is where
 * element lo lives in the master shard. */
typedef fsdpc_status (*segment_fn)(fsdpc_engine *e, int p, uint64_t lo, uint64_t hi, float *dst,
                                   void *arg, fsdpc_err *err);

static fsdpc_status for_each_segment(fsdpc_engine *e, int u, float *shard, segment_fn fn,
                                     void *arg, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  uint64_t s0 = un->shard_offset, s1 = un->shard_offset + un->shard_numel, a, b;
  for (int i = 0, p; fsdpc__next_segment(e, un, s0, s1, &i, &p, &a, &b);)
    FSDPC_TRY(fn(e, p, a - e->param_offset[p], b - e->param_offset[p], shard + (a - s0), arg, err));
  return FSDPC_OK;
}

/* Which units a fill covers. */
enum { FILL_ALL, FILL_BASE, FILL_ADAPTERS, FILL_NOT_NF4, FILL_TRAINABLE };

static int unit_is_adapter(const fsdpc_engine *e, const fsdpc_unit *un) {
  return fsdpc__lora_kind(e->params[un->params[0]].kind);
}

fsdpc_status fsdpc__nf4_store(fsdpc_engine *e, int u, const float *full, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  uint64_t mb = un->nf4_shard, ib = mb * (uint64_t)e->S;
  uint8_t *image = malloc(ib + 1);
  if (!image)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of host memory quantizing unit %s to nf4",
                       un->name);
  fsdpc_status st = fsdpc__nf4_unit_pack(un, e->params, e->param_offset, e->x.nf4_block,
                                         e->x.nf4_dq, (int)e->psize, full, image, ib, err);
  const uint8_t *mine = image + (uint64_t)e->dist->shard_rank * mb;
  if (st == FSDPC_OK && e->ops->device == FSDPC_DEVICE_CPU)
    memcpy(un->master, mine, mb);
  else if (st == FSDPC_OK)
    st = e->ops->upload(e->ops->ctx, un->master, mine, mb, err);
  free(image);
  return st;
}

/* An NF4 unit: fn makes the whole unit's fp32 values on the host (one
 * unit at a time: a projection is quantized whole, its blocks' scales and
 * the double quantization's mean need all of it), then fsdpc__nf4_store. */
static fsdpc_status fill_nf4(fsdpc_engine *e, int u, segment_fn fn, void *arg, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  float *full = calloc(un->flat_numel + 1, sizeof(float));
  if (!full)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of host memory quantizing unit %s to nf4",
                       un->name);
  fsdpc_status st = FSDPC_OK;
  for (int i = 0; i < un->n_params && st == FSDPC_OK; i++) {
    int p = un->params[i];
    st = fn(e, p, 0, e->params[p].numel, full + e->param_offset[p], arg, err);
  }
  if (st == FSDPC_OK)
    st = fsdpc__nf4_store(e, u, full, err);
  free(full);
  return st;
}

/* Runs fn over the shard segments of the units `which` names. On the CPU it
 * writes the master shards in place; on a device it fills one host staging
 * shard at a time and uploads it, so host memory stays at one unit's shard.
 * A frozen unit's bf16 shard is made from the fp32 staging shard on the
 * host. */
static fsdpc_status fill_shards(fsdpc_engine *e, int which, segment_fn fn, void *arg,
                                fsdpc_err *err) {
  FSDPC_TRY(fsdpc__engine_quiesce(e, err));
  int on_host = e->ops->device == FSDPC_DEVICE_CPU || e->offload;
  int narrow = e->psize != sizeof(float); /* frozen shards in bf16 */
  int need = !on_host || narrow, need16 = narrow && !e->offload;
  float *stage = need ? malloc(e->max_shard * sizeof(float)) : NULL;
  uint16_t *stage16 = need16 ? malloc(e->max_shard * 2) : NULL;
  if ((need && !stage) || (need16 && !stage16)) {
    free(stage);
    free(stage16);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of host memory staging a shard");
  }
  fsdpc_status st = FSDPC_OK;
  for (int u = 0; u < e->n_units && st == FSDPC_OK; u++) {
    fsdpc_unit *un = &e->units[u];
    int adapter = unit_is_adapter(e, un);
    if ((which == FILL_BASE && adapter) || (which == FILL_ADAPTERS && !adapter) ||
        (which == FILL_NOT_NF4 && un->nf4) || (which == FILL_TRAINABLE && un->frozen))
      continue;
    un->lp_stale = 1;
    if (un->nf4) {
      st = fill_nf4(e, u, fn, arg, err);
      continue;
    }
    int direct = on_host && !(un->frozen && narrow);
    if (direct) {
      un->stage_stale = 1;
      st = for_each_segment(e, u, un->master, fn, arg, err);
      continue;
    }
    memset(stage, 0, un->shard_numel * sizeof(float)); /* padding stays zero */
    st = for_each_segment(e, u, stage, fn, arg, err);
    if (st != FSDPC_OK)
      break;
    if (un->frozen && narrow) {
      uint16_t *dst = e->offload ? (uint16_t *)un->master : stage16;
      fsdpc__f32_to_bf16_n(stage, dst, un->shard_numel);
      if (!e->offload)
        st = e->ops->upload(e->ops->ctx, un->master, stage16, un->shard_numel * 2, err);
    } else {
      st = e->ops->upload(e->ops->ctx, un->master, stage, un->shard_numel * sizeof(float), err);
    }
  }
  free(stage);
  free(stage16);
  return st;
}

typedef struct init_arg {
  uint64_t seed;
  double std;
} init_arg;

static fsdpc_status init_segment(fsdpc_engine *e, int p, uint64_t lo, uint64_t hi, float *dst,
                                 void *arg, fsdpc_err *err) {
  init_arg *a = arg;
  fsdpc__model_init_range(&e->params[p], a->seed, a->std, lo, hi - lo, dst);
  return FSDPC_OK;
}

/* On the device: the same elements made by a kernel in place (ops init_f32). */
static fsdpc_status init_segment_dev(fsdpc_engine *e, int p, uint64_t lo, uint64_t hi, float *dst,
                                     void *arg, fsdpc_err *err) {
  init_arg *a = arg;
  const fsdpc_param_info *pi = &e->params[p];
  int ones = fsdpc__model_init_is_ones(pi);
  uint64_t key = ones ? 0 : fsdpc__model_init_key(pi, a->seed);
  double std = pi->init_zero ? 0.0 : a->std; /* normal * 0 = the zeros of init_range */
  return e->ops->init_f32(e->ops->ctx, dst, hi - lo, key, lo, std, ones, err);
}

typedef struct dev_make {
  fsdpc_engine *e;
  init_arg a;
} dev_make;

static fsdpc_status make_param_dev(void *arg, int p, float *x, fsdpc_err *err) {
  dev_make *m = arg;
  return init_segment_dev(m->e, p, 0, m->e->params[p].numel, x, &m->a, err);
}

int fsdpc__nf4_on_device(const fsdpc_engine *e) {
  return e->x.nf4_block && e->ops->nf4_quant && e->psize == 2 && !e->offload;
}

/* QLoRA's NF4 units made and quantized on the device (ops->nf4_quant): each
 * unit's image built whole in device memory (the same bytes as the host
 * quantizer's from the same values), this rank's bytes kept. The image and
 * the scratch borrow the arena's activation block, which no step uses yet
 * at start-up; a block too small for them is allocated beside. */
fsdpc_status fsdpc__nf4_fill_dev(fsdpc_engine *e, fsdpc_nf4_unit_fn begin, fsdpc_nf4_make_fn make,
                                 void *arg, fsdpc_err *err) {
  const fsdpc_ops *o = e->ops;
  uint64_t need = 0;
  for (int u = 0; u < e->n_units; u++) {
    const fsdpc_unit *un = &e->units[u];
    uint64_t b = un->nf4 ? (un->nf4_shard * (uint64_t)e->S + 255) / 256 * 256 +
                               fsdpc__nf4_pack_dev_scratch(un, e->params, e->x.nf4_block)
                         : 0;
    need = b > need ? b : need;
  }
  size_t have = 0;
  char *block = fsdpc__engine_act_block(e, &have), *own = NULL;
  if (have < need && !(block = own = o->alloc(o->ctx, FSDPC_MEM_OTHER, need)))
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                       "out of device memory quantizing the nf4 base (%.1f MiB of scratch)",
                       (double)need / 1048576.0);
  fsdpc_status st = FSDPC_OK;
  int n = 0;
  double t0 = fsdpc__now();
  for (int u = 0; u < e->n_units && st == FSDPC_OK; u++) {
    fsdpc_unit *un = &e->units[u];
    if (!un->nf4)
      continue;
    n++;
    uint64_t mb = un->nf4_shard, ib = mb * (uint64_t)e->S;
    uint8_t *image = (uint8_t *)block;
    void *scratch = block + (ib + 255) / 256 * 256;
    un->lp_stale = 1;
    if (begin)
      st = begin(arg, u, err);
    if (st == FSDPC_OK)
      st = fsdpc__nf4_unit_pack_dev(un, e->params, e->x.nf4_block, e->x.nf4_dq, o, e->nf4_map, make,
                                    arg, image, ib, scratch, err);
    if (st == FSDPC_OK)
      st =
          o->copy_on(o->ctx, un->master, image + (uint64_t)e->dist->shard_rank * mb, mb, NULL, err);
    if (st == FSDPC_OK)
      st = o->sync(o->ctx, err);
  }
  if (own)
    o->free(o->ctx, FSDPC_MEM_OTHER, own, need);
  if (st == FSDPC_OK && e->dist->rank == 0)
    FSDPC_LOGI("fsdp: %d nf4 units quantized on the device in %.2f s (%s)", n, fsdpc__now() - t0,
               begin ? "read on the host" : "made there");
  return st;
}

/* Frozen bf16 shards (LoRA's and QLoRA's base outside the NF4 units: the
 * embedding, the head, norms) made on the device: each shard segment's fp32
 * values by the device init (the CPU's bit for bit) into a scratch, in
 * pieces that fit it, then cast to bf16 in place (round to nearest even, as
 * the host's fsdpc__f32_to_bf16_n). The scratch borrows the arena's
 * activation block, unused at start-up (or 64 MiB beside it when there is
 * none). */
static fsdpc_status init_frozen_dev(fsdpc_engine *e, const init_arg *a, fsdpc_err *err) {
  const fsdpc_ops *o = e->ops;
  size_t have = 0;
  float *scratch = fsdpc__engine_act_block(e, &have), *own = NULL;
  if (have < (64u << 20)) {
    have = 64u << 20;
    if (!(scratch = own = o->alloc(o->ctx, FSDPC_MEM_OTHER, have)))
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                         "out of device memory making the frozen base (64 MiB of scratch)");
  }
  uint64_t cap = have / sizeof(float);
  fsdpc_status st = FSDPC_OK;
  for (int u = 0; u < e->n_units && st == FSDPC_OK; u++) {
    fsdpc_unit *un = &e->units[u];
    if (!un->frozen || un->nf4 || unit_is_adapter(e, un))
      continue;
    un->lp_stale = 1;
    uint16_t *dst = (uint16_t *)un->master; /* bf16, shard_numel; padding zero from create */
    uint64_t s0 = un->shard_offset, s1 = s0 + un->shard_numel, lo, hi;
    for (int i = 0, p; st == FSDPC_OK && fsdpc__next_segment(e, un, s0, s1, &i, &p, &lo, &hi);)
      for (uint64_t c = lo; c < hi && st == FSDPC_OK; c += cap) {
        uint64_t n = hi - c < cap ? hi - c : cap, pe = c - e->param_offset[p];
        st = init_segment_dev(e, p, pe, pe + n, scratch, (void *)a, err);
        if (st == FSDPC_OK)
          st = o->cast_params(o->ctx, dst + (c - s0), scratch, n, err);
      }
  }
  if (st == FSDPC_OK)
    st = o->sync(o->ctx, err);
  if (own)
    o->free(o->ctx, FSDPC_MEM_OTHER, own, have);
  return st;
}

fsdpc_status fsdpc__engine_init_random(fsdpc_engine *e, uint64_t seed, double std, fsdpc_err *err) {
  init_arg a = {seed, std};
  /* LoRA and QLoRA on a device: the adapters' init (Kaiming-uniform, zero)
   * on the host, the frozen bf16 shards and the NF4 units on the device
   * (the same values); elsewhere everything on the host */
  int frozen = 0;
  for (int u = 0; u < e->n_units; u++)
    frozen |= e->units[u].frozen;
  int dev = e->ops->init_f32 && e->ops->cast_params && !e->offload &&
            e->ops->device != FSDPC_DEVICE_CPU;
  dev_make m = {e, a};
  if (dev && frozen && e->psize == 2) {
    /* the adapters (and any trainable unit) on the host, the base here */
    FSDPC_TRY(fill_shards(e, FILL_TRAINABLE, init_segment, &a, err));
    FSDPC_TRY(init_frozen_dev(e, &a, err));
    return fsdpc__nf4_on_device(e) ? fsdpc__nf4_fill_dev(e, NULL, make_param_dev, &m, err)
                                   : FSDPC_OK;
  }
  if (fsdpc__nf4_on_device(e) && e->ops->init_f32) {
    FSDPC_TRY(fill_shards(e, FILL_NOT_NF4, init_segment, &a, err));
    return fsdpc__nf4_fill_dev(e, NULL, make_param_dev, &m, err);
  }
  if (!e->ops->init_f32 || e->offload || frozen)
    return fill_shards(e, FILL_ALL, init_segment, &a, err);
  /* Device shards: no host work and no copy; padding stays zero from create. */
  for (int u = 0; u < e->n_units; u++)
    FSDPC_TRY(for_each_segment(e, u, e->units[u].master, init_segment_dev, &a, err));
  return e->ops->sync(e->ops->ctx, err);
}

fsdpc_status fsdpc__engine_init_adapters(fsdpc_engine *e, uint64_t seed, fsdpc_err *err) {
  init_arg a = {seed, 0.0};
  return fill_shards(e, FILL_ADAPTERS, init_segment, &a, err);
}

/* Host mirrors of device shards (checkpoints). Index: unit * (1 + n_slots) +
 * (slot + 1), slot FSDPC_SD_SLOT_PARAM = -1 for the master weights. */
static float *device_shard(fsdpc_engine *e, int u, int slot) {
  fsdpc_unit *un = &e->units[u];
  return slot == FSDPC_SD_SLOT_PARAM ? un->master : un->state + (size_t)slot * un->shard_numel;
}

float *fsdpc__engine_host_shard(fsdpc_engine *e, int u, int slot, fsdpc_err *err) {
  if (u < 0 || u >= e->n_units || slot < FSDPC_SD_SLOT_PARAM || slot >= (int)fsdpc__ckpt_slots(e) ||
      (e->units[u].frozen && slot != FSDPC_SD_SLOT_PARAM)) {
    fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "host_shard: unit %d slot %d out of range", u, slot);
    return NULL;
  }
  if (e->units[u].nf4) { /* bytes, not floats: checkpoints never hold the frozen base */
    fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                "host_shard: unit %s holds an NF4 image, not fp32 values; gather it instead",
                e->units[u].name);
    return NULL;
  }
  if (fsdpc__engine_quiesce(e, err) != FSDPC_OK)
    return NULL;
  if (e->qf.block && slot >= 0)
    return fsdpc__qstate_host_shard(e, u, slot, err);
  int narrow = e->units[u].frozen && e->psize != sizeof(float); /* a bf16 frozen shard */
  if (!narrow && (e->ops->device == FSDPC_DEVICE_CPU || e->offload ||
                  (e->offload_optim && slot != FSDPC_SD_SLOT_PARAM)))
    return device_shard(e, u, slot);
  size_t per = 1 + (size_t)e->n_slots, i = (size_t)u * per + (size_t)(slot + 1);
  if (!e->mirror && !(e->mirror = calloc((size_t)e->n_units * per, sizeof(float *)))) {
    fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of host memory for checkpoint staging");
    return NULL;
  }
  if (!e->mirror[i]) {
    size_t b = e->units[u].shard_numel * sizeof(float);
    float *m = malloc(b ? b : 1);
    if (!m) {
      fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of host memory staging unit %s for a checkpoint",
                  e->units[u].name);
      return NULL;
    }
    if (narrow) { /* widened on the host; read-only (frozen shards are never loaded) */
      size_t n = e->units[u].shard_numel;
      uint16_t *h = e->offload ? (uint16_t *)e->units[u].master : malloc(n * 2 + 2);
      if (!h || (!e->offload &&
                 e->ops->download(e->ops->ctx, h, e->units[u].master, n * 2, err) != FSDPC_OK)) {
        if (!e->offload)
          free(h);
        free(m);
        if (!h)
          fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of host memory staging unit %s",
                      e->units[u].name);
        return NULL;
      }
      fsdpc__bf16_to_f32_n(h, m, n);
      if (!e->offload)
        free(h);
    } else if (e->ops->download(e->ops->ctx, m, device_shard(e, u, slot), b, err) != FSDPC_OK) {
      free(m);
      return NULL;
    }
    e->mirror[i] = m;
  }
  return e->mirror[i];
}

fsdpc_status fsdpc__engine_host_shards_done(fsdpc_engine *e, int upload, fsdpc_err *err) {
  FSDPC_TRY(fsdpc__engine_quiesce(e, err));
  fsdpc_status qst = fsdpc__qstate_done(e, upload, err);
  if (e->offload && upload) {
    /* The host shards were written in place: recast the bf16 staging copies
     * at the next gather, once no copy from them is in flight. */
    FSDPC_TRY(e->ops->sync(e->ops->ctx, err));
    for (int u = 0; u < e->n_units; u++) e->units[u].stage_stale = 1;
  }
  if (upload)
    for (int u = 0; u < e->n_units; u++) e->units[u].lp_stale = 1;
  if (!e->mirror)
    return qst;
  size_t per = 1 + (size_t)e->n_slots;
  fsdpc_status st = qst;
  for (int u = 0; u < e->n_units; u++)
    for (int k = 0; k < (int)per; k++) {
      float *m = e->mirror[(size_t)u * per + (size_t)k];
      if (!m) continue;
      if (upload && st == FSDPC_OK && !e->units[u].frozen) /* frozen: read-only */
        st = e->ops->upload(e->ops->ctx, device_shard(e, u, k - 1), m,
                            e->units[u].shard_numel * sizeof(float), err);
      free(m);
    }
  free(e->mirror);
  e->mirror = NULL;
  return st;
}

uint64_t fsdpc__engine_host_pinned(const fsdpc_engine *e) { return e->host_pinned; }
