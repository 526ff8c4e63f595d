/* wrap/transformer: one FSDP unit per decoder layer; everything outside the
 * decoder layers (embedding, final norm, lm_head) goes to one root unit.
 *
 * Options (torchtune's memory-efficient wrapping, for large vocabularies):
 *   separate_embedding  the token embedding gets its own unit
 *   separate_lm_head    the output projection gets its own unit
 * Tied parameters (same tie_group) always share one unit: a tied embedding
 * and lm_head stay together in the unit of whichever comes first, even when
 * both are "separated". Units are numbered by first appearance. */
#include <string.h>

#include "../common/wrap_separate.h"
#include "fsdpc/plugin.h"

static const fsdpc_host_api *g_host;

/* Which unit a parameter belongs to, before tie groups are applied. */
enum { CLASS_ROOT = 0, CLASS_EMBEDDING = 1, CLASS_LM_HEAD = 2, CLASS_LAYER = 3 };

typedef struct wrap_opts {
  int32_t separate_embedding, separate_lm_head;
} wrap_opts;

static int32_t fail(int32_t st, const char *msg) {
  if (g_host && g_host->set_error)
    g_host->set_error(g_host->host_ctx, st, msg);
  return st;
}

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

static int32_t read_opts(const fsdpc_opts *opts, wrap_opts *o) {
  return fsdpc_wrap_read_separate(g_host, opts, &o->separate_embedding, &o->separate_lm_head);
}
static int32_t plan(const fsdpc_opts *opts, const fsdpc_wrap_param *params, uint32_t n_params,
                    uint32_t *unit_of_param, uint32_t *n_units) {
  if (!n_units || (n_params > 0 && (!params || !unit_of_param)))
    return fail(FSDPC_INVALID_USAGE, "wrap transformer: params, unit_of_param and n_units "
                                     "must be non-NULL");
  wrap_opts o;
  int32_t st = read_opts(opts, &o);
  if (st != FSDPC_OK)
    return st;
  for (uint32_t i = 0; i < n_params; i++) {
    if (params[i].struct_size < offsetof(fsdpc_wrap_param, tie_group) + sizeof(int32_t))
      return fail(FSDPC_INVALID_USAGE, "wrap transformer: a parameter's struct_size is too small");
    if (fsdpc_wrap_eq(params[i].module_type, "decoder_layer") && !params[i].module &&
        params[i].layer < 0)
      return fail(FSDPC_INVALID_USAGE,
                  "wrap transformer: a decoder-layer parameter has neither module nor layer");
  }
  /* First pass: each parameter points at the first parameter of its unit
   * (its "leader"); tie groups point at the first tied parameter's leader. */
  uint32_t n_out = 0;
  for (uint32_t i = 0; i < n_params; i++) {
    const fsdpc_wrap_param *p = &params[i];
    uint32_t leader = i;
    int found = 0;
    if (p->tie_group >= 0) {
      for (uint32_t j = 0; j < i && !found; j++)
        if (params[j].tie_group == p->tie_group)
          leader = unit_of_param[j], found = 1;
    }
    int cls = param_class(p, &o);
    for (uint32_t j = 0; j < i && !found; j++) {
      /* Only leaders are compared: unit_of_param[j] == j marks one. A tied
       * parameter moved elsewhere is not a leader for its own class. */
      if (unit_of_param[j] != j || param_class(&params[j], &o) != cls)
        continue;
      if (cls == CLASS_LAYER && !same_layer(&params[j], p))
        continue;
      leader = j;
      found = 1;
    }
    unit_of_param[i] = leader;
  }
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
    .plan = plan,
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

FSDPC_PLUGIN_EXPORT int32_t fsdpc_plugin_entry_v1(const fsdpc_host_api *host,
                                                  const fsdpc_plugin_desc **out) {
  if (!host || !FSDPC_HAS_FIELD(host, fsdpc_host_api, opt_get) || !host->opt_get || !out)
    return FSDPC_INVALID_USAGE;
  g_host = host;
  *out = &plugin;
  return FSDPC_OK;
}
