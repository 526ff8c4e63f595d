/* The passes of the FSDP engine: a training micro-batch, evaluation's
 * forward, the logits of one position and the inference block path, each
 * executing its program (fsdp/program.h) action by action. The optimizer
 * step is optim_step.c; a checkpoint's unit gathers gather_unit.c.
 *
 * forward, block by block: gather the block's units (unless resident) ->
 * compute -> under FULL_SHARD / HYBRID_SHARD free a unit after its last
 * forward use (units the head needs stay: backward starts there).
 * The head block runs forward and backward together (fused cross-entropy).
 * backward, in reverse: gather (re-gather after a free) -> backward ->
 * after a unit's last backward use: reduce-scatter its grads into the grad
 * shard (or keep them until the last micro-batch with no_sync) and free its
 * full params and grads.
 *
 * Memory: every buffer an action makes has its planned offset in the
 * engine's arena (fsdp/memplan.h: off[slot][2i + k] for action i); making
 * and freeing one is accounting only. The events below are the orderings
 * that plan relies on to share bytes between buffers across streams. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp/internal.h"
#include "fsdp/nf4_unit.h"
#include "fsdp/program.h"
#include "util/fault.h"

/* Events: a unit's gather done (comm -> compute), a unit's grads ready
 * (compute -> comm), the two fences around a pass, a unit's reduction done
 * (comm or d2h -> compute: REDUCED). Slots of ops.h's engine range; offload.c
 * uses 50-57. */
enum {
  EV_GATHER = 0,
  EV_GRADS = 32,
  EV_FENCE_IN = 48,
  EV_FENCE_OUT = 49,
  EV_FENCE_D2H = 56,
  EV_REDUCED = 64 /* 16 of them */
};

/* Before a pass, and after a block's releases (FENCE_FREE): the comm stream
 * waits for everything on the compute stream (the optimizer's update of the
 * master shards; the compute that read the released bytes). */
static fsdpc_status fence_in(fsdpc_engine *e, fsdpc_err *err) {
  if (!e->comm)
    return FSDPC_OK;
  FSDPC_TRY(e->ops->event_record(e->ops->ctx, EV_FENCE_IN, NULL, err));
  return e->ops->stream_wait(e->ops->ctx, e->comm, EV_FENCE_IN, err);
}

/* After a pass: compute waits for every gather and reduction issued. */
static fsdpc_status fence_out(fsdpc_engine *e, fsdpc_err *err) {
  if (!e->comm)
    return FSDPC_OK;
  if (e->d2h != e->comm) { /* and every copy of grads to the host */
    FSDPC_TRY(e->ops->event_record(e->ops->ctx, EV_FENCE_D2H, e->d2h, err));
    FSDPC_TRY(e->ops->stream_wait(e->ops->ctx, NULL, EV_FENCE_D2H, err));
  }
  FSDPC_TRY(e->ops->event_record(e->ops->ctx, EV_FENCE_OUT, e->comm, err));
  return e->ops->stream_wait(e->ops->ctx, NULL, EV_FENCE_OUT, err);
}

/* Makes unit u's full parameters exist in the compute dtype in dst (its
 * planned place): all-gather the fp32 shards (fp32 compute), or cast this
 * rank's shard to bf16 into its own slot of the full buffer and all-gather
 * in place (bf16 compute). Offloaded, the bf16 shard comes from the host
 * staging copy (one H2D copy) instead of a device cast. With a comm stream
 * this is issued there and only recorded; use() makes compute wait for it. */
