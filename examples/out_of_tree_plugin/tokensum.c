/* An out-of-tree objective plugin: "tokensum", the summed token
 * cross-entropy over a fixed divisor instead of the step's token count
 * (the constant normalisation some recipes use so that every token weighs
 * the same whatever the batch holds). Built against the installed
 * <fsdpc/plugin.h> only; see docs/objectives.md and Makefile.
 *
 *   loss = sum over the step's target tokens of -log p(label) / divisor
 *   seed of each target token = 1 / divisor
 * and one metric, "token_ce": the mean over the step's target tokens, what
 * the default objective (sft) would log as the loss.
 */
#include <stdio.h>
#include <stdlib.h>

#include <fsdpc/plugin.h>

struct fsdpc_objective {
  const fsdpc_host_api *host;
  double divisor;
};

static const fsdpc_option_desc opt_divisor = {sizeof(fsdpc_option_desc),
                                              "divisor",
                                              FSDPC_OPT_FLOAT,
                                              "1024",
                                              1e-9,
                                              1e300,
                                              "what the summed token loss is divided by"};
static const fsdpc_option_desc *const options[] = {&opt_divisor};

static int32_t fail(const fsdpc_host_api *h, int32_t st, const char *msg) {
  if (FSDPC_HAS_FIELD(h, fsdpc_host_api, set_error) && h->set_error)
    h->set_error(h->host_ctx, st, msg);
  return st;
}

static int32_t ts_create(const fsdpc_objective_init *init, fsdpc_objective **out) {
  const fsdpc_host_api *h = FSDPC_HAS_FIELD(init, fsdpc_objective_init, host) ? init->host : NULL;
  double divisor = 1024.0;
  if (init->opts) {
    if (!h || !h->opt_get)
      return fail(h, FSDPC_INTERNAL_ERROR, "tokensum: options given but no host to read them");
    int32_t st =
        h->opt_get(h->host_ctx, init->opts, "divisor", FSDPC_OPT_FLOAT, &divisor, sizeof divisor);
    if (st != FSDPC_OK)
      return st;
  }
  fsdpc_objective *o = calloc(1, sizeof *o);
  if (!o)
    return fail(h, FSDPC_SYSTEM_ERROR, "tokensum: out of memory");
  o->host = h;
  o->divisor = divisor;
  *out = o;
  return FSDPC_OK;
}

static void ts_destroy(fsdpc_objective *o) {
  free(o);
}

static uint32_t ts_n_metrics(const fsdpc_objective *o) {
  return 1;
}

static const char *ts_metric_name(const fsdpc_objective *o, uint32_t i) {
  return i == 0 ? "token_ce" : NULL;
}

static int32_t ts_compute(fsdpc_objective *o, const fsdpc_obj_batch *in, fsdpc_obj_result *out) {
  if (in->want & FSDPC_OBJ_WANT_SEED)
    out->token_weight = 1.0 / o->divisor;
  if (in->want & FSDPC_OBJ_WANT_LOSS) {
    out->loss = in->token_loss_sum / o->divisor;
    if (out->metrics)
      out->metrics[0] = in->token_loss_sum / (double)in->n_tokens;
  }
  return FSDPC_OK;
}

static const fsdpc_objective_v1 vtable = {sizeof(fsdpc_objective_v1),
                                          FSDPC_OBJ_INPUT_TOKENS,
                                          0,
                                          ts_create,
                                          ts_destroy,
                                          ts_n_metrics,
                                          ts_metric_name,
                                          ts_compute};

static const fsdpc_component_desc component = {
    sizeof(fsdpc_component_desc),
    FSDPC_KIND_OBJECTIVE,
    "tokensum",
    "0.1.0",
    1,
    5,
    "summed token cross-entropy over a fixed divisor (example)",
    "token input; option divisor",
    options,
    1,
    &vtable};
static const fsdpc_component_desc *const components[] = {&component};

static const fsdpc_plugin_desc plugin = {sizeof(fsdpc_plugin_desc),
                                         FSDPC_PLUGIN_ABI_MAJOR,
                                         FSDPC_PLUGIN_ABI_MINOR,
                                         "tokensum",
                                         components,
                                         1};

/* The objective kind is ABI 1.3's. */
FSDPC_PLUGIN_DEFINE(plugin, 3)
