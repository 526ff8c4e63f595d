/* The FSDP engine: flat units, shard ownership, gather / free / reduce
 * around each compute block, gradient clipping and the optimizer step.
 *
 * Every strategy is expressed with three numbers:
 *   S  shard group size   (FULL_SHARD, SHARD_GRAD_OP: world; NO_SHARD: 1;
 *                          HYBRID_SHARD: hybrid_shard_size)
 *   R  replica group size (world / S)
 *   reshard after forward (FULL_SHARD, HYBRID_SHARD: yes; others: no)
 * A unit's flat buffer is padded to a multiple of S * align; shard-group rank
 * r owns [r * shard_numel, (r + 1) * shard_numel). Per unit per rank the
 * engine holds an fp32 master shard, an fp32 grad shard and the optimizer's
 * state shard; full buffers exist only while a block needs them (S = 1: the
 * full buffer IS the shard, nothing moves).
 *
 * Gradients are summed (not averaged) across ranks: the loss is already
 * scaled by 1 / (counted tokens of the global batch), so the sum is the
 * gradient of the global-batch mean at any world size. */
#ifndef FSDPC_FSDP_ENGINE_H
#define FSDPC_FSDP_ENGINE_H

#include "config/config.h"
#include "fsdp/dist.h"
#include "model/llama.h"

/* fsdpc_strategy and its names: config/config.h. */

typedef struct fsdpc_unit {
  char name[64];            /* "layers.3", "root", "embed", "units.2" ... */
  int *params;              /* indexes into the engine's param list */
  int n_params;
  uint64_t numel;           /* sum of parameter numels */
  uint64_t flat_numel;      /* padded: multiple of S * align */
  uint64_t shard_numel;     /* flat_numel / S */
  uint64_t shard_offset;    /* shard_rank * shard_numel */
  float *master;            /* (shard_numel) fp32 master shard */
  float *grad;              /* (shard_numel) fp32 grad shard, summed over micro-batches */
  float *state;             /* (n_slots * shard_numel) optimizer state */
  void *full;               /* (flat_numel) gathered params in the compute dtype; == master
                               when S == 1 and the compute dtype is fp32 */
  float *full_grad;         /* (flat_numel) this micro-batch's grads; == grad when S == 1 */
  int first_block, last_block; /* compute blocks that use it (forward order) */
  int grad_live;            /* full_grad holds grads not yet reduced */
  int pending;              /* gathered on the comm stream; compute has not waited yet */
  /* cpu_offload only (pinned host memory): */
  uint16_t *stage;          /* (shard_numel) bf16 copy of master, the source of each gather */
  float *landing;           /* (shard_numel) later micro-batches' grads before the host add */
  int stage_stale;          /* master changed since stage was cast */
  int grad_clean;           /* grad is all zero (no micro-batch landed since the step) */
  int land_pending;         /* landing holds grads not yet added into grad */
  /* fsdp.param_copy (device, not offloaded): */
  uint16_t *lp;             /* (shard_numel) bf16 copy of master, written by the optimizer
                               step; the source of each gather (at S == 1 it IS full) */
  int lp_stale;             /* master changed since lp was written */
  /* Frozen (the base under LoRA): master is the shard in the compute dtype
   * (bf16 on a device), grad and state are NULL; gathered, never reduced. */
  int frozen;
  /* quantization.method nf4: a frozen unit holding a projection; master is
   * its shard of the unit's NF4 image (nf4_shard bytes, fsdp/nf4_unit.h),
   * gathered and dequantized into full like any unit, at S == 1 too */
  int nf4;
  uint64_t nf4_shard;
  /* no embedding in it: with grad_overwrite (step.c) the step's first
   * backward writes all of its gradient, so the update leaves it unzeroed */
  int grad_written;
  /* quantized optimizer state only (fsdp/qstate.h); else NULL and 0: */
  uint8_t *qstate;                /* (n_slots, n_q) codes */
  float *qscale;                  /* (n_slots, n_qblocks) block scales */
  uint64_t n_f32, n_q, n_qblocks; /* fp32-state elements (in state), coded elements, blocks */
} fsdpc_unit;

/* Compute blocks: 0 embedding, 1..L decoder layers, L+1 head (see llama.h).
 * A block needs at most this many units (a layer's unit, plus the embedding
 * unit and the norm/head units for the head block). */
enum { FSDPC_BLOCK_MAX_UNITS = 4 };

typedef struct fsdpc_block {
  int units[FSDPC_BLOCK_MAX_UNITS];
  int n_units;
} fsdpc_block;

/* The unit layout (see layout.c): a pure function of the model, the wrap
 * plan, the shard group size S and the alignment. Units come back with their
 * buffers NULL. */