static fsdpc_status gather(fsdpc_engine *e, int u, void *dst, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  if (un->full)
    return FSDPC_OK;
  if (un->lp && un->lp_stale) {
    /* param_copy: master changed outside the optimizer step (init, load):
     * one cast of the whole shard, padding included */
    FSDPC_TRY(e->comm ? e->ops->cast_params_on(e->ops->ctx, un->lp, un->master, un->shard_numel,
                                               e->comm, err)
                      : e->ops->cast_params(e->ops->ctx, un->lp, un->master, un->shard_numel, err));
    un->lp_stale = 0;
  }
  if (un->lp && e->S == 1) {
    un->full = un->lp; /* the copy is the full unit: nothing to gather */
    return FSDPC_OK;
  }
  size_t fb = un->flat_numel * e->psize;
  if (!dst)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "fsdp: no planned buffer gathers unit %s",
                       un->name);
  un->full = dst;
  fsdpc__acct(e, FSDPC_MEM_COMM, (int64_t)fb);
  fsdpc_status st;
  if (un->nf4) {
    st = fsdpc__nf4_gather(e, u, un->full, err);
  } else if (un->frozen) { /* the shard already is in the compute dtype */
    void *own = (char *)un->full + un->shard_offset * e->psize;
    st = e->offload ? e->ops->copy_on(e->ops->ctx, own, un->master, un->shard_numel * e->psize,
                                      e->comm, err)
                    : FSDPC_OK;
    if (st == FSDPC_OK && e->S > 1)
      st = fsdpc__dist_all_gather_on(e->dist, FSDPC_GROUP_SHARD, e->offload ? own : un->master,
                                     un->full, un->shard_numel, e->ops->act_dtype, e->comm,
                                     un->name, err);
  } else if (e->offload) {
    void *own = (char *)un->full + un->shard_offset * e->psize;
    st = fsdpc__offload_upload(e, u, own, e->comm, err);
    if (st == FSDPC_OK && e->S > 1)
      st = fsdpc__dist_all_gather_on(e->dist, FSDPC_GROUP_SHARD, own, un->full, un->shard_numel,
                                     e->ops->act_dtype, e->comm, un->name, err);
  } else if (un->lp) {
    st = fsdpc__dist_all_gather_on(e->dist, FSDPC_GROUP_SHARD, un->lp, un->full, un->shard_numel,
                                   e->ops->act_dtype, e->comm, un->name, err);
  } else if (e->ops->act_dtype == FSDPC_DTYPE_F32) {
    st = fsdpc__dist_all_gather_on(e->dist, FSDPC_GROUP_SHARD, un->master, un->full,
                                   un->shard_numel, FSDPC_DTYPE_F32, e->comm, un->name, err);
  } else {
    void *own = (char *)un->full + un->shard_offset * e->psize;
    st = e->comm
             ? e->ops->cast_params_on(e->ops->ctx, own, un->master, un->shard_numel, e->comm, err)
             : e->ops->cast_params(e->ops->ctx, own, un->master, un->shard_numel, err);
    if (st == FSDPC_OK && e->S > 1)
      st = fsdpc__dist_all_gather_on(e->dist, FSDPC_GROUP_SHARD, own, un->full, un->shard_numel,
                                     e->ops->act_dtype, e->comm, un->name, err);
  }
  FSDPC_TRY(st);
  if (e->comm) {
    FSDPC_TRY(e->ops->event_record(e->ops->ctx, EV_GATHER + u % 32, e->comm, err));
    un->pending = 1;
  }
  return FSDPC_OK;
}

fsdpc_status fsdpc__nf4_gather(fsdpc_engine *e, int u, void *dst, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  const uint8_t *image = (const uint8_t *)un->master;
  if (e->S > 1) {
    if (!e->nf4buf)
      return fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                         "fsdp: no planned buffer gathers unit %s's "
                         "NF4 image",
                         un->name);
    FSDPC_TRY(fsdpc__dist_all_gather_on(e->dist, FSDPC_GROUP_SHARD, un->master, e->nf4buf,
                                        un->nf4_shard, FSDPC_DTYPE_U8, e->comm, un->name, err));
    image = e->nf4buf;
  }
  if (e->ops->device != FSDPC_DEVICE_CPU) /* on the gather's stream, after it */
    return fsdpc__nf4_unit_unpack_dev(un, e->params, e->param_offset, e->x.nf4_block, e->x.nf4_dq,
                                      (int)e->psize, e->ops, e->nf4_map, image, dst, e->comm, err);
  return fsdpc__nf4_unit_unpack(un, e->params, e->param_offset, e->x.nf4_block, e->x.nf4_dq,
                                (int)e->psize, e->nf4_map, image, dst, err);
}

