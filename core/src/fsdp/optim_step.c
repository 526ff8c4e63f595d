/* The optimizer step of the FSDP engine (its program, FSDPC_MP_OPTIM):
 * replica all-reduce of the grad shards (NO_SHARD, HYBRID_SHARD), the
 * global grad norm (one all-reduce over the shard group), clipping, the
 * optimizer plugin on each shard (or piece of one, under
 * fsdp.offload.optimizer), zeroing the grads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp/internal.h"
#include "fsdp/qstate.h"

/* Replica all-reduce of a grad shard in device memory (in place), in fp32 or,
 * with reduce_dtype bf16, through a bf16 copy. */
static fsdpc_status replica_reduce_dev(fsdpc_engine *e, float *g, uint64_t n, void *g16,
                                       const char *name, fsdpc_err *err) {
  if (!e->reduce_bf16)
    return fsdpc__dist_all_reduce_f32(e->dist, FSDPC_GROUP_REPLICA, g, n, name, err);
  if (!g16)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "fsdp: no planned bf16 buffer for unit %s", name);
  fsdpc__acct(e, FSDPC_MEM_COMM, (int64_t)n * 2);
  fsdpc_status st = e->ops->cast_params_on(e->ops->ctx, g16, g, n, NULL, err);
  if (st == FSDPC_OK)
    st = fsdpc__dist_all_reduce_dt(e->dist, FSDPC_GROUP_REPLICA, g16, n, FSDPC_DTYPE_BF16, name,
                                   err);
  if (st == FSDPC_OK)
    st = e->ops->cast_to_f32_on(e->ops->ctx, g, g16, n, NULL, err);
  fsdpc__acct(e, FSDPC_MEM_COMM, -(int64_t)n * 2);
  return st;
}

/* Replicas (NO_SHARD, HYBRID_SHARD) hold partial sums of the same shard.
 * Offloaded, the host shard goes through a device buffer d (device
 * collectives move device memory); g16: the bf16 copy (reduce_dtype bf16).
 * Both are the plan's (memplan.h); all of it runs on the compute stream,
 * the copies synchronously. */
fsdpc_status fsdpc__engine_replica_reduce(fsdpc_engine *e, int u, float *d, void *g16,
                                          fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  if (!e->offload)
    return replica_reduce_dev(e, un->grad, un->shard_numel, g16, un->name, err);
  size_t sb = un->shard_numel * sizeof(float);
  if (!d)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "fsdp: no planned buffer reducing unit %s",
                       un->name);
  fsdpc__acct(e, FSDPC_MEM_COMM, (int64_t)sb);
  fsdpc_status st = e->ops->upload(e->ops->ctx, d, un->grad, sb, err);
  if (st == FSDPC_OK)
    st = replica_reduce_dev(e, d, un->shard_numel, g16, un->name, err);
  if (st == FSDPC_OK)
    st = e->ops->download(e->ops->ctx, un->grad, d, sb, err);
  fsdpc__acct(e, FSDPC_MEM_COMM, -(int64_t)sb);
  return st;
}

/* in_bwd: the units' sums of squares that UPDATE kept (on a device, one
 * double each, downloaded at once), added in unit order as the loop below
 * adds them: the same norm. */
static fsdpc_status in_bwd_sumsq(fsdpc_engine *e, double *out, fsdpc_err *err) {
  if (e->dnorm)
    FSDPC_TRY(
        e->ops->download(e->ops->ctx, e->part, e->dnorm, (size_t)e->n_units * sizeof(double), err));
  double sumsq = 0.0;
  for (int u = 0; u < e->n_units; u++)
    if (!e->units[u].frozen)
      sumsq += e->part[u];
  *out = sumsq;
  return FSDPC_OK;
}

/* Sum of squares of every grad shard of this rank, in unit order. On a
 * device each unit's sum is added into one device double (the same order
 * and double arithmetic as the host loop) and downloaded once, so the norm
 * costs one host sync instead of one per unit. */
static fsdpc_status local_sumsq(fsdpc_engine *e, double *out, fsdpc_err *err) {
  if (e->x.in_bwd)
    return in_bwd_sumsq(e, out, err);
  if (e->hw && e->parts_ok) /* the worker summed each unit as its grads landed */
    return fsdpc__offload_sumsq(e, out, err);
  if (e->dnorm) {
    int first = 1;
    for (int u = 0; u < e->n_units; u++) {
      if (e->units[u].frozen)
        continue;
      FSDPC_TRY(e->ops->sumsq_f32_dev(e->ops->ctx, e->dnorm, e->units[u].grad,
                                      e->units[u].shard_numel, !first, err));
      first = 0;
    }
    if (first)
      return (*out = 0.0, FSDPC_OK);
    return e->ops->download(e->ops->ctx, out, e->dnorm, sizeof(double), err);
  }
  double sumsq = 0.0;
  for (int u = 0; u < e->n_units; u++) {
    double part;
    if (e->units[u].frozen)
      continue;
    FSDPC_TRY(
        e->sops->sumsq_f32(e->sops->ctx, e->units[u].grad, e->units[u].shard_numel, &part, err));
    sumsq += part;
  }
  *out = sumsq;
  return FSDPC_OK;
}

