/* Broken test plugins, one per BAD_* definition, each refused by the
 * registry with its own one-line reason:
 *   BAD_ABI2          v1 entry whose descriptor says ABI 2.0
 *   BAD_ENTRY_V2      exports only fsdpc_plugin_entry_v2 (a future ABI)
 *   BAD_NO_ENTRY      exports no entry symbol at all
 *   BAD_SMALL_DESC    descriptor struct_size smaller than v1.0
 *   BAD_SMALL_VTABLE  fsdpc_optim_v1 struct_size too small
 *   BAD_NULL_STEP     required fsdpc_optim_v1.step is NULL
 *   BAD_ENTRY_FAILS   the entry point returns an error with set_error */
#include "fsdpc/plugin.h"

static int32_t create(const fsdpc_optim_init *init, fsdpc_optimizer **out) {
  return FSDPC_UNSUPPORTED;
}
static void destroy(fsdpc_optimizer *o) {}
static uint32_t n_slots(const fsdpc_optimizer *o) { return 0; }
static const char *slot_name(const fsdpc_optimizer *o, uint32_t i) { return 0; }
static int32_t init_state(fsdpc_optimizer *o, float *s, uint64_t n, int32_t d, void *st) {
  return FSDPC_OK;
}
#ifndef BAD_NULL_STEP
static int32_t step(fsdpc_optimizer *o, const fsdpc_optim_tensor *t, uint32_t n,
                    const fsdpc_optim_step_info *i) {
  return FSDPC_OK;
}
#endif

static const fsdpc_optim_v1 vt = {
#ifdef BAD_SMALL_VTABLE
    .struct_size = 8,
#else
    .struct_size = sizeof(fsdpc_optim_v1),
#endif
    .create = create,
    .destroy = destroy,
    .n_slots = n_slots,
    .slot_name = slot_name,
    .init_state = init_state,
#ifdef BAD_NULL_STEP
    .step = 0,
#else
    .step = step,
#endif
};

static const fsdpc_component_desc comp = {
    .struct_size = sizeof(fsdpc_component_desc),
    .kind = FSDPC_KIND_OPTIM,
    .name = TEST_NAME,
    .version = "0.0.1",
    .iface_version = 1,
    .default_score = 1000,
    .description = "a broken test plugin",
    .capabilities = "none",
    .vtable = &vt,
};
static const fsdpc_component_desc *const comps[] = {&comp};

static const fsdpc_plugin_desc plugin = {
#ifdef BAD_SMALL_DESC
    .struct_size = 12,
#else
    .struct_size = sizeof(fsdpc_plugin_desc),
#endif
#ifdef BAD_ABI2
    .abi_major = 2,
#else
    .abi_major = FSDPC_PLUGIN_ABI_MAJOR,
#endif
    .abi_minor = 0,
    .name = TEST_NAME,
    .components = comps,
    .n_components = 1,
};

#if defined(BAD_ENTRY_V2)
FSDPC_PLUGIN_EXPORT int32_t fsdpc_plugin_entry_v2(const void *host, const void **out);
FSDPC_PLUGIN_EXPORT int32_t fsdpc_plugin_entry_v2(const void *host, const void **out) {
  *out = &plugin;
  return FSDPC_OK;
}
#elif defined(BAD_NO_ENTRY)
/* Something exported, but not an entry point. */
FSDPC_PLUGIN_EXPORT int32_t fsdpc_not_an_entry(void);
FSDPC_PLUGIN_EXPORT int32_t fsdpc_not_an_entry(void) { return plugin.n_components; }
#else
FSDPC_PLUGIN_EXPORT int32_t fsdpc_plugin_entry_v1(const fsdpc_host_api *host,
                                                  const fsdpc_plugin_desc **out) {
#ifdef BAD_ENTRY_FAILS
  host->set_error(host->host_ctx, FSDPC_SYSTEM_ERROR, "cannot find libfoo.so.3 (install foo)");
  return FSDPC_SYSTEM_ERROR;
#endif
  *out = &plugin;
  return FSDPC_OK;
}
#endif
