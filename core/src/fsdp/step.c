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
#include "io/dtype.h"
#include "ops/cpu/ops_cpu.h"
#include "util/mem.h"

/* Events: a unit's gather done (comm -> compute), a unit's grads ready
 * (compute -> comm), and the two fences around a pass. */
enum { EV_GATHER = 0, EV_GRADS = 32, EV_FENCE_IN = 48, EV_FENCE_OUT = 49 };

/* Collectives of the engine on stream st (the dist default when NULL). */
static void *dist_stream_swap(fsdpc_engine *e, void *st) {
  void *old = e->dist->stream;
  if (st) e->dist->stream = st;
  return old;
}

/* Before a pass: the comm stream waits for everything on the compute stream
 * (the optimizer's update of the master shards, frees). */
static fsdpc_status fence_in(fsdpc_engine *e, fsdpc_err *err) {
  if (!e->comm) return FSDPC_OK;
  FSDPC_TRY(e->ops->event_record(e->ops->ctx, EV_FENCE_IN, NULL, err));
  return e->ops->stream_wait(e->ops->ctx, e->comm, EV_FENCE_IN, err);
}

/* After a pass: compute waits for every gather and reduction issued. */
static fsdpc_status fence_out(fsdpc_engine *e, fsdpc_err *err) {
  if (!e->comm) return FSDPC_OK;
  FSDPC_TRY(e->ops->event_record(e->ops->ctx, EV_FENCE_OUT, e->comm, err));
  return e->ops->stream_wait(e->ops->ctx, NULL, EV_FENCE_OUT, err);
}

/* cpu_offload: the bf16 staging copy of u's master shard, recast on the
 * host (threads) only after the master changed. Callers guarantee no copy
 * from the staging buffer is in flight then (the optimizer step and a
 * checkpoint load synchronise first). */
static void refresh_stage(fsdpc_engine *e, fsdpc_unit *un) {
  if (!un->stage_stale) return;
  const int64_t n = (int64_t)un->shard_numel, chunk = 1 << 16;
  const float *src = un->master;
  uint16_t *dst = un->stage;
#pragma omp parallel for num_threads(e->threads) schedule(static) if (n > chunk)
  for (int64_t i = 0; i < n; i += chunk)
    fsdpc__f32_to_bf16_n(src + i, dst + i, (uint64_t)(n - i < chunk ? n - i : chunk));
  un->stage_stale = 0;
}

/* Makes unit u's full parameters exist in the compute dtype: all-gather the
 * fp32 shards (fp32 compute), or cast this rank's shard to bf16 into its own
 * slot of the full buffer and all-gather in place (bf16 compute). Offloaded,
 * the bf16 shard comes from the host staging copy (one H2D copy) instead of
 * a device cast. With a comm stream this is issued there and only recorded;
 * use() makes compute wait for it. */
static fsdpc_status gather(fsdpc_engine *e, int u, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  if (un->full) return FSDPC_OK;
  size_t fb = un->flat_numel * e->psize;
  un->full = e->comm ? e->ops->alloc_on(e->ops->ctx, FSDPC_MEM_COMM, fb, e->comm)
                     : fsdpc__ealloc(e, FSDPC_MEM_COMM, fb);
  if (!un->full)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory gathering unit %s (%zu bytes)",
                       un->name, fb);
  void *old = dist_stream_swap(e, e->comm);
  fsdpc_status st;
  if (e->offload) {
    void *own = (char *)un->full + un->shard_offset * e->psize;
    refresh_stage(e, un);
    st = e->ops->copy_on(e->ops->ctx, own, un->stage, un->shard_numel * e->psize, e->comm, err);
    if (st == FSDPC_OK && e->S > 1)
      st = fsdpc__dist_all_gather(e->dist, FSDPC_GROUP_SHARD, own, un->full, un->shard_numel,
                                  e->ops->act_dtype, un->name, err);
  } else if (e->ops->act_dtype == FSDPC_DTYPE_F32) {
    st = fsdpc__dist_all_gather(e->dist, FSDPC_GROUP_SHARD, un->master, un->full,
                                un->shard_numel, FSDPC_DTYPE_F32, un->name, err);
  } else {
    void *own = (char *)un->full + un->shard_offset * e->psize;
    st = e->comm ? e->ops->cast_params_on(e->ops->ctx, own, un->master, un->shard_numel, e->comm,
                                          err)
                 : e->ops->cast_params(e->ops->ctx, own, un->master, un->shard_numel, err);
    if (st == FSDPC_OK && e->S > 1)
      st = fsdpc__dist_all_gather(e->dist, FSDPC_GROUP_SHARD, own, un->full, un->shard_numel,
                                  e->ops->act_dtype, un->name, err);
  }
  e->dist->stream = old;
  FSDPC_TRY(st);
  if (e->comm) {
    FSDPC_TRY(e->ops->event_record(e->ops->ctx, EV_GATHER + u % 32, e->comm, err));
    un->pending = 1;
  }
  return FSDPC_OK;
}

