/* The memory model: the engine's own memory plan (fsdp/memplan.h) for a
 * variant's resolved execution, the collective bytes of its step programs,
 * and the host memory around it. tests/bench/test_plan.c and the CPU
 * acceptance test (tests/fsdp/test_arena.sh) check it against engines and
 * runs. */
#include "plan/plan.h"

#include "config/config.h"
#include "fsdp/memplan.h"
#include "fsdp/nf4_unit.h"
#include "fsdp/program.h"
#include "fsdp/qstate.h"
#include "ops/ops.h"

#include <stdlib.h>
#include <string.h>

void fsdpc__plan_device_default(int32_t device, fsdpc_plan_device *out) {
  memset(out, 0, sizeof *out);
  out->device = device;
  if (device != FSDPC_DEVICE_CUDA)
    return;
  /* Device memory no arena holds, estimates: the CUDA context, libraries
   * and cuBLASLt's 32 MiB workspace before the engine exists; kernel
   * modules loaded on first launch and the small buffers of the pool after
   * it; NCCL's buffers at world > 1. Their sum is the 768 MiB the planner
   * used for them since the first GPU runs (nvidia-smi less the pools'
   * reservation); tests/gpu/arena_check.sh prints each run's measured
   * figures against them. */
  out->runtime_bytes = (uint64_t)512 << 20;
  out->late_bytes = (uint64_t)256 << 20;
  out->late_comm_bytes = (uint64_t)512 << 20;
  /* libraries and the CUDA runtime's host state: VmHWM less the pinned
   * bytes of a 1B cpu_offload run on one H200, which has no other host
   * memory of the engine (bench/results/2026-11-24-offload.md) */
  out->host_runtime_bytes = (uint64_t)440 << 20;
  /* the process's host memory while the initial fill's staging shard
   * lives (VmHWM less pinned bytes less that shard: 281.7 to 282.6 MiB on
   * the 1B H200 rows, 285.8 on the 8B H100 ones): the CUDA context and
   * libraries before the first step's kernels are loaded; the 1B runs
   * show 293 MiB of RSS before step 1 and 440 after it
   * (bench/results/2026-11-24-cpuoffload.md) */
  out->host_fill_runtime_bytes = (uint64_t)283 << 20;
}

/* The collective bytes one step of the plan's programs sends (fsdp/step.c,
 * optim_step.c). */
static void comm_bytes(const fsdpc_memplan *mp, const fsdpc_run_exec *x, const fsdpc_layout *lay,
                       fsdpc_comm_bytes *out) {
  memset(out, 0, sizeof *out);
  uint64_t gs = (uint64_t)x->act_size, rs = x->reduce_bf16 ? 2u : 4u;
  for (int mi = 0; mi <= x->accum; mi++) {
    int slot = mi == x->accum ? FSDPC_MP_OPTIM : fsdpc__mp_micro_slot(mi, x->accum);
    const fsdpc_program *p = &mp->prog[slot];
    for (int i = 0; mp->has[slot] && i < p->n; i++) {
      int op = p->a[i].op, arg = p->a[i].arg;
      /* only these three take a unit: the others' args are blocks or none */
      if ((op != FSDPC_ACT_GATHER && op != FSDPC_ACT_REDUCE && op != FSDPC_ACT_REPLICA_REDUCE) ||
          arg < 0 || arg >= lay->n_units)
        continue;
      uint64_t n = lay->units[arg].shard_numel;
      if (p->a[i].op == FSDPC_ACT_GATHER && lay->units[arg].nf4)
        out->all_gather += mp->unit[arg].nf4_shard * (uint64_t)(x->S - 1); /* 4-bit */
      else if (p->a[i].op == FSDPC_ACT_GATHER)
        out->all_gather += n * gs * (uint64_t)(x->S - 1);
      else if (p->a[i].op == FSDPC_ACT_REDUCE && x->S > 1)
        out->reduce_scatter += n * rs * (uint64_t)(x->S - 1);
      else if (p->a[i].op == FSDPC_ACT_REPLICA_REDUCE)
        out->all_reduce += n * rs * 2 * (uint64_t)(x->R - 1) / (uint64_t)x->R;
    }
  }
}

