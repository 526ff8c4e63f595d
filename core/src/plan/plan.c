/* The memory model: shard bytes from the unit layout, activations from the
 * model context's sizes, and the transient buffers of one training step
 * costed action by action over the same programs the engine executes
 * (fsdp/program.h): what a gather, a gradient buffer, a reduction or a
 * release allocates or frees, in the order they run, prefetches included.
 * tests/bench checks the prediction against measured runs. */
#include "plan/plan.h"

#include "config/config.h"
#include "fsdp/program.h"
#include "fsdp/qstate.h"
#include "ops/ops.h"

#include <stdlib.h>
#include <string.h>

void fsdpc__plan_device_default(int32_t device, fsdpc_plan_device *out) {
  memset(out, 0, sizeof *out);
  out->device = device;
  if (device == FSDPC_DEVICE_CUDA) {
    /* bf16 compute copies and bf16 activations; fp32 reduce buffers. The
     * overheads are first estimates for the caching allocator and the CUDA
     * context + NCCL buffers, to be calibrated on the GPU bench. */
    out->full_param_bytes = 2;
    out->full_grad_bytes = 4;
    out->act_scale = 0.5;
    out->xent_logit_bytes = 6;
    out->reserved_factor = 1.10;
    /* Shard groups of one gather nothing: the pools hold what is allocated.
     * Measured reserved / tracked peak on one H200: 1.002-1.005 (1B,
     * 1B adamw8bit, 1B LoRA, 8B with each checkpointing policy;
     * bench/results/2026-11-24-final-speed2.md). With gathers the one
     * measurement, a 4 x H200 1B run of an older engine, read 1.095-1.25
     * (2026-11-21-llama3-1b-4xh200.md): 1.10 stays a first estimate. */
    out->reserved_factor_s1 = 1.01;
    out->runtime_bytes = (uint64_t)768 << 20;
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
  } else {
    out->full_param_bytes = 4;
    out->full_grad_bytes = 4;
    out->act_scale = 1.0;
    out->xent_logit_bytes = 4;
    out->reserved_factor = 1.0;
    out->reserved_factor_s1 = 1.0;
    out->runtime_bytes = 0;
  }
}

/* Current and peak bytes per category, as util/mem.c keeps them. */
typedef struct tracker {
  int64_t cur[FSDPC_MEM_NCAT], peak[FSDPC_MEM_NCAT];
  int64_t total, total_peak;
} tracker;

static void track(tracker *t, int cat, int64_t bytes) {
  t->cur[cat] += bytes;
  t->total += bytes;
  if (t->cur[cat] > t->peak[cat])
    t->peak[cat] = t->cur[cat];
  if (t->total > t->total_peak)
    t->total_peak = t->total;
}

typedef struct cost_state {
  const fsdpc_layout *lay;
  const fsdpc_plan_device *dev;
  int bf16; /* reduce_dtype bf16, in effect on CUDA only */
  int S, R, offload;
  tracker t;
  unsigned char *full_grad; /* (n_units) full grads live (they outlive a no_sync program) */
  fsdpc_comm_bytes comm;
} cost_state;

static int64_t full_bytes(const cost_state *r, int u) {
  return (int64_t)r->lay->units[u].flat_numel * r->dev->full_param_bytes;
}
static int64_t grad_bytes(const cost_state *r, int u) {
  return (int64_t)r->lay->units[u].flat_numel * r->dev->full_grad_bytes;
}

/* The reduction of unit u's full grads (step.c reduce_grads): fp32
 * reduce-scatter, or a bf16 copy made before the fp32 buffer goes (the two
 * overlap for a moment). Offloaded with S == 1 the full grads go to the host
 * as they are. */
static void cost_reduce(cost_state *r, int u) {
  const fsdpc_unit *un = &r->lay->units[u];
  int S = r->S;
  if (S > 1 && r->bf16) {
    track(&r->t, FSDPC_MEM_COMM, (int64_t)un->flat_numel * 2);
    track(&r->t, FSDPC_MEM_GRADS, -grad_bytes(r, u));
    track(&r->t, FSDPC_MEM_COMM, -(int64_t)un->flat_numel * 2);
  } else {
    track(&r->t, FSDPC_MEM_GRADS, -grad_bytes(r, u));
  }
  r->full_grad[u] = 0;
  if (S > 1)
    r->comm.reduce_scatter += un->shard_numel * (r->bf16 ? 2u : 4u) * (uint64_t)(S - 1);
}

