/* The engine's private state, shared by units.c (layout, init, loading) and
 * step.c (the micro-batch schedule and the optimizer step). */
#ifndef FSDPC_FSDP_INTERNAL_H
#define FSDPC_FSDP_INTERNAL_H

#include <stddef.h>

#include "fsdp/engine.h"
#include "fsdp/memplan.h"
#include "fsdp/nf4_unit.h"
#include "fsdp/program.h"
#include "runplan/runplan.h"

struct fsdpc_engine {
  /* The run plan's resolved execution, copied at creation; the mode fields
   * below are its values, never decided here. */
  fsdpc_run_exec x;
  fsdpc_model_shape shape;
  const fsdpc_ops *ops;        /* the device: memory, casts, fp32 adds and norms */
  size_t psize;                /* bytes per element of a gathered (compute) parameter */
  int full_is_master;          /* S == 1 and fp32 compute: nothing to gather or cast */
  fsdpc_strategy strategy;
  int reshard_after_forward;
  int no_sync;
  int threads;
  fsdpc_dist *dist;
  int S;                       /* shard group size */

  fsdpc_param_info *params;    /* module order */
  int n_params;
  int *param_unit;             /* (n_params) */
  uint64_t *param_offset;      /* (n_params) element offset in the unit's flat buffer */
  int param_of_kind[FSDPC_P_NKIND]; /* non-layer params: index or -1 */
  int *layer_param;            /* (L, FSDPC_P_NKIND) index or -1 */

  fsdpc_unit *units;
  int n_units;
  fsdpc_block *blocks;         /* (L + 2) */
  int n_blocks;

  const fsdpc_component *optim;
  const fsdpc_optim_v1 *ov;
  fsdpc_optimizer *opt;
  uint32_t n_slots;
  fsdpc_optim_tensor *otensors;/* scratch for the multi-tensor step */
  fsdpc_optim_qformat qf;      /* quantized state when qf.block > 0 (qstate.c) */
  char qslot_names[4][72];     /* "<slot>.absmax" checkpoint names (quantized) */
  float **qmirror;             /* (n_units) fp32 checkpoint planes of quantized state, or NULL */
  int decay_norm_and_bias;