/* The host bytes that fill the shards at start-up on a GPU, freed before
 * the first step (fsdp/units.c, fsdp/load.c): a random init runs on the
 * device, or straight into the pinned shards when offloaded, except that
 * LoRA's frozen bf16 shards are made on the host from an fp32 staging shard
 * (fill_shards: the largest shard, every unit going through it unless
 * offloaded, plus a bf16 one for upload); an HF checkpoint streams through
 * two pinned buffers of at most 64 MiB (in place when offloaded). Only
 * touched pages count. */
static int64_t fill_host_bytes(const fsdpc_layout *lay, int offload, int from_checkpoint) {
  uint64_t frozen = 0;
  for (int u = 0; u < lay->n_units; u++)
    if (lay->units[u].frozen && lay->units[u].shard_numel > frozen)
      frozen = lay->units[u].shard_numel;
  if (from_checkpoint) {
    uint64_t buf =
        lay->max_shard * 4 < ((uint64_t)64 << 20) ? lay->max_shard * 4 : (uint64_t)64 << 20;
    return offload ? 0 : (int64_t)(2 * buf);
  }
  if (!frozen)
    return 0;
  return offload ? (int64_t)(frozen * 4) : (int64_t)(lay->max_shard * 4 + frozen * 2);
}

/* Rank r's memory plan: its layout (shard offsets), offload.optimizer's
 * pieces as the engine cuts them (fsdp/offload.c, qstream.c), then the
 * plan. */
static fsdpc_status rank_plan(const fsdpc_run_plan *p, const fsdpc_run_exec *x, fsdpc_layout *lay,
                              int r, uint64_t act, uint64_t act_tracked, fsdpc_memplan *mp,
                              fsdpc_err *err) {
  for (int u = 0; u < lay->n_units; u++)
    lay->units[u].shard_offset = (uint64_t)r * lay->units[u].shard_numel;
  fsdpc_state_pieces ps = {0};
  uint64_t sbuf = 0;
  fsdpc_status st = FSDPC_OK;
  if (x->offload_optim && p->qf.block)
    st = fsdpc__qstate_pieces_build(lay->units, lay->n_units, p->params, lay->param_offset, &p->qf,
                                    x->n_slots, x->offload_buffer_bytes, &ps, &sbuf, err);
  else if (x->offload_optim &&
           (st = fsdpc__state_pieces_build(
                lay, fsdpc__state_piece_elems(x->offload_buffer_bytes, x->n_slots), &ps, err)) ==
               FSDPC_OK)
    sbuf = ps.max_len * 4 * x->n_slots; /* fsdpc__stream_bytes */
  fsdpc_memplan_in in = {.x = x,
                         .lay = lay,
                         .params = p->params,
                         .qf = &p->qf,
                         .pieces = x->offload_optim ? &ps : NULL,
                         .sbuf_bytes = sbuf,
                         .act_bytes = act,
                         .act_tracked = act_tracked};
  if (st == FSDPC_OK)
    st = fsdpc__memplan_build(&in, mp, err);
  fsdpc__state_pieces_free(&ps);
  return st;
}