/* Compute waits for u's gather (issued earlier, perhaps as a prefetch). */
static fsdpc_status use(fsdpc_engine *e, int u, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  if (!un->pending)
    return FSDPC_OK;
  un->pending = 0;
  return e->ops->stream_wait(e->ops->ctx, NULL, EV_GATHER + u % 32, err);
}

static fsdpc_status release(fsdpc_engine *e, int u, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  if (fsdpc__unit_resident(e, un) || !un->full)
    return FSDPC_OK;
  /* stream-ordered after compute's last use (a pending prefetch is waited
   * for first, so the free never overtakes the gather) */
  if (un->pending)
    FSDPC_TRY(use(e, u, err));
  if (!fsdpc__full_is_lp(un)) /* its bytes go back to the plan */
    fsdpc__acct(e, FSDPC_MEM_COMM, -(int64_t)(un->flat_numel * e->psize));
  un->full = NULL;
  return FSDPC_OK;
}

/* Unit u's full gradient buffer, zeroed, in dst (its planned place). */
static fsdpc_status ensure_grad(fsdpc_engine *e, int u, void *dst, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  if (un->full_grad)
    return FSDPC_OK;
  size_t fb = un->flat_numel * sizeof(float);
  if (!dst)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                       "fsdp: no planned buffer for the gradients of unit %s", un->name);
  un->full_grad = dst;
  fsdpc__acct(e, FSDPC_MEM_GRADS, (int64_t)fb);
  return e->ops->memset0(e->ops->ctx, un->full_grad, fb, err);
}

/* The full gradient buffer of un ends (its bytes go back to the plan). */
static void grads_done(fsdpc_engine *e, fsdpc_unit *un) {
  if (un->full_grad)
    fsdpc__acct(e, FSDPC_MEM_GRADS, -(int64_t)(un->flat_numel * sizeof(float)));
  un->full_grad = NULL;
}

/* bf16 reduce-scatter of un's full grads (device, on stream st): cast to a
 * bf16 copy g16 (planned), end the fp32 full grads, reduce-scatter into
 * rs16, widen into out (rs_scratch, or in_bwd's grad shard). */
static fsdpc_status reduce_scatter_bf16(fsdpc_engine *e, fsdpc_unit *un, void *st, void *g16,
                                        float *out, fsdpc_err *err) {
  size_t hb = un->flat_numel * 2;
  if (!g16)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "fsdp: no planned bf16 buffer for unit %s",
                       un->name);
  fsdpc__acct(e, FSDPC_MEM_COMM, (int64_t)hb);
  fsdpc_status s = e->ops->cast_params_on(e->ops->ctx, g16, un->full_grad, un->flat_numel, st, err);
  grads_done(e, un);
  if (s == FSDPC_OK)
    s = fsdpc__dist_reduce_scatter_on(e->dist, FSDPC_GROUP_SHARD, g16, e->rs16, un->shard_numel,
                                      FSDPC_DTYPE_BF16, st, un->name, err);
  fsdpc__acct(e, FSDPC_MEM_COMM, -(int64_t)hb);
  FSDPC_TRY(s);
  return e->ops->cast_to_f32_on(e->ops->ctx, out, e->rs16, un->shard_numel, st, err);
}

/* REDUCE under in_bwd: unit u's grad shard is a transient (memplan.h),
 * made in dst, or at S == 1 the full grads themselves (their bytes stay
 * counted as grads); the reduce-scatter lands in it straight, or through
 * rs16 (bf16). UPDATE (optim_step.c) ends it. */
