/* The public API of the memory planner (fsdpc plan): one row per sharding
 * strategy x activation checkpointing x offload (the last on CUDA only),
 * each costed by plan/ from the engine's own step programs. */
#include <stdlib.h>
#include <string.h>

#include "api/api_fill.h"
#include "config/config.h"
#include "plan/plan.h"

typedef struct memrow {
  int strategy, ckpt, offload; /* offload: 0 off, 1 full (cpu_offload), 2 optimizer state */
  int is_config;
  fsdpc_plan_mem m;
} memrow;

struct fsdpc_memplan {
  int32_t world, nproc, device, save_mlp;
  int64_t micro, seq_len;
  uint64_t numel;
  memrow *rows;
  int n_rows;
};

static const char *const offload_names[] = {"off", "full", "optim"};

static fsdpc_status fill_rows(fsdpc_memplan *mp, const fsdpc_config *cfg, fsdpc_plan_ctx *pc,
                              fsdpc_err *err) {
  int cuda = mp->device == FSDPC_DEVICE_CUDA, n_off = cuda ? 3 : 1;
  int own_off = cfg->fsdp.cpu_offload ? 1 : cfg->fsdp.offload.optimizer ? 2 : 0;
  if (!(mp->rows = calloc((size_t)(FSDPC_STRATEGY_COUNT * 2 * n_off), sizeof *mp->rows)))
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  for (int s = 0; s < FSDPC_STRATEGY_COUNT; s++)
    for (int ck = 0; ck < 2; ck++)
      for (int off = 0; off < n_off; off++) {
        memrow *r = &mp->rows[mp->n_rows];
        if (cfg->optim.in_backward && off != 0)
          continue; /* optim.in_backward refuses both offload modes (runplan.c) */
        /* on the CPU the offload keys stay the config's (one row) */
        fsdpc_plan_variant v = {s, ck, cuda ? off == 1 : -1, cuda ? off == 2 : -1};
        fsdpc_status st = fsdpc__plan_config(pc, &v, mp->world, mp->nproc, &r->m, err);
        int own = s == cfg->fsdp.sharding_strategy &&
                  ck == (int)cfg->fsdp.activation_checkpointing && (!cuda || off == own_off);
        /* a variant the engine refuses for this config (cpu_offload with an
         * nf4 base) is not a row; the config's own variant is an error */
        if (st == FSDPC_UNSUPPORTED && !own)
          continue;
        if (st != FSDPC_OK) {
          fsdpc__err_prefix(err, "%s", fsdpc__strategy_name((fsdpc_strategy)s));
          return st;
        }
        r->strategy = s;
        r->ckpt = ck;
        r->offload = off;
        r->is_config = own;
        mp->n_rows++;
      }
  return FSDPC_OK;
}

FSDPC_API fsdpc_status fsdpc_memplan_create(const fsdpc_config *cfg, int32_t world_size,
                                            int32_t nproc_per_node, fsdpc_memplan **out,
                                            fsdpc_err *err) {
  if (!cfg || !out)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "fsdpc_memplan_create: NULL config or out");
  int32_t nproc = nproc_per_node > 0 ? nproc_per_node : world_size;
  if (world_size < 1 || nproc < 1 || world_size % nproc != 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "plan: world %d is not a positive multiple of %d ranks per node",
                       (int)world_size, (int)nproc);
  fsdpc_memplan *mp = calloc(1, sizeof *mp);
  if (!mp)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  *mp = (fsdpc_memplan){.world = world_size,
                        .nproc = nproc,
                        .device = cfg->train.device,
                        .save_mlp = cfg->fsdp.activation_checkpointing_policy == FSDPC_AC_SAVE_MLP,
                        .micro = cfg->train.micro_batch_size,
                        .seq_len = cfg->data.seq_len};
  fsdpc_plan_ctx *pc = NULL;
  fsdpc_status st = fsdpc__plan_ctx_create(cfg, &pc, err);
  if (st == FSDPC_OK) {
    mp->numel = fsdpc__plan_numel(pc);
    st = fill_rows(mp, cfg, pc, err);
  }
  fsdpc__plan_ctx_destroy(pc);
  if (st != FSDPC_OK) {
    fsdpc_memplan_destroy(mp);
    return st;
  }
  *out = mp;
  return FSDPC_OK;
}

FSDPC_API void fsdpc_memplan_destroy(fsdpc_memplan *p) {
  if (!p)
    return;
  free(p->rows);
  free(p);
}

FSDPC_API void fsdpc_memplan_describe(const fsdpc_memplan *p, fsdpc_memplan_info *out) {
  if (!p || !FSDPC_API_SIZED(out))
    return;
  fsdpc_memplan_info full = {.world_size = p->world,
                             .nproc_per_node = p->nproc,
                             .device = p->device,
                             .n_rows = p->n_rows,
                             .micro_batch = p->micro,
                             .seq_len = p->seq_len,
                             .n_params = p->numel};
  FSDPC_API_FILL(out, full);
}

FSDPC_API fsdpc_status fsdpc_memplan_row_get(const fsdpc_memplan *p, int32_t i,
                                             fsdpc_memplan_row *out, fsdpc_err *err) {
  if (!p || i < 0 || i >= p->n_rows || !FSDPC_API_SIZED(out))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "fsdpc_memplan_row_get: no row %d, or out->struct_size unset", (int)i);
  const memrow *r = &p->rows[i];
  const fsdpc_plan_mem *m = &r->m;
  fsdpc_memplan_row full = {.strategy = r->strategy,
                            .strategy_name = fsdpc__strategy_name((fsdpc_strategy)r->strategy),
                            .checkpointing = !r->ckpt      ? "off"
                                             : p->save_mlp ? "save_mlp"
                                                           : "full",
                            .offload = offload_names[r->offload],
                            .is_config = r->is_config,
                            .shard_size = m->S,
                            .replica_size = m->R,
                            .params = (int64_t)m->params,
                            .grads = (int64_t)m->grads,
                            .optim = (int64_t)m->optim,
                            .activations = (int64_t)m->activations,
                            .total_peak = m->total_peak,
                            .reserved = m->reserved,
                            .host_pinned = m->host_bytes,
                            .host_pageable = m->host_pageable,
                            .host_runtime = m->host_runtime,
                            .host_total = m->host_total,
                            .arena = m->arena,
                            .arena_shards = m->arena_shards,
                            .arena_activations = m->arena_activations,
                            .arena_transients = m->arena_transients,
                            .late = m->late,
                            .peak_pass = m->peak_pass,
                            .peak_action = m->peak_action,
                            .peak_arg = m->peak_arg};
  for (int c = 0; c < FSDPC_MEM_CATEGORY_COUNT; c++) {
    full.peak[c] = m->peak[c];
    full.at_peak[c] = m->at_peak[c];
  }
  FSDPC_API_FILL(out, full);
  return FSDPC_OK;
}
