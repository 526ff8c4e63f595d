/* Unit layout: which parameters form each FSDP unit, where each sits in its
 * unit's flat buffer, the padded flat and shard sizes, and which compute
 * blocks use which units. A pure function of (model, wrap plan, shard group
 * size, alignment): the engine, the checkpoint code (resharding, offline
 * conversion) and the memory planner all compute it the same way. */
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp/internal.h"
#include "plugin/call.h"

static fsdpc_status build(fsdpc_layout *e, const fsdpc_model_shape *shape,
                          const fsdpc_param_info *params, const uint32_t *unit_of_param,
                          uint32_t n_units, int align, int shard_rank, fsdpc_err *err);

void fsdpc__layout_free(fsdpc_layout *l) {
  if (!l) return;
  for (int u = 0; l->units && u < l->n_units; u++) free(l->units[u].params);
  free(l->units);
  free(l->param_unit);
  free(l->param_offset);
  free(l->layer_param);
  free(l->blocks);
  memset(l, 0, sizeof *l);
}

static void unit_name(const fsdpc_param_info *params, fsdpc_unit *u) {
  /* Name a unit after what it holds: "layers.3", "layers.2-5", "embed", ... */
  int lo = 1 << 30, hi = -1, other = 0;
  const char *type = NULL;
  for (int i = 0; i < u->n_params; i++) {
    const fsdpc_param_info *p = &params[u->params[i]];
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
  else if (lo == hi)
    snprintf(u->name, sizeof u->name, "root+layers.%d", lo);
  else
    snprintf(u->name, sizeof u->name, "root+layers.%d-%d", lo, hi);
}

fsdpc_status fsdpc__layout_build(const fsdpc_model_shape *shape, const fsdpc_param_info *params,
                                 int n_params, const uint32_t *unit_of_param, uint32_t n_units,
                                 int shard_size, int align, int shard_rank, fsdpc_layout *e,
                                 fsdpc_err *err) {
  memset(e, 0, sizeof *e);
  e->S = shard_size;
  e->n_params = n_params;
  fsdpc_status st = build(e, shape, params, unit_of_param, n_units, align, shard_rank, err);
  if (st != FSDPC_OK) fsdpc__layout_free(e);
  return st;
}

/* Every parameter of a module in one unit, checked in linear time (a model
 * of 20,000 layers has 180,000 parameters) through a hash table of module
 * names: the first parameter of each module is kept, later ones compared. */
static fsdpc_status check_modules_whole(const fsdpc_param_info *params, int n,
                                        const uint32_t *unit_of_param, fsdpc_err *err) {
  size_t cap = 16;
  while (cap < 2 * (size_t)n + 2) cap *= 2;
  int *slot = malloc(cap * sizeof *slot);
  if (!slot) return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory for the unit layout");
  for (size_t i = 0; i < cap; i++) slot[i] = -1;
  fsdpc_status st = FSDPC_OK;
  for (int p = 0; p < n && st == FSDPC_OK; p++) {
    uint32_t h = 2166136261u;
    for (const char *c = params[p].module; *c; c++) h = (h ^ (uint8_t)*c) * 16777619u;
    size_t i = h & (cap - 1);
    while (slot[i] >= 0 && strcmp(params[slot[i]].module, params[p].module) != 0)
      i = (i + 1) & (cap - 1);
    if (slot[i] < 0) {
      slot[i] = p;
    } else if (unit_of_param[slot[i]] != unit_of_param[p]) {
      st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "wrap policy splits module '%s' across units %u and %u; a module's "
                       "parameters must share a unit",
                       params[p].module, unit_of_param[slot[i]], unit_of_param[p]);
    }
  }
  free(slot);
  return st;
}

static fsdpc_status build(fsdpc_layout *e, const fsdpc_model_shape *shape,
                          const fsdpc_param_info *params, const uint32_t *unit_of_param,
                          uint32_t n_units, int align, int shard_rank, fsdpc_err *err) {
  int L = shape->L;
  e->n_units = (int)n_units;
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
    uint32_t u = unit_of_param[p];
    if (u >= n_units)
      return fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                         "wrap plan puts '%s' in unit %u of %u", params[p].name, u,
                         n_units);
    e->param_unit[p] = (int)u;
    e->units[u].n_params++;
  }
  FSDPC_TRY(check_modules_whole(params, e->n_params, unit_of_param, err));
  for (int u = 0; u < e->n_units; u++) {
    e->units[u].params = calloc((size_t)e->units[u].n_params + 1, sizeof(int));
    if (!e->units[u].params) return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    e->units[u].n_params = 0;
    e->units[u].first_block = 1 << 30;
    e->units[u].last_block = -1;
  }
  uint64_t quantum = (uint64_t)e->S * (uint64_t)(align > 0 ? align : 1);
  for (int p = 0; p < e->n_params; p++) {
    fsdpc_unit *u = &e->units[e->param_unit[p]];
    const fsdpc_param_info *pi = &params[p];
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
    un->shard_offset = (uint64_t)shard_rank * un->shard_numel;
    unit_name(params, un);
    /* A unit is frozen or trainable as a whole: frozen shards have no
     * gradient and live in the compute dtype. */
    int nfrozen = 0;
    for (int i = 0; i < un->n_params; i++)
      nfrozen += params[un->params[i]].frozen != 0;
    if (nfrozen != 0 && nfrozen != un->n_params)
      return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "unit %s mixes frozen and trainable parameters",
                         un->name);
    un->frozen = nfrozen != 0;
    if (!un->frozen && un->shard_numel > e->max_grad_shard) e->max_grad_shard = un->shard_numel;
    if (!un->frozen && strcmp(params[un->params[0]].module_type, "lora") == 0) {
      size_t len = strlen(un->name), room = sizeof un->name - 6;
      memmove(un->name + 5, un->name, (len < room ? len : room) + 1);
      un->name[sizeof un->name - 1] = '\0';
      memcpy(un->name, "lora.", 5);
    }
    if (un->shard_numel > e->max_shard) e->max_shard = un->shard_numel;
    if (un->flat_numel > e->max_flat) e->max_flat = un->flat_numel;
  }

  /* Blocks and the units they need; the head also needs the embedding's
   * unit when the embedding is tied. */
  for (int p = 0; p < e->n_params; p++) {
    int b = params[p].block, u = e->param_unit[p];
    fsdpc_block *blk = &e->blocks[b];
    int seen = 0;
    for (int i = 0; i < blk->n_units; i++) seen |= blk->units[i] == u;
    if (!seen) blk->units[blk->n_units++] = u;
  }
  if (shape->tied) {
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