/* Compute waits for u's gather (issued earlier, perhaps as a prefetch). */
static fsdpc_status use(fsdpc_engine *e, int u, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  if (!un->pending) return FSDPC_OK;
  un->pending = 0;
  return e->ops->stream_wait(e->ops->ctx, NULL, EV_GATHER + u % 32, err);
}

static void release(fsdpc_engine *e, int u) {
  fsdpc_unit *un = &e->units[u];
  if (e->full_is_master || !un->full) return;
  /* stream-ordered after compute's last use (a pending prefetch is waited
   * for first, so the free never overtakes the gather) */
  if (un->pending) {
    fsdpc_err ignore;
    use(e, u, &ignore);
  }
  fsdpc__efree(e, FSDPC_MEM_COMM, un->full, un->flat_numel * e->psize);
  un->full = NULL;
}

static fsdpc_status ensure_grad(fsdpc_engine *e, int u, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  if (un->full_grad) return FSDPC_OK;
  size_t fb = un->flat_numel * sizeof(float);
  if (!(un->full_grad = fsdpc__ealloc(e, FSDPC_MEM_GRADS, fb)))
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                       "out of memory for the gradients of unit %s (%zu bytes)", un->name, fb);
  return e->ops->memset0(e->ops->ctx, un->full_grad, fb, err);
}

/* bf16 reduce-scatter of un's full grads (device, on stream st): cast to a
 * bf16 copy, free the fp32 full grads, reduce-scatter into rs16, widen into
 * rs_scratch. */
static fsdpc_status reduce_scatter_bf16(fsdpc_engine *e, fsdpc_unit *un, void *st,
                                        fsdpc_err *err) {
  size_t fb = un->flat_numel * sizeof(float), hb = un->flat_numel * 2;
  void *g16 = e->ops->alloc_on(e->ops->ctx, FSDPC_MEM_COMM, hb, st);
  if (!g16)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory reducing unit %s in bf16 (%zu bytes)",
                       un->name, hb);
  fsdpc_status s = e->ops->cast_params_on(e->ops->ctx, g16, un->full_grad, un->flat_numel, st,
                                          err);
  e->ops->free_on(e->ops->ctx, FSDPC_MEM_GRADS, un->full_grad, fb, st);
  un->full_grad = NULL;
  if (s == FSDPC_OK)
    s = fsdpc__dist_reduce_scatter_dt(e->dist, FSDPC_GROUP_SHARD, g16, e->rs16, un->shard_numel,
                                      FSDPC_DTYPE_BF16, un->name, err);
  e->ops->free_on(e->ops->ctx, FSDPC_MEM_COMM, g16, hb, st);
  FSDPC_TRY(s);
  return e->ops->cast_to_f32_on(e->ops->ctx, e->rs_scratch, e->rs16, un->shard_numel, st, err);
}

/* Offloaded: this micro-batch's fp32 grad shard (device, src) goes to the
 * host. The first micro-batch of a step lands straight in the (zero) grad
 * shard; later ones land in a per-unit buffer that absorb_landings() adds
 * in once the copies are done. */
static fsdpc_status grads_to_host(fsdpc_engine *e, fsdpc_unit *un, const float *src,
                                  fsdpc_err *err) {
  size_t sb = un->shard_numel * sizeof(float);
  float *dst = un->grad;
  if (!un->grad_clean) {
    if (!un->landing) {
      if (!(un->landing = e->ops->alloc_host(e->ops->ctx, sb)))
        return fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                           "out of pinned host memory for the gradients of unit %s", un->name);
      e->host_pinned += sb;
    }
    dst = un->landing;
    un->land_pending = 1;
  }
  un->grad_clean = 0;
  return e->ops->copy_on(e->ops->ctx, dst, src, sb, e->comm, err);
}

