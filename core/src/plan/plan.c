/* The memory model: shard bytes from the unit layout, activations from the
 * model context's sizes, and the transient buffers of one training step
 * replayed allocation by allocation in the order core/src/fsdp/step.c makes
 * them. If step.c changes when it gathers, frees or reduces, change replay()
 * with it; tests/bench checks the two agree on a real run. */
#include "plan/plan.h"

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
    out->runtime_bytes = (uint64_t)768 << 20;
  } else {
    out->full_param_bytes = 4;
    out->full_grad_bytes = 4;
    out->act_scale = 1.0;
    out->xent_logit_bytes = 4;
    out->reserved_factor = 1.0;
    out->runtime_bytes = 0;
  }
}

int fsdpc__plan_shard_size(int strategy, int world, int nproc_per_node, int hybrid_shard_size) {
  if (world <= 1 || strategy == FSDPC_NO_SHARD)
    return 1;
  if (strategy == FSDPC_HYBRID_SHARD)
    return hybrid_shard_size > 0 ? hybrid_shard_size
                                 : (nproc_per_node > 0 ? nproc_per_node : world);
  return world;
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

typedef struct replay_state {
  const fsdpc_layout *lay;
  const fsdpc_plan_in *in;
  int offload, bf16;    /* cpu_offload / reduce_dtype bf16, both in effect on CUDA only */
  int full_grads;       /* full grad buffers apart from the shard (S > 1 or offload) */
  tracker t;
  unsigned char *full, *full_grad; /* (n_units) gathered / full grads live */
  fsdpc_comm_bytes comm;
} replay_state;

static int64_t full_bytes(const replay_state *r, int u) {
  return (int64_t)r->lay->units[u].flat_numel * r->in->dev.full_param_bytes;
}
static int64_t grad_bytes(const replay_state *r, int u) {
  return (int64_t)r->lay->units[u].flat_numel * r->in->dev.full_grad_bytes;
}

static void gather(replay_state *r, int u) {
  if (r->full[u])
    return;
  r->full[u] = 1;
  track(&r->t, FSDPC_MEM_COMM, full_bytes(r, u));
  r->comm.all_gather +=
      r->lay->units[u].shard_numel * (uint64_t)r->in->dev.full_param_bytes * (uint64_t)(r->lay->S - 1);
}

static void release(replay_state *r, int u) {
  if (!r->full[u])
    return;
  r->full[u] = 0;
  track(&r->t, FSDPC_MEM_COMM, -full_bytes(r, u));
}

static void gather_block(replay_state *r, int b, int with_grads) {
  const fsdpc_block *blk = &r->lay->blocks[b];
  for (int i = 0; i < blk->n_units; i++) {
    int u = blk->units[i];
    gather(r, u);
    if (with_grads && r->full_grads && !r->full_grad[u]) {
      r->full_grad[u] = 1;
      track(&r->t, FSDPC_MEM_GRADS, grad_bytes(r, u));
    }
  }
}

/* The reduction of unit u's full grads (step.c reduce_grads): fp32
 * reduce-scatter, or a bf16 copy made before the fp32 buffer goes (the two
 * overlap for a moment). Offloaded with S == 1 the full grads go to the host
 * as they are. */
static void reduce(replay_state *r, int u) {
  const fsdpc_unit *un = &r->lay->units[u];
  int S = r->lay->S;
  if (!r->full_grads)
    return;
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

/* One micro-batch of fsdpc__engine_micro_step (S > 1, or a device that
 * gathers into bf16 buffers). */
static void replay_micro(replay_state *r, int reshard, int last_micro) {
  const fsdpc_layout *lay = r->lay;
  int L = r->in->shape->L, head = L + 1;
  for (int b = 0; b <= L; b++) {
    gather_block(r, b, 0);
    if (!reshard)
      continue;
    for (int i = 0; i < lay->blocks[b].n_units; i++) {
      int u = lay->blocks[b].units[i];
      if (lay->units[u].last_block == b && lay->units[u].last_block != head)
        release(r, u);
    }
  }
  gather_block(r, head, 1);
  for (int b = head; b >= 0; b--) {
    if (b < head)
      gather_block(r, b, 1);
    for (int i = 0; i < lay->blocks[b].n_units; i++) {
      int u = lay->blocks[b].units[i];
      if (lay->units[u].first_block != b)
        continue;
      if (!(r->in->no_sync && !last_micro))
        reduce(r, u);
      release(r, u);
    }
  }
}

fsdpc_status fsdpc__plan_memory(const fsdpc_plan_in *in, fsdpc_plan_mem *out, fsdpc_err *err) {
  memset(out, 0, sizeof *out);
  int S = in->shard_size;
  if (S < 1 || in->world < 1 || in->world % S != 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "planner: the shard group size (%d) must divide the world size (%d)", S,
                       in->world);
  fsdpc_layout lay;
  FSDPC_TRY(fsdpc__layout_build(in->shape, in->params, in->n_params, in->unit_of_param, in->n_units,
                                S, in->align, 0, &lay, err));
  out->S = S;
  out->R = in->world / S;
  for (int u = 0; u < lay.n_units; u++) {
    uint64_t sb = lay.units[u].shard_numel * sizeof(float);
    out->params += sb;
    out->grads += sb;
    out->optim += sb * in->n_slots;
  }
  uint64_t act = fsdpc__model_ctx_bytes_for(in->shape, in->B, in->T, in->activation_checkpointing,
                                            &in->attn, 0);
  /* The context is sized with the CPU table (fp32); its cross-entropy
   * scratch does not scale with the activation dtype, so it is swapped for
   * the device's own. */
  uint64_t rows = (uint64_t)fsdpc__model_xent_chunk_rows(0, in->B * in->T, in->shape->V);
  uint64_t cpu_xent = rows * (uint64_t)in->shape->V * sizeof(float);
  uint64_t dev_xent = rows * (uint64_t)in->shape->V * (uint64_t)in->dev.xent_logit_bytes;
  out->activations = (uint64_t)((double)(act - cpu_xent) * in->dev.act_scale) + dev_xent;

  /* Resident from engine creation on: shards (on the host when offloaded),
   * the reduce-scatter landing buffer (S > 1) and the model context. */
  int cuda = in->dev.device == FSDPC_DEVICE_CUDA;
  replay_state r = {.lay = &lay, .in = in, .offload = in->cpu_offload && cuda,
                    .bf16 = in->reduce_dtype == FSDPC_DTYPE_BF16 && cuda};
  r.full_grads = S > 1 || r.offload;
  int accum = in->accum > 0 ? in->accum : 1;
  int64_t shards = (int64_t)(out->params + out->grads + out->optim);
  if (r.offload) {
    /* units.c: shards + the bf16 staging copy of each master shard; a grad
     * landing buffer per unit once a second micro-batch reduces in a step */
    out->host_bytes = shards + (int64_t)out->params / 2;
    if (accum > 1 && !in->no_sync)
      out->host_bytes += (int64_t)out->grads;
  } else {
    track(&r.t, FSDPC_MEM_PARAMS, (int64_t)out->params);
    track(&r.t, FSDPC_MEM_GRADS, (int64_t)out->grads);
    track(&r.t, FSDPC_MEM_OPTIM, (int64_t)out->optim);
    if (cuda) /* the device accumulator of the grad norm */
      track(&r.t, FSDPC_MEM_OTHER, (int64_t)sizeof(double));
  }
  if (S > 1)
    track(&r.t, FSDPC_MEM_COMM, (int64_t)lay.max_shard * 4);
  if (S > 1 && r.bf16)
    track(&r.t, FSDPC_MEM_COMM, (int64_t)lay.max_shard * 2);
  track(&r.t, FSDPC_MEM_ACTIVATIONS, (int64_t)out->activations);

  /* Gathered buffers are apart from the master shards unless S == 1 and
   * the compute dtype is the master's (the CPU). */
  if (S > 1 || in->dev.full_param_bytes != 4 || r.offload) {
    r.full = calloc((size_t)lay.n_units, 1);
    r.full_grad = calloc((size_t)lay.n_units, 1);
    if (!r.full || !r.full_grad) {
      free(r.full);
      free(r.full_grad);
      fsdpc__layout_free(&lay);
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    }
    int reshard = in->strategy == FSDPC_FULL_SHARD || in->strategy == FSDPC_HYBRID_SHARD;
    for (int m = 0; m < accum; m++)
      replay_micro(&r, reshard, m == accum - 1);
    free(r.full);
    free(r.full_grad);
  }
  /* fsdpc__engine_optim_step: replica all-reduce of every grad shard, one
   * unit at a time through transient buffers (offloaded: an fp32 device
   * copy of the host shard; bf16: a bf16 copy). */
  if (out->R > 1) {
    uint64_t es = r.bf16 ? 2 : 4;
    for (int u = 0; u < lay.n_units; u++)
      r.comm.all_reduce += lay.units[u].shard_numel * es * 2 * (uint64_t)(out->R - 1) / (uint64_t)out->R;
    int64_t tmp = (int64_t)lay.max_shard * ((r.offload ? 4 : 0) + (r.bf16 ? 2 : 0));
    track(&r.t, FSDPC_MEM_COMM, tmp);
    track(&r.t, FSDPC_MEM_COMM, -tmp);
  }
  for (int c = 0; c < FSDPC_MEM_NCAT; c++)
    out->peak[c] = r.t.peak[c];
  out->total_peak = r.t.total_peak;
  out->reserved =
      (int64_t)((double)out->total_peak * in->dev.reserved_factor) + (int64_t)in->dev.runtime_bytes;
  out->comm = r.comm;
  fsdpc__layout_free(&lay);
  return FSDPC_OK;
}

double fsdpc__plan_flops_per_token(const fsdpc_model_shape *s, int T) {
  double n = (double)fsdpc__model_numel(s), embed = (double)s->V * (double)s->C;
  return 6.0 * (n - embed) + 12.0 * (double)s->L * (double)s->C * (double)T;
}
