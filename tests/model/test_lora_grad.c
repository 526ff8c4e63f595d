/* LoRA on the CPU reference (issue 14): the adapters' gradients from the
 * engine's backward match central finite differences of the loss on a tiny
 * model whose B matrices are non-zero (so every term of the backward
 * matters: dB, dA and the input gradients through frozen base weights and
 * through other layers' adapters), with and without dropout (the same mask
 * in the forward, the recompute and the backward); the frozen base gets no
 * gradient and does not move in an optimizer step; the adapter init is
 * PEFT's (A within 1/sqrt(in), B zero). Activation checkpointing, full
 * (whose recompute skips the down projection unless LoRA targets it) and
 * save_mlp (which also skips the saved gate and up projections unless LoRA
 * targets them), gives the same loss and gradients, bit for bit, without
 * LoRA, with LoRA on every projection and with LoRA on q and v only. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "tiny_model.h"

typedef tiny_model fx;

/* ckpt: 0 or FSDPC_AC_*; lora: 0 none, 1 every projection, 2 q and v. */
static void setup_with(fx *f, double dropout, int ckpt, int lora) {
  char peft[256] = "";
  if (lora)
    snprintf(peft, sizeof peft,
             "peft: {method: lora, r: 3, alpha: 6, dropout: %g, target_modules: [%s]}\n", dropout,
             lora == 1 ? "all-linear" : "q_proj, v_proj");
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "model: {vocab_size: 40, hidden_size: 16, intermediate_size: 24, num_hidden_layers: 2,\n"
           "        num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 16,\n"
           "        tie_word_embeddings: false, init: {std: 0.2}}\n"
           "data: {seq_len: 12}\n"
           "attention: {impl: naive}\n"
           "train: {micro_batch_size: 2, seed: 5}\n"
           "fsdp: {activation_checkpointing: %s, activation_checkpointing_policy: %s}\n"
           "%s",
           ckpt ? "true" : "false", ckpt == FSDPC_AC_SAVE_MLP ? "save_mlp" : "full", peft);
  tiny_model_open(f, yaml, "lora.yaml", ckpt);
  ck_assert_int_eq(f->plan->modes.activation_checkpointing, ckpt);
  tiny_model_lm_batch(f, 40);
  fsdpc__model_set_lora_round(f->m, 9, 1);
}

static void setup(fx *f, double dropout, int ckpt) {
  setup_with(f, dropout, ckpt, 1);
}

static void teardown(fx *f) {
  tiny_model_close(f);
}

/* Pointer to element 0 of parameter p in its (world-1, CPU) master shard. */
static float *master_of(fx *f, int p, float **grad) {
  return tiny_master(f, p, grad);
}

static double loss(void *f) {
  return tiny_loss(f);
}

/* B != 0: every adapter term contributes. */
static void set_b(fx *f) {
  tiny_set_b(f, 0.3f);
}

static void check_fd(double dropout, int ckpt) {
  fx f;
  setup(&f, dropout, ckpt);
  int np = fsdpc__engine_n_params(f.eng);
  set_b(&f);
  double ls;
  int64_t cnt = 0;
  fsdpc_err err;
  /* count first, then the real backward with grad_scale = 1 / count */
  ok(fsdpc__engine_eval(f.eng, f.m, &ls, &cnt, &err), &err);
  ok(fsdpc__engine_micro_step(f.eng, f.m, (float)(1.0 / (double)cnt), 1, &ls, &cnt, &err), &err);
  int checked = 0;
  double worst = 0.0;
  for (int p = 0; p < np; p++) {
    const fsdpc_param_info *pi = fsdpc__engine_param(f.eng, p, NULL, NULL);
    float *g;
    float *w = master_of(&f, p, &g);
    if (!fsdpc__lora_kind(pi->kind)) {
      ck_assert_msg(g == NULL, "frozen %s has a gradient buffer", pi->name);
      continue;
    }
    for (uint64_t k = 0; k < 3; k++) {
      uint64_t i = (k * 37 + (uint64_t)p) % pi->numel;
      double fd = tiny_central_diff(&w[i], loss, &f), an = g[i];
      double err_abs = fabs(fd - an), tol = 2e-3 + 2e-2 * fabs(fd);
      if (err_abs / (fabs(fd) + 1e-3) > worst)
        worst = err_abs / (fabs(fd) + 1e-3);
      ck_assert_msg(err_abs <= tol, "%s[%llu]: backward %.6g, finite differences %.6g", pi->name,
                    (unsigned long long)i, an, fd);
      checked++;
    }
  }
  ck_assert_int_eq(checked, 2 * 2 * 7 * 3);
  teardown(&f);
}

