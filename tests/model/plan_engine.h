/* The engine options of a run plan at world 1 on the CPU (one thread), as
 * the trainer builds them (train/setup.c), for the model tests that drive the
 * engine directly. */
#ifndef FSDPC_TESTS_PLAN_ENGINE_H
#define FSDPC_TESTS_PLAN_ENGINE_H

#include "fsdp/engine.h"
#include "runplan/runplan.h"

static inline fsdpc_engine_opts plan_engine_opts(const fsdpc_run_plan *p, fsdpc_dist *d) {
  fsdpc_engine_opts eo = {.shape = &p->shape,
                          .strategy = FSDPC_FULL_SHARD,
                          .align = 16,
                          .params = p->params,
                          .n_params = p->n_params,
                          .unit_of_param = p->unit_of_param,
                          .n_units = p->n_units,
                          .dist = d,
                          .optim = p->optim,
                          .optim_init = &p->optim_init,
                          .threads = 1};
  return eo;
}

#endif