static fsdpc_status reduce_shard(fsdpc_engine *e, int u, void *dst, void *g16, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  if (e->S == 1) {
    un->grad = un->full_grad;
    un->full_grad = NULL;
    return FSDPC_OK;
  }
  if (!dst)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "fsdp: no planned grad shard for unit %s",
                       un->name);
  un->grad = dst;
  fsdpc__acct(e, FSDPC_MEM_GRADS, (int64_t)(un->shard_numel * sizeof(float)));
  if (e->comm) {
    FSDPC_TRY(e->ops->event_record(e->ops->ctx, EV_GRADS + u % 16, NULL, err));
    FSDPC_TRY(e->ops->stream_wait(e->ops->ctx, e->comm, EV_GRADS + u % 16, err));
  }
  FSDPC_TRY(e->reduce_bf16 ? reduce_scatter_bf16(e, un, e->comm, g16, un->grad, err)
                           : fsdpc__dist_reduce_scatter_on(
                                 e->dist, FSDPC_GROUP_SHARD, un->full_grad, un->grad,
                                 un->shard_numel, FSDPC_DTYPE_F32, e->comm, un->name, err));
  grads_done(e, un);
  if (e->comm) /* REDUCED waits for this */
    FSDPC_TRY(e->ops->event_record(e->ops->ctx, EV_REDUCED + u % 16, e->comm, err));
  return FSDPC_OK;
}

/* After the unit's last backward use in this micro-batch. With a comm
 * stream, the reduce-scatter and the accumulation into the grad shard run
 * there, overlapping the backward of the blocks before it. Offloaded, the
 * reduced shard is copied to the host instead of added on the device. Ends
 * with an event on that stream that REDUCED waits for. */
static fsdpc_status reduce_grads(fsdpc_engine *e, int u, void *g16, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  /* grads accumulated straight into the shard */
  if (e->S == 1 && !e->offload)
    return FSDPC_OK;
  /* offloaded at S == 1 the grads only go to the host: on their own stream */
  void *gs = e->S == 1 && e->offload ? e->d2h : e->comm;
  if (gs) {
    FSDPC_TRY(e->ops->event_record(e->ops->ctx, EV_GRADS + u % 16, NULL, err));
    FSDPC_TRY(e->ops->stream_wait(e->ops->ctx, gs, EV_GRADS + u % 16, err));
  }
  const float *reduced = un->full_grad; /* S == 1: the full grads are the shard */
  if (e->S > 1 && !e->rs_scratch) {
    /* one micro-batch a step (fsdpc__mp_rs_direct): into the zeroed shard */
    FSDPC_TRY(fsdpc__dist_reduce_scatter_on(e->dist, FSDPC_GROUP_SHARD, un->full_grad, un->grad,
                                            un->shard_numel, FSDPC_DTYPE_F32, e->comm, un->name,
                                            err));
  } else if (e->S > 1) {
    FSDPC_TRY(e->reduce_bf16 ? reduce_scatter_bf16(e, un, e->comm, g16, e->rs_scratch, err)
                             : fsdpc__dist_reduce_scatter_on(
                                   e->dist, FSDPC_GROUP_SHARD, un->full_grad, e->rs_scratch,
                                   un->shard_numel, FSDPC_DTYPE_F32, e->comm, un->name, err));
    reduced = e->rs_scratch;
  }
  if (e->offload) {
    FSDPC_TRY(fsdpc__offload_grads_to_host(e, un, reduced, err));
  } else if (e->S > 1 && !e->rs_scratch) {
    /* landed in the shard already */
  } else if (e->comm) {
    FSDPC_TRY(
        e->ops->add_f32_on(e->ops->ctx, un->grad, e->rs_scratch, un->shard_numel, e->comm, err));
  } else {
    FSDPC_TRY(e->ops->add_f32(e->ops->ctx, un->grad, e->rs_scratch, un->shard_numel, err));
  }
  grads_done(e, un);
  if (gs) /* the reads above are done: REDUCED waits for this */
    FSDPC_TRY(e->ops->event_record(e->ops->ctx, EV_REDUCED + u % 16, gs, err));
  return FSDPC_OK;
}

/* Compute waits for unit u's reduction (REDUCED): its full gradient bytes
 * may then be reused on any stream (memplan.h). */
