/* wrap/size: size-based units, like PyTorch's size_based_auto_wrap_policy
 * but over a flat module list. Walking the blocks (runs of parameters with
 * the same owning module) in module order, a unit takes whole blocks until
 * it holds at least min_num_params elements, then closes; a block is never
 * split. What is left at the end forms the last unit.
 *
 * Options: min_num_params; separate_embedding and separate_lm_head take
 * those blocks out of the running unit into units of their own. Tied
 * parameters (same tie_group) always go to the unit of the first one, and do
 * not count towards the running unit's size there. Units are numbered by
 * first appearance. */
#include <stdlib.h>
#include <string.h>

#include "../../common/host_call.h"
#include "../common/wrap_separate.h"
#include "fsdpc/plugin.h"

#define NO_UNIT UINT32_MAX

typedef struct size_opts {
  int64_t min_num_params;
  int32_t separate_embedding, separate_lm_head;
} size_opts;

static int32_t read_opts(const fsdpc_host_api *h, const fsdpc_opts *opts, size_opts *o) {
  o->min_num_params = 100000000;
  int32_t st = fsdpc_wrap_read_separate(h, opts, &o->separate_embedding, &o->separate_lm_head);
  if (st == FSDPC_OK && opts)
    st = fsdpc_pl_opt(h, opts, "min_num_params", FSDPC_OPT_INT, &o->min_num_params,
                      sizeof o->min_num_params);
  if (st == FSDPC_OK && o->min_num_params < 1)
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE, "wrap size: min_num_params must be at least 1");
  return st;
}

/* Parameters i and j (adjacent) belong to the same block. */
static int same_block(const fsdpc_wrap_param *a, const fsdpc_wrap_param *b) {
  return a->module && b->module && strcmp(a->module, b->module) == 0;
}

/* Unit already given to an earlier member of p's tie group, or NO_UNIT. */
static uint32_t tied_unit(const fsdpc_wrap_param *params, const uint32_t *unit_of_param,
                          uint32_t i) {
  if (params[i].tie_group < 0)
    return NO_UNIT;
  for (uint32_t j = 0; j < i; j++)
    if (params[j].tie_group == params[i].tie_group)
      return unit_of_param[j];
  return NO_UNIT;
}

static int32_t plan(const fsdpc_call *call, const fsdpc_wrap_param *params, uint32_t n_params,
                    uint32_t *unit_of_param, uint32_t *n_units) {
  const fsdpc_host_api *h = fsdpc_pl_call_host(call);
  if (!n_units || (n_params > 0 && (!params || !unit_of_param)))
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                         "wrap size: params, unit_of_param and n_units must be non-NULL");
  size_opts o;
  int32_t st = read_opts(h, fsdpc_pl_call_opts(call), &o);
  if (st != FSDPC_OK)
    return st;
  for (uint32_t i = 0; i < n_params; i++)
    if (params[i].struct_size < offsetof(fsdpc_wrap_param, tie_group) + sizeof(int32_t))
      return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                           "wrap size: a parameter's struct_size is too small");

  uint32_t next = 0;       /* next provisional unit id */
  uint32_t open = NO_UNIT; /* the running unit, if any */
  uint64_t open_numel = 0;
  for (uint32_t b = 0; b < n_params;) {
    uint32_t e = b + 1; /* block is [b, e) */
    while (e < n_params && same_block(&params[b], &params[e]))
      e++;
    const char *type = params[b].module_type;
    int separate = (o.separate_embedding && fsdpc_wrap_eq(type, "embedding")) ||
                   (o.separate_lm_head && fsdpc_wrap_eq(type, "lm_head"));
    uint32_t own = NO_UNIT; /* a separated block's unit, made on first use */
    uint64_t added = 0;
    for (uint32_t i = b; i < e; i++) {
      uint32_t tied = tied_unit(params, unit_of_param, i);
      if (tied != NO_UNIT) {
        unit_of_param[i] = tied;
        continue;
      }
      if (separate) {
        if (own == NO_UNIT)
          own = next++;
        unit_of_param[i] = own;
        continue;
      }
      if (open == NO_UNIT)
        open = next++, open_numel = 0;
      unit_of_param[i] = open;
      added += params[i].numel;
    }
    open_numel += added;
    if (open != NO_UNIT && open_numel >= (uint64_t)o.min_num_params)
      open = NO_UNIT;
    b = e;
  }
  /* Provisional ids are already in order of creation, but a unit created
   * for a block whose parameters were all tied elsewhere stays empty: number
   * the used ones again by first appearance. */
  uint32_t n_out = 0;
  uint32_t map_small[64], *map = map_small;
  uint32_t map_len = next;
  if (map_len > 64) {
    map = malloc((size_t)map_len * sizeof *map);
    if (!map)
      return fsdpc_pl_fail(h, FSDPC_SYSTEM_ERROR, "wrap size: out of memory");
  }
  for (uint32_t u = 0; u < map_len; u++)
    map[u] = NO_UNIT;
  for (uint32_t i = 0; i < n_params; i++) {
    uint32_t u = unit_of_param[i];
    if (map[u] == NO_UNIT)
      map[u] = n_out++;
    unit_of_param[i] = map[u];
  }
  if (map != map_small)
    free(map);
  *n_units = n_out;
  return FSDPC_OK;
}

static const fsdpc_option_desc opt_min = {
    .struct_size = sizeof(fsdpc_option_desc),
    .key = "min_num_params",
    .type = FSDPC_OPT_INT,
    .default_value = "100000000",
    .min = 1,
    .max = 1e15,
    .help = "close a unit once it holds at least this many parameters",
};
static const fsdpc_option_desc *const options[] = {&opt_min, &fsdpc_wrap_opt_separate_embedding,
                                                   &fsdpc_wrap_opt_separate_lm_head};

static const fsdpc_wrap_v1 vtable = {
    .struct_size = sizeof(fsdpc_wrap_v1),
    .plan = NULL, /* 1.0's plan: the host calls plan_call */
    .plan_call = plan,
};

static const fsdpc_component_desc component = {
    .struct_size = sizeof(fsdpc_component_desc),
    .kind = FSDPC_KIND_WRAP,
    .name = "size",
    .version = "1.0.0",
    .iface_version = 1,
    .default_score = 50,
    .description = "units of whole modules with at least min_num_params parameters each",
    .capabilities = "min_num_params, separate_embedding, separate_lm_head; keeps tied params "
                    "together",
    .options = options,
    .n_options = 3,
    .vtable = &vtable,
};
static const fsdpc_component_desc *const components[] = {&component};

static const fsdpc_plugin_desc plugin = {
    .struct_size = sizeof(fsdpc_plugin_desc),
    .abi_major = FSDPC_PLUGIN_ABI_MAJOR,
    .abi_minor = FSDPC_PLUGIN_ABI_MINOR,
    .name = "wrap-size",
    .components = components,
    .n_components = 1,
};

FSDPC_PLUGIN_DEFINE(plugin, 1)