fsdpc_status fsdpc__plan_memory(const fsdpc_run_plan *p, const fsdpc_run_modes *m,
                                const fsdpc_plan_device *dev, fsdpc_plan_mem *out, fsdpc_err *err) {
  memset(out, 0, sizeof *out);
  fsdpc_run_exec x; /* the modes as the engine runs them (an evaluation's: no grads) */
  fsdpc__run_exec_resolve(p, m, (p->flags & FSDPC_RUN_PLAN_EVAL) != 0, &x);
  fsdpc_layout lay;
  FSDPC_TRY(fsdpc__layout_build(&p->shape, p->params, p->n_params, p->unit_of_param, p->n_units,
                                x.S, x.align, 0, &lay, err));
  fsdpc__nf4_mark_units(&lay, p->params, x.nf4_block);
  out->S = x.S;
  out->R = x.R;
  uint64_t act = 0, tracked = 0;
  fsdpc_status ast = fsdpc__memplan_act_bytes(p, m, &x, &act, &tracked, err);
  if (ast != FSDPC_OK) {
    fsdpc__layout_free(&lay);
    return ast;
  }
  /* the rank that holds the most: quantized state depends on which
   * parameters and partial blocks fall in a rank's shards; fp32 does not */
  fsdpc_memplan mp = {0}, worst = {0};
  fsdpc_status st = FSDPC_OK;
  for (int r = 0; r < (p->qf.block ? x.S : 1); r++) {
    if ((st = rank_plan(p, &x, &lay, r, act, tracked, &mp, err)) != FSDPC_OK)
      break;
    out->optim = mp.optim > out->optim ? mp.optim : out->optim;
    if (!worst.unit || mp.arena_bytes > worst.arena_bytes) {
      fsdpc__memplan_free(&worst);
      worst = mp;
    } else {
      fsdpc__memplan_free(&mp);
    }
    memset(&mp, 0, sizeof mp);
  }
  if (st != FSDPC_OK) {
    fsdpc__memplan_free(&worst);
    fsdpc__layout_free(&lay);
    return st;
  }
  int cuda = x.device == FSDPC_DEVICE_CUDA;
  out->params = worst.params;
  out->grads = worst.grads;
  out->activations = tracked;
  for (int c = 0; c < FSDPC_MEM_NCAT; c++)
    out->peak[c] = worst.peak[c];
  out->total_peak = worst.total_peak;
  memcpy(out->at_peak, worst.at_peak, sizeof out->at_peak);
  out->peak_pass = fsdpc__mp_slot_name(worst.peak_slot);
  out->peak_action = "none";
  out->peak_arg = -1;
  if (worst.peak_slot >= 0 && worst.peak_action >= 0) {
    const fsdpc_action *a = &worst.prog[worst.peak_slot].a[worst.peak_action];
    out->peak_action = fsdpc__act_name(a->op);
    out->peak_arg = a->arg;
  }
  out->arena = (int64_t)worst.arena_bytes;
  out->arena_shards = (int64_t)worst.persist_bytes;
  out->arena_activations = (int64_t)worst.act_bytes;
  out->arena_transients = (int64_t)worst.trans_bytes;
  out->late = cuda ? (int64_t)(dev->late_bytes + (x.S * x.R > 1 ? dev->late_comm_bytes : 0)) : 0;
  out->reserved = out->arena + (int64_t)dev->runtime_bytes + out->late;
  out->host_bytes = (int64_t)worst.host_pinned;
  comm_bytes(&worst, &x, &lay, &out->comm);
  fsdpc__memplan_free(&worst);
  /* Host memory: on the CPU device the arena is host memory; on a GPU the
   * engine's own host memory at start-up is what fills the shards
   * (fill_host_bytes); a resume (checkpoint.resume) reads the checkpoint
   * through host staging of at least the largest shard (train/setup.c). */
  const fsdpc_config *cf = p->cfg;
  int from_checkpoint = cf && cf->model.init.from && cf->model.init.from[0];
  int resuming = cf && cf->checkpoint.resume && strcmp(cf->checkpoint.resume, "none") != 0;
  if (!cuda) {
    out->host_pageable = out->arena;
  } else {
    out->host_pageable = fill_host_bytes(&lay, x.offload, from_checkpoint);
    if (resuming && !x.offload && out->host_pageable < (int64_t)lay.max_shard * 4)
      out->host_pageable = (int64_t)lay.max_shard * 4;
  }
  /* The fill's staging shard is freed before the runtime reaches its
   * steady size (fsdpc_plan_device): the larger of the two moments. */
  out->host_runtime = (int64_t)dev->host_runtime_bytes;
  int64_t at_fill = out->host_pageable + (int64_t)dev->host_fill_runtime_bytes;
  out->host_total = out->host_bytes + (at_fill > out->host_runtime ? at_fill : out->host_runtime);
  fsdpc__layout_free(&lay);
  return FSDPC_OK;
}

fsdpc_status fsdpc__plan_modes(const fsdpc_run_plan *p, const fsdpc_run_modes *m,
                               fsdpc_plan_mem *out, fsdpc_err *err) {
  fsdpc_plan_device dev;
  fsdpc__plan_device_default(m->device, &dev);
  return fsdpc__plan_memory(p, m, &dev, out, err);
}
