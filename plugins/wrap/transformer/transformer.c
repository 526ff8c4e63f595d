/* wrap/transformer: one FSDP unit per decoder layer; everything outside the
 * decoder layers (embedding, final norm, lm_head) goes to one root unit.
 *
 * Options (torchtune's memory-efficient wrapping, for large vocabularies):
 *   separate_embedding  the token embedding gets its own unit
 *   separate_lm_head    the output projection gets its own unit
 * Tied parameters (same tie_group) always share one unit: a tied embedding
 * and lm_head stay together in the unit of whichever comes first, even when
 * both are "separated". Units are numbered by first appearance. */
#include <stdlib.h>
#include <string.h>

#include "../../common/host_call.h"
#include "../common/wrap_separate.h"
#include "fsdpc/plugin.h"

/* Which unit a parameter belongs to, before tie groups are applied. */
enum { CLASS_ROOT = 0, CLASS_EMBEDDING = 1, CLASS_LM_HEAD = 2, CLASS_LAYER = 3 };

typedef struct wrap_opts {
  int32_t separate_embedding, separate_lm_head;
} wrap_opts;

static int param_class(const fsdpc_wrap_param *p, const wrap_opts *o) {
  if (fsdpc_wrap_eq(p->module_type, "decoder_layer"))
    return CLASS_LAYER;
  if (o->separate_embedding && fsdpc_wrap_eq(p->module_type, "embedding"))
    return CLASS_EMBEDDING;
  if (o->separate_lm_head && fsdpc_wrap_eq(p->module_type, "lm_head"))
    return CLASS_LM_HEAD;
  return CLASS_ROOT;
}

/* Two parameters of decoder layers share a unit when they share a layer:
 * by module name, or by layer index when the module is not named. */
static int same_layer(const fsdpc_wrap_param *a, const fsdpc_wrap_param *b) {
  if (a->module && b->module)
    return strcmp(a->module, b->module) == 0;
  return a->layer == b->layer;
}

/* Leaders of decoder layers, keyed as same_layer() compares them: by
 * module name, or by layer index for parameters without one. Open
 * addressing; the table has at least twice as many slots as parameters. */
typedef struct layer_map {
  uint32_t *slot; /* parameter index of a leader, or UINT32_MAX */
  uint32_t mask;
} layer_map;

typedef struct tie_slot {
  int32_t group;
  uint32_t first; /* first parameter of the tie group */
} tie_slot;

static int tie_known(const tie_slot *t, uint32_t n, int32_t group) {
  for (uint32_t i = 0; i < n; i++)
    if (t[i].group == group)
      return 1;
  return 0;
}

static uint32_t layer_hash(const fsdpc_wrap_param *p) {
  uint32_t h = 2166136261u;
  if (p->module) {
    for (const char *c = p->module; *c; c++)
      h = (h ^ (uint8_t)*c) * 16777619u;
    return h;
  }
  return (uint32_t)p->layer * 2654435761u ^ 0x9e3779b9u;
}

static int layer_map_init(layer_map *m, uint32_t n) {
  uint32_t cap = 16;
  while (cap < 2 * (uint64_t)n + 2)
    cap *= 2;
  m->slot = malloc((size_t)cap * sizeof *m->slot);
  if (!m->slot)
    return -1;
  memset(m->slot, 0xff, (size_t)cap * sizeof *m->slot);
  m->mask = cap - 1;
  return 0;
}

static void layer_map_free(layer_map *m) {
  free(m->slot);
}

/* Both with a module name, or both without one and the same layer index:
 * same_layer() for the parameters of one model, which are named alike. */
static int same_key(const fsdpc_wrap_param *a, const fsdpc_wrap_param *b) {
  if (!a->module != !b->module)
    return 0;
  return same_layer(a, b);
}

static uint32_t layer_map_find(const layer_map *m, const fsdpc_wrap_param *params,
                               const fsdpc_wrap_param *p) {
  for (uint32_t h = layer_hash(p) & m->mask;; h = (h + 1) & m->mask) {
    uint32_t j = m->slot[h];
    if (j == UINT32_MAX)
      return UINT32_MAX;
    if (same_key(&params[j], p))
      return j;
  }
}

static void layer_map_add(layer_map *m, const fsdpc_wrap_param *params, uint32_t i) {
  uint32_t h = layer_hash(&params[i]) & m->mask;
  while (m->slot[h] != UINT32_MAX)
    h = (h + 1) & m->mask;
  m->slot[h] = i;
}