static fsdpc_status reduced(fsdpc_engine *e, int u, fsdpc_err *err) {
  if (!e->comm)
    return FSDPC_OK;
  return e->ops->stream_wait(e->ops->ctx, NULL, EV_REDUCED + u % 16, err);
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
  if (kind == FSDPC_P_HEAD && e->shape.tied)
    return e->param_of_kind[FSDPC_P_EMBED];
  return e->param_of_kind[kind];
}
static void *top_w(fsdpc_engine *e, int kind) {
  return fsdpc__param_full(e, top_param(e, kind));
}
static float *top_g(fsdpc_engine *e, int kind) {
  return fsdpc__param_full_grad(e, top_param(e, kind)); /* NULL when frozen */
}

/* What the HEAD action does in each kind of pass. */
typedef enum { PASS_TRAIN, PASS_EVAL, PASS_LOGITS } pass_kind;

typedef struct pass {
  pass_kind kind;
  fsdpc_model_ctx *m;
  float grad_scale;
  double *loss_sum;
  int64_t *count;
  int pos;    /* PASS_LOGITS: the position whose logits are wanted */
  float *out; /* PASS_LOGITS: (B, V) */
} pass;

static fsdpc_status block_forward(fsdpc_engine *e, fsdpc_model_ctx *m, int b, fsdpc_err *err) {
  if (b == 0)
    return fsdpc__model_embed_fwd(m, top_w(e, FSDPC_P_EMBED), err);
  void *base[FSDPC_P_NKIND];
  fsdpc_layer_w w;
  layer_weights(e, b - 1, base);
  fsdpc__layer_views(base, &w);
  return fsdpc__model_layer_fwd(m, b - 1, &w, err);
}

static fsdpc_status block_backward(fsdpc_engine *e, fsdpc_model_ctx *m, int b, fsdpc_err *err) {
  if (b == 0)
    return fsdpc__model_embed_bwd(m, top_g(e, FSDPC_P_EMBED), err);
  void *wb[FSDPC_P_NKIND];
  float *gb[FSDPC_P_NKIND];
  fsdpc_layer_w w;
  fsdpc_layer_g g;
  layer_weights(e, b - 1, wb);
  layer_grads(e, b - 1, gb);
  fsdpc__layer_views(wb, &w);
  fsdpc__layer_grad_views(gb, &g);
  return fsdpc__model_layer_bwd(m, b - 1, &w, &g, err);
}

static fsdpc_status head(fsdpc_engine *e, const pass *x, fsdpc_err *err) {
  switch (x->kind) {
  case PASS_TRAIN:
    return fsdpc__model_head_fwd_bwd(x->m, top_w(e, FSDPC_P_NORM), top_w(e, FSDPC_P_HEAD),
                                     x->grad_scale, top_g(e, FSDPC_P_NORM), top_g(e, FSDPC_P_HEAD),
                                     x->loss_sum, x->count, err);
  case PASS_EVAL:
    return fsdpc__model_head_fwd_bwd(x->m, top_w(e, FSDPC_P_NORM), top_w(e, FSDPC_P_HEAD), 0.0f,
                                     NULL, NULL, x->loss_sum, x->count, err);
  default:
    return fsdpc__model_logits_at(x->m, x->pos, top_w(e, FSDPC_P_NORM), top_w(e, FSDPC_P_HEAD),
                                  x->out, err);
  }
}

/* Whether program p reduces unit u's grads. */
static int reduces(const fsdpc_program *p, int u) {
  for (int i = 0; i < p->n; i++)
    if (p->a[i].op == FSDPC_ACT_REDUCE && p->a[i].arg == u)
      return 1;
  return 0;
}

/* The arena bytes an action makes live at off: before the arena (issue 32)
 * a device allocation, and still one for FSDPC_FAULT=alloc=N, so that the
 * fault injection fails a rank mid-step as an out of memory did. */
static fsdpc_status take(const fsdpc_engine *e, uint64_t off, void **p, fsdpc_err *err) {
  if (fsdpc__fault_alloc())
    return fsdpc__fault_alloc_fail(err, e->ops->device == FSDPC_DEVICE_CUDA ? "cuda" : "cpu", 0);
  *p = fsdpc__arena_at(e, off);
  return FSDPC_OK;
}

