/* A valid test plugin with two optim components:
 *   test-good   score 10, no supports(): accepts every situation
 *   test-picky  score 90, supports() accepts only the CPU (vetoes CUDA with
 *               a set_error reason)
 * Both do plain SGD so that create/step can be exercised through the host.
 * Written the plugin ABI 1.0 way (a global host table from the entry point,
 * no 1.1 field read) and says abi_minor 0: what a plugin built before 1.1
 * is, loaded by a 1.1 host.
 *
 * Built with TEST_ABI10 (into a folder of its own, test_wrap.c), it also has
 * two components whose vtables end where 1.0's ended (no *_call members):
 *   wrap "v10"        plan(): units of `flag` parameters (the option, read
 *                     through the global host); flag 0 is refused with a
 *                     set_error message
 *   attention "v10"   create() (1.0) makes a context; sizes() says whether
 *                     it got it (saved_bytes 1) or not (0)
 *   statedict "v10"   probe() (1.0): OK for a folder holding "v10.marker"
 * and one component of the 1.1 layout, to see the host prefer the *_call
 * member over the 1.0 one:
 *   attention "v11"   create() would fail; create_call() keeps call->host in
 *                     the context, and sizes() says (saved_bytes 2) that it
 *                     is the host of the shape */
#include <stddef.h>
#include <string.h>

#include "fsdpc/plugin.h"

static const fsdpc_host_api *g_host;

struct fsdpc_optimizer {
  double weight_decay;
  int32_t num_threads; /* from host device_info, checked by the test */
};

static int32_t picky_supports(const fsdpc_situation *s) {
  if (s->device != FSDPC_DEVICE_CPU) {
    g_host->set_error(g_host->host_ctx, FSDPC_UNSUPPORTED, "test-picky runs on the CPU only");
    return FSDPC_UNSUPPORTED;
  }
  return FSDPC_OK;
}

static int32_t create(const fsdpc_optim_init *init, fsdpc_optimizer **out) {
  if (init->weight_decay < 0) {
    g_host->set_error(g_host->host_ctx, FSDPC_INVALID_USAGE,
                      "weight_decay must be >= 0 (set optim.weight_decay)");
    return FSDPC_INVALID_USAGE;
  }
  fsdpc_optimizer *o = g_host->alloc(g_host->host_ctx, sizeof *o, 64);
  if (!o)
    return FSDPC_SYSTEM_ERROR;
  fsdpc_device_info info = {.struct_size = sizeof info};
  int32_t st = g_host->device_info(g_host->host_ctx, &info);
  if (st != FSDPC_OK) {
    g_host->free(g_host->host_ctx, o);
    return st;
  }
  o->weight_decay = init->weight_decay;
  o->num_threads = info.num_threads;
  g_host->log(g_host->host_ctx, FSDPC_LOG_DEBUG, "created");
  *out = o;
  return FSDPC_OK;
}

static void destroy(fsdpc_optimizer *o) { g_host->free(g_host->host_ctx, o); }

static uint32_t n_slots(const fsdpc_optimizer *o) { return 0; }

static const char *slot_name(const fsdpc_optimizer *o, uint32_t i) { return NULL; }

static int32_t init_state(fsdpc_optimizer *o, float *state, uint64_t n, int32_t dev, void *s) {
  return FSDPC_OK;
}

static int32_t step(fsdpc_optimizer *o, const fsdpc_optim_tensor *t, uint32_t n,
                    const fsdpc_optim_step_info *info) {
  for (uint32_t k = 0; k < n; k++)
    for (uint64_t i = 0; i < t[k].numel; i++)
      t[k].param[i] -= (float)(info->lr * (info->grad_scale * t[k].grad[i] +
                                           (t[k].decay ? o->weight_decay * t[k].param[i] : 0)));
  return FSDPC_OK;
}

static const fsdpc_optim_v1 good_vt = {
    .struct_size = sizeof(fsdpc_optim_v1),
    .supports = NULL,
    .create = create,
    .destroy = destroy,
    .n_slots = n_slots,
    .slot_name = slot_name,
    .init_state = init_state,
    .step = step,
};
static const fsdpc_optim_v1 picky_vt = {
    .struct_size = sizeof(fsdpc_optim_v1),
    .supports = picky_supports,
    .create = create,
    .destroy = destroy,
    .n_slots = n_slots,
    .slot_name = slot_name,
    .init_state = init_state,
    .step = step,
};