  void *comm;                  /* comm stream when collectives overlap compute, else NULL */
  void *d2h;                   /* cpu_offload at S == 1: the grads' copies to the host (the
                                  device's d2h stream, else comm) */
  int fwd_prefetch, bwd_prefetch;
  float **mirror;              /* (n_units * (1 + n_slots)) host copies of shards, or NULL */
  float *rs_scratch;           /* (max shard_numel) reduce-scatter landing buffer */
  int reduce_bf16;             /* reduce-scatter / replica all-reduce in bf16 (device) */
  void *rs16;                  /* (max shard_numel) bf16 reduce-scatter landing, or NULL */
  double *dnorm;               /* (1) device accumulator of the grad norm, or NULL */
  int offload;                 /* shards in pinned host memory, optimizer on the CPU */
  int param_copy;              /* units keep lp, the bf16 copy of master (engine.h) */
  uint64_t lp_bytes;           /* bytes of those copies */
  int lp_units;                /* units with one */
  int inference;               /* no grad or optimizer shards (evaluation) */
  const fsdpc_ops *sops;       /* where shard math runs: the CPU table when offloaded */
  uint64_t host_pinned;        /* bytes of pinned host memory held (offload) */
  uint64_t max_shard, max_flat;
  uint64_t max_grad_shard;     /* largest trainable shard: the reduce-scatter landing buffers */
  /* Where every buffer lives (memplan.h), the programs of each slot among
   * them, and the arena they live in: one reservation on the device. */
  fsdpc_memplan mp;
  char *arena;
  int micro_i;                 /* micro-batches of the step begun so far (0: between steps) */
  int keep;                    /* fsdp.keep_params (FSDPC_KEEP_*) */
  int kept;                    /* the last micro-batch left its kept units gathered */
  /* Offload modes (offload.c). */
  int host_async;              /* cpu_offload: the optimizer step runs on the host worker */
  int offload_optim;           /* fsdp.offload.optimizer: state in host memory, streamed */
  struct fsdpc_hostwork *hw;   /* the host worker (host_async), else NULL */
  uint64_t *upd_seq;           /* (n_units) the worker task updating the unit; 0 = none */
  uint64_t *land_seq;          /* (n_units) the worker task adding the unit's landing */
  /* (n_units) elements [0, upd_prog) of the unit's staging copy are updated
   * and recast by the worker's current update of it (offload.c) */
  _Atomic(uint64_t) *upd_prog;
  unsigned char *upd_follow;   /* (n_units) HOST_WAIT left the update running: the gather's
                                  upload follows it (fsdpc__offload_upload) */
  int head_unit;               /* the unit whose flat buffer ends with the final norm and the
                                  (untied) head, used before the head block: -1 = none */
  uint64_t head_at;            /* where that suffix starts */
  int head_sent;               /* this pass sent the suffix's grads to the host already */
  double *part;                /* (n_units) each grad shard's sum of squares (worker) */
  int parts_ok;                /* part[] is the norm's input: one replica (no all-reduce) */
  int64_t h_step;              /* the optimizer step the worker applies */
  double h_lr, h_scale;
  int early;                   /* this step's updates start in the backward (step_begin) */
  int in_bwd_begun;            /* optim.in_backward: step_begin gave h_step, h_lr */
  int early_logged;
  void *sbuf[2];               /* offload_optim: device buffers of one piece's state */
  uint64_t sbuf_bytes;
  fsdpc_state_pieces pieces;   /* offload_optim: the state in pieces (program.h) */
  int sbuf_out[2];             /* a STATE_OUT from the buffer is in flight this step */
  int sin_fenced;              /* the copy stream waited for compute in this step */
  void *copy_stream;           /* offload_optim: where states go in (NULL: compute) */
  /* Gradients written, not zeroed (step.c, grad_overwrite): 1 on, -1 off, 0
   * not decided yet; grads_fresh: the decoder layers' gradients hold nothing
   * of this step yet (the next micro-batch may overwrite them). */
  int grad_ow, grads_fresh;
  /* a micro-batch reduced into the grad shards since the last update (a
   * reduce-scatter straight into the shards needs them zeroed:
   * fsdpc__mp_rs_direct) */
  int shards_dirty;
  /* quantization.method nf4 (fsdp/nf4_unit.h): the 8-bit map of the
   * absmax's double quantization, and at S > 1 the gathered image */
  float nf4_map[256];
  uint8_t *nf4buf;
};

/* Whether the optimizer plugin writes fsdpc_optim_tensor.param_bf16 (on
 * the device the engine runs it on). */
static inline int fsdpc__optim_writes_bf16(const fsdpc_engine *e) {
  return e->ops->device == FSDPC_DEVICE_CUDA &&
         e->ov->struct_size >= offsetof(fsdpc_optim_v1, param_bf16) + sizeof(int32_t) &&
         e->ov->param_bf16;
}

/* Whether un->full is un->lp (S == 1 with param_copy): nothing to free. */
static inline int fsdpc__full_is_lp(const fsdpc_unit *un) {
  return un->lp && (void *)un->lp == un->full;
}

/* Bytes of optimizer state (every slot) of n elements of a shard: what
 * offload_optim streams. */
static inline uint64_t fsdpc__stream_bytes(const fsdpc_engine *e, uint64_t n) {
  return n * sizeof(float) * e->n_slots;
}

/* step.c: the optimizer update of elements [lo, hi) of unit u's shard (see
 * there). */
fsdpc_status fsdpc__engine_update(fsdpc_engine *e, int u, uint64_t lo, uint64_t hi, float *state,
                                  uint64_t stride, int64_t step, double lr, double scale,
                                  fsdpc_err *err);

/* optim_step.c, optim.in_backward: the replica all-reduce of unit u's grad
 * shard (d: a device buffer when offloaded; g16: the bf16 copy), and UPDATE
 * u in the backward (its sum of squares kept for the norm, the update with
 * step_begin's step and lr, its transient grad shard ended); step_begin's
 * part of it. */
fsdpc_status fsdpc__engine_replica_reduce(fsdpc_engine *e, int u, float *d, void *g16,
                                          fsdpc_err *err);
fsdpc_status fsdpc__engine_update_in_bwd(fsdpc_engine *e, int u, fsdpc_err *err);
fsdpc_status fsdpc__engine_in_bwd_begin(fsdpc_engine *e, int64_t step, double lr,
                                        double max_grad_norm, fsdpc_err *err);

/* offload.c */
/* Sets up the offload modes the plan resolved (e->x): the worker, events
 * and buffers (engine creation, after the layout). */