/* The global grad norm (before clipping) and the clipping factor. */
static fsdpc_status grad_norm(fsdpc_engine *e, int64_t step, double max_grad_norm, double *norm,
                              double *scale, fsdpc_err *err) {
  double sumsq = 0.0;
  FSDPC_TRY(local_sumsq(e, &sumsq, err));
  FSDPC_TRY(fsdpc__dist_all_reduce_f64(e->dist, FSDPC_GROUP_SHARD, &sumsq, 1, "grad_norm", err));
  *norm = sqrt(sumsq);
  if (!isfinite(*norm))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "step %lld: the gradient norm is %f; lower optim.lr or check the data",
                       (long long)step, *norm);
  /* torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), clamped to 1. */
  *scale = 1.0;
  if (max_grad_norm > 0.0) {
    double coef = max_grad_norm / (*norm + 1e-6);
    if (coef < 1.0)
      *scale = coef;
  }
  return FSDPC_OK;
}

/* The optimizer update of elements [lo, hi) of unit u's shard (clipped by
 * scale), then that range of its grad shard zeroed. The state of element x
 * of slot k is state[k * stride + (x - lo)]: the unit's own state (lo = 0,
 * stride = shard_numel) or, under offload_optim, a piece in a device
 * buffer (stride = hi - lo). */
fsdpc_status fsdpc__engine_update(fsdpc_engine *e, int u, uint64_t lo, uint64_t hi, float *state,
                                  uint64_t stride, int64_t step, double lr, double scale,
                                  fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  /* param_copy: the plugin writes the bf16 copy in the same pass (a stale
   * copy stays stale: its padding was never written) */
  int lpw = un->lp && !un->lp_stale && fsdpc__optim_writes_bf16(e);
  uint32_t n = 0;
  /* 8-bit state: whole units, or offload.optimizer's pieces (state: the
   * piece's device buffer, fsdpc__qspan_planes) */
  if (e->qf.block) {
    if (e->offload_optim) {
      fsdpc_qspan sp;
      fsdpc_qplanes pl;
      fsdpc__qstate_span(un, e->params, e->param_offset, &e->qf, lo, hi, &sp);
      fsdpc__qspan_planes(e->n_slots, &sp, state, &pl);
      n = fsdpc__optim_tensors_range(e, u, lo, hi, un->master, un->grad, &pl, e->otensors);
    } else if (lo != 0 || hi != un->shard_numel || state != un->state) {
      return fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                         "unit %s: a quantized optimizer state is updated whole", un->name);
    } else {
      n = fsdpc__optim_tensors(e, u, un->master, un->grad, un->state, un->qstate, un->qscale,
                               e->otensors);
    }
    for (uint32_t k = 0; lpw && k < n; k++)
      e->otensors[k].param_bf16 = un->lp + (e->otensors[k].param - un->master);
  } else {
    uint64_t s0 = un->shard_offset + lo, s1 = un->shard_offset + hi, a, b;
    for (int i = 0, p; fsdpc__next_segment(e, un, s0, s1, &i, &p, &a, &b);)
      e->otensors[n++] = (fsdpc_optim_tensor){.struct_size = sizeof(fsdpc_optim_tensor),
                                              .param = un->master + lo + (a - s0),
                                              .grad = un->grad + lo + (a - s0),
                                              .state = state ? state + (a - s0) : NULL,
                                              .numel = b - a,
                                              .stride = stride,
                                              .decay = e->params[p].decay || e->decay_norm_and_bias,
                                              .param_bf16 = lpw ? un->lp + lo + (a - s0) : NULL};
  }
  fsdpc_optim_step_info si = {.struct_size = sizeof si,
                              .step = step,
                              .lr = lr,
                              .grad_scale = scale,
                              .stream = e->sops->stream(e->sops->ctx),
                              .num_threads = e->threads};
  int32_t r = n ? e->ov->step(e->opt, e->otensors, n, &si) : FSDPC_OK;
  if (r != FSDPC_OK)
    return fsdpc__plugin_fail(e->optim, r, err);
  /* Offloaded, the next micro-batch's copy overwrites the whole grad shard
   * (grad_clean): zeroing it would only cost host bandwidth. With
   * grad_overwrite, the next backward writes a grad_written unit whole. */
  if (!e->offload && !e->x.in_bwd && !(un->grad_written && fsdpc__grad_ow(e)))
    FSDPC_TRY(e->sops->memset0(e->sops->ctx, un->grad + lo, (hi - lo) * sizeof(float), err));
  if (hi == un->shard_numel) {
    un->grad_clean = 1;
    un->stage_stale = 1;
    un->lp_stale = !lpw;
  }
  return FSDPC_OK;
}

/* The whole shard of unit u. */
static fsdpc_status update_unit(fsdpc_engine *e, int u, int64_t step, double lr, double scale,
                                fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  return fsdpc__engine_update(e, u, 0, un->shard_numel, un->state, un->shard_numel, step, lr, scale,
                              err);
}