START_TEST(fd_no_dropout) {
  check_fd(0.0, 0);
}
END_TEST

START_TEST(fd_dropout_checkpointing) {
  check_fd(0.25, 1);
}
END_TEST

START_TEST(frozen_base_and_init) {
  fx f;
  setup(&f, 0.0, 0);
  int np = fsdpc__engine_n_params(f.eng), nb = f.plan->n_base_params;
  ck_assert_int_eq(np, nb + 2 * 2 * 7);
  /* PEFT's init: A uniform within 1/sqrt(in) and not all equal, B zero */
  for (int p = nb; p < np; p++) {
    const fsdpc_param_info *pi = fsdpc__engine_param(f.eng, p, NULL, NULL);
    float *w = master_of(&f, p, NULL);
    double bound = 1.0 / sqrt((double)pi->shape[1]), mx = 0.0;
    for (uint64_t i = 0; i < pi->numel; i++)
      mx = fmax(mx, fabs(w[i]));
    if (fsdpc__lora_kind_is_b(pi->kind))
      ck_assert_msg(mx == 0.0, "%s is not zero", pi->name);
    else
      ck_assert_msg(mx <= bound && mx > 0.5 * bound, "%s: max |A| %g, bound %g", pi->name, mx,
                    bound);
  }
  /* a step moves the adapters only */
  float *b0 = master_of(&f, 0, NULL);
  uint64_t n0 = fsdpc__engine_param(f.eng, 0, NULL, NULL)->numel;
  float *copy = malloc(n0 * sizeof(float));
  memcpy(copy, b0, n0 * sizeof(float));
  double ls, gn;
  int64_t cnt;
  fsdpc_err err;
  ok(fsdpc__engine_micro_step(f.eng, f.m, 0.05f, 1, &ls, &cnt, &err), &err);
  ok(fsdpc__engine_optim_step(f.eng, 1, 1e-2, 1.0, &gn, &err), &err);
  ck_assert_msg(gn > 0.0, "no adapter gradient");
  ck_assert_msg(memcmp(copy, b0, n0 * sizeof(float)) == 0, "the frozen embedding moved");
  int moved = 0;
  for (int p = nb; p < np; p++) {
    const fsdpc_param_info *pi = fsdpc__engine_param(f.eng, p, NULL, NULL);
    float *w = master_of(&f, p, NULL);
    if (fsdpc__lora_kind_is_b(pi->kind))
      for (uint64_t i = 0; i < pi->numel; i++)
        moved |= w[i] != 0.0f;
  }
  ck_assert_msg(moved, "no B matrix moved");
  free(copy);
  teardown(&f);
}
END_TEST

/* One micro-step's loss and every gradient, concatenated (*n floats, of
 * which *n_trained have a gradient buffer; frozen ones stay 0). */
