/* Unit layout (flat buffers, padding, shard ranges), shard memory, and
 * filling the master shards: seeded random init or an HF checkpoint read
 * range by range, so no rank ever holds more than its own shards. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp/internal.h"
#include "io/hf_ckpt.h"
#include "util/log.h"
#include "util/mem.h"

const char *fsdpc__strategy_name(fsdpc_strategy s) {
  static const char *names[] = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD"};
  return (unsigned)s < 4 ? names[s] : "?";
}

int fsdpc__strategy_parse(const char *name) {
  for (int i = 0; i < 4; i++)
    if (strcmp(name, fsdpc__strategy_name((fsdpc_strategy)i)) == 0) return i;
  return -1;
}

static void unit_name(fsdpc_engine *e, fsdpc_unit *u) {
  /* Name a unit after what it holds: "layers.3", "layers.2-5", "embed", ... */
  int lo = 1 << 30, hi = -1, other = 0;
  const char *type = NULL;
  for (int i = 0; i < u->n_params; i++) {
    const fsdpc_param_info *p = &e->params[u->params[i]];
    if (p->layer >= 0) {
      if (p->layer < lo) lo = p->layer;
      if (p->layer > hi) hi = p->layer;
    } else {
      other = 1;
      type = p->module_type;
    }
  }
  if (hi >= 0 && !other && lo == hi)
    snprintf(u->name, sizeof u->name, "layers.%d", lo);
  else if (hi >= 0 && !other)
    snprintf(u->name, sizeof u->name, "layers.%d-%d", lo, hi);
  else if (hi < 0 && u->n_params == 1)
    snprintf(u->name, sizeof u->name, "%s", strcmp(type, "embedding") == 0 ? "embed" : type);
  else if (hi < 0)
    snprintf(u->name, sizeof u->name, "root");
  else
    snprintf(u->name, sizeof u->name, "root+layers.%d-%d", lo, hi);
}

static fsdpc_status build_layout(fsdpc_engine *e, const fsdpc_engine_opts *o, fsdpc_err *err) {
  int L = e->shape.L;
  e->n_units = (int)o->n_units;
  if (e->n_units < 1)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "the wrap policy produced no units");
  e->units = calloc((size_t)e->n_units, sizeof *e->units);
  e->param_unit = calloc((size_t)e->n_params, sizeof(int));
  e->param_offset = calloc((size_t)e->n_params, sizeof(uint64_t));
  e->layer_param = malloc((size_t)L * FSDPC_P_NKIND * sizeof(int));
  e->n_blocks = L + 2;
  e->blocks = calloc((size_t)e->n_blocks, sizeof *e->blocks);
  if (!e->units || !e->param_unit || !e->param_offset || !e->layer_param || !e->blocks)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory for the unit layout");
  for (int k = 0; k < FSDPC_P_NKIND; k++) e->param_of_kind[k] = -1;
  for (int i = 0; i < L * FSDPC_P_NKIND; i++) e->layer_param[i] = -1;

  /* Every parameter of a module must land in one unit (a block computes
   * with its module's weights together). */
  for (int p = 0; p < e->n_params; p++) {
    uint32_t u = o->unit_of_param[p];
    if (u >= o->n_units)
      return fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                         "wrap plan puts '%s' in unit %u of %u", e->params[p].name, u,
                         o->n_units);
    for (int q = 0; q < p; q++)
      if (strcmp(e->params[q].module, e->params[p].module) == 0 && o->unit_of_param[q] != u)
        return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                           "wrap policy splits module '%s' across units %u and %u; a module's "
                           "parameters must share a unit",
                           e->params[p].module, o->unit_of_param[q], u);
    e->param_unit[p] = (int)u;
    e->units[u].n_params++;
  }
  for (int u = 0; u < e->n_units; u++) {
    e->units[u].params = calloc((size_t)e->units[u].n_params + 1, sizeof(int));
    if (!e->units[u].params) return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    e->units[u].n_params = 0;
    e->units[u].first_block = 1 << 30;
    e->units[u].last_block = -1;
  }
  uint64_t quantum = (uint64_t)e->S * (uint64_t)(o->align > 0 ? o->align : 1);
  for (int p = 0; p < e->n_params; p++) {
    fsdpc_unit *u = &e->units[e->param_unit[p]];
    const fsdpc_param_info *pi = &e->params[p];
    u->params[u->n_params++] = p;
    e->param_offset[p] = u->numel;
    u->numel += pi->numel;
    if (pi->layer >= 0)
      e->layer_param[pi->layer * FSDPC_P_NKIND + pi->kind] = p;
    else
      e->param_of_kind[pi->kind] = p;
  }
  for (int u = 0; u < e->n_units; u++) {
    fsdpc_unit *un = &e->units[u];
    if (un->n_params == 0)
      return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "wrap plan left unit %d empty", u);
    un->flat_numel = (un->numel + quantum - 1) / quantum * quantum;
    un->shard_numel = un->flat_numel / (uint64_t)e->S;
    un->shard_offset = (uint64_t)e->dist->shard_rank * un->shard_numel;
    unit_name(e, un);
    if (un->shard_numel > e->max_shard) e->max_shard = un->shard_numel;
    if (un->flat_numel > e->max_flat) e->max_flat = un->flat_numel;
  }

  /* Blocks and the units they need; the head also needs the embedding's
   * unit when the embedding is tied. */
  for (int p = 0; p < e->n_params; p++) {
    int b = e->params[p].block, u = e->param_unit[p];
    fsdpc_block *blk = &e->blocks[b];
    int seen = 0;
    for (int i = 0; i < blk->n_units; i++) seen |= blk->units[i] == u;
    if (!seen) blk->units[blk->n_units++] = u;
  }
  if (e->shape.tied) {
    fsdpc_block *head = &e->blocks[L + 1];
    int u = e->param_unit[e->param_of_kind[FSDPC_P_EMBED]], seen = 0;
    for (int i = 0; i < head->n_units; i++) seen |= head->units[i] == u;
    if (!seen) head->units[head->n_units++] = u;
  }
  for (int b = 0; b < e->n_blocks; b++)
    for (int i = 0; i < e->blocks[b].n_units; i++) {
      fsdpc_unit *un = &e->units[e->blocks[b].units[i]];
      if (b < un->first_block) un->first_block = b;
      if (b > un->last_block) un->last_block = b;
    }
  return FSDPC_OK;
}

