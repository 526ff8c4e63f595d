/* What the run plan asks of its plugins beside their options: the wrap
 * plugin's unit of each parameter and the optimizer's state format (with the
 * alignment it puts on shards). The engine reads both from the plan. */
#include <stdlib.h>
#include <string.h>

#include "plugin/call.h"
#include "plugin/registry.h"
#include "runplan/runplan.h"

fsdpc_status fsdpc__wrap_plan(const fsdpc_component *wrap, const fsdpc_opts *opts,
                              const fsdpc_param_info *params, int n_params,
                              uint32_t **unit_of_param, uint32_t *n_units, fsdpc_err *err) {
  fsdpc_wrap_param *wp = calloc((size_t)n_params, sizeof *wp);
  uint32_t *uop = calloc((size_t)n_params, sizeof(uint32_t));
  if (!wp || !uop) {
    free(wp);
    free(uop);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory for the wrap plan");
  }
  for (int i = 0; i < n_params; i++)
    wp[i] = (fsdpc_wrap_param){.struct_size = sizeof *wp,
                               .name = params[i].name,
                               .module = params[i].module,
                               .module_type = params[i].module_type,
                               .numel = params[i].numel,
                               .layer = params[i].layer,
                               .tie_group = params[i].tie_group};
  int32_t r = fsdpc__call_wrap_plan(wrap, opts, wp, (uint32_t)n_params, uop, n_units);
  free(wp);
  if (r != FSDPC_OK) {
    free(uop);
    return fsdpc__plugin_fail(wrap, r, err);
  }
  *unit_of_param = uop;
  return FSDPC_OK;
}

fsdpc_status fsdpc__qformat_get(const fsdpc_component *c, const fsdpc_optimizer *opt,
                                fsdpc_optim_qformat *out, fsdpc_err *err) {
  const fsdpc_optim_v1 *ov = c->vtable;
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  if (!FSDPC_HAS_FIELD(ov, fsdpc_optim_v1, q_import) || !ov->qformat)
    return FSDPC_OK;
  int32_t r = ov->qformat(opt, out);
  if (r != FSDPC_OK)
    return fsdpc__plugin_fail(c, r, err);
  if (out->block == 0)
    return FSDPC_OK;
  uint32_t ns = ov->n_slots(opt);
  if (!ov->q_export || !ov->q_import || ns == 0 || ns > 4 || out->block > (1u << 20))
    return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                       "optimizer '%s': quantized state needs q_export and q_import, 1 to 4 "
                       "slots and a block of at most 2^20 elements (it has %u slots, block %u)",
                       c->desc->name, ns, out->block);
  return FSDPC_OK;
}

static uint64_t gcd(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

int fsdpc__optim_align(int align, const fsdpc_optim_qformat *qf) {
  uint64_t a = align > 0 ? (uint64_t)align : 1;
  if (!qf || qf->block == 0)
    return (int)a;
  return (int)(a / gcd(a, qf->block) * qf->block);
}