/* Offloaded, after a micro-batch: waits for its grad copies and adds the
 * ones that landed beside the grad shard (host threads). */
static fsdpc_status absorb_landings(fsdpc_engine *e, fsdpc_err *err) {
  int any = 0;
  for (int u = 0; u < e->n_units; u++) any |= e->units[u].land_pending;
  if (!any) return FSDPC_OK;
  FSDPC_TRY(e->ops->sync(e->ops->ctx, err));
  for (int u = 0; u < e->n_units; u++) {
    fsdpc_unit *un = &e->units[u];
    if (!un->land_pending) continue;
    fsdpc__cpu_add_inplace(un->grad, un->landing, un->shard_numel);
    un->land_pending = 0;
  }
  return FSDPC_OK;
}

/* After the unit's last backward use in this micro-batch. With a comm
 * stream, the reduce-scatter and the accumulation into the grad shard run
 * there, overlapping the backward of the blocks before it. Offloaded, the
 * reduced shard is copied to the host instead of added on the device. */
static fsdpc_status reduce_grads(fsdpc_engine *e, int u, int last_micro, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  /* grads accumulated straight into the shard */
  if (e->S == 1 && !e->offload) return FSDPC_OK;
  if (e->no_sync && !last_micro) return FSDPC_OK; /* keep accumulating full grads */
  size_t fb = un->flat_numel * sizeof(float);
  if (e->comm) {
    FSDPC_TRY(e->ops->event_record(e->ops->ctx, EV_GRADS + u % 16, NULL, err));
    FSDPC_TRY(e->ops->stream_wait(e->ops->ctx, e->comm, EV_GRADS + u % 16, err));
  }
  const float *reduced = un->full_grad; /* S == 1: the full grads are the shard */
  if (e->S > 1) {
    void *old = dist_stream_swap(e, e->comm);
    fsdpc_status st =
        e->reduce_bf16
            ? reduce_scatter_bf16(e, un, e->comm, err)
            : fsdpc__dist_reduce_scatter(e->dist, FSDPC_GROUP_SHARD, un->full_grad,
                                         e->rs_scratch, un->shard_numel, un->name, err);
    e->dist->stream = old;
    FSDPC_TRY(st);
    reduced = e->rs_scratch;
  }
  if (e->offload) {
    FSDPC_TRY(grads_to_host(e, un, reduced, err));
  } else if (e->comm) {
    FSDPC_TRY(e->ops->add_f32_on(e->ops->ctx, un->grad, e->rs_scratch, un->shard_numel, e->comm,
                                 err));
  } else {
    FSDPC_TRY(e->ops->add_f32(e->ops->ctx, un->grad, e->rs_scratch, un->shard_numel, err));
  }
  /* stream-ordered after the reads above */
  if (un->full_grad) {
    if (e->comm)
      e->ops->free_on(e->ops->ctx, FSDPC_MEM_GRADS, un->full_grad, fb, e->comm);
    else
      fsdpc__efree(e, FSDPC_MEM_GRADS, un->full_grad, fb);
  }
  un->full_grad = NULL;
  return FSDPC_OK;
}

static void layer_weights(fsdpc_engine *e, int l, void *base[FSDPC_P_NKIND]) {
  for (int k = 0; k < FSDPC_P_NKIND; k++) {
    int p = e->layer_param[l * FSDPC_P_NKIND + k];
    base[k] = p < 0 ? NULL : fsdpc__param_full(e, p);
  }
}

static void layer_grads(fsdpc_engine *e, int l, float *base[FSDPC_P_NKIND]) {
  for (int k = 0; k < FSDPC_P_NKIND; k++) {
    int p = e->layer_param[l * FSDPC_P_NKIND + k];
    base[k] = p < 0 ? NULL : fsdpc__param_full_grad(e, p);
  }
}

static int top_param(fsdpc_engine *e, int kind) {
  if (kind == FSDPC_P_HEAD && e->shape.tied) return e->param_of_kind[FSDPC_P_EMBED];
  return e->param_of_kind[kind];
}
static void *top_w(fsdpc_engine *e, int kind) { return fsdpc__param_full(e, top_param(e, kind)); }
static float *top_g(fsdpc_engine *e, int kind) {
  return fsdpc__param_full_grad(e, top_param(e, kind));
}