fsdpc_status fsdpc__offload_setup(fsdpc_engine *e, fsdpc_err *err);
void fsdpc__offload_teardown(fsdpc_engine *e);
/* The optimizer state shard: pinned host memory under offload_optim on a
 * device, else where the other shards are (off: its planned place). */
float *fsdpc__offload_state_alloc(fsdpc_engine *e, uint64_t off, size_t bytes);
void fsdpc__offload_state_free(fsdpc_engine *e, float *p, size_t bytes);
/* Every host task done and, with offload_optim, every state copy: the
 * host may read or write the shards. */
fsdpc_status fsdpc__engine_quiesce(fsdpc_engine *e, fsdpc_err *err);
/* cpu_offload's bf16 copy of a master shard, recast if stale. */
void fsdpc__offload_refresh_stage(fsdpc_engine *e, fsdpc_unit *un);
fsdpc_status fsdpc__offload_grads_to_host(fsdpc_engine *e, fsdpc_unit *un, const float *src,
                                          fsdpc_err *err);
fsdpc_status fsdpc__offload_absorb(fsdpc_engine *e, fsdpc_err *err);
/* The actions of the offload modes (program.h). */
fsdpc_status fsdpc__offload_host_grad(fsdpc_engine *e, int u, int last, fsdpc_err *err);
fsdpc_status fsdpc__offload_host_wait(fsdpc_engine *e, int u, fsdpc_err *err);
/* The H2D copy of unit u's bf16 staging copy into dst (device) on stream;
 * after a HOST_WAIT that left u's update running, chunk by chunk behind it,
 * and returns once the update is done. */
fsdpc_status fsdpc__offload_upload(fsdpc_engine *e, int u, void *dst, void *stream,
                                   fsdpc_err *err);
/* After the head block of a pass that reduces head_unit: its suffix's
 * grads (final now) go to the host at once, the rest at its REDUCE. */
fsdpc_status fsdpc__offload_head_grads(fsdpc_engine *e, fsdpc_err *err);
/* UPDATE u under host_async: hand it to the worker (nothing when the
 * worker updated it in the backward already). */
fsdpc_status fsdpc__offload_host_update(fsdpc_engine *e, int u, int64_t step, double lr,
                                        double scale, fsdpc_err *err);
fsdpc_status fsdpc__offload_sumsq(fsdpc_engine *e, double *out, fsdpc_err *err);
fsdpc_status fsdpc__offload_state_in(fsdpc_engine *e, int u, fsdpc_err *err);
fsdpc_status fsdpc__offload_state_out(fsdpc_engine *e, int u, fsdpc_err *err);
/* UPDATE_PIECE p: compute waits for the piece's state, then updates it. */
fsdpc_status fsdpc__offload_update_piece(fsdpc_engine *e, int p, int64_t step, double lr,
                                         double scale, fsdpc_err *err);

/* The part [*a, *b) of the element range [p0, p1) (a parameter in the flat
 * order) that lies in [s0, s1) (a shard or a piece of one); 0 when none. */
static inline int fsdpc__overlap(uint64_t p0, uint64_t p1, uint64_t s0, uint64_t s1, uint64_t *a,
                                 uint64_t *b) {
  *a = p0 > s0 ? p0 : s0;
  *b = p1 < s1 ? p1 : s1;
  return *a < *b;
}

/* The next parameter of unit un (from *i on) whose elements overlap
 * [s0, s1) of its flat buffer: *p, and the overlap [*a, *b) in flat
 * elements; 0 when there is none left. Walks:
 *   for (int i = 0, p; fsdpc__next_segment(e, un, s0, s1, &i, &p, &a, &b);) */
static inline int fsdpc__next_segment(const fsdpc_engine *e, const fsdpc_unit *un, uint64_t s0,
                                      uint64_t s1, int *i, int *p, uint64_t *a, uint64_t *b) {
  for (; *i < un->n_params; (*i)++) {
    *p = un->params[*i];
    uint64_t p0 = e->param_offset[*p];
    if (fsdpc__overlap(p0, p0 + e->params[*p].numel, s0, s1, a, b)) {
      (*i)++;
      return 1;
    }
  }
  return 0;
}