/* Executes the program of slot (fsdp/memplan.h) action by action; the
 * buffers action i makes live at the plan's off[2i], off[2i + 1]. */
static fsdpc_status run(fsdpc_engine *e, int slot, const pass *x, fsdpc_err *err) {
  const fsdpc_program *p = &e->mp.prog[slot];
  const uint64_t *off = e->mp.off[slot];
  if (!e->mp.has[slot])
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "fsdp: the plan has no program %d (%s)", slot,
                       e->inference ? "an engine for evaluation only" : "a step of other size");
  for (int i = 0; i < p->n; i++) {
    int arg = p->a[i].arg;
    void *buf = NULL;
    switch ((fsdpc_act_op)p->a[i].op) {
    case FSDPC_ACT_FENCE_IN:
    case FSDPC_ACT_FENCE_FREE:
      FSDPC_TRY(fence_in(e, err));
      break;
    case FSDPC_ACT_GATHER:
      FSDPC_TRY(take(e, off[2 * i], &buf, err));
      FSDPC_TRY(gather(e, arg, buf, err));
      break;
    case FSDPC_ACT_WAIT:
      FSDPC_TRY(use(e, arg, err));
      break;
    case FSDPC_ACT_GRAD_ALLOC:
      FSDPC_TRY(take(e, off[2 * i], &buf, err));
      FSDPC_TRY(ensure_grad(e, arg, buf, err));
      break;
    case FSDPC_ACT_FORWARD:
      FSDPC_TRY(block_forward(e, x->m, arg, err));
      break;
    case FSDPC_ACT_HEAD:
      FSDPC_TRY(head(e, x, err));
      /* offloaded: the final norm's and head's grads are final now */
      if (e->offload && e->head_unit >= 0 && x->kind == PASS_TRAIN && reduces(p, e->head_unit))
        FSDPC_TRY(fsdpc__offload_head_grads(e, err));
      break;
    case FSDPC_ACT_BACKWARD:
      FSDPC_TRY(block_backward(e, x->m, arg, err));
      break;
    case FSDPC_ACT_REDUCE:
      FSDPC_TRY(e->x.in_bwd ? reduce_shard(e, arg, fsdpc__arena_at(e, off[2 * i]),
                                           fsdpc__arena_at(e, off[2 * i + 1]), err)
                            : reduce_grads(e, arg, fsdpc__arena_at(e, off[2 * i + 1]), err));
      break;
    /* in_bwd: the unit's replica all-reduce and update, in the backward */
    case FSDPC_ACT_REPLICA_REDUCE:
      FSDPC_TRY(
          fsdpc__engine_replica_reduce(e, arg, NULL, fsdpc__arena_at(e, off[2 * i + 1]), err));
      break;
    case FSDPC_ACT_UPDATE:
      FSDPC_TRY(fsdpc__engine_update_in_bwd(e, arg, err));
      break;
    case FSDPC_ACT_REDUCED:
      FSDPC_TRY(reduced(e, arg, err));
      break;
    case FSDPC_ACT_RELEASE:
      FSDPC_TRY(release(e, arg, err));
      break;
    case FSDPC_ACT_FENCE_OUT:
      FSDPC_TRY(fence_out(e, err));
      break;
    case FSDPC_ACT_ABSORB:
      FSDPC_TRY(fsdpc__offload_absorb(e, err));
      break;
    case FSDPC_ACT_HOST_GRAD:
    case FSDPC_ACT_HOST_LAND:
      FSDPC_TRY(fsdpc__offload_host_grad(e, arg, p->a[i].op == FSDPC_ACT_HOST_GRAD, err));
      break;
    case FSDPC_ACT_HOST_WAIT:
      FSDPC_TRY(fsdpc__offload_host_wait(e, arg, err));
      break;
    default:
      return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "fsdp: action %s in a compute pass",
                         fsdpc__act_name(p->a[i].op));
    }
  }
  return FSDPC_OK;
}