static float *step_grads(int ckpt, int lora, double *ls, int *n, int *n_trained) {
  fx f;
  setup_with(&f, lora ? 0.25 : 0.0, ckpt, lora);
  set_b(&f);
  int64_t cnt;
  fsdpc_err err;
  ok(fsdpc__engine_micro_step(f.eng, f.m, 0.05f, 1, ls, &cnt, &err), &err);
  int np = fsdpc__engine_n_params(f.eng), k = 0;
  uint64_t total = 0;
  for (int p = 0; p < np; p++)
    total += fsdpc__engine_param(f.eng, p, NULL, NULL)->numel;
  float *out = calloc(total, sizeof(float));
  *n_trained = 0;
  for (int p = 0; p < np; p++) {
    const fsdpc_param_info *pi = fsdpc__engine_param(f.eng, p, NULL, NULL);
    float *g;
    master_of(&f, p, &g);
    if (g) {
      memcpy(out + k, g, pi->numel * sizeof(float));
      *n_trained += (int)pi->numel;
    }
    k += (int)pi->numel;
  }
  *n = k;
  teardown(&f);
  return out;
}

START_TEST(checkpointing_exact) {
  for (int lora = 0; lora < 3; lora++) {
    double l0;
    int n0, t0;
    float *g0 = step_grads(0, lora, &l0, &n0, &t0);
    for (int ckpt = FSDPC_AC_FULL; ckpt <= FSDPC_AC_SAVE_MLP; ckpt++) {
      double l1;
      int n1, t1;
      float *g1 = step_grads(ckpt, lora, &l1, &n1, &t1);
      ck_assert_int_eq(n0, n1);
      ck_assert_int_eq(t0, t1);
      ck_assert_msg(l0 == l1, "lora %d, checkpointing %d: loss %.17g, %.17g without", lora, ckpt,
                    l1, l0);
      int nz = 0;
      for (int i = 0; i < n0; i++) {
        ck_assert_msg(memcmp(&g0[i], &g1[i], sizeof(float)) == 0,
                      "lora %d, checkpointing %d: gradient %d is %.9g, %.9g without", lora, ckpt, i,
                      g1[i], g0[i]);
        nz += g0[i] != 0.0f;
      }
      ck_assert_msg(nz > t0 / 2, "lora %d: only %d of %d gradients are non-zero", lora, nz, t0);
      free(g1);
    }
    free(g0);
  }
}
END_TEST

/* PEFT's scaling: alpha / r, alpha / sqrt(r) with rslora; target bits. */
START_TEST(scaling_and_targets) {
  const char *base = "model: {vocab_size: 40, hidden_size: 16, intermediate_size: 24,\n"
                     "        num_hidden_layers: 1, num_attention_heads: 4}\n";
  struct {
    const char *peft;
    float scale;
    unsigned targets;
  } cases[] = {
      {"peft: {method: lora, r: 4, alpha: 6}\n", 1.5f, 0x5u}, /* PEFT's default q_proj, v_proj */
      {"peft: {method: lora, r: 4, alpha: 6, rslora: true, target_modules: [all-linear]}\n", 3.0f,
       0x7fu},
      {"peft: {method: lora, r: 16, alpha: 32, target_modules: [down_proj, o_proj]}\n", 2.0f,
       0x48u},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char yaml[512];
    snprintf(yaml, sizeof yaml, "%s%s", base, cases[i].peft);
    fsdpc_config *c = NULL;
    fsdpc_err err;
    ok(fsdpc__config_from_string(yaml, "s.yaml", NULL, 0, &c, &err), &err);
    fsdpc_lora lo;
    int on = 0;
    ok(fsdpc__lora_from_config(c, &lo, &on, &err), &err);
    ck_assert_int_eq(on, 1);
    ck_assert_msg(fabsf(lo.scale - cases[i].scale) < 1e-6f, "case %zu: scale %g, want %g", i,
                  lo.scale, cases[i].scale);
    ck_assert_uint_eq(lo.targets, cases[i].targets);
    fsdpc__config_destroy(c);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("lora");
  TCase *tc = tcase_create("grad");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, fd_no_dropout);
  tcase_add_test(tc, fd_dropout_checkpointing);
  tcase_add_test(tc, frozen_base_and_init);
  tcase_add_test(tc, scaling_and_targets);
  tcase_add_test(tc, checkpointing_exact);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