/* Parameter p inside its unit's gathered full buffer (compute dtype). */
static inline void *fsdpc__param_full(fsdpc_engine *e, int p) {
  return (char *)e->units[e->param_unit[p]].full + e->param_offset[p] * e->psize;
}
/* An NF4 unit (fsdp/nf4_unit.h): packs the image of its full fp32 values
 * (flat, host memory) and keeps this rank's shard of it (units.c). */
fsdpc_status fsdpc__nf4_store(fsdpc_engine *e, int u, const float *full, fsdpc_err *err);
/* Whether the engine makes its NF4 units on the device (ops->nf4_quant,
 * bf16 compute, shards resident there). */
int fsdpc__nf4_on_device(const fsdpc_engine *e);
/* Each NF4 unit on the device (units.c): begin(arg, u) (may be NULL)
 * prepares unit u, make(arg, p, x) writes parameter p's fp32 values into
 * device memory x, the unit is quantized there and this rank's bytes kept;
 * the same bytes as fsdpc__nf4_store from the same values. */
typedef fsdpc_status (*fsdpc_nf4_unit_fn)(void *arg, int u, fsdpc_err *err);
fsdpc_status fsdpc__nf4_fill_dev(fsdpc_engine *e, fsdpc_nf4_unit_fn begin, fsdpc_nf4_make_fn make,
                                 void *arg, fsdpc_err *err);
/* Dequantizes an NF4 unit into dst (its compute-dtype full buffer): its
 * shard, or at S > 1 the image all-gathered into e->nf4buf (step.c). */
fsdpc_status fsdpc__nf4_gather(fsdpc_engine *e, int u, void *dst, fsdpc_err *err);

/* NULL for a frozen parameter (no gradient). */
static inline float *fsdpc__param_full_grad(fsdpc_engine *e, int p) {
  const fsdpc_unit *un = &e->units[e->param_unit[p]];
  return un->frozen ? NULL : un->full_grad + e->param_offset[p];
}
/* A unit that is its own full buffer: nothing to gather or free (S == 1 with
 * fp32 compute; or frozen, S == 1 and not offloaded). */
static inline int fsdpc__unit_resident(const fsdpc_engine *e, const fsdpc_unit *un) {
  return !un->nf4 && (e->full_is_master || (un->frozen && e->S == 1 && !e->offload));
}
/* Bytes per element of a unit's master shard: the compute dtype when
 * frozen, fp32 otherwise. */
static inline size_t fsdpc__master_size(const fsdpc_engine *e, const fsdpc_unit *un) {
  return un->frozen ? e->psize : sizeof(float);
}

/* A planned buffer of the arena (memplan.h): its pointer; NULL for
 * FSDPC_MP_NONE. */
static inline void *fsdpc__arena_at(const fsdpc_engine *e, uint64_t off) {
  return off == FSDPC_MP_NONE ? NULL : e->arena + off;
}

/* A planned buffer begins (bytes > 0) or ends (< 0): the device's
 * accounting by category, which the planner predicts (memplan.h). */
static inline void fsdpc__acct(const fsdpc_engine *e, fsdpc_mem_cat cat, int64_t bytes) {
  if (e->ops->account)
    e->ops->account(e->ops->ctx, cat, bytes);
}

/* Shard memory (master, grad, optimizer state): its planned place in the
 * arena, or pinned host memory when offloaded. */
static inline void *fsdpc__salloc(fsdpc_engine *e, fsdpc_mem_cat cat, uint64_t off, size_t bytes) {
  if (!e->offload) {
    void *p = fsdpc__arena_at(e, off);
    if (p)
      fsdpc__acct(e, cat, (int64_t)bytes);
    return p;
  }
  void *p = e->ops->alloc_host(e->ops->ctx, bytes);
  if (p) e->host_pinned += bytes;
  return p;
}
static inline void fsdpc__sfree(fsdpc_engine *e, fsdpc_mem_cat cat, void *p, size_t bytes) {
  if (!p) return;
  if (!e->offload) {
    fsdpc__acct(e, cat, -(int64_t)bytes);
    return;
  }
  e->ops->free_host(e->ops->ctx, p);
  e->host_pinned -= bytes;
}

/* step.c: frees the units a micro-batch kept when what comes next is not a
 * micro-batch of the same step; the decision of grad_overwrite (there). */
fsdpc_status fsdpc__drop_kept(fsdpc_engine *e, fsdpc_err *err);
int fsdpc__grad_ow(fsdpc_engine *e);

#endif