/* Whether the first micro-batch after an optimizer step writes the decoder
 * layers', the final norm's and the head's weight gradients instead of
 * adding them to zeroed ones
 * (fsdpc__model_grad_overwrite), so that the update need not zero them: a
 * pass of 4 bytes a parameter less, and the weight-gradient GEMMs read no
 * old gradient (beta 0). Where the grad shard is the full gradient (S == 1)
 * on a device whose ops have it, nothing offloaded or frozen. Units whose
 * parameters are all written so (grad_written) skip the zeroing; the
 * embedding's (a scatter-add) keeps it. Decided once: at that
 * point no backward has run, so the gradients are the zeros they were
 * allocated as. */
int fsdpc__grad_ow(fsdpc_engine *e) {
  if (e->grad_ow)
    return e->grad_ow > 0;
  e->grad_ow = -1;
  if (e->S != 1 || e->offload || e->offload_optim || e->hw || !e->ops->grad_overwrite ||
      e->ops->device == FSDPC_DEVICE_CPU)
    return 0;
  for (int u = 0; u < e->n_units; u++)
    if (e->units[u].frozen)
      return 0;
  char *layer = calloc((size_t)e->n_params + 1, 1);
  if (!layer)
    return 0;
  for (int l = 0; l < e->shape.L; l++)
    for (int k = FSDPC_P_Q; k <= FSDPC_P_LN2; k++) {
      int p = e->layer_param[l * FSDPC_P_NKIND + k];
      if (p >= 0)
        layer[p] = 1;
    }
  /* the head block writes the final norm's and an untied head's gradients
   * (tied, the embedding adds into the head's: that unit stays zeroed) */
  int pn = e->param_of_kind[FSDPC_P_NORM], ph = e->param_of_kind[FSDPC_P_HEAD];
  if (pn >= 0)
    layer[pn] = 1;
  if (ph >= 0 && !e->shape.tied)
    layer[ph] = 1;
  for (int u = 0; u < e->n_units; u++) {
    fsdpc_unit *un = &e->units[u];
    un->grad_written = un->n_params > 0;
    for (int i = 0; i < un->n_params; i++)
      un->grad_written &= layer[un->params[i]];
  }
  free(layer);
  e->grad_ow = 1;
  e->grads_fresh = 1;
  return 1;
}

/* Frees the units a micro-batch kept (keep_params) when what comes next is
 * not a micro-batch of the same step: the programs of evaluation and the
 * optimizer step assume nothing gathered. The trainer always ends a step
 * with its last micro-batch, which keeps nothing. */
fsdpc_status fsdpc__drop_kept(fsdpc_engine *e, fsdpc_err *err) {
  if (!e->kept)
    return FSDPC_OK;
  e->kept = 0;
  for (int u = 0; u < e->n_units; u++)
    FSDPC_TRY(release(e, u, err));
  return FSDPC_OK;
}

