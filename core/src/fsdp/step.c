/* One training step of the FSDP engine.
 *
 * forward, block by block: gather the block's units (unless resident) ->
 * compute -> under FULL_SHARD / HYBRID_SHARD free a unit after its last
 * forward use (units the head needs stay: backward starts there).
 * The head block runs forward and backward together (fused cross-entropy).
 * backward, in reverse: gather (re-gather after a free) -> backward ->
 * after a unit's last backward use: reduce-scatter its grads into the grad
 * shard (or keep them until the last micro-batch with no_sync) and free its
 * full params and grads.
 * step: replica all-reduce of grad shards (NO_SHARD, HYBRID_SHARD) -> global
 * grad norm (one all-reduce over the shard group) -> clip -> optimizer. */
#include <math.h>
#include <string.h>

#include "fsdp/internal.h"
#include "ops/cpu/ops_cpu.h"
#include "util/mem.h"

static fsdpc_status gather(fsdpc_engine *e, int u, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  if (un->full) return FSDPC_OK;
  size_t fb = un->flat_numel * sizeof(float);
  if (!(un->full = fsdpc__mem_alloc(FSDPC_MEM_COMM, fb)))
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of host memory gathering unit %s (%zu bytes)",
                       un->name, fb);
  return fsdpc__dist_all_gather(e->dist, FSDPC_GROUP_SHARD, un->master, un->full,
                                un->shard_numel, un->name, err);
}

static void release(fsdpc_engine *e, int u) {
  fsdpc_unit *un = &e->units[u];
  if (e->S == 1 || !un->full) return;
  fsdpc__mem_free(FSDPC_MEM_COMM, un->full, un->flat_numel * sizeof(float));
  un->full = NULL;
}

static fsdpc_status ensure_grad(fsdpc_engine *e, int u, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  if (un->full_grad) return FSDPC_OK;
  size_t fb = un->flat_numel * sizeof(float);
  if (!(un->full_grad = fsdpc__mem_alloc(FSDPC_MEM_GRADS, fb))) /* zero-filled */
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                       "out of host memory for the gradients of unit %s (%zu bytes)", un->name,
                       fb);
  return FSDPC_OK;
}

/* After the unit's last backward use in this micro-batch. */
static fsdpc_status reduce_grads(fsdpc_engine *e, int u, int last_micro, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  if (e->S == 1) return FSDPC_OK; /* grads accumulated straight into the shard */
  if (e->no_sync && !last_micro) return FSDPC_OK; /* keep accumulating full grads */
  FSDPC_TRY(fsdpc__dist_reduce_scatter(e->dist, FSDPC_GROUP_SHARD, un->full_grad, e->rs_scratch,
                                       un->shard_numel, un->name, err));
  fsdpc__cpu_add_inplace(un->grad, e->rs_scratch, un->shard_numel);
  fsdpc__mem_free(FSDPC_MEM_GRADS, un->full_grad, un->flat_numel * sizeof(float));
  un->full_grad = NULL;
  return FSDPC_OK;
}

static void layer_ptrs(fsdpc_engine *e, int l, int grads, float *base[FSDPC_P_NKIND]) {
  for (int k = 0; k < FSDPC_P_NKIND; k++) {
    int p = e->layer_param[l * FSDPC_P_NKIND + k];
    base[k] = p < 0 ? NULL : grads ? fsdpc__param_full_grad(e, p) : fsdpc__param_full(e, p);
  }
}

static float *top_ptr(fsdpc_engine *e, int kind, int grads) {
  int p = e->param_of_kind[kind];
  if (kind == FSDPC_P_HEAD && e->shape.tied) p = e->param_of_kind[FSDPC_P_EMBED];
  return grads ? fsdpc__param_full_grad(e, p) : fsdpc__param_full(e, p);
}

static fsdpc_status gather_block(fsdpc_engine *e, int b, int with_grads, fsdpc_err *err) {
  for (int i = 0; i < e->blocks[b].n_units; i++) {
    FSDPC_TRY(gather(e, e->blocks[b].units[i], err));
    if (with_grads) FSDPC_TRY(ensure_grad(e, e->blocks[b].units[i], err));
  }
  return FSDPC_OK;
}