static int32_t plan(const fsdpc_call *call, const fsdpc_wrap_param *params, uint32_t n_params,
                    uint32_t *unit_of_param, uint32_t *n_units) {
  const fsdpc_host_api *h = fsdpc_pl_call_host(call);
  if (!n_units || (n_params > 0 && (!params || !unit_of_param)))
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                         "wrap transformer: params, unit_of_param and n_units "
                         "must be non-NULL");
  wrap_opts o;
  int32_t st = fsdpc_wrap_read_separate(h, fsdpc_pl_call_opts(call), &o.separate_embedding,
                                        &o.separate_lm_head);
  if (st != FSDPC_OK)
    return st;
  for (uint32_t i = 0; i < n_params; i++) {
    if (params[i].struct_size < offsetof(fsdpc_wrap_param, tie_group) + sizeof(int32_t))
      return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                           "wrap transformer: a parameter's struct_size is too small");
    if (fsdpc_wrap_eq(params[i].module_type, "decoder_layer") && !params[i].module &&
        params[i].layer < 0)
      return fsdpc_pl_fail(
          h, FSDPC_INVALID_USAGE,
          "wrap transformer: a decoder-layer parameter has neither module nor layer");
  }
  /* First pass: each parameter points at the first parameter of its unit
   * (its "leader"); tie groups point at the first tied parameter's leader.
   * Linear time (a model with 20,000 layers plans at once): leaders are
   * found through a hash table of layers and one slot per other class. */
  uint32_t n_out = 0;
  layer_map lm;
  if (layer_map_init(&lm, n_params) != 0)
    return fsdpc_pl_fail(h, FSDPC_SYSTEM_ERROR, "wrap transformer: out of memory");
  uint32_t class_leader[4] = {UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX};
  tie_slot ties_small[8], *ties = ties_small;
  uint32_t n_ties = 0, cap_ties = 8;
  for (uint32_t i = 0; i < n_params; i++) {
    const fsdpc_wrap_param *p = &params[i];
    uint32_t leader = i;
    int found = 0;
    if (p->tie_group >= 0) {
      for (uint32_t t = 0; t < n_ties && !found; t++)
        if (ties[t].group == p->tie_group)
          leader = unit_of_param[ties[t].first], found = 1;
    }
    int cls = param_class(p, &o);
    if (!found) {
      /* Only leaders are looked up: a tied parameter moved elsewhere is not
       * a leader for its own class. */
      uint32_t l = cls == CLASS_LAYER ? layer_map_find(&lm, params, p) : class_leader[cls];
      if (l != UINT32_MAX)
        leader = l, found = 1;
    }
    unit_of_param[i] = leader;
    if (leader == i) {
      if (cls == CLASS_LAYER)
        layer_map_add(&lm, params, i);
      else
        class_leader[cls] = i;
    }
    if (p->tie_group >= 0 && !tie_known(ties, n_ties, p->tie_group)) {
      if (n_ties == cap_ties) {
        tie_slot *nt = malloc(2 * cap_ties * sizeof *nt);
        if (!nt) {
          layer_map_free(&lm);
          if (ties != ties_small)
            free(ties);
          return fsdpc_pl_fail(h, FSDPC_SYSTEM_ERROR, "wrap transformer: out of memory");
        }
        memcpy(nt, ties, n_ties * sizeof *nt);
        if (ties != ties_small)
          free(ties);
        ties = nt;
        cap_ties *= 2;
      }
      ties[n_ties++] = (tie_slot){.group = p->tie_group, .first = i};
    }
  }
  layer_map_free(&lm);
  if (ties != ties_small)
    free(ties);
  /* Second pass: leaders become unit numbers in order of first appearance;
   * a leader always precedes (or is) its followers. */
  for (uint32_t i = 0; i < n_params; i++) {
    if (unit_of_param[i] == i)
      unit_of_param[i] = n_out++;
    else
      unit_of_param[i] = unit_of_param[unit_of_param[i]];
  }
  *n_units = n_out;
  return FSDPC_OK;
}

static const fsdpc_option_desc *const options[] = {&fsdpc_wrap_opt_separate_embedding,
                                                   &fsdpc_wrap_opt_separate_lm_head};

static const fsdpc_wrap_v1 vtable = {
    .struct_size = sizeof(fsdpc_wrap_v1),
    .plan = NULL, /* 1.0's plan: the host calls plan_call */
    .plan_call = plan,
};

static const fsdpc_component_desc component = {
    .struct_size = sizeof(fsdpc_component_desc),
    .kind = FSDPC_KIND_WRAP,
    .name = "transformer",
    .version = "1.0.0",
    .iface_version = 1,
    .default_score = 100,
    .description = "one unit per decoder layer, the rest in a root unit",
    .capabilities = "separate_embedding, separate_lm_head; keeps tied params together",
    .options = options,
    .n_options = 2,
    .vtable = &vtable,
};
static const fsdpc_component_desc *const components[] = {&component};

static const fsdpc_plugin_desc plugin = {
    .struct_size = sizeof(fsdpc_plugin_desc),
    .abi_major = FSDPC_PLUGIN_ABI_MAJOR,
    .abi_minor = FSDPC_PLUGIN_ABI_MINOR,
    .name = "wrap-transformer",
    .components = components,
    .n_components = 1,
};

FSDPC_PLUGIN_DEFINE(plugin, 1)
