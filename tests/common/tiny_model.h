/* The tiny decoder that the engine-level gradient tests share
 * (test_lora_grad, test_fsdp_qlora, test_pref_grad): a config from YAML,
 * its run plan at world 1, the CPU engine on one thread filled with the
 * seeded random init of the config's train.seed and model.init.std, and a
 * model context of TINY_B x TINY_T tokens. The batch buffers live here
 * because the context reads them at each pass. Header-only, for Check
 * tests (failures are ck_assert's). */
#ifndef FSDPC_TESTS_TINY_MODEL_H
#define FSDPC_TESTS_TINY_MODEL_H

#include <check.h>
#include <math.h>
#include <string.h>

#include "config/config.h"
#include "fsdp/engine.h"
#include "model/lora.h"
#include "runplan/runplan.h"

enum { TINY_B = 2, TINY_T = 12 };

typedef struct tiny_model {
  fsdpc_config *cfg;
  fsdpc_run_plan *plan;
  fsdpc_dist dist;
  fsdpc_engine *eng;
  fsdpc_model_ctx *m;
  int32_t tok[TINY_B * TINY_T], lab[TINY_B * TINY_T], doc[TINY_B * TINY_T];
} tiny_model;

static inline void ok(fsdpc_status st, const fsdpc_err *err) {
  ck_assert_msg(st == FSDPC_OK, "%s", err->msg);
}

/* t from yaml (named name in errors); ckpt: the context's activation
 * checkpointing (0 or FSDPC_AC_*). No batch is set. */
static inline void tiny_model_open(tiny_model *t, const char *yaml, const char *name, int ckpt) {
  memset(t, 0, sizeof *t);
  fsdpc_err err;
  ok(fsdpc__config_from_string(yaml, name, NULL, 0, &t->cfg, &err), &err);
  fsdpc_run_world w = {1, 1};
  ok(fsdpc__run_plan_create(t->cfg, &w, 0, &t->plan, &err), &err);
  fsdpc__dist_single(&t->dist);
  const fsdpc_run_plan *p = t->plan;
  fsdpc_engine_env env = {.dist = &t->dist, .threads = 1};
  ok(fsdpc__engine_create(p, &env, &t->eng, &err), &err);
  ok(fsdpc__engine_init_random(t->eng, (uint64_t)t->cfg->train.seed, t->cfg->model.init.std, &err),
     &err);
  fsdpc_model_ctx_opts mo = {.shape = &p->shape,
                             .B = TINY_B,
                             .T = TINY_T,
                             .activation_checkpointing = ckpt,
                             .attention = p->attn,
                             .attention_opts = t->cfg->attention.options,
                             .lora = &p->lora};
  ok(fsdpc__model_ctx_create(&mo, &t->m, &err), &err);
}

/* A language-model batch over a vocabulary of v: every fifth target
 * ignored (-100). */
static inline void tiny_model_lm_batch(tiny_model *t, int v) {
  for (int i = 0; i < TINY_B * TINY_T; i++) {
    t->tok[i] = (i * 7 + 3) % v;
    t->lab[i] = i % 5 == 0 ? -100 : (i * 11 + 1) % v;
  }
  fsdpc_err err;
  ok(fsdpc__model_set_batch(t->m, t->tok, t->lab, NULL, &err), &err);
}

static inline void tiny_model_close(tiny_model *t) {
  fsdpc__model_ctx_destroy(t->m);
  fsdpc__engine_destroy(t->eng);
  fsdpc__run_plan_destroy(t->plan);
  fsdpc__config_destroy(t->cfg);
}

/* Element 0 of parameter p in its master shard (world 1, CPU: fp32), and
 * its gradient (NULL for a frozen one). */
static inline float *tiny_master(tiny_model *t, int p, float **grad) {
  uint64_t off;
  int u;
  fsdpc__engine_param(t->eng, p, &off, &u);
  const fsdpc_unit *un = fsdpc__engine_unit(t->eng, u);
  if (grad)
    *grad = un->grad ? un->grad + off : NULL;
  return un->master + off;
}

/* The mean loss of an evaluation pass over the batch. */
static inline double tiny_loss(tiny_model *t) {
  double ls;
  int64_t n;
  fsdpc_err err;
  ok(fsdpc__engine_eval(t->eng, t->m, &ls, &n, &err), &err);
  return ls / (double)n;
}

/* The adapters' B matrices at scale * sin(...): non-zero, so that every
 * adapter term contributes (0: the initial B). */
static inline void tiny_set_b(tiny_model *t, float scale) {
  for (int p = 0; p < fsdpc__engine_n_params(t->eng); p++) {
    const fsdpc_param_info *pi = fsdpc__engine_param(t->eng, p, NULL, NULL);
    if (!fsdpc__lora_kind(pi->kind) || !fsdpc__lora_kind_is_b(pi->kind))
      continue;
    float *b = tiny_master(t, p, NULL);
    for (uint64_t i = 0; i < pi->numel; i++)
      b[i] = scale * sinf((float)(i * 13 + p));
  }
}

/* The central difference (loss(w + h) - loss(w - h)) / 2h at *w with h
 * 1e-2 (fp32 weights), *w restored. */
static inline double tiny_central_diff(float *w, double (*loss)(void *), void *arg) {
  float keep = *w;
  const float h = 1e-2f;
  *w = keep + h;
  double lp = loss(arg);
  *w = keep - h;
  double lm = loss(arg);
  *w = keep;
  return (lp - lm) / (2.0 * h);
}

#endif