typedef struct fsdpc_layout {
  int S;                       /* shard group size */
  int n_params;
  int *param_unit;             /* (n_params) */
  uint64_t *param_offset;      /* (n_params) element offset in the unit's flat buffer */
  int param_of_kind[FSDPC_P_NKIND]; /* non-layer params: index or -1 */
  int *layer_param;            /* (L, FSDPC_P_NKIND) index or -1 */
  fsdpc_unit *units;
  int n_units;
  fsdpc_block *blocks;         /* (L + 2) */
  int n_blocks;
  uint64_t max_shard, max_flat;
  uint64_t max_grad_shard; /* largest shard of a trainable unit (reduce-scatter landing) */
} fsdpc_layout;

/* Checks the plan (every module's parameters in one unit, no empty unit)
 * and computes the layout; shard_rank sets each unit's shard_offset. */
fsdpc_status fsdpc__layout_build(const fsdpc_model_shape *shape, const fsdpc_param_info *params,
                                 int n_params, const uint32_t *unit_of_param, uint32_t n_units,
                                 int shard_size, int align, int shard_rank, fsdpc_layout *out,
                                 fsdpc_err *err);
void fsdpc__layout_free(fsdpc_layout *l);

/* What an engine needs beside its run plan: this process's handles, which
 * the plan (pure, the same on every rank and in `fsdpc plan`) cannot hold.
 * The plan says what runs; these say where. */
typedef struct fsdpc_engine_env {
  fsdpc_dist *dist;     /* borrowed: this rank's communicators (its shard rank picks the shards) */
  const fsdpc_ops *ops; /* the device; NULL = the CPU reference (fp32) */
  int threads;          /* host threads of the optimizer and the offload worker */
} fsdpc_engine_env;

/* fsdp.param_copy_max_mib: whether a unit of shard_numel elements gets its
 * bf16 copy when `used` bytes of copies exist (units are offered in order;
 * the planner asks the same). cap 0 = no cap. */
static inline int fsdpc__param_copy_fits(uint64_t cap, uint64_t used, uint64_t shard_numel) {
  return cap == 0 || used + shard_numel * 2 <= cap;
}

/* Bytes per rank, by category (what the planner predicts). */
typedef struct fsdpc_engine_bytes {
  uint64_t params;          /* master shards */
  uint64_t grads;           /* grad shards */
  uint64_t optim;           /* optimizer state shards */
  uint64_t max_unit_full;   /* largest gathered unit (params) */
} fsdpc_engine_bytes;

/* Communication volume of the last step, this rank, in bytes, and the
 * seconds spent inside collective calls (exposed communication time on CPU). */
typedef struct fsdpc_comm_bytes {
  uint64_t all_gather, reduce_scatter, all_reduce;
  double comm_s;
} fsdpc_comm_bytes;

typedef struct fsdpc_engine fsdpc_engine;
struct fsdpc_run_plan;

/* Builds this rank's engine for run plan p (runplan/runplan.h): its layout,
 * strategy, offload and every other mode come from p->exec, resolved once;
 * the engine copies what it needs and never reads p again (p may change or
 * go after this returns). env's device and shard group must be the plan's. */
fsdpc_status fsdpc__engine_create(const struct fsdpc_run_plan *p, const fsdpc_engine_env *env,
                                  fsdpc_engine **out, fsdpc_err *err);
void fsdpc__engine_destroy(fsdpc_engine *e);

int fsdpc__engine_n_units(const fsdpc_engine *e);
const fsdpc_unit *fsdpc__engine_unit(const fsdpc_engine *e, int u);
const fsdpc_param_info *fsdpc__engine_param(const fsdpc_engine *e, int p, uint64_t *unit_offset,
                                            int *unit);
int fsdpc__engine_n_params(const fsdpc_engine *e);
void fsdpc__engine_bytes(const fsdpc_engine *e, fsdpc_engine_bytes *out);
void fsdpc__engine_comm_bytes(const fsdpc_engine *e, fsdpc_comm_bytes *out);
fsdpc_dist *fsdpc__engine_dist(fsdpc_engine *e);
uint32_t fsdpc__engine_n_slots(const fsdpc_engine *e);
const char *fsdpc__engine_slot_name(const fsdpc_engine *e, uint32_t i);

/* Fills this rank's master shards with the seeded, world-size-independent
 * random init (std for matrices, 1 for norms). */
fsdpc_status fsdpc__engine_init_random(fsdpc_engine *e, uint64_t seed, double std,
                                       fsdpc_err *err);
/* Fills this rank's adapter shards (LoRA) with their seeded init (A
 * Kaiming-uniform, B zero); after fsdpc__engine_load_hf, which fills only
 * the base. */
fsdpc_status fsdpc__engine_init_adapters(fsdpc_engine *e, uint64_t seed, fsdpc_err *err);
/* Fills this rank's master shards (the base's only, under LoRA) from an HF
 * checkpoint folder, reading only the byte ranges of its own shards (many
 * threads, large reads; on a device, staged through pinned buffers of 64 MiB,
 * fsdp/load.c). */
