/* The memory planner: per-rank memory by category for a config under each
 * sharding strategy, without allocating the model.
 *
 * It builds the very memory plan the engine builds at creation
 * (fsdp/memplan.h) for the variant's resolved execution (runplan/): the
 * shards of the same unit layout, the model context's block counted by the
 * context's own allocation code, and each program action's transients laid
 * out in one arena. So the arena it reports is the arena the run reserves,
 * byte for byte, and the per-category peaks are what the engine's
 * accounting records over a step.
 *
 * Outside the plan (fsdpc_plan_device): the CUDA context and libraries, the
 * cuBLASLt workspace, the kernels' code, NCCL's own buffers and the few
 * small buffers no arena holds, estimated (docs/fsdp.md). */
#ifndef FSDPC_PLAN_PLAN_H
#define FSDPC_PLAN_PLAN_H

#include "fsdp/engine.h"
#include "runplan/runplan.h"
#include "util/mem.h"

typedef struct fsdpc_plan_device {
  int32_t device; /* FSDPC_DEVICE_* */
  /* Device memory outside the arena (0 on the CPU): what the process holds
   * before the engine is made (CUDA context, libraries, cuBLASLt workspace),
   * and what comes after (kernel modules loaded on first launch, small pool
   * buffers, NCCL's buffers at world > 1): late_bytes at world 1, plus
   * late_comm_bytes with collectives. */
  uint64_t runtime_bytes, late_bytes, late_comm_bytes;
  /* Host memory of the process that the engine does not allocate: code,
   * libraries, the CUDA runtime's own host allocations (the planner adds it
   * to the host total that --host-mem is checked against). */
  uint64_t host_runtime_bytes;
  /* The same while the shards are filled, before the first step: the
   * runtime grows from this to host_runtime_bytes in the first step, after
   * the fill's pageable staging shard is freed, so the two never add up. */
  uint64_t host_fill_runtime_bytes;
} fsdpc_plan_device;

/* Defaults for a device: CPU = nothing beyond the arena; CUDA = the
 * estimates of what lies outside it. */
void fsdpc__plan_device_default(int32_t device, fsdpc_plan_device *out);

typedef struct fsdpc_plan_mem {
  int S, R;                      /* shard and replica group sizes */
  uint64_t params, grads, optim; /* shard bytes: == fsdpc__engine_bytes */
  uint64_t activations;          /* model context bytes */
  int64_t peak[FSDPC_MEM_NCAT];  /* per-category peaks, as fsdpc_mem_stats.peak */
  int64_t total_peak;            /* peak of the sum (device memory) */
  int64_t arena;                 /* the one reservation the engine makes: every byte above,
                                  * laid out (fsdp/memplan.h); >= total_peak */
  int64_t arena_shards, arena_activations, arena_transients; /* its three parts */
  int64_t late;                  /* device memory the run takes after its fit check (the
                                  * device's late_bytes, late_comm_bytes) */
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
  int64_t reserved;              /* device memory the run takes: arena + runtime + late */
  fsdpc_comm_bytes comm;         /* collective bytes sent per step (comm_s unused) */
  /* the moment of total_peak: each category's bytes then; the pass and the
   * program action (fsdp/program.h) that reached it, static strings, and
   * its unit or block (-1: none) */
  int64_t at_peak[FSDPC_MEM_NCAT];
  const char *peak_pass, *peak_action;
  int peak_arg;
} fsdpc_plan_mem;

/* The memory model of run plan p under modes m (the plan's own, or a
 * variant's from fsdpc__run_modes_resolve) on device dev. Pure: no plugin
 * call, no allocation of model memory. */
fsdpc_status fsdpc__plan_memory(const fsdpc_run_plan *p, const fsdpc_run_modes *m,
                                const fsdpc_plan_device *dev, fsdpc_plan_mem *out, fsdpc_err *err);

/* The same with the device defaults of m->device and m's world. */
fsdpc_status fsdpc__plan_modes(const fsdpc_run_plan *p, const fsdpc_run_modes *m,
                               fsdpc_plan_mem *out, fsdpc_err *err);

/* Before any work, whether the run of plan p fits free_bytes of free device
 * memory (device_index: for the message): its arena and what the run takes
 * after this point (fsdpc_plan_mem.late). When not, refuses in one line
 * with the planner's figures and the variants of the run that would fit
 * (activation checkpointing, a smaller micro-batch with the same global
 * batch, fsdp.offload.optimizer, fsdp.cpu_offload). The same numbers as
 * `fsdpc plan --gpu-mem` (plan_fit.c). */
fsdpc_status fsdpc__plan_fit_check(const fsdpc_run_plan *p, uint64_t free_bytes, int device_index,
                                   fsdpc_err *err);

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