/* Forward of blocks 0..L (not the head). */
static fsdpc_status forward_layers(fsdpc_engine *e, fsdpc_model_ctx *m, int reshard,
                                   fsdpc_err *err) {
  int L = e->shape.L, head = L + 1;
  for (int b = 0; b <= L; b++) {
    FSDPC_TRY(gather_block(e, b, 0, err));
    if (b == 0) {
      FSDPC_TRY(fsdpc__model_embed_fwd(m, top_ptr(e, FSDPC_P_EMBED, 0), err));
    } else {
      float *base[FSDPC_P_NKIND];
      fsdpc_layer_w w;
      layer_ptrs(e, b - 1, 0, base);
      fsdpc__layer_views(base, &w);
      FSDPC_TRY(fsdpc__model_layer_fwd(m, b - 1, &w, err));
    }
    if (!reshard) continue;
    for (int i = 0; i < e->blocks[b].n_units; i++) {
      fsdpc_unit *un = &e->units[e->blocks[b].units[i]];
      if (un->last_block == b && un->last_block != head) release(e, e->blocks[b].units[i]);
    }
  }
  return FSDPC_OK;
}

fsdpc_status fsdpc__engine_micro_step(fsdpc_engine *e, fsdpc_model_ctx *m, float grad_scale,
                                      int last_micro, double *loss_sum, int64_t *count,
                                      fsdpc_err *err) {
  int L = e->shape.L, head = L + 1;
  FSDPC_TRY(forward_layers(e, m, e->reshard_after_forward, err));

  FSDPC_TRY(gather_block(e, head, 1, err));
  FSDPC_TRY(fsdpc__model_head_fwd_bwd(m, top_ptr(e, FSDPC_P_NORM, 0), top_ptr(e, FSDPC_P_HEAD, 0),
                                      grad_scale, top_ptr(e, FSDPC_P_NORM, 1),
                                      top_ptr(e, FSDPC_P_HEAD, 1), loss_sum, count, err));
  for (int b = head; b >= 0; b--) {
    if (b < head) {
      FSDPC_TRY(gather_block(e, b, 1, err));
      if (b == 0) {
        FSDPC_TRY(fsdpc__model_embed_bwd(m, top_ptr(e, FSDPC_P_EMBED, 1), err));
      } else {
        float *wb[FSDPC_P_NKIND], *gb[FSDPC_P_NKIND];
        fsdpc_layer_w w;
        fsdpc_layer_g g;
        layer_ptrs(e, b - 1, 0, wb);
        layer_ptrs(e, b - 1, 1, gb);
        fsdpc__layer_views(wb, &w);
        fsdpc__layer_grad_views(gb, &g);
        FSDPC_TRY(fsdpc__model_layer_bwd(m, b - 1, &w, &g, err));
      }
    }
    for (int i = 0; i < e->blocks[b].n_units; i++) {
      int u = e->blocks[b].units[i];
      if (e->units[u].first_block != b) continue; /* used again further back */
      FSDPC_TRY(reduce_grads(e, u, last_micro, err));
      release(e, u);
    }
  }
  return FSDPC_OK;
}

fsdpc_status fsdpc__engine_eval(fsdpc_engine *e, fsdpc_model_ctx *m, double *loss_sum,
                                int64_t *count, fsdpc_err *err) {
  int head = e->shape.L + 1;
  FSDPC_TRY(forward_layers(e, m, 1, err));
  FSDPC_TRY(gather_block(e, head, 0, err));
  FSDPC_TRY(fsdpc__model_head_fwd_bwd(m, top_ptr(e, FSDPC_P_NORM, 0), top_ptr(e, FSDPC_P_HEAD, 0),
                                      0.0f, NULL, NULL, loss_sum, count, err));
  for (int u = 0; u < e->n_units; u++) release(e, u);
  return FSDPC_OK;
}

fsdpc_status fsdpc__engine_logits_at(fsdpc_engine *e, fsdpc_model_ctx *m, int pos, float *out,
                                     fsdpc_err *err) {
  int head = e->shape.L + 1;
  FSDPC_TRY(forward_layers(e, m, 1, err));
  FSDPC_TRY(gather_block(e, head, 0, err));
  FSDPC_TRY(fsdpc__model_logits_at(m, pos, top_ptr(e, FSDPC_P_NORM, 0),
                                   top_ptr(e, FSDPC_P_HEAD, 0), out, err));
  for (int u = 0; u < e->n_units; u++) release(e, u);
  return FSDPC_OK;
}

