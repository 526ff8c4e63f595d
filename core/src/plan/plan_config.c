/* The planner over one config: a run plan made for planning, then the
 * memory model for any strategy / checkpointing / offload variant and
 * world, each variant's modes resolved by the run plan's one function. */
#include <stdlib.h>

#include "plan/plan.h"

struct fsdpc_plan_ctx {
  fsdpc_run_plan *rp;
};

fsdpc_status fsdpc__plan_ctx_create(const fsdpc_config *cfg, fsdpc_plan_ctx **out, fsdpc_err *err) {
  fsdpc_plan_ctx *p = calloc(1, sizeof *p);
  if (!p)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  /* The plugins of one rank: world size does not change which attention,
   * optimizer or wrap plugin `auto` picks. */
  fsdpc_run_world one = {.world_size = 1, .nproc_per_node = 1};
  fsdpc_status st = fsdpc__run_plan_create(cfg, &one, FSDPC_RUN_PLAN_OFFLINE, &p->rp, err);
  if (st != FSDPC_OK) {
    free(p);
    return st;
  }
  *out = p;
  return FSDPC_OK;
}

void fsdpc__plan_ctx_destroy(fsdpc_plan_ctx *p) {
  if (!p)
    return;
  fsdpc__run_plan_destroy(p->rp);
  free(p);
}

const fsdpc_run_plan *fsdpc__plan_run(const fsdpc_plan_ctx *p) {
  return p->rp;
}

fsdpc_status fsdpc__plan_config(const fsdpc_plan_ctx *p, const fsdpc_plan_variant *v, int world,
                                int nproc_per_node, fsdpc_plan_mem *out, fsdpc_err *err) {
  fsdpc_run_world w = {.world_size = world, .nproc_per_node = nproc_per_node};
  fsdpc_run_modes m;
  FSDPC_TRY(fsdpc__run_modes_resolve(p->rp->cfg, v, &w, &m, err));
  return fsdpc__plan_modes(p->rp, &m, out, err);
}

uint64_t fsdpc__plan_numel(const fsdpc_plan_ctx *p) {
  return p->rp->numel;
}
const fsdpc_model_shape *fsdpc__plan_shape(const fsdpc_plan_ctx *p) {
  return &p->rp->shape;
}
const fsdpc_param_info *fsdpc__plan_params(const fsdpc_plan_ctx *p, int *n_params,
                                           const uint32_t **unit_of_param, uint32_t *n_units) {
  *n_params = p->rp->n_params;
  *unit_of_param = p->rp->unit_of_param;
  *n_units = p->rp->n_units;
  return p->rp->params;
}
double fsdpc__plan_flops_per_token(const fsdpc_model_shape *s, int T) {
  return fsdpc__run_flops_per_token(s, T);
}