fsdpc_status fsdpc__engine_load_hf(fsdpc_engine *e, const char *dir, fsdpc_err *err);
/* The same with another staging size (tests make chunks smaller than units). */
fsdpc_status fsdpc__engine_load_hf_chunked(fsdpc_engine *e, const char *dir, size_t chunk_bytes,
                                           fsdpc_err *err);

/* Forward + backward of one micro-batch. grad_scale = 1 / (counted tokens
 * of the global batch). last_micro says whether grads must be reduced now
 * (no_sync mode). */
fsdpc_status fsdpc__engine_micro_step(fsdpc_engine *e, fsdpc_model_ctx *m, float grad_scale,
                                      int last_micro, double *loss_sum, int64_t *count,
                                      fsdpc_err *err);
/* Forward only (evaluation): loss sum and counted tokens. */
fsdpc_status fsdpc__engine_eval(fsdpc_engine *e, fsdpc_model_ctx *m, double *loss_sum,
                                int64_t *count, fsdpc_err *err);
/* Forward through the layers, then the logits at position pos of each row:
 * out (B, V). Collective (every rank calls it). */
fsdpc_status fsdpc__engine_logits_at(fsdpc_engine *e, fsdpc_model_ctx *m, int pos, float *out,
                                     fsdpc_err *err);
/* Inference over the engine's weights (core/src/infer), block by block in
 * order 0..L+1: block_weights gathers block b and gives the pointers of its
 * parameters by kind (base[k] NULL for kinds the block lacks; the head
 * block gives FSDPC_P_NORM and FSDPC_P_HEAD, the embedding when tied);
 * block_done frees what the block was the last to use. Collective. */
fsdpc_status fsdpc__engine_block_weights(fsdpc_engine *e, int b, void *base[FSDPC_P_NKIND],
                                         fsdpc_err *err);
fsdpc_status fsdpc__engine_block_done(fsdpc_engine *e, int b, fsdpc_err *err);
/* Says, before a step's micro-batches, which optimizer step comes (1-based),
 * its lr and max_grad_norm. Optional: with cpu_offload's host worker, one
 * replica and no clipping (max_grad_norm 0), each unit's update then starts
 * as soon as its grads of the last micro-batch are on the host, during the
 * backward of the remaining units (with clipping it must wait for the
 * global norm). fsdpc__engine_optim_step must follow with the same values. */
fsdpc_status fsdpc__engine_step_begin(fsdpc_engine *e, int64_t step, double lr,
                                      double max_grad_norm, fsdpc_err *err);
/* Finishes the step: replica all-reduce, global grad norm (*grad_norm, before
 * clipping), clipping to max_grad_norm (0 = off), optimizer update at lr,
 * zeroes grads. step is 1-based. */
fsdpc_status fsdpc__engine_optim_step(fsdpc_engine *e, int64_t step, double lr,
                                      double max_grad_norm, double *grad_norm, fsdpc_err *err);

/* The block of the engine's arena planned for the model context of its
 * run (fsdpc_model_ctx_opts.arena, fsdpc__run_model_opts); *bytes = 0 and
 * NULL when the plan has none. */
void *fsdpc__engine_act_block(fsdpc_engine *e, size_t *bytes);
/* The engine's memory plan (fsdp/memplan.h): the arena's bytes and parts. */
const struct fsdpc_memplan *fsdpc__engine_memplan(const fsdpc_engine *e);

/* Whether the shards live in host memory while the model computes on a
 * device (fsdp.cpu_offload on CUDA). */
int fsdpc__engine_offloaded(const fsdpc_engine *e);
/* Bytes of pinned host memory the engine holds (cpu_offload's shards and
 * staging copies, offload.optimizer's state). */
uint64_t fsdpc__engine_host_pinned(const fsdpc_engine *e);

/* This rank's fp32 shard of unit u (slot FSDPC_SD_SLOT_PARAM or an optimizer
 * slot) in HOST memory, for checkpoints. On the CPU (and with cpu_offload) it
 * is the shard itself. On a device it is a host mirror, filled from the device on first use; writes
 * to it reach the device at fsdpc__engine_host_shards_done(e, 1). */
float *fsdpc__engine_host_shard(fsdpc_engine *e, int u, int slot, fsdpc_err *err);
/* Ends a checkpoint operation: with upload, copies every host mirror back to
 * the device (after a load); frees the mirrors. No-op on the CPU. */
fsdpc_status fsdpc__engine_host_shards_done(fsdpc_engine *e, int upload, fsdpc_err *err);

/* Gathers the full fp32 values of unit u (params or an optimizer slot) to
 * shard-group rank `root` (full: flat_numel floats, used on root only).
 * slot = FSDPC_SD_SLOT_PARAM or 0..n_slots-1. Collective over the shard group. */
fsdpc_status fsdpc__engine_gather_unit(fsdpc_engine *e, int u, int slot, int root, float *full,
                                       fsdpc_err *err);

#endif