/* fsdpc__engine_optim_step's replica all-reduce of unit u's grad shard,
 * through transient buffers (offloaded: an fp32 device copy of the host
 * shard; bf16: a bf16 copy). */
static void cost_replica_reduce(cost_state *r, int u) {
  uint64_t n = r->lay->units[u].shard_numel;
  r->comm.all_reduce += n * (r->bf16 ? 2u : 4u) * 2 * (uint64_t)(r->R - 1) / (uint64_t)r->R;
  int64_t tmp = (int64_t)n * ((r->offload ? 4 : 0) + (r->bf16 ? 2 : 0));
  track(&r->t, FSDPC_MEM_COMM, tmp);
  track(&r->t, FSDPC_MEM_COMM, -tmp);
}

/* Costs one program: what each action allocates and frees. */
static void cost(cost_state *r, const fsdpc_program *p) {
  for (int i = 0; i < p->n; i++) {
    int u = p->a[i].arg;
    switch ((fsdpc_act_op)p->a[i].op) {
    case FSDPC_ACT_GATHER:
      track(&r->t, FSDPC_MEM_COMM, full_bytes(r, u));
      r->comm.all_gather +=
          r->lay->units[u].shard_numel * (uint64_t)r->dev->full_param_bytes * (uint64_t)(r->S - 1);
      break;
    case FSDPC_ACT_RELEASE:
      track(&r->t, FSDPC_MEM_COMM, -full_bytes(r, u));
      break;
    case FSDPC_ACT_GRAD_ALLOC:
      if (!r->full_grad[u]) {
        r->full_grad[u] = 1;
        track(&r->t, FSDPC_MEM_GRADS, grad_bytes(r, u));
      }
      break;
    case FSDPC_ACT_REDUCE:
      cost_reduce(r, u);
      break;
    case FSDPC_ACT_REPLICA_REDUCE:
      cost_replica_reduce(r, u);
      break;
    default: /* compute, waits, fences: no memory of their own here */
      break;
    }
  }
}

/* Optimizer state bytes of the rank that holds the most: every rank's are
 * equal for fp32 slots; quantized state (qstate.h) depends on which
 * parameters and partial blocks fall in the rank's shards. */