fsdpc_status fsdpc__engine_create(const fsdpc_engine_opts *o, fsdpc_engine **out,
                                  fsdpc_err *err) {
  fsdpc_engine *e = calloc(1, sizeof *e);
  if (!e) return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory for the FSDP engine");
  fsdpc_status st;
  e->shape = *o->shape;
  e->strategy = o->strategy;
  e->reshard_after_forward =
      o->strategy == FSDPC_FULL_SHARD || o->strategy == FSDPC_HYBRID_SHARD;
  e->no_sync = o->no_sync;
  e->threads = o->threads;
  e->dist = o->dist;
  e->S = o->dist->shard_size;
  e->decay_norm_and_bias = o->decay_norm_and_bias;
  e->n_params = o->n_params;
  e->params = malloc((size_t)o->n_params * sizeof *e->params);
  if (!e->params) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    goto fail;
  }
  memcpy(e->params, o->params, (size_t)o->n_params * sizeof *e->params);
  if ((st = build_layout(e, o, err)) != FSDPC_OK) goto fail;

  e->optim = o->optim;
  e->ov = o->optim->vtable;
  int32_t r = e->ov->create(o->optim_init, &e->opt);
  if (r != FSDPC_OK) {
    st = fsdpc__plugin_fail(o->optim, r, err);
    goto fail;
  }
  e->n_slots = e->ov->n_slots(e->opt);
  e->otensors = calloc((size_t)e->n_params + 1, sizeof *e->otensors);
  if (!e->otensors) goto oom;

  for (int u = 0; u < e->n_units; u++) {
    fsdpc_unit *un = &e->units[u];
    size_t sb = un->shard_numel * sizeof(float);
    un->master = fsdpc__mem_alloc(FSDPC_MEM_PARAMS, sb);
    un->grad = fsdpc__mem_alloc(FSDPC_MEM_GRADS, sb);
    un->state = e->n_slots ? fsdpc__mem_alloc(FSDPC_MEM_OPTIM, sb * e->n_slots) : NULL;
    if (!un->master || !un->grad || (e->n_slots && !un->state)) goto oom;
    if (e->n_slots) {
      r = e->ov->init_state(e->opt, un->state, un->shard_numel * e->n_slots, FSDPC_DEVICE_CPU,
                            NULL);
      if (r != FSDPC_OK) {
        st = fsdpc__plugin_fail(o->optim, r, err);
        goto fail;
      }
    }
    if (e->S == 1) { /* nothing to gather: the shard is the full buffer */
      un->full = un->master;
      un->full_grad = un->grad;
    }
  }
  if (e->S > 1 && !(e->rs_scratch = fsdpc__mem_alloc(FSDPC_MEM_COMM, e->max_shard * 4)))
    goto oom;
  *out = e;
  return FSDPC_OK;
oom:
  st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                   "out of host memory for parameter, gradient and optimizer shards; use "
                   "more ranks or a sharded strategy");
fail:
  fsdpc__engine_destroy(e);
  return st;
}

void fsdpc__engine_destroy(fsdpc_engine *e) {
  if (!e) return;
  for (int u = 0; e->units && u < e->n_units; u++) {
    fsdpc_unit *un = &e->units[u];
    size_t sb = un->shard_numel * sizeof(float), fb = un->flat_numel * sizeof(float);
    if (e->S > 1) {
      fsdpc__mem_free(FSDPC_MEM_COMM, un->full, fb);
      fsdpc__mem_free(FSDPC_MEM_GRADS, un->full_grad, fb);
    }
    fsdpc__mem_free(FSDPC_MEM_PARAMS, un->master, sb);
    fsdpc__mem_free(FSDPC_MEM_GRADS, un->grad, sb);
    fsdpc__mem_free(FSDPC_MEM_OPTIM, un->state, sb * e->n_slots);
    free(un->params);
  }
  if (e->opt) e->ov->destroy(e->opt);
  fsdpc__mem_free(FSDPC_MEM_COMM, e->rs_scratch, e->max_shard * 4);
  free(e->otensors);
  free(e->units);
  free(e->blocks);
  free(e->param_unit);
  free(e->param_offset);
  free(e->layer_param);
  free(e->params);
  free(e);
}