fsdpc_status fsdpc__engine_optim_step(fsdpc_engine *e, int64_t step, double lr,
                                      double max_grad_norm, double *grad_norm, fsdpc_err *err) {
  /* Replicas (NO_SHARD, HYBRID_SHARD) hold partial sums of the same shard. */
  if (e->dist->replica_size > 1)
    for (int u = 0; u < e->n_units; u++)
      FSDPC_TRY(fsdpc__dist_all_reduce_f32(e->dist, FSDPC_GROUP_REPLICA, e->units[u].grad,
                                           e->units[u].shard_numel, e->units[u].name, err));
  double sumsq = 0.0;
  for (int u = 0; u < e->n_units; u++)
    sumsq += fsdpc__cpu_sumsq(e->units[u].grad, e->units[u].shard_numel);
  FSDPC_TRY(fsdpc__dist_all_reduce_f64(e->dist, FSDPC_GROUP_SHARD, &sumsq, 1, "grad_norm", err));
  double norm = sqrt(sumsq);
  *grad_norm = norm;
  if (!isfinite(norm))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "step %lld: the gradient norm is %f; lower optim.lr or check the data",
                       (long long)step, norm);
  /* torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), clamped to 1. */
  double scale = 1.0;
  if (max_grad_norm > 0.0) {
    double coef = max_grad_norm / (norm + 1e-6);
    if (coef < 1.0) scale = coef;
  }

  for (int u = 0; u < e->n_units; u++) {
    fsdpc_unit *un = &e->units[u];
    uint32_t n = 0;
    uint64_t s0 = un->shard_offset, s1 = s0 + un->shard_numel;
    for (int i = 0; i < un->n_params; i++) {
      int p = un->params[i];
      uint64_t p0 = e->param_offset[p], p1 = p0 + e->params[p].numel;
      uint64_t a = p0 > s0 ? p0 : s0, b = p1 < s1 ? p1 : s1;
      if (a >= b) continue;
      e->otensors[n++] = (fsdpc_optim_tensor){
          .struct_size = sizeof(fsdpc_optim_tensor), .param = un->master + (a - s0),
          .grad = un->grad + (a - s0), .state = un->state ? un->state + (a - s0) : NULL,
          .numel = b - a, .stride = un->shard_numel,
          .decay = e->params[p].decay || e->decay_norm_and_bias};
    }
    fsdpc_optim_step_info si = {.struct_size = sizeof si, .step = step, .lr = lr,
                                .grad_scale = scale, .stream = NULL,
                                .num_threads = e->threads};
    int32_t r = n ? e->ov->step(e->opt, e->otensors, n, &si) : FSDPC_OK;
    if (r != FSDPC_OK) return fsdpc__plugin_fail(e->optim, r, err);
    memset(un->grad, 0, un->shard_numel * sizeof(float));
  }
  return FSDPC_OK;
}

fsdpc_status fsdpc__engine_gather_unit(fsdpc_engine *e, int u, int slot, int root, float *full,
                                       fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  const float *src = slot == FSDPC_SD_SLOT_PARAM ? un->master
                                                  : un->state + (size_t)slot * un->shard_numel;
  if (e->S == 1) {
    if (full) memcpy(full, src, un->shard_numel * sizeof(float));
    return FSDPC_OK;
  }
  /* Root gathers straight into `full`; the others into a transient buffer.
   * Peak extra memory is one unit, never the model. */
  int direct = e->dist->shard_rank == root && full;
  float *tmp = direct ? full : fsdpc__mem_alloc(FSDPC_MEM_COMM, un->flat_numel * sizeof(float));
  if (!tmp) return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory gathering unit %s", un->name);
  fsdpc_status st = fsdpc__dist_all_gather(e->dist, FSDPC_GROUP_SHARD, src, tmp, un->shard_numel,
                                           un->name, err);
  if (!direct) fsdpc__mem_free(FSDPC_MEM_COMM, tmp, un->flat_numel * sizeof(float));
  return st;
}
