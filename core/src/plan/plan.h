/* The memory planner: per-rank memory by category for a config under each
 * sharding strategy, without allocating the model.
 *
 * Shards (params, grads, optimizer) come from fsdpc__layout_build with the
 * same wrap plan and the optimizer plugin's n_slots, so they equal
 * fsdpc__engine_bytes exactly. Activations come from
 * fsdpc__model_ctx_bytes_for (what the model context allocates). Transient
 * buffers (gathered units: COMM; full gradient buffers: GRADS) come from
 * replaying the engine's schedule (core/src/fsdp/step.c) allocation by
 * allocation, so the per-category peaks and the peak of the total are what
 * util/mem.h records over a step.
 *
 * The GPU path slots in through fsdpc_plan_device: element sizes of the
 * gathered params and full grads (bf16 on GPU), an activation scale until
 * the CUDA model context has its own byte function, and the allocator's
 * reserved overhead. */
#ifndef FSDPC_PLAN_PLAN_H
#define FSDPC_PLAN_PLAN_H

#include "config/config.h"
#include "fsdp/engine.h"
#include "util/mem.h"

typedef struct fsdpc_plan_device {
  int32_t device;         /* FSDPC_DEVICE_* */
  int full_param_bytes;   /* element size of gathered params: 4 (CPU fp32), 2 (bf16) */
  int full_grad_bytes;    /* element size of full gradient buffers */
  double act_scale;       /* activations relative to the fp32 CPU context */
  int xent_logit_bytes;   /* cross-entropy scratch per logit of a chunk (CPU 4:
                           * fp32; CUDA 6: fp32 logits + bf16 gradient) */
  double reserved_factor; /* reserved = factor x tracked peak + runtime_bytes */
  uint64_t runtime_bytes; /* CUDA context, communicator buffers (not tracked) */
} fsdpc_plan_device;

/* Defaults for a device: CPU = fp32 everywhere, nothing reserved beyond
 * what is tracked; CUDA = bf16 compute, estimated allocator overhead. */
void fsdpc__plan_device_default(int32_t device, fsdpc_plan_device *out);

/* Everything the memory model needs, independent of a config file. */
typedef struct fsdpc_plan_in {
  const fsdpc_model_shape *shape;
  const fsdpc_param_info *params; /* module order */
  int n_params;
  const uint32_t *unit_of_param; /* the wrap plugin's plan */
  uint32_t n_units;
  int align;        /* fsdp.align */
  uint32_t n_slots; /* optimizer state planes */
  int strategy;     /* fsdpc_strategy */
  int world;        /* ranks */
  int shard_size;   /* S (see fsdpc__plan_shard_size) */
  int no_sync;
  int accum; /* micro-batches per step */
  int B, T;  /* micro-batch */
  int activation_checkpointing;
  int cpu_offload;       /* shards live in host memory (GPU only) */
  int reduce_dtype;      /* FSDPC_DTYPE_F32 or FSDPC_DTYPE_BF16 (GPU only) */
  fsdpc_attn_sizes attn; /* the attention plugin's sizes() for (B, T) */
  fsdpc_plan_device dev;
} fsdpc_plan_in;

typedef struct fsdpc_plan_mem {
  int S, R;                      /* shard and replica group sizes */
  uint64_t params, grads, optim; /* shard bytes: == fsdpc__engine_bytes */
  uint64_t activations;          /* model context bytes */
  int64_t peak[FSDPC_MEM_NCAT];  /* per-category peaks, as fsdpc_mem_stats.peak */
  int64_t total_peak;            /* peak of the sum (device memory) */
  int64_t host_bytes;            /* pinned host memory of cpu_offload: the shards, the bf16
                                  * staging copies of the master shards and, with more than
                                  * one micro-batch, the grad landing buffers */
  int64_t reserved;              /* predicted reserved device memory */
  fsdpc_comm_bytes comm;         /* collective bytes sent per step (comm_s unused) */
} fsdpc_plan_mem;

/* S for a strategy: FULL_SHARD / SHARD_GRAD_OP = world, NO_SHARD = 1,
 * HYBRID_SHARD = hybrid_shard_size, or ranks per node when 0; 1 at world 1
 * (as core/src/train/setup.c decides). */
int fsdpc__plan_shard_size(int strategy, int world, int nproc_per_node, int hybrid_shard_size);

/* The memory model (pure: no plugin, no allocation of model memory). */
fsdpc_status fsdpc__plan_memory(const fsdpc_plan_in *in, fsdpc_plan_mem *out, fsdpc_err *err);

/* What a config needs from plugins, loaded once: the parameter list, the
 * wrap plan, the optimizer's n_slots and the attention sizes. */
typedef struct fsdpc_plan_ctx fsdpc_plan_ctx;

fsdpc_status fsdpc__plan_ctx_create(const fsdpc_config *cfg, fsdpc_plan_ctx **out, fsdpc_err *err);
void fsdpc__plan_ctx_destroy(fsdpc_plan_ctx *p);

/* One variant of the config: strategy, checkpointing and offload as given
 * (pass -1 to keep the config's value). world / nproc_per_node as for
 * `fsdpc train --nproc-per-node`. */
typedef struct fsdpc_plan_variant {
  int strategy, activation_checkpointing, cpu_offload;
} fsdpc_plan_variant;

fsdpc_status fsdpc__plan_config(const fsdpc_plan_ctx *p, const fsdpc_plan_variant *v, int world,
                                int nproc_per_node, fsdpc_plan_mem *out, fsdpc_err *err);

/* Parameter count of the model (unique parameters) and the FLOPs per token
 * of one training step, torchtitan's convention:
 *   6 x (params - embedding) + 12 x L x C x T. */
uint64_t fsdpc__plan_numel(const fsdpc_plan_ctx *p);
double fsdpc__plan_flops_per_token(const fsdpc_model_shape *s, int T);
const fsdpc_model_shape *fsdpc__plan_shape(const fsdpc_plan_ctx *p);
/* The parameter list and wrap plan the planner uses (as the trainer's). */
const fsdpc_param_info *fsdpc__plan_params(const fsdpc_plan_ctx *p, int *n_params,
                                           const uint32_t **unit_of_param, uint32_t *n_units);

#endif
