/* Tests build engines the way the trainer does: from a run plan made from
 * YAML (plus overrides), at a pretend world: this process plays one rank
 * (shard rank `rank`) with no communicator, which is enough to allocate,
 * fill and inspect shards, and to step at world 1. Header-only: each test
 * binary includes it once. */
#ifndef FSDPC_TESTS_ENGINE_PLAN_H
#define FSDPC_TESTS_ENGINE_PLAN_H

#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "fsdp/dist.h"
#include "fsdp/engine.h"
#include "runplan/runplan.h"

typedef struct test_engine {
  fsdpc_config *cfg;
  fsdpc_run_plan *plan;
  fsdpc_dist dist;
  fsdpc_engine *eng;
} test_engine;

static inline void test_engine_close(test_engine *t) {
  fsdpc__engine_destroy(t->eng);
  fsdpc__run_plan_destroy(t->plan);
  fsdpc__config_destroy(t->cfg);
  memset(t, 0, sizeof *t);
}

/* Replaces t's engine by the one of shard rank `rank` on ops (NULL: the
 * CPU), from t's plan. */
static inline fsdpc_status test_engine_rank(test_engine *t, int rank, const fsdpc_ops *ops,
                                            fsdpc_err *err) {
  fsdpc__engine_destroy(t->eng);
  t->eng = NULL;
  fsdpc__dist_single(&t->dist);
  t->dist.world_size = t->plan->modes.world.world_size;
  t->dist.shard_size = t->plan->exec.S;
  t->dist.replica_size = t->plan->exec.R;
  t->dist.shard_rank = rank % t->plan->exec.S;
  t->dist.replica_rank = rank / t->plan->exec.S;
  t->dist.rank = rank;
  fsdpc_engine_env env = {.dist = &t->dist, .ops = ops, .threads = 1};
  return fsdpc__engine_create(t->plan, &env, &t->eng, err);
}

/* The config (yaml with n_ovr overrides), its run plan at `world` ranks
 * (one node) and, unless no_engine, the engine of shard rank `rank` on ops
 * (NULL: the CPU). On failure everything made is closed and err says why. */
static inline fsdpc_status test_engine_open(const char *yaml, const char *const *ovr, int n_ovr,
                                            int world, int rank, const fsdpc_ops *ops,
                                            int no_engine, test_engine *t, fsdpc_err *err) {
  memset(t, 0, sizeof *t);
  fsdpc_status st = fsdpc__config_from_string(yaml, "test.yaml", ovr, n_ovr, &t->cfg, err);
  fsdpc_run_world w = {.world_size = world, .nproc_per_node = world};
  if (st == FSDPC_OK)
    st = fsdpc__run_plan_create(t->cfg, &w, 0, &t->plan, err);
  if (st == FSDPC_OK && !no_engine)
    st = test_engine_rank(t, rank, ops, err);
  if (st != FSDPC_OK)
    test_engine_close(t);
  return st;
}

#endif
