/* Test plugins that misbehave in their entry point (issue 19, finding 4):
 *   HOSTILE_EXIT   the entry calls exit(0)
 *   HOSTILE_CRASH  the entry dereferences NULL
 *   HOSTILE_ESC    a valid optim component whose description and version
 *                  hold a newline and terminal escapes
 * The registry must name each bad file and go on; `plugins list` must print
 * the escapes escaped. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "fsdpc/plugin.h"

static int32_t create(const fsdpc_optim_init *init, fsdpc_optimizer **out) {
  (void)init;
  *out = NULL;
  return FSDPC_UNSUPPORTED;
}
static void destroy(fsdpc_optimizer *o) {
  (void)o;
}
static uint32_t n_slots(const fsdpc_optimizer *o) {
  return 0;
}
static const char *slot_name(const fsdpc_optimizer *o, uint32_t i) {
  return NULL;
}
static int32_t init_state(fsdpc_optimizer *o, float *state, uint64_t n, int32_t dev, void *s) {
  return FSDPC_OK;
}
static int32_t step(fsdpc_optimizer *o, const fsdpc_optim_tensor *t, uint32_t n,
                    const fsdpc_optim_step_info *info) {
  return FSDPC_OK;
}

static const fsdpc_optim_v1 vt = {
    .struct_size = sizeof(fsdpc_optim_v1),
    .create = create,
    .destroy = destroy,
    .n_slots = n_slots,
    .slot_name = slot_name,
    .init_state = init_state,
    .step = step,
};
static const fsdpc_component_desc comp = {
    .struct_size = sizeof(fsdpc_component_desc),
    .kind = FSDPC_KIND_OPTIM,
    .name = TEST_NAME,
    .version = "1.0\x1b[2J",
    .description = "evil\n\x1b[31mred\x1b]0;title\x07",
    .capabilities = "cpu\r",
    .iface_version = 1,
    .default_score = 0,
    .vtable = &vt,
};
static const fsdpc_component_desc *const comps[] = {&comp};
static const fsdpc_plugin_desc desc = {
    .struct_size = sizeof(fsdpc_plugin_desc),
    .abi_major = FSDPC_PLUGIN_ABI_MAJOR,
    .abi_minor = FSDPC_PLUGIN_ABI_MINOR,
    .name = TEST_NAME,
    .n_components = 1,
    .components = comps,
};

FSDPC_PLUGIN_EXPORT int32_t fsdpc_plugin_entry_v1(const fsdpc_host_api *host,
                                                  const fsdpc_plugin_desc **out) {
  (void)host;
#if defined(HOSTILE_EXIT)
  exit(0);
#elif defined(HOSTILE_CRASH)
  volatile int *p = NULL;
  *p = 1;
#endif
  *out = &desc;
  return FSDPC_OK;
}