static const fsdpc_option_desc opt_flag = {
    .struct_size = sizeof(fsdpc_option_desc),
    .key = "flag",
    .type = FSDPC_OPT_INT,
    .default_value = "7",
    .min = 0,
    .max = 10,
    .help = "a test option",
};
static const fsdpc_option_desc *const options[] = {&opt_flag};

static const fsdpc_component_desc good = {
    .struct_size = sizeof(fsdpc_component_desc),
    .kind = FSDPC_KIND_OPTIM,
    .name = "test-good",
    .version = "0.1.0",
    .iface_version = 1,
    .default_score = 10,
    .description = "test: plain SGD",
    .capabilities = "cpu",
    .options = options,
    .n_options = 1,
    .vtable = &good_vt,
};
static const fsdpc_component_desc picky = {
    .struct_size = sizeof(fsdpc_component_desc),
    .kind = FSDPC_KIND_OPTIM,
    .name = "test-picky",
    .version = "0.1.0",
    .iface_version = 1,
    .default_score = 90,
    .description = "test: plain SGD, CPU only",
    .capabilities = "cpu only",
    .vtable = &picky_vt,
};
#ifdef TEST_ABI10
/* A test component: kind, name, vtable, description, options. */
#define TEST_COMPONENT(var, kind_, name_, vt, what, opts, n_opts)                                  \
  static const fsdpc_component_desc var = {.struct_size = sizeof(fsdpc_component_desc),            \
                                           .kind = kind_,                                          \
                                           .name = name_,                                          \
                                           .version = "0.1.0",                                     \
                                           .iface_version = 1,                                     \
                                           .default_score = 1,                                     \
                                           .description = what,                                    \
                                           .capabilities = "-",                                    \
                                           .options = opts,                                        \
                                           .n_options = n_opts,                                    \
                                           .vtable = vt}
#include <stdio.h>
#include <sys/stat.h>
static int32_t plan(const fsdpc_opts *opts, const fsdpc_wrap_param *params, uint32_t n_params,
                    uint32_t *unit_of_param, uint32_t *n_units) {
  int64_t per_unit = 1;
  if (opts) {
    int32_t st = g_host->opt_get(g_host->host_ctx, opts, "flag", FSDPC_OPT_INT, &per_unit,
                                 sizeof per_unit);
    if (st != FSDPC_OK)
      return st;
  }
  if (per_unit < 1) {
    g_host->set_error(g_host->host_ctx, FSDPC_INVALID_USAGE, "v10: flag must be >= 1");
    return FSDPC_INVALID_USAGE;
  }
  for (uint32_t i = 0; i < n_params; i++)
    unit_of_param[i] = (uint32_t)(i / (uint64_t)per_unit);
  *n_units = n_params ? (uint32_t)((n_params - 1) / (uint64_t)per_unit + 1) : 0;
  return FSDPC_OK;
}

static const fsdpc_wrap_v1 wrap_vt = {
    .struct_size = offsetof(fsdpc_wrap_v1, plan_call), /* the 1.0 layout */
    .plan = plan,
};

struct fsdpc_attn_ctx {
  int device;
};
static struct fsdpc_attn_ctx the_ctx;

static int32_t attn_create(const fsdpc_opts *opts, int32_t device, int32_t device_index,
                           fsdpc_attn_ctx **out) {
  the_ctx.device = device;
  *out = &the_ctx;
  return FSDPC_OK;
}
static void attn_destroy(fsdpc_attn_ctx *ctx) {}
static int32_t attn_sizes(fsdpc_attn_ctx *ctx, const fsdpc_attn_shape *s, fsdpc_attn_sizes *out) {
  out->saved_bytes = ctx == &the_ctx ? 1 : 0;
  out->fwd_workspace = out->bwd_workspace = 0;
  return FSDPC_OK;
}
static int32_t attn_forward(fsdpc_attn_ctx *ctx, const fsdpc_attn_shape *s, const void *q,
                            const void *k, const void *v, void *o, void *saved, void *ws,
                            void *stream) {
  g_host->set_error(g_host->host_ctx, FSDPC_UNSUPPORTED, "v10: no forward");
  return FSDPC_UNSUPPORTED;
}
static int32_t attn_backward(fsdpc_attn_ctx *ctx, const fsdpc_attn_shape *s, const void *q,
                             const void *k, const void *v, const void *o, const void *dout,
                             const void *saved, void *dq, void *dk, void *dv, void *ws,
                             void *stream) {
  return FSDPC_UNSUPPORTED;
}

