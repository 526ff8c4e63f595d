/* The sft objective (fsdpc_objective_v1): next-token cross-entropy, the mean
 * over the optimizer step's target tokens of -log p(label), what fsdpc
 * trained with before objectives were plugins. Its input is the host's
 * fused lm_head + cross-entropy (FSDPC_OBJ_INPUT_TOKENS): the seed of each
 * target token's gradient is 1 / n_tokens, the loss the step's sum over
 * n_tokens. Both are computed exactly as the host did before (a double
 * reciprocal, a double division), so losses and gradients are bit for bit
 * those of earlier versions. */
#include <stdlib.h>

#include "../../common/host_call.h"
#include "fsdpc/plugin.h"

struct fsdpc_objective {
  const fsdpc_host_api *host;
};

static int32_t sft_create(const fsdpc_objective_init *init, fsdpc_objective **out) {
  const fsdpc_host_api *h = FSDPC_PL_HOST_OF(init, fsdpc_objective_init);
  fsdpc_objective *o = calloc(1, sizeof *o);
  if (!o)
    return fsdpc_pl_fail(h, FSDPC_SYSTEM_ERROR, "sft: out of memory");
  o->host = h;
  *out = o;
  return FSDPC_OK;
}

static void sft_destroy(fsdpc_objective *o) {
  free(o);
}

static uint32_t sft_n_metrics(const fsdpc_objective *o) {
  return 0;
}

static const char *sft_metric_name(const fsdpc_objective *o, uint32_t i) {
  return NULL;
}

static int32_t sft_compute(fsdpc_objective *o, const fsdpc_obj_batch *in, fsdpc_obj_result *out) {
  if (in->n_tokens <= 0)
    return fsdpc_pl_fail(o->host, FSDPC_INVALID_USAGE,
                         "sft: a step with %lld target tokens has no loss (the host skips it)",
                         (long long)in->n_tokens);
  if (in->want & FSDPC_OBJ_WANT_SEED)
    out->token_weight = 1.0 / (double)in->n_tokens;
  if (in->want & FSDPC_OBJ_WANT_LOSS)
    out->loss = in->token_loss_sum / (double)in->n_tokens;
  return FSDPC_OK;
}

static const fsdpc_objective_v1 sft_vtable = {
    /* .struct_size = */ sizeof(fsdpc_objective_v1),
    /* .input = */ FSDPC_OBJ_INPUT_TOKENS,
    /* .needs_ref = */ 0,
    /* .create = */ sft_create,
    /* .destroy = */ sft_destroy,
    /* .n_metrics = */ sft_n_metrics,
    /* .metric_name = */ sft_metric_name,
    /* .compute = */ sft_compute,
};

static const fsdpc_component_desc sft_component = {
    /* .struct_size = */ sizeof(fsdpc_component_desc),
    /* .kind = */ FSDPC_KIND_OBJECTIVE,
    /* .name = */ "sft",
    /* .version = */ "1.0.0",
    /* .iface_version = */ 1,
    /* .default_score = */ 10,
    /* .description = */ "next-token cross-entropy, the mean over the step's target tokens",
    /* .capabilities = */ "token input (the host's fused lm_head + cross-entropy); any device",
    /* .options = */ NULL,
    /* .n_options = */ 0,
    /* .vtable = */ &sft_vtable,
};

static const fsdpc_component_desc *const sft_components[] = {&sft_component};

static const fsdpc_plugin_desc sft_plugin = {
    /* .struct_size = */ sizeof(fsdpc_plugin_desc),
    /* .abi_major = */ FSDPC_PLUGIN_ABI_MAJOR,
    /* .abi_minor = */ FSDPC_PLUGIN_ABI_MINOR,
    /* .name = */ "sft",
    /* .components = */ sft_components,
    /* .n_components = */ 1,
};

/* The objective kind is 1.3's: an older host does not know it. */
FSDPC_PLUGIN_DEFINE(sft_plugin, 3)