fsdpc_status fsdpc__engine_micro_step(fsdpc_engine *e, fsdpc_model_ctx *m, float grad_scale,
                                      int last_micro, double *loss_sum, int64_t *count,
                                      fsdpc_err *err) {
  pass x = {
      .kind = PASS_TRAIN, .m = m, .grad_scale = grad_scale, .loss_sum = loss_sum, .count = count};
  /* the plan's step: accum micro-batches, the last one last */
  int mi = e->micro_i, accum = e->x.accum;
  if ((mi == accum - 1) != (last_micro != 0))
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                       "fsdp: micro-batch %d of a step of %d called %s the last one", mi + 1, accum,
                       last_micro ? "as" : "not as");
  if (e->x.in_bwd && last_micro && !e->in_bwd_begun)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                       "fsdp: optim.in_backward: a micro-batch before fsdpc__engine_step_begin "
                       "said which step it updates");
  if (e->S > 1 && !e->rs_scratch && e->shards_dirty && !e->x.in_bwd)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "fsdp: a second micro-batch before the optimizer step, in a run planned "
                       "for one a step (its reduce-scatters overwrite the grad shards); set "
                       "train.grad_accum_steps to the micro-batches of a step");
  int ow = fsdpc__grad_ow(e) && e->grads_fresh;
  if (fsdpc__model_grad_overwrite(m, ow) != ow) {
    /* the model adds into its gradients (LoRA): zero what the updates left
     * and keep zeroing from now on */
    e->grad_ow = -1;
    ow = 0;
    for (int u = 0; u < e->n_units; u++)
      if (e->units[u].grad_written && e->units[u].grad)
        FSDPC_TRY(e->sops->memset0(e->sops->ctx, e->units[u].grad,
                                   e->units[u].shard_numel * sizeof(float), err));
  }
  /* the program of the micro-batch's place in the step (after a first one
   * that kept units, the *_IN ones, which find them gathered) */
  fsdpc_status st = run(e, fsdpc__mp_micro_slot(mi, accum), &x, err);
  e->kept = st == FSDPC_OK && !last_micro && e->keep != FSDPC_KEEP_NONE;
  e->micro_i = last_micro || st != FSDPC_OK ? 0 : mi + 1;
  e->shards_dirty = 1;
  fsdpc__model_grad_overwrite(m, 0);
  e->grads_fresh = 0; /* later micro-batches of the step add into what it wrote */
  return st;
}

/* Evaluation, logits and the block path run between steps: the plan lays
 * their buffers over the step's (memplan.h), which must all have ended. */
static fsdpc_status between_steps(fsdpc_engine *e, const char *what, fsdpc_err *err) {
  if (e->micro_i != 0)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                       "fsdp: %s after micro-batch %d of a step of %d; run it between steps", what,
                       e->micro_i, e->x.accum);
  return fsdpc__drop_kept(e, err);
}

fsdpc_status fsdpc__engine_eval(fsdpc_engine *e, fsdpc_model_ctx *m, double *loss_sum,
                                int64_t *count, fsdpc_err *err) {
  pass x = {.kind = PASS_EVAL, .m = m, .loss_sum = loss_sum, .count = count};
  FSDPC_TRY(between_steps(e, "an evaluation", err));
  return run(e, FSDPC_MP_FORWARD, &x, err);
}

fsdpc_status fsdpc__engine_logits_at(fsdpc_engine *e, fsdpc_model_ctx *m, int pos, float *out,
                                     fsdpc_err *err) {
  pass x = {.kind = PASS_LOGITS, .m = m, .pos = pos, .out = out};
  FSDPC_TRY(between_steps(e, "a forward for logits", err));
  return run(e, FSDPC_MP_FORWARD, &x, err);
}

fsdpc_status fsdpc__engine_block_weights(fsdpc_engine *e, int b, void *base[FSDPC_P_NKIND],
                                         fsdpc_err *err) {
  int head = e->shape.L + 1;
  if (b < 0 || b > head)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "no block %d", b);
  if (b == 0) {
    FSDPC_TRY(between_steps(e, "inference", err));
    FSDPC_TRY(fsdpc__engine_quiesce(e, err));
  }
  /* the comm stream after the compute of the blocks before: a unit's
   * planned bytes may be those of a unit freed there (memplan.h) */
  FSDPC_TRY(fence_in(e, err));
  for (int i = 0; i < e->blocks[b].n_units; i++) {
    int u = e->blocks[b].units[i];
    FSDPC_TRY(gather(e, u, fsdpc__arena_at(e, e->mp.unit[u].blk), err));
    FSDPC_TRY(use(e, u, err));
  }
  for (int k = 0; k < FSDPC_P_NKIND; k++)
    base[k] = NULL;
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
    for (int u = 0; u < e->n_units; u++)
      FSDPC_TRY(release(e, u, err));
    return fence_out(e, err);
  }
  for (int i = 0; i < e->blocks[b].n_units; i++) {
    fsdpc_unit *un = &e->units[e->blocks[b].units[i]];
    if (un->last_block == b)
      FSDPC_TRY(release(e, e->blocks[b].units[i], err));
  }
  return FSDPC_OK;
}