static fsdpc_status gather_block(fsdpc_engine *e, int b, int with_grads, fsdpc_err *err) {
  for (int i = 0; i < e->blocks[b].n_units; i++) {
    FSDPC_TRY(gather(e, e->blocks[b].units[i], err));
    FSDPC_TRY(use(e, e->blocks[b].units[i], err));
    if (with_grads) FSDPC_TRY(ensure_grad(e, e->blocks[b].units[i], err));
  }
  return FSDPC_OK;
}

/* Issues block b's gathers on the comm stream so they run while compute
 * works on the current block (a no-op without a comm stream). */
static fsdpc_status prefetch_block(fsdpc_engine *e, int b, fsdpc_err *err) {
  if (!e->comm || b < 0 || b >= e->n_blocks) return FSDPC_OK;
  for (int i = 0; i < e->blocks[b].n_units; i++) FSDPC_TRY(gather(e, e->blocks[b].units[i], err));
  return FSDPC_OK;
}

/* Forward of blocks 0..L (not the head). */
static fsdpc_status forward_layers(fsdpc_engine *e, fsdpc_model_ctx *m, int reshard,
                                   fsdpc_err *err) {
  int L = e->shape.L, head = L + 1;
  for (int b = 0; b <= L; b++) {
    FSDPC_TRY(gather_block(e, b, 0, err));
    if (e->fwd_prefetch) FSDPC_TRY(prefetch_block(e, b + 1, err));
    if (b == 0) {
      FSDPC_TRY(fsdpc__model_embed_fwd(m, top_w(e, FSDPC_P_EMBED), err));
    } else {
      void *base[FSDPC_P_NKIND];
      fsdpc_layer_w w;
      layer_weights(e, b - 1, base);
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
  FSDPC_TRY(fence_in(e, err));
  FSDPC_TRY(forward_layers(e, m, e->reshard_after_forward, err));

  FSDPC_TRY(gather_block(e, head, 1, err));
  if (e->bwd_prefetch) FSDPC_TRY(prefetch_block(e, L, err));
  FSDPC_TRY(fsdpc__model_head_fwd_bwd(m, top_w(e, FSDPC_P_NORM), top_w(e, FSDPC_P_HEAD),
                                      grad_scale, top_g(e, FSDPC_P_NORM),
                                      top_g(e, FSDPC_P_HEAD), loss_sum, count, err));
  for (int b = head; b >= 0; b--) {
    if (b < head) {
      FSDPC_TRY(gather_block(e, b, 1, err));
      if (e->bwd_prefetch) FSDPC_TRY(prefetch_block(e, b - 1, err));
      if (b == 0) {
        FSDPC_TRY(fsdpc__model_embed_bwd(m, top_g(e, FSDPC_P_EMBED), err));
      } else {
        void *wb[FSDPC_P_NKIND];
        float *gb[FSDPC_P_NKIND];
        fsdpc_layer_w w;
        fsdpc_layer_g g;
        layer_weights(e, b - 1, wb);
        layer_grads(e, b - 1, gb);
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
  FSDPC_TRY(fence_out(e, err));
  return e->offload ? absorb_landings(e, err) : FSDPC_OK;
}

fsdpc_status fsdpc__engine_eval(fsdpc_engine *e, fsdpc_model_ctx *m, double *loss_sum,
                                int64_t *count, fsdpc_err *err) {
  int head = e->shape.L + 1;
  FSDPC_TRY(fence_in(e, err));
  FSDPC_TRY(forward_layers(e, m, 1, err));
  FSDPC_TRY(gather_block(e, head, 0, err));
  FSDPC_TRY(fsdpc__model_head_fwd_bwd(m, top_w(e, FSDPC_P_NORM), top_w(e, FSDPC_P_HEAD),
                                      0.0f, NULL, NULL, loss_sum, count, err));
  for (int u = 0; u < e->n_units; u++) release(e, u);
  return fence_out(e, err);
}

fsdpc_status fsdpc__engine_logits_at(fsdpc_engine *e, fsdpc_model_ctx *m, int pos, float *out,
                                     fsdpc_err *err) {
  int head = e->shape.L + 1;
  FSDPC_TRY(fence_in(e, err));
  FSDPC_TRY(forward_layers(e, m, 1, err));
  FSDPC_TRY(gather_block(e, head, 0, err));
  FSDPC_TRY(fsdpc__model_logits_at(m, pos, top_w(e, FSDPC_P_NORM),
                                   top_w(e, FSDPC_P_HEAD), out, err));
  for (int u = 0; u < e->n_units; u++) release(e, u);
  return fence_out(e, err);
}

fsdpc_status fsdpc__engine_block_weights(fsdpc_engine *e, int b, void *base[FSDPC_P_NKIND],
                                         fsdpc_err *err) {
  int head = e->shape.L + 1;
  if (b < 0 || b > head) return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "no block %d", b);
  if (b == 0) FSDPC_TRY(fence_in(e, err));
  FSDPC_TRY(gather_block(e, b, 0, err));
  for (int k = 0; k < FSDPC_P_NKIND; k++) base[k] = NULL;
  if (b == 0) {
    base[FSDPC_P_EMBED] = top_w(e, FSDPC_P_EMBED);
  } else if (b < head) {
    layer_weights(e, b - 1, base);
  } else {
    base[FSDPC_P_NORM] = top_w(e, FSDPC_P_NORM);
    base[FSDPC_P_HEAD] = top_w(e, FSDPC_P_HEAD);
  }
  return FSDPC_OK;
}

fsdpc_status fsdpc__engine_block_done(fsdpc_engine *e, int b, fsdpc_err *err) {
  int head = e->shape.L + 1;
  if (b == head) {
    for (int u = 0; u < e->n_units; u++) release(e, u);
    return fence_out(e, err);
  }
  for (int i = 0; i < e->blocks[b].n_units; i++) {
    fsdpc_unit *un = &e->units[e->blocks[b].units[i]];
    if (un->last_block == b) release(e, e->blocks[b].units[i]);
  }
  return FSDPC_OK;
}

/* Replica all-reduce of a grad shard in device memory (in place), in fp32 or,
 * with reduce_dtype bf16, through a bf16 copy. */
static fsdpc_status replica_reduce_dev(fsdpc_engine *e, float *g, uint64_t n, const char *name,
                                       fsdpc_err *err) {
  if (!e->reduce_bf16)
    return fsdpc__dist_all_reduce_f32(e->dist, FSDPC_GROUP_REPLICA, g, n, name, err);
  void *g16 = fsdpc__ealloc(e, FSDPC_MEM_COMM, n * 2);
  if (!g16)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory reducing unit %s in bf16", name);
  fsdpc_status st = e->ops->cast_params_on(e->ops->ctx, g16, g, n, NULL, err);
  if (st == FSDPC_OK)
    st = fsdpc__dist_all_reduce_dt(e->dist, FSDPC_GROUP_REPLICA, g16, n, FSDPC_DTYPE_BF16, name,
                                   err);
  if (st == FSDPC_OK) st = e->ops->cast_to_f32_on(e->ops->ctx, g, g16, n, NULL, err);
  fsdpc__efree(e, FSDPC_MEM_COMM, g16, n * 2);
  return st;
}

/* Replicas (NO_SHARD, HYBRID_SHARD) hold partial sums of the same shard.
 * Offloaded, each host shard goes through a transient device buffer (device
 * collectives move device memory). */
static fsdpc_status replica_reduce(fsdpc_engine *e, fsdpc_err *err) {
  if (e->dist->replica_size <= 1) return FSDPC_OK;
  for (int u = 0; u < e->n_units; u++) {
    fsdpc_unit *un = &e->units[u];
    if (!e->offload) {
      FSDPC_TRY(replica_reduce_dev(e, un->grad, un->shard_numel, un->name, err));
      continue;
    }
    size_t sb = un->shard_numel * sizeof(float);
    float *d = fsdpc__ealloc(e, FSDPC_MEM_COMM, sb);
    if (!d) return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory reducing unit %s", un->name);
    fsdpc_status st = e->ops->upload(e->ops->ctx, d, un->grad, sb, err);
    if (st == FSDPC_OK) st = replica_reduce_dev(e, d, un->shard_numel, un->name, err);
    if (st == FSDPC_OK) st = e->ops->download(e->ops->ctx, un->grad, d, sb, err);
    fsdpc__efree(e, FSDPC_MEM_COMM, d, sb);
    FSDPC_TRY(st);
  }
  return FSDPC_OK;
}

/* Sum of squares of every grad shard of this rank, in unit order. On a
 * device each unit's sum is added into one device double (the same order
 * and double arithmetic as the host loop) and downloaded once, so the norm
 * costs one host sync instead of one per unit. */
static fsdpc_status local_sumsq(fsdpc_engine *e, double *out, fsdpc_err *err) {
  if (e->dnorm) {
    for (int u = 0; u < e->n_units; u++)
      FSDPC_TRY(e->ops->sumsq_f32_dev(e->ops->ctx, e->dnorm, e->units[u].grad,
                                      e->units[u].shard_numel, u > 0, err));
    if (e->n_units == 0) return (*out = 0.0, FSDPC_OK);
    return e->ops->download(e->ops->ctx, out, e->dnorm, sizeof(double), err);
  }
  double sumsq = 0.0;
  for (int u = 0; u < e->n_units; u++) {
    double part;
    FSDPC_TRY(e->sops->sumsq_f32(e->sops->ctx, e->units[u].grad, e->units[u].shard_numel, &part,
                                 err));
    sumsq += part;
  }
  *out = sumsq;
  return FSDPC_OK;
}

fsdpc_status fsdpc__engine_optim_step(fsdpc_engine *e, int64_t step, double lr,
                                      double max_grad_norm, double *grad_norm, fsdpc_err *err) {
  /* Offloaded: every grad copy to the host (and every gather copy from the
   * staging buffers, which the update below makes stale) must be done. */
  if (e->offload) FSDPC_TRY(e->ops->sync(e->ops->ctx, err));
  FSDPC_TRY(replica_reduce(e, err));
  double sumsq = 0.0;
  FSDPC_TRY(local_sumsq(e, &sumsq, err));
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
                                .grad_scale = scale, .stream = e->sops->stream(e->sops->ctx),
                                .num_threads = e->threads};
    int32_t r = n ? e->ov->step(e->opt, e->otensors, n, &si) : FSDPC_OK;
    if (r != FSDPC_OK) return fsdpc__plugin_fail(e->optim, r, err);
    FSDPC_TRY(e->sops->memset0(e->sops->ctx, un->grad, un->shard_numel * sizeof(float), err));
    un->grad_clean = 1;
    un->stage_stale = 1;
  }
  return FSDPC_OK;
}

static fsdpc_status gather_full(fsdpc_engine *e, fsdpc_unit *un, const float *src, int root,
                                float *full, fsdpc_err *err);

fsdpc_status fsdpc__engine_gather_unit(fsdpc_engine *e, int u, int slot, int root, float *full,
                                       fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  const float *src = slot == FSDPC_SD_SLOT_PARAM ? un->master
                                                  : un->state + (size_t)slot * un->shard_numel;
  size_t fb = un->flat_numel * sizeof(float), sb = un->shard_numel * sizeof(float);
  if (e->S == 1) {
    if (full) FSDPC_TRY(e->sops->download(e->sops->ctx, full, src, fb, err));
    return FSDPC_OK;
  }
  if (e->offload) { /* device collectives: the host shard goes up first */
    float *d = fsdpc__ealloc(e, FSDPC_MEM_COMM, sb);
    if (!d) return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory gathering unit %s", un->name);
    fsdpc_status st = e->ops->upload(e->ops->ctx, d, src, sb, err);
    if (st == FSDPC_OK) st = gather_full(e, un, d, root, full, err);
    fsdpc__efree(e, FSDPC_MEM_COMM, d, sb);
    return st;
  }
  return gather_full(e, un, src, root, full, err);
}

/* The S > 1 part of fsdpc__engine_gather_unit; src is device memory. */
static fsdpc_status gather_full(fsdpc_engine *e, fsdpc_unit *un, const float *src, int root,
                                float *full, fsdpc_err *err) {
  size_t fb = un->flat_numel * sizeof(float);
  /* Root gathers straight into `full` on the CPU; on a device (and on the
   * other ranks) into a transient buffer, from which root downloads. Peak
   * extra memory is one unit, never the model. */
  int direct = e->dist->shard_rank == root && full && e->ops->device == FSDPC_DEVICE_CPU;
  float *tmp = direct ? full : fsdpc__ealloc(e, FSDPC_MEM_COMM, fb);
  if (!tmp) return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory gathering unit %s", un->name);
  fsdpc_status st = fsdpc__dist_all_gather(e->dist, FSDPC_GROUP_SHARD, src, tmp, un->shard_numel,
                                           FSDPC_DTYPE_F32, un->name, err);
  if (!direct && st == FSDPC_OK && e->dist->shard_rank == root && full)
    st = e->ops->download(e->ops->ctx, full, tmp, fb, err);
  if (!direct) fsdpc__efree(e, FSDPC_MEM_COMM, tmp, fb);
  return st;
}