static const fsdpc_attention_v1 attn_vt = {
    .struct_size = offsetof(fsdpc_attention_v1, create_call), /* the 1.0 layout */
    .create = attn_create,
    .destroy = attn_destroy,
    .sizes = attn_sizes,
    .forward = attn_forward,
    .backward = attn_backward,
};

TEST_COMPONENT(wrap, FSDPC_KIND_WRAP, "v10", &wrap_vt, "test: a 1.0 wrap plugin", options, 1);
TEST_COMPONENT(attn, FSDPC_KIND_ATTENTION, "v10", &attn_vt,
               "test: a 1.0 attention plugin with a context", NULL, 0);
static int32_t sd_probe(const char *dir) {
  char p[4096];
  struct stat sb;
  snprintf(p, sizeof p, "%s/v10.marker", dir);
  return stat(p, &sb) == 0 ? FSDPC_OK : FSDPC_UNSUPPORTED;
}
static int32_t sd_save(const fsdpc_opts *opts, const fsdpc_sd_host *h, const char *dir,
                       const fsdpc_sd_save_opts *so) {
  return FSDPC_UNSUPPORTED;
}
static int32_t sd_load(const fsdpc_opts *opts, const fsdpc_sd_host *h, const char *dir,
                       int32_t with_optimizer) {
  return FSDPC_UNSUPPORTED;
}
static const fsdpc_statedict_v1 sd_vt = {
    .struct_size = offsetof(fsdpc_statedict_v1, probe_call), /* the 1.0 layout */
    .probe = sd_probe,
    .save = sd_save,
    .load = sd_load,
};
TEST_COMPONENT(sd, FSDPC_KIND_STATEDICT, "v10", &sd_vt, "test: a 1.0 statedict plugin (probe only)",
               NULL, 0);

/* 1.1: the context keeps the host of its create_call. */
static struct fsdpc_attn_ctx v11_ctx;
static const fsdpc_host_api *v11_host;
static int32_t v11_create_old(const fsdpc_opts *opts, int32_t device, int32_t device_index,
                              fsdpc_attn_ctx **out) {
  return FSDPC_INTERNAL_ERROR; /* the 1.1 host must call create_call */
}
static int32_t v11_create_call(const fsdpc_call *call, int32_t device, int32_t device_index,
                               fsdpc_attn_ctx **out) {
  v11_host = call->host;
  *out = &v11_ctx;
  return FSDPC_OK;
}
static int32_t v11_sizes(fsdpc_attn_ctx *ctx, const fsdpc_attn_shape *s, fsdpc_attn_sizes *out) {
  out->saved_bytes = ctx == &v11_ctx && v11_host && v11_host == s->host ? 2 : 0;
  out->fwd_workspace = out->bwd_workspace = 0;
  return FSDPC_OK;
}
static const fsdpc_attention_v1 v11_vt = {
    .struct_size = sizeof(fsdpc_attention_v1),
    .create = v11_create_old,
    .destroy = attn_destroy,
    .sizes = v11_sizes,
    .forward = attn_forward,
    .backward = attn_backward,
    .create_call = v11_create_call,
};
TEST_COMPONENT(v11, FSDPC_KIND_ATTENTION, "v11", &v11_vt,
               "test: a 1.1 attention plugin (create_call)", NULL, 0);
static const fsdpc_component_desc *const components[] = {&good, &picky, &wrap, &attn, &sd, &v11};
#else
static const fsdpc_component_desc *const components[] = {&good, &picky};
#endif

static const fsdpc_plugin_desc plugin = {
    .struct_size = sizeof(fsdpc_plugin_desc),
    .abi_major = FSDPC_PLUGIN_ABI_MAJOR,
    .abi_minor = 0, /* built before 1.1 (see the top) */
    .name = "test-good",
    .components = components,
    .n_components = sizeof components / sizeof components[0],
};

FSDPC_PLUGIN_EXPORT int32_t fsdpc_plugin_entry_v1(const fsdpc_host_api *host,
                                                  const fsdpc_plugin_desc **out) {
  g_host = host;
  *out = &plugin;
  return FSDPC_OK;
}