static uint64_t optim_bytes(const fsdpc_run_plan *p, const fsdpc_layout *lay, int S) {
  uint64_t worst = 0;
  for (int r = 0; r < (p->qf.block ? S : 1); r++) {
    uint64_t total = 0;
    for (int u = 0; u < lay->n_units; u++) {
      fsdpc_unit un = lay->units[u];
      if (un.frozen) /* LoRA's base: no optimizer state */
        continue;
      uint64_t nf = 0, nq = 0, nb = 0;
      un.shard_offset = (uint64_t)r * un.shard_numel;
      if (p->qf.block)
        fsdpc__qstate_count(&un, p->params, lay->param_offset, &p->qf, &nf, &nq, &nb);
      total += fsdpc__qstate_bytes(p->n_slots, un.shard_numel, nf, nq, nb, p->qf.block > 0);
    }
    worst = total > worst ? total : worst;
  }
  return worst;
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

/* offload.optimizer with quantized state: the pieces as the engine cuts
 * them (fsdp/qstream.c), rank 0's in *ps (the program needs only their
 * number), and the largest piece's buffer bytes over the ranks. */
static fsdpc_status qpieces(const fsdpc_run_plan *p, const fsdpc_layout *lay, int S,
                            uint64_t buffer_bytes, fsdpc_state_pieces *ps, uint64_t *max_bytes,
                            fsdpc_err *err) {
  fsdpc_unit *units = malloc(((size_t)lay->n_units + 1) * sizeof *units);
  if (!units)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  memcpy(units, lay->units, (size_t)lay->n_units * sizeof *units);
  fsdpc_status st = FSDPC_OK;
  *max_bytes = 0;
  for (int r = S - 1; r >= 0 && st == FSDPC_OK; r--) {
    for (int u = 0; u < lay->n_units; u++)
      units[u].shard_offset = (uint64_t)r * units[u].shard_numel;
    uint64_t b = 0;
    fsdpc__state_pieces_free(ps);
    st = fsdpc__qstate_pieces_build(units, lay->n_units, p->params, lay->param_offset, &p->qf,
                                    p->n_slots, buffer_bytes, ps, &b, err);
    *max_bytes = b > *max_bytes ? b : *max_bytes;
  }
  free(units);
  return st;
}

fsdpc_status fsdpc__plan_memory(const fsdpc_run_plan *p, const fsdpc_run_modes *m,
                                const fsdpc_plan_device *dev, fsdpc_plan_mem *out, fsdpc_err *err) {
  memset(out, 0, sizeof *out);
  int S = m->S;
  int B = (int)m->batch.micro, T = (int)m->batch.seq_len;
  const fsdpc_model_shape *shape = &p->shape;
  fsdpc_run_exec x; /* the modes as the engine runs them */
  fsdpc__run_exec_resolve(p, m, 0, &x);
  fsdpc_layout lay;
  FSDPC_TRY(fsdpc__layout_build(shape, p->params, p->n_params, p->unit_of_param, p->n_units, S,
                                x.align, 0, &lay, err));
  out->S = S;
  out->R = m->R;
  uint64_t frozen = 0; /* LoRA's base: compute dtype, no grads, no optimizer state */
  for (int u = 0; u < lay.n_units; u++) {
    uint64_t sb = lay.units[u].shard_numel * sizeof(float);
    if (lay.units[u].frozen) {
      frozen += lay.units[u].shard_numel * (uint64_t)dev->full_param_bytes;
      continue;
    }
    out->params += sb;
    out->grads += sb;
  }
  uint64_t trainable = out->params;
  out->params += frozen;
  out->optim = optim_bytes(p, &lay, S);
  uint64_t act =
      fsdpc__model_ctx_bytes_for(shape, B, T, m->activation_checkpointing, &p->attn_sizes, 0);
  /* The context is sized with the CPU table (fp32); its cross-entropy
   * scratch does not scale with the activation dtype, so it is swapped for
   * the device's own. */
  uint64_t rows = (uint64_t)fsdpc__model_xent_chunk_rows(0, B * T, shape->V);
  uint64_t cpu_xent = rows * (uint64_t)shape->V * sizeof(float);
  /* bf16 logits on CUDA: the gradient overwrites them, 2 bytes a logit */
  uint64_t logit_bytes = m->logits_dtype == FSDPC_DTYPE_BF16 && dev->device == FSDPC_DEVICE_CUDA
                             ? 2
                             : (uint64_t)dev->xent_logit_bytes;
  uint64_t dev_xent = rows * (uint64_t)shape->V * logit_bytes;
  if (p->has_lora) /* the adapters' saved inputs and scratch (model/lora.c) */
    act += fsdpc__lora_ctx_bytes(shape, &p->lora, B * T, m->activation_checkpointing, 4);
  out->activations = (uint64_t)((double)(act - cpu_xent) * dev->act_scale) + dev_xent;

  /* Resident from engine creation on: shards (on the host when offloaded),
   * the reduce-scatter landing buffer (S > 1) and the model context. */
  int cuda = dev->device == FSDPC_DEVICE_CUDA;
  cost_state r = {
      .lay = &lay, .dev = dev, .S = S, .R = m->R, .offload = x.offload, .bf16 = x.reduce_bf16};
  int accum = x.accum;
  int64_t shards = (int64_t)(out->params + out->grads + out->optim);
  /* offload.optimizer (fsdp/offload.c): the state shards in host memory
   * (pinned on a GPU), two device buffers of the largest unit's state */
  int offload_optim = x.offload_optim;
  uint64_t piece = fsdpc__state_piece_elems(x.offload_buffer_bytes, x.n_slots);
  int64_t max_state =
      (int64_t)(lay.max_shard < piece ? lay.max_shard : piece) * 4 * (int64_t)p->n_slots;
  fsdpc_state_pieces qps = {0};
  if (offload_optim && p->qf.block) {
    uint64_t qb = 0;
    fsdpc_status qst = qpieces(p, &lay, S, x.offload_buffer_bytes, &qps, &qb, err);
    if (qst != FSDPC_OK) {
      fsdpc__layout_free(&lay);
      return qst;
    }
    max_state = (int64_t)qb;
  }
  if (r.offload) {
    /* units.c: shards + the bf16 staging copy of each master shard; a grad
     * landing buffer per unit once a second micro-batch reduces in a step */
    out->host_bytes = shards + (int64_t)trainable / 2; /* frozen shards need no staging */
    if (accum > 1 && !m->no_sync)
      out->host_bytes += (int64_t)out->grads;
  } else {
    track(&r.t, FSDPC_MEM_PARAMS, (int64_t)out->params);
    track(&r.t, FSDPC_MEM_GRADS, (int64_t)out->grads);
    if (!offload_optim || !cuda)
      track(&r.t, FSDPC_MEM_OPTIM, (int64_t)out->optim);
    else
      out->host_bytes = (int64_t)out->optim;
    if (offload_optim)
      track(&r.t, FSDPC_MEM_OPTIM, 2 * max_state);
    if (x.param_copy) { /* units.c: the bf16 copies of master shards, in unit order */
      uint64_t lp = 0;
      for (int u = 0; u < lay.n_units; u++)
        if (!lay.units[u].frozen && /* a frozen shard already is bf16 */
            fsdpc__param_copy_fits(x.param_copy_max_bytes, lp, lay.units[u].shard_numel))
          lp += lay.units[u].shard_numel * 2;
      track(&r.t, FSDPC_MEM_PARAMS, (int64_t)lp);
    }
    if (x.dev_norm) /* the device accumulator of the grad norm */
      track(&r.t, FSDPC_MEM_OTHER, (int64_t)sizeof(double));
  }
  if (S > 1)
    track(&r.t, FSDPC_MEM_COMM, (int64_t)lay.max_grad_shard * 4);
  if (S > 1 && r.bf16)
    track(&r.t, FSDPC_MEM_COMM, (int64_t)lay.max_grad_shard * 2);
  track(&r.t, FSDPC_MEM_ACTIVATIONS, (int64_t)out->activations);

  /* The step's programs, as the engine builds them on this device: device
   * collectives (CUDA) overlap on a comm stream when units are sharded, and
   * cpu_offload's host copies do at any S (fsdp/units.c). */
  fsdpc_program_opts po;
  fsdpc__program_opts_exec(&lay, &x, p->qf.block ? &qps : NULL, &po);
  fsdpc_program prog[FSDPC_PROGRAM_NKINDS] = {0};
  fsdpc_status st = FSDPC_OK;
  r.full_grad = calloc((size_t)lay.n_units + 1, 1);
  if (!r.full_grad)
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  for (int k = 0; k < FSDPC_PROGRAM_NKINDS && st == FSDPC_OK; k++)
    st = fsdpc__program_build(&po, (fsdpc_program_kind)k, &prog[k], err);
  if (st == FSDPC_OK) {
    for (int mi = 0; mi < accum; mi++)
      cost(&r, &prog[fsdpc__micro_kind(mi, accum)]);
    cost(&r, &prog[FSDPC_PROGRAM_OPTIM]);
  }
  for (int k = 0; k < FSDPC_PROGRAM_NKINDS; k++)
    fsdpc__program_free(&prog[k]);
  fsdpc__state_pieces_free(&qps);
  free(r.full_grad);
  if (st != FSDPC_OK) {
    fsdpc__layout_free(&lay);
    return st;
  }
  for (int c = 0; c < FSDPC_MEM_NCAT; c++)
    out->peak[c] = r.t.peak[c];
  out->total_peak = r.t.total_peak;
  double factor = out->S == 1 ? dev->reserved_factor_s1 : dev->reserved_factor;
  out->reserved = (int64_t)((double)out->total_peak * factor) + (int64_t)dev->runtime_bytes;
  out->comm = r.comm;
  /* Host memory: on the CPU device the tracked peak is host memory; on a
   * GPU the engine's own host memory at start-up is what fills the shards
   * (fill_host_bytes); a resume (checkpoint.resume) reads the checkpoint
   * through host staging of at least the largest shard (train/setup.c). */
  const fsdpc_config *cf = p->cfg;
  int from_checkpoint = cf && cf->model.init.from && cf->model.init.from[0];
  int resuming = cf && cf->checkpoint.resume && strcmp(cf->checkpoint.resume, "none") != 0;
  if (!cuda) {
    out->host_pageable = out->total_peak;
  } else {
    out->host_pageable = fill_host_bytes(&lay, r.offload, from_checkpoint);
    if (resuming && !r.offload && out->host_pageable < (int64_t)lay.max_shard * 4)
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