int fsdpc__engine_n_units(const fsdpc_engine *e) { return e->n_units; }
const fsdpc_unit *fsdpc__engine_unit(const fsdpc_engine *e, int u) { return &e->units[u]; }
int fsdpc__engine_n_params(const fsdpc_engine *e) { return e->n_params; }
fsdpc_dist *fsdpc__engine_dist(fsdpc_engine *e) { return e->dist; }
uint32_t fsdpc__engine_n_slots(const fsdpc_engine *e) { return e->n_slots; }
const char *fsdpc__engine_slot_name(const fsdpc_engine *e, uint32_t i) {
  return e->ov->slot_name(e->opt, i);
}

const fsdpc_param_info *fsdpc__engine_param(const fsdpc_engine *e, int p, uint64_t *unit_offset,
                                            int *unit) {
  if (unit_offset) *unit_offset = e->param_offset[p];
  if (unit) *unit = e->param_unit[p];
  return &e->params[p];
}

void fsdpc__engine_bytes(const fsdpc_engine *e, fsdpc_engine_bytes *out) {
  memset(out, 0, sizeof *out);
  for (int u = 0; u < e->n_units; u++) {
    uint64_t sb = e->units[u].shard_numel * sizeof(float);
    out->params += sb;
    out->grads += sb;
    out->optim += sb * e->n_slots;
    if (e->units[u].flat_numel * 4 > out->max_unit_full)
      out->max_unit_full = e->units[u].flat_numel * 4;
  }
}

void fsdpc__engine_comm_bytes(const fsdpc_engine *e, fsdpc_comm_bytes *out) {
  out->all_gather = e->dist->bytes_all_gather;
  out->reduce_scatter = e->dist->bytes_reduce_scatter;
  out->all_reduce = e->dist->bytes_all_reduce;
}

/* Calls fn(p, lo, hi, dst) for each parameter segment [lo, hi) (elements of
 * the parameter) that falls inside this rank's shard of unit u; dst is where
 * element lo lives in the master shard. */
typedef fsdpc_status (*segment_fn)(fsdpc_engine *e, int p, uint64_t lo, uint64_t hi, float *dst,
                                   void *arg, fsdpc_err *err);

static fsdpc_status for_each_segment(fsdpc_engine *e, int u, segment_fn fn, void *arg,
                                     fsdpc_err *err) {
  fsdpc_unit *un = &e->units[u];
  uint64_t s0 = un->shard_offset, s1 = un->shard_offset + un->shard_numel;
  for (int i = 0; i < un->n_params; i++) {
    int p = un->params[i];
    uint64_t p0 = e->param_offset[p], p1 = p0 + e->params[p].numel;
    uint64_t a = p0 > s0 ? p0 : s0, b = p1 < s1 ? p1 : s1;
    if (a >= b) continue;
    FSDPC_TRY(fn(e, p, a - p0, b - p0, un->master + (a - s0), arg, err));
  }
  return FSDPC_OK;
}

typedef struct init_arg {
  uint64_t seed;
  double std;
} init_arg;

static fsdpc_status init_segment(fsdpc_engine *e, int p, uint64_t lo, uint64_t hi, float *dst,
                                 void *arg, fsdpc_err *err) {
  init_arg *a = arg;
  fsdpc__model_init_range(&e->params[p], a->seed, a->std, lo, hi - lo, dst);
  return FSDPC_OK;
}

fsdpc_status fsdpc__engine_init_random(fsdpc_engine *e, uint64_t seed, double std,
                                       fsdpc_err *err) {
  init_arg a = {seed, std};
  for (int u = 0; u < e->n_units; u++) FSDPC_TRY(for_each_segment(e, u, init_segment, &a, err));
  return FSDPC_OK;
}

static fsdpc_status load_segment(fsdpc_engine *e, int p, uint64_t lo, uint64_t hi, float *dst,
                                 void *arg, fsdpc_err *err) {
  return fsdpc__hf_ckpt_read_f32((fsdpc_hf_ckpt *)arg, e->params[p].name, lo, hi - lo, dst, err);
}

fsdpc_status fsdpc__engine_load_hf(fsdpc_engine *e, const char *dir, fsdpc_err *err) {
  fsdpc_hf_ckpt *ck = NULL;
  FSDPC_TRY(fsdpc__hf_ckpt_open(dir, &ck, err));
  fsdpc_status st = FSDPC_OK;
  for (int p = 0; p < e->n_params && st == FSDPC_OK; p++)
    st = fsdpc__hf_ckpt_expect(ck, e->params[p].name, e->params[p].ndim, e->params[p].shape,
                               err);
  for (int u = 0; u < e->n_units && st == FSDPC_OK; u++)
    st = for_each_segment(e, u, load_segment, ck, err);
  fsdpc__hf_ckpt_close(ck);
  return st;
}
