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

#include "fsdp/engine.h"
#include "runplan/runplan.h"
#include "util/mem.h"

typedef struct fsdpc_plan_device {
  int32_t device;         /* FSDPC_DEVICE_* */
  int full_param_bytes;   /* element size of gathered params: 4 (CPU fp32), 2 (bf16) */
  int full_grad_bytes;    /* element size of full gradient buffers */
  double act_scale;       /* activations relative to the fp32 CPU context */
  int xent_logit_bytes;   /* cross-entropy scratch per logit of a chunk (CPU 4:
                           * fp32; CUDA 6: fp32 logits + bf16 gradient; plan.c
                           * takes 2 for CUDA's bf16 logits) */
  double reserved_factor; /* reserved = factor x tracked peak + runtime_bytes, shard groups > 1 */
  double reserved_factor_s1; /* the same with shard groups of 1 (nothing gathered) */
  uint64_t runtime_bytes; /* CUDA context, communicator buffers (not tracked) */
  /* Host memory of the process that the engine does not allocate: code,
   * libraries, the CUDA runtime's own host allocations (the planner adds it
   * to the host total that --host-mem is checked against). */
  uint64_t host_runtime_bytes;
  /* The same while the shards are filled, before the first step: the
   * runtime grows from this to host_runtime_bytes in the first step, after
   * the fill's pageable staging shard is freed, so the two never add up. */
  uint64_t host_fill_runtime_bytes;
} fsdpc_plan_device;

/* Defaults for a device: CPU = fp32 everywhere, nothing reserved beyond
 * what is tracked; CUDA = bf16 compute, estimated allocator overhead. */
void fsdpc__plan_device_default(int32_t device, fsdpc_plan_device *out);

typedef struct fsdpc_plan_mem {
  int S, R;                      /* shard and replica group sizes */
  uint64_t params, grads, optim; /* shard bytes: == fsdpc__engine_bytes */
  uint64_t activations;          /* model context bytes */
  int64_t peak[FSDPC_MEM_NCAT];  /* per-category peaks, as fsdpc_mem_stats.peak */
  int64_t total_peak;            /* peak of the sum (device memory) */
  int64_t host_bytes;            /* pinned host memory: cpu_offload's shards, the bf16
                                  * staging copies of the master shards and, with more than
                                  * one micro-batch, the grad landing buffers; or
                                  * offload.optimizer's state shards */
  int64_t host_pageable;         /* peak of the engine's other host memory (util/mem.h): on
                                  * the CPU device everything above (device = host); on a
                                  * GPU what fills the shards at start-up (plan.c
                                  * fill_host_bytes: none for a random init without LoRA) */
  int64_t host_runtime;          /* the device's host_runtime_bytes */
  int64_t host_total;            /* host_bytes + max(host_pageable + the device's
                                  * host_fill_runtime_bytes, host_runtime), per rank */
  int64_t reserved;              /* predicted reserved device memory */
  fsdpc_comm_bytes comm;         /* collective bytes sent per step (comm_s unused) */
} fsdpc_plan_mem;

/* The memory model of run plan p under modes m (the plan's own, or a
 * variant's from fsdpc__run_modes_resolve) on device dev. Pure: no plugin
 * call, no allocation of model memory. */
fsdpc_status fsdpc__plan_memory(const fsdpc_run_plan *p, const fsdpc_run_modes *m,
                                const fsdpc_plan_device *dev, fsdpc_plan_mem *out, fsdpc_err *err);

/* The same with the device defaults of m->device and m's world. */
fsdpc_status fsdpc__plan_modes(const fsdpc_run_plan *p, const fsdpc_run_modes *m,
                               fsdpc_plan_mem *out, fsdpc_err *err);

/* A planner over one config (a run plan made for planning: see
 * FSDPC_RUN_PLAN_OFFLINE), for any strategy / checkpointing / offload
 * variant and world. */
typedef struct fsdpc_plan_ctx fsdpc_plan_ctx;
typedef fsdpc_run_variant fsdpc_plan_variant;

fsdpc_status fsdpc__plan_ctx_create(const fsdpc_config *cfg, fsdpc_plan_ctx **out, fsdpc_err *err);
void fsdpc__plan_ctx_destroy(fsdpc_plan_ctx *p);
const fsdpc_run_plan *fsdpc__plan_run(const fsdpc_plan_ctx *p);

/* Variant v (NULL = the config's own) at world ranks, nproc_per_node per
 * node, as for `fsdpc train --nproc-per-node`. */
fsdpc_status fsdpc__plan_config(const fsdpc_plan_ctx *p, const fsdpc_plan_variant *v, int world,
                                int nproc_per_node, fsdpc_plan_mem *out, fsdpc_err *err);

/* Views of the plan's run plan (tests use them). */
uint64_t fsdpc__plan_numel(const fsdpc_plan_ctx *p);
double fsdpc__plan_flops_per_token(const fsdpc_model_shape *s, int T);
const fsdpc_model_shape *fsdpc__plan_shape(const fsdpc_plan_ctx *p);
const fsdpc_param_info *fsdpc__plan_params(const fsdpc_plan_ctx *p, int *n_params,
                                           const uint32_t **unit_of_param, uint32_t *n_units);

#endif