fsdpc_status fsdpc__engine_in_bwd_begin(fsdpc_engine *e, int64_t step, double lr,
                                        double max_grad_norm, fsdpc_err *err) {
  if (max_grad_norm > 0.0) /* the run plan refused it (runplan.c in_bwd_check) */
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                       "fsdp: optim.in_backward with clipping (max_grad_norm %g)", max_grad_norm);
  e->h_step = step;
  e->h_lr = lr;
  e->in_bwd_begun = 1;
  return FSDPC_OK;
}

/* UPDATE u in the backward: compute is ordered after its reduction (the
 * program's REDUCED, or no comm stream). Its sum of squares first (the
 * logged norm), then the update of the step begun, unclipped, then its
 * grad shard's bytes go back to the plan (no zeroing: the next step makes
 * a new one). */
fsdpc_status fsdpc__engine_update_in_bwd(fsdpc_engine *e, int u, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  uint64_t n = un->shard_numel;
  if (!un->grad || !e->in_bwd_begun)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "fsdp: in_bwd update of unit %s without %s",
                       un->name, un->grad ? "a step begun" : "its grads");
  if (e->dnorm)
    FSDPC_TRY(e->ops->sumsq_f32_dev(e->ops->ctx, e->dnorm + u, un->grad, n, 0, err));
  else
    FSDPC_TRY(e->sops->sumsq_f32(e->sops->ctx, un->grad, n, &e->part[u], err));
  FSDPC_TRY(update_unit(e, u, e->h_step, e->h_lr, 1.0, err));
  fsdpc__acct(e, FSDPC_MEM_GRADS, -(int64_t)(n * sizeof(float)));
  un->grad = NULL;
  return FSDPC_OK;
}

fsdpc_status fsdpc__engine_optim_step(fsdpc_engine *e, int64_t step, double lr,
                                      double max_grad_norm, double *grad_norm_out, fsdpc_err *err) {
  if (e->inference)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                       "fsdp: an optimizer step on an engine for evaluation only");
  const fsdpc_program *p = &e->mp.prog[FSDPC_MP_OPTIM];
  const uint64_t *off = e->mp.off[FSDPC_MP_OPTIM];
  double scale = 1.0;
  if (e->micro_i != 0) /* the plan's step: accum micro-batches, then this */
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                       "fsdp: optimizer step after %d of the step's %d micro-batches", e->micro_i,
                       e->x.accum);
  FSDPC_TRY(fsdpc__drop_kept(e, err));
  if (e->x.in_bwd) { /* the updates ran in the backward with step_begin's values */
    if (!e->in_bwd_begun || step != e->h_step || lr != e->h_lr)
      return fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                         "fsdp: optimizer step %lld (lr %g) is not the one begun in the backward "
                         "(%lld, lr %g)",
                         (long long)step, lr, (long long)e->h_step, e->h_lr);
    e->in_bwd_begun = 0;
  }
  for (int i = 0; i < p->n; i++) {
    int arg = p->a[i].arg;
    switch ((fsdpc_act_op)p->a[i].op) {
    /* Offloaded: every grad copy to the host (and every gather copy from
     * the staging buffers, which the update makes stale) must be done. */
    case FSDPC_ACT_SYNC:
      FSDPC_TRY(fsdpc__engine_quiesce(e, err));
      FSDPC_TRY(e->ops->sync(e->ops->ctx, err));
      break;
    case FSDPC_ACT_REPLICA_REDUCE:
      FSDPC_TRY(fsdpc__engine_replica_reduce(e, arg, fsdpc__arena_at(e, off[2 * i]),
                                             fsdpc__arena_at(e, off[2 * i + 1]), err));
      break;
    case FSDPC_ACT_NORM:
      FSDPC_TRY(grad_norm(e, step, max_grad_norm, grad_norm_out, &scale, err));
      break;
    case FSDPC_ACT_UPDATE:
      if (e->hw) {
        FSDPC_TRY(fsdpc__offload_host_update(e, arg, step, lr, scale, err));
        break;
      }
      FSDPC_TRY(update_unit(e, arg, step, lr, scale, err));
      break;
    case FSDPC_ACT_UPDATE_PIECE:
      FSDPC_TRY(fsdpc__offload_update_piece(e, arg, step, lr, scale, err));
      break;
    case FSDPC_ACT_STATE_IN:
      FSDPC_TRY(fsdpc__offload_state_in(e, arg, err));
      break;
    case FSDPC_ACT_STATE_OUT:
      FSDPC_TRY(fsdpc__offload_state_out(e, arg, err));
      break;
    default:
      return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "fsdp: action %s in the optimizer step",
                         fsdpc__act_name(p->a[i].op));
    }
  }
  if (fsdpc__grad_ow(e))
    e->grads_fresh = 1; /* the updates left grad_written units unzeroed */
  e->shards_dirty = 0;
  return FSDPC_OK;
}
