/* optim/lion: the Lion optimizer (Chen et al. 2023, "Symbolic Discovery of
 * Optimization Algorithms") as a third-party fsdpc plugin, built out of tree
 * against the installed <fsdpc/plugin.h> only.
 *
 * Per element, with g the (scaled) gradient and m the momentum slot:
 *   c = beta1 * m + (1 - beta1) * g
 *   p = p * (1 - lr * wd) - lr * sign(c)      (wd only where decay is set)
 *   m = beta2 * m + (1 - beta2) * g
 * One fp32 state slot ("exp_avg"), half of AdamW's. CPU only.
 *
 * No globals (plugin ABI 1.1): the host table comes with each call, in the
 * situation for supports() and in the init struct for create(); the
 * optimizer keeps it for its own later calls. */
#include <fsdpc/plugin.h>

struct fsdpc_optimizer {
  double beta1, beta2, weight_decay;
  const fsdpc_host_api *host; /* the host that created it */
};

/* Tells host h why the call fails (when there is a host to tell). */
static int32_t fail(const fsdpc_host_api *h, int32_t st, const char *msg) {
  if (h && h->set_error)
    h->set_error(h->host_ctx, st, msg);
  return st;
}

static int32_t lion_supports(const fsdpc_situation *s) {
  const fsdpc_host_api *h = FSDPC_HAS_FIELD(s, fsdpc_situation, host) ? s->host : 0;
  if (s->device != FSDPC_DEVICE_CPU)
    return fail(h, FSDPC_UNSUPPORTED, "lion runs on the CPU only (use cpu_offload or adamw)");
  return FSDPC_OK;
}

static int32_t lion_create(const fsdpc_optim_init *init, fsdpc_optimizer **out) {
  const fsdpc_host_api *h = FSDPC_HAS_FIELD(init, fsdpc_optim_init, host) ? init->host : 0;
  if (!h) /* a 1.0 host: the entry point refused it already */
    return FSDPC_UNSUPPORTED;
  if (init->device != FSDPC_DEVICE_CPU)
    return fail(h, FSDPC_UNSUPPORTED, "lion runs on the CPU only (use cpu_offload or adamw)");
  double beta1 = 0.9, beta2 = 0.99; /* Lion's defaults, not AdamW's */
  if (init->opts) {
    int32_t st =
        h->opt_get(h->host_ctx, init->opts, "beta1", FSDPC_OPT_FLOAT, &beta1, sizeof beta1);
    if (st == FSDPC_OK)
      st = h->opt_get(h->host_ctx, init->opts, "beta2", FSDPC_OPT_FLOAT, &beta2, sizeof beta2);
    if (st != FSDPC_OK)
      return st;
  }
  if (init->weight_decay < 0)
    return fail(h, FSDPC_INVALID_USAGE, "lion: weight_decay must be >= 0");
  fsdpc_optimizer *o = h->alloc(h->host_ctx, sizeof *o, 64);
  if (!o)
    return fail(h, FSDPC_SYSTEM_ERROR, "lion: out of host memory");
  o->beta1 = beta1;
  o->beta2 = beta2;
  o->weight_decay = init->weight_decay;
  o->host = h;
  *out = o;
  return FSDPC_OK;
}

static void lion_destroy(fsdpc_optimizer *o) {
  if (o)
    o->host->free(o->host->host_ctx, o);
}

static uint32_t lion_n_slots(const fsdpc_optimizer *o) { return 1; }

static const char *lion_slot_name(const fsdpc_optimizer *o, uint32_t i) {
  return i == 0 ? "exp_avg" : 0;
}

static int32_t lion_init_state(fsdpc_optimizer *o, float *state, uint64_t n_floats, int32_t device,
                               void *stream) {
  if (device != FSDPC_DEVICE_CPU)
    return fail(o->host, FSDPC_UNSUPPORTED, "lion: state must be on the CPU");
  for (uint64_t i = 0; i < n_floats; i++)
    state[i] = 0.0f;
  return FSDPC_OK;
}

static int32_t lion_step(fsdpc_optimizer *o, const fsdpc_optim_tensor *tensors, uint32_t n_tensors,
                         const fsdpc_optim_step_info *info) {
  const float b1 = (float)o->beta1, b2 = (float)o->beta2;
  const float lr = (float)info->lr, scale = (float)info->grad_scale;
  for (uint32_t k = 0; k < n_tensors; k++) {
    const fsdpc_optim_tensor *t = &tensors[k];
    if (!t->param || !t->grad || !t->state)
      return fail(o->host, FSDPC_INVALID_USAGE, "lion: a tensor has a NULL param, grad or state");
    float *p = t->param;      /* (numel) */
    const float *g = t->grad; /* (numel) */
    float *m = t->state;      /* slot 0: (numel) */
    const float shrink = t->decay ? 1.0f - lr * (float)o->weight_decay : 1.0f;
    for (uint64_t i = 0; i < t->numel; i++) {
      float gi = g[i] * scale;
      float c = b1 * m[i] + (1.0f - b1) * gi;
      float sign = (float)(c > 0.0f) - (float)(c < 0.0f);
      p[i] = p[i] * shrink - lr * sign;
      m[i] = b2 * m[i] + (1.0f - b2) * gi;
    }
  }
  return FSDPC_OK;
}

static const fsdpc_optim_v1 lion_vtable = {
    .struct_size = sizeof(fsdpc_optim_v1),
    .supports = lion_supports,
    .create = lion_create,
    .destroy = lion_destroy,
    .n_slots = lion_n_slots,
    .slot_name = lion_slot_name,
    .init_state = lion_init_state,
    .step = lion_step,
};

static const fsdpc_option_desc opt_beta1 = {
    .struct_size = sizeof(fsdpc_option_desc),
    .key = "beta1",
    .type = FSDPC_OPT_FLOAT,
    .default_value = "0.9",
    .min = 0.0,
    .max = 1.0,
    .help = "interpolation between momentum and gradient for the update sign",
};
static const fsdpc_option_desc opt_beta2 = {
    .struct_size = sizeof(fsdpc_option_desc),
    .key = "beta2",
    .type = FSDPC_OPT_FLOAT,
    .default_value = "0.99",
    .min = 0.0,
    .max = 1.0,
    .help = "momentum decay",
};
static const fsdpc_option_desc *const lion_options[] = {&opt_beta1, &opt_beta2};

static const fsdpc_component_desc lion_component = {
    .struct_size = sizeof(fsdpc_component_desc),
    .kind = FSDPC_KIND_OPTIM,
    .name = "lion",
    .version = "0.1.0",
    .iface_version = 1,
    .default_score = 5, /* never chosen by `auto` over the in-tree optimizers */
    .description = "Lion: sign of interpolated momentum, decoupled weight decay",
    .capabilities = "cpu; fp32 state, 1 slot (exp_avg)",
    .options = lion_options,
    .n_options = 2,
    .vtable = &lion_vtable,
};
static const fsdpc_component_desc *const components[] = {&lion_component};

static const fsdpc_plugin_desc plugin = {
    .struct_size = sizeof(fsdpc_plugin_desc),
    .abi_major = FSDPC_PLUGIN_ABI_MAJOR,
    .abi_minor = FSDPC_PLUGIN_ABI_MINOR,
    .name = "example-lion",
    .components = components,
    .n_components = 1,
};

/* The exported entry point, through the header's one host check: a host
 * of ABI 1.1 or later (one that hands its table to each call) is needed;
 * an older one is refused with a line saying so. The table is not kept. */
FSDPC_PLUGIN_DEFINE(plugin, 1)
