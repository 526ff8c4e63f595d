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
#include <stdlib.h>
#include <string.h>

#include "fsdp/internal.h"
#include "fsdp/program.h"
#include "fsdp/qstate.h"
#include "io/dtype.h"
#include "ops/cpu/ops_cpu.h"
#include "util/mem.h"

/* Events: a unit's gather done (comm -> compute), a unit's grads ready
 * (compute -> comm), and the two fences around a pass. */
enum { EV_GATHER = 0, EV_GRADS = 32, EV_FENCE_IN = 48, EV_FENCE_OUT = 49, EV_FENCE_D2H = 56 };

/* Before a pass: the comm stream waits for everything on the compute stream
 * (the optimizer's update of the master shards, frees). */
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

/* Makes unit u's full parameters exist in the compute dtype: all-gather the
 * fp32 shards (fp32 compute), or cast this rank's shard to bf16 into its own
 * slot of the full buffer and all-gather in place (bf16 compute). Offloaded,
 * the bf16 shard comes from the host staging copy (one H2D copy) instead of
 * a device cast. With a comm stream this is issued there and only recorded;
 * use() makes compute wait for it. */
static fsdpc_status gather(fsdpc_engine *e, int u, fsdpc_err *err) {
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
  un->full = e->comm ? e->ops->alloc_on(e->ops->ctx, FSDPC_MEM_COMM, fb, e->comm)
                     : fsdpc__ealloc(e, FSDPC_MEM_COMM, fb);
  if (!un->full)
    return fsdpc__ops_oom(e->ops, err, "gathering unit %s (%zu bytes)", un->name, fb);
  fsdpc_status st;
  if (un->frozen) { /* the shard already is in the compute dtype */
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

/* Compute waits for u's gather (issued earlier, perhaps as a prefetch). */
static fsdpc_status use(fsdpc_engine *e, int u, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  if (!un->pending)
    return FSDPC_OK;
  un->pending = 0;
  return e->ops->stream_wait(e->ops->ctx, NULL, EV_GATHER + u % 32, err);
}

/* st, or else the error a free on the device kept (fsdpc__ops_freed): a
 * device fault is reported, never dropped. Takes that error either way. */
static fsdpc_status after_free(fsdpc_engine *e, fsdpc_status st, fsdpc_err *err) {
  fsdpc_err fe;
  fsdpc_status f = fsdpc__ops_freed(e->ops, &fe);
  if (st != FSDPC_OK || f == FSDPC_OK)
    return st;
  if (err)
    *err = fe;
  return f;
}

static fsdpc_status release(fsdpc_engine *e, int u, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  if (fsdpc__unit_resident(e, un) || !un->full)
    return FSDPC_OK;
  /* stream-ordered after compute's last use (a pending prefetch is waited
   * for first, so the free never overtakes the gather) */
  if (un->pending)
    FSDPC_TRY(use(e, u, err));
  if (!fsdpc__full_is_lp(un))
    fsdpc__efree(e, FSDPC_MEM_COMM, un->full, un->flat_numel * e->psize);
  un->full = NULL;
  return after_free(e, FSDPC_OK, err);
}

static fsdpc_status ensure_grad(fsdpc_engine *e, int u, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  if (un->full_grad)
    return FSDPC_OK;
  size_t fb = un->flat_numel * sizeof(float);
  if (!(un->full_grad = fsdpc__ealloc(e, FSDPC_MEM_GRADS, fb)))
    return fsdpc__ops_oom(e->ops, err, "for the gradients of unit %s (%zu bytes)", un->name, fb);
  return e->ops->memset0(e->ops->ctx, un->full_grad, fb, err);
}

/* bf16 reduce-scatter of un's full grads (device, on stream st): cast to a
 * bf16 copy, free the fp32 full grads, reduce-scatter into rs16, widen into
 * rs_scratch. */
static fsdpc_status reduce_scatter_bf16(fsdpc_engine *e, fsdpc_unit *un, void *st, fsdpc_err *err) {
  size_t fb = un->flat_numel * sizeof(float), hb = un->flat_numel * 2;
  void *g16 = e->ops->alloc_on(e->ops->ctx, FSDPC_MEM_COMM, hb, st);
  if (!g16)
    return fsdpc__ops_oom(e->ops, err, "reducing unit %s in bf16 (%zu bytes)", un->name, hb);
  fsdpc_status s = e->ops->cast_params_on(e->ops->ctx, g16, un->full_grad, un->flat_numel, st, err);
  e->ops->free_on(e->ops->ctx, FSDPC_MEM_GRADS, un->full_grad, fb, st);
  un->full_grad = NULL;
  if (s == FSDPC_OK)
    s = fsdpc__dist_reduce_scatter_on(e->dist, FSDPC_GROUP_SHARD, g16, e->rs16, un->shard_numel,
                                      FSDPC_DTYPE_BF16, st, un->name, err);
  e->ops->free_on(e->ops->ctx, FSDPC_MEM_COMM, g16, hb, st);
  FSDPC_TRY(after_free(e, s, err));
  return e->ops->cast_to_f32_on(e->ops->ctx, e->rs_scratch, e->rs16, un->shard_numel, st, err);
}

/* After the unit's last backward use in this micro-batch. With a comm
 * stream, the reduce-scatter and the accumulation into the grad shard run
 * there, overlapping the backward of the blocks before it. Offloaded, the
 * reduced shard is copied to the host instead of added on the device. */
static fsdpc_status reduce_grads(fsdpc_engine *e, int u, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  /* grads accumulated straight into the shard */
  if (e->S == 1 && !e->offload)
    return FSDPC_OK;
  size_t fb = un->flat_numel * sizeof(float);
  /* offloaded at S == 1 the grads only go to the host: on their own stream */
  void *gs = e->S == 1 && e->offload ? e->d2h : e->comm;
  if (gs) {
    FSDPC_TRY(e->ops->event_record(e->ops->ctx, EV_GRADS + u % 16, NULL, err));
    FSDPC_TRY(e->ops->stream_wait(e->ops->ctx, gs, EV_GRADS + u % 16, err));
  }
  const float *reduced = un->full_grad; /* S == 1: the full grads are the shard */
  if (e->S > 1) {
    FSDPC_TRY(e->reduce_bf16 ? reduce_scatter_bf16(e, un, e->comm, err)
                             : fsdpc__dist_reduce_scatter_on(
                                   e->dist, FSDPC_GROUP_SHARD, un->full_grad, e->rs_scratch,
                                   un->shard_numel, FSDPC_DTYPE_F32, e->comm, un->name, err));
    reduced = e->rs_scratch;
  }
  if (e->offload) {
    FSDPC_TRY(fsdpc__offload_grads_to_host(e, un, reduced, err));
  } else if (e->comm) {
    FSDPC_TRY(
        e->ops->add_f32_on(e->ops->ctx, un->grad, e->rs_scratch, un->shard_numel, e->comm, err));
  } else {
    FSDPC_TRY(e->ops->add_f32(e->ops->ctx, un->grad, e->rs_scratch, un->shard_numel, err));
  }
  /* stream-ordered after the reads above */
  if (un->full_grad) {
    if (gs)
      e->ops->free_on(e->ops->ctx, FSDPC_MEM_GRADS, un->full_grad, fb, gs);
    else
      fsdpc__efree(e, FSDPC_MEM_GRADS, un->full_grad, fb);
  }
  un->full_grad = NULL;
  return after_free(e, FSDPC_OK, err);
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

/* Executes a pass's program (fsdp/program.h) action by action. */
static fsdpc_status run(fsdpc_engine *e, const fsdpc_program *p, const pass *x, fsdpc_err *err) {
  for (int i = 0; i < p->n; i++) {
    int arg = p->a[i].arg;
    switch ((fsdpc_act_op)p->a[i].op) {
    case FSDPC_ACT_FENCE_IN:
      FSDPC_TRY(fence_in(e, err));
      break;
    case FSDPC_ACT_GATHER:
      FSDPC_TRY(gather(e, arg, err));
      break;
    case FSDPC_ACT_WAIT:
      FSDPC_TRY(use(e, arg, err));
      break;
    case FSDPC_ACT_GRAD_ALLOC:
      FSDPC_TRY(ensure_grad(e, arg, err));
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
      FSDPC_TRY(reduce_grads(e, arg, err));
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
static int grad_ow(fsdpc_engine *e) {
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
static fsdpc_status drop_kept(fsdpc_engine *e, fsdpc_err *err) {
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
  int ow = grad_ow(e) && e->grads_fresh;
  if (fsdpc__model_grad_overwrite(m, ow) != ow) {
    /* the model adds into its gradients (LoRA): zero what the updates left
     * and keep zeroing from now on */
    e->grad_ow = -1;
    ow = 0;
    for (int u = 0; u < e->n_units; u++)
      if (e->units[u].grad_written)
        FSDPC_TRY(e->sops->memset0(e->sops->ctx, e->units[u].grad,
                                   e->units[u].shard_numel * sizeof(float), err));
  }
  /* keep_params: after a micro-batch of this step that kept its units, the
   * *_IN program, which finds them gathered */
  fsdpc_program_kind kind =
      last_micro ? (e->kept ? FSDPC_PROGRAM_MICRO_IN : FSDPC_PROGRAM_MICRO)
                 : (e->kept ? FSDPC_PROGRAM_MICRO_NO_SYNC_IN : FSDPC_PROGRAM_MICRO_NO_SYNC);
  fsdpc_status st = run(e, &e->prog[kind], &x, err);
  e->kept = st == FSDPC_OK && !last_micro && e->keep != FSDPC_KEEP_NONE;
  fsdpc__model_grad_overwrite(m, 0);
  e->grads_fresh = 0; /* later micro-batches of the step add into what it wrote */
  return st;
}

fsdpc_status fsdpc__engine_eval(fsdpc_engine *e, fsdpc_model_ctx *m, double *loss_sum,
                                int64_t *count, fsdpc_err *err) {
  pass x = {.kind = PASS_EVAL, .m = m, .loss_sum = loss_sum, .count = count};
  FSDPC_TRY(drop_kept(e, err));
  return run(e, &e->prog[FSDPC_PROGRAM_FORWARD], &x, err);
}

fsdpc_status fsdpc__engine_logits_at(fsdpc_engine *e, fsdpc_model_ctx *m, int pos, float *out,
                                     fsdpc_err *err) {
  pass x = {.kind = PASS_LOGITS, .m = m, .pos = pos, .out = out};
  FSDPC_TRY(drop_kept(e, err));
  return run(e, &e->prog[FSDPC_PROGRAM_FORWARD], &x, err);
}

fsdpc_status fsdpc__engine_block_weights(fsdpc_engine *e, int b, void *base[FSDPC_P_NKIND],
                                         fsdpc_err *err) {
  int head = e->shape.L + 1;
  if (b < 0 || b > head)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "no block %d", b);
  if (b == 0) {
    FSDPC_TRY(drop_kept(e, err));
    FSDPC_TRY(fsdpc__engine_quiesce(e, err));
    FSDPC_TRY(fence_in(e, err));
  }
  for (int i = 0; i < e->blocks[b].n_units; i++) {
    FSDPC_TRY(gather(e, e->blocks[b].units[i], err));
    FSDPC_TRY(use(e, e->blocks[b].units[i], err));
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

/* Replica all-reduce of a grad shard in device memory (in place), in fp32 or,
 * with reduce_dtype bf16, through a bf16 copy. */
static fsdpc_status replica_reduce_dev(fsdpc_engine *e, float *g, uint64_t n, const char *name,
                                       fsdpc_err *err) {
  if (!e->reduce_bf16)
    return fsdpc__dist_all_reduce_f32(e->dist, FSDPC_GROUP_REPLICA, g, n, name, err);
  void *g16 = fsdpc__ealloc(e, FSDPC_MEM_COMM, n * 2);
  if (!g16)
    return fsdpc__ops_oom(e->ops, err, "reducing unit %s in bf16", name);
  fsdpc_status st = e->ops->cast_params_on(e->ops->ctx, g16, g, n, NULL, err);
  if (st == FSDPC_OK)
    st = fsdpc__dist_all_reduce_dt(e->dist, FSDPC_GROUP_REPLICA, g16, n, FSDPC_DTYPE_BF16, name,
                                   err);
  if (st == FSDPC_OK)
    st = e->ops->cast_to_f32_on(e->ops->ctx, g, g16, n, NULL, err);
  fsdpc__efree(e, FSDPC_MEM_COMM, g16, n * 2);
  return after_free(e, st, err);
}

/* Replicas (NO_SHARD, HYBRID_SHARD) hold partial sums of the same shard.
 * Offloaded, the host shard goes through a transient device buffer (device
 * collectives move device memory). */
static fsdpc_status replica_reduce(fsdpc_engine *e, int u, fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  if (!e->offload)
    return replica_reduce_dev(e, un->grad, un->shard_numel, un->name, err);
  size_t sb = un->shard_numel * sizeof(float);
  float *d = fsdpc__ealloc(e, FSDPC_MEM_COMM, sb);
  if (!d)
    return fsdpc__ops_oom(e->ops, err, "reducing unit %s", un->name);
  fsdpc_status st = e->ops->upload(e->ops->ctx, d, un->grad, sb, err);
  if (st == FSDPC_OK)
    st = replica_reduce_dev(e, d, un->shard_numel, un->name, err);
  if (st == FSDPC_OK)
    st = e->ops->download(e->ops->ctx, un->grad, d, sb, err);
  fsdpc__efree(e, FSDPC_MEM_COMM, d, sb);
  return after_free(e, st, err);
}

/* Sum of squares of every grad shard of this rank, in unit order. On a
 * device each unit's sum is added into one device double (the same order
 * and double arithmetic as the host loop) and downloaded once, so the norm
 * costs one host sync instead of one per unit. */
static fsdpc_status local_sumsq(fsdpc_engine *e, double *out, fsdpc_err *err) {
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
    uint64_t s0 = un->shard_offset + lo, s1 = un->shard_offset + hi;
    for (int i = 0; i < un->n_params; i++) {
      int p = un->params[i];
      uint64_t p0 = e->param_offset[p], p1 = p0 + e->params[p].numel;
      uint64_t a, b;
      if (!fsdpc__overlap(p0, p1, s0, s1, &a, &b))
        continue;
      e->otensors[n++] = (fsdpc_optim_tensor){.struct_size = sizeof(fsdpc_optim_tensor),
                                              .param = un->master + lo + (a - s0),
                                              .grad = un->grad + lo + (a - s0),
                                              .state = state ? state + (a - s0) : NULL,
                                              .numel = b - a,
                                              .stride = stride,
                                              .decay = e->params[p].decay || e->decay_norm_and_bias,
                                              .param_bf16 = lpw ? un->lp + lo + (a - s0) : NULL};
    }
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
  if (!e->offload && !(un->grad_written && grad_ow(e)))
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

fsdpc_status fsdpc__engine_optim_step(fsdpc_engine *e, int64_t step, double lr,
                                      double max_grad_norm, double *grad_norm_out, fsdpc_err *err) {
  const fsdpc_program *p = &e->prog[FSDPC_PROGRAM_OPTIM];
  double scale = 1.0;
  FSDPC_TRY(drop_kept(e, err));
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
      FSDPC_TRY(replica_reduce(e, arg, err));
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
  if (grad_ow(e))
    e->grads_fresh = 1; /* the updates left grad_written units unzeroed */
  return FSDPC_OK;
}

static fsdpc_status gather_full(fsdpc_engine *e, fsdpc_unit *un, const float *src, int root,
                                float *full, fsdpc_err *err);

/* A frozen unit in bf16 (LoRA's base on a device): the bf16 shards are
 * gathered on the device and widened to fp32 on root's host. */
static fsdpc_status gather_frozen16(fsdpc_engine *e, fsdpc_unit *un, int root, float *full,
                                    fsdpc_err *err) {
  size_t hb = un->flat_numel * 2, sb = un->shard_numel * 2;
  int is_root = e->dist->shard_rank == root && full;
  uint16_t *h16 = is_root ? malloc(hb ? hb : 1) : NULL;
  void *d16 = fsdpc__ealloc(e, FSDPC_MEM_COMM, hb ? hb : 2);
  fsdpc_status st = FSDPC_OK;
  if ((is_root && !h16) || !d16) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory gathering unit %s", un->name);
    goto done;
  }
  void *own = (char *)d16 + un->shard_offset * 2;
  if (e->offload)
    st = e->ops->upload(e->ops->ctx, own, un->master, sb, err);
  else if (e->S == 1)
    st = e->ops->copy_on(e->ops->ctx, own, un->master, sb, NULL, err);
  if (st == FSDPC_OK && e->S > 1)
    st = fsdpc__dist_all_gather(e->dist, FSDPC_GROUP_SHARD, e->offload ? own : un->master, d16,
                                un->shard_numel, e->ops->act_dtype, un->name, err);
  if (st == FSDPC_OK && is_root)
    st = e->ops->download(e->ops->ctx, h16, d16, hb, err);
  if (st == FSDPC_OK && is_root)
    fsdpc__bf16_to_f32_n(h16, full, un->flat_numel);
done:
  fsdpc__efree(e, FSDPC_MEM_COMM, d16, hb ? hb : 2);
  free(h16);
  return st;
}

fsdpc_status fsdpc__engine_gather_unit(fsdpc_engine *e, int u, int slot, int root, float *full,
                                       fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  FSDPC_TRY(fsdpc__engine_quiesce(e, err));
  if (un->frozen && slot != FSDPC_SD_SLOT_PARAM)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "unit %s is frozen: no optimizer state",
                       un->name);
  if (un->frozen && e->psize != sizeof(float))
    return gather_frozen16(e, un, root, full, err);
  if (slot != FSDPC_SD_SLOT_PARAM && e->qf.block)
    return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                       "gathering unit %s's optimizer state: quantized state has no flat fp32 "
                       "form; use the sharded checkpoint format for optimizer state",
                       un->name);
  const float *src =
      slot == FSDPC_SD_SLOT_PARAM ? un->master : un->state + (size_t)slot * un->shard_numel;
  size_t fb = un->flat_numel * sizeof(float), sb = un->shard_numel * sizeof(float);
  int host_src = e->offload || (e->offload_optim && slot != FSDPC_SD_SLOT_PARAM);
  if (e->S == 1) {
    if (full && host_src && e->ops->device != FSDPC_DEVICE_CPU)
      memcpy(full, src, fb);
    else if (full)
      FSDPC_TRY(e->sops->download(e->sops->ctx, full, src, fb, err));
    return FSDPC_OK;
  }
  if (host_src && e->ops->device != FSDPC_DEVICE_CPU) { /* the host shard goes up first */
    float *d = fsdpc__ealloc(e, FSDPC_MEM_COMM, sb);
    if (!d)
      return fsdpc__ops_oom(e->ops, err, "gathering unit %s", un->name);
    fsdpc_status st = e->ops->upload(e->ops->ctx, d, src, sb, err);
    if (st == FSDPC_OK)
      st = gather_full(e, un, d, root, full, err);
    fsdpc__efree(e, FSDPC_MEM_COMM, d, sb);
    return after_free(e, st, err);
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
  if (!tmp)
    return fsdpc__ops_oom(e->ops, err, "gathering unit %s", un->name);
  fsdpc_status st = fsdpc__dist_all_gather(e->dist, FSDPC_GROUP_SHARD, src, tmp, un->shard_numel,
                                           FSDPC_DTYPE_F32, un->name, err);
  if (!direct && st == FSDPC_OK && e->dist->shard_rank == root && full)
    st = e->ops->download(e->ops->ctx, full, tmp, fb, err);
  if (!direct)
    fsdpc__efree(e, FSDPC_MEM_COMM, tmp, fb);
  return after_free(e, st, err);
}
