/* The adamw plugin against a double-precision reference written from the
 * torch.optim.AdamW documentation's pseudo-code, plus hand-computed values.
 * The plugin is dlopened from the build tree through a stub host. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "optim_testutil.h"

static const fsdpc_optim_v1 *vt;
static const fsdpc_component_desc *desc;

static void setup(void) { desc = stub_load_optim("adamw", &vt); }

static fsdpc_optimizer *create_ok(double wd, double b1, double b2, double eps) {
  fsdpc_optim_init in = optim_test_init(wd, b1, b2, eps);
  return optim_test_create_ok(vt, &in);
}

/* ---------------------------------------------------------------------- */

START_TEST(descriptor_and_slots) {
  ck_assert_int_eq(desc->default_score, 20);
  ck_assert_uint_eq(desc->n_options, 0);
  ck_assert_ptr_nonnull(desc->capabilities);
  ck_assert_ptr_nonnull(strstr(desc->capabilities, "cpu"));
  fsdpc_optimizer *opt = create_ok(0.01, 0.9, 0.999, 1e-8);
  ck_assert_uint_eq(vt->n_slots(opt), 2);
  ck_assert_str_eq(vt->slot_name(opt, 0), "exp_avg");
  ck_assert_str_eq(vt->slot_name(opt, 1), "exp_avg_sq");
  ck_assert_ptr_null(vt->slot_name(opt, 2));
  float state[10];
  for (int i = 0; i < 10; i++)
    state[i] = 7.0f;
  ck_assert_int_eq(vt->init_state(opt, state, 10, FSDPC_DEVICE_CPU, NULL), FSDPC_OK);
  for (int i = 0; i < 10; i++)
    ck_assert_float_eq(state[i], 0.0f);
#ifdef FSDPC_WITH_CUDA /* the plugin has a CUDA path: host memory is refused (or no GPU) */
  ck_assert_int_ne(vt->init_state(opt, state, 10, FSDPC_DEVICE_CUDA, NULL), FSDPC_OK);
#else
  ck_assert_int_eq(vt->init_state(opt, state, 10, FSDPC_DEVICE_CUDA, NULL), FSDPC_UNSUPPORTED);
#endif
  vt->destroy(opt);
}
END_TEST

START_TEST(supports_cpu_only) {
  fsdpc_situation s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  s.host = stub_host();
  s.device = FSDPC_DEVICE_CPU;
  ck_assert_int_eq(vt->supports(&s), FSDPC_OK);
  s.device = FSDPC_DEVICE_CUDA;
  stub_clear_error();
  fsdpc_optim_init in = optim_test_init(0.0, 0.9, 0.999, 1e-8);
  in.device = FSDPC_DEVICE_CUDA;
  fsdpc_optimizer *opt = (fsdpc_optimizer *)(uintptr_t)1; /* must be reset to NULL */
#ifdef FSDPC_WITH_CUDA /* built with its CUDA path (tests/cuda runs it) */
  ck_assert_int_eq(vt->supports(&s), FSDPC_OK);
  ck_assert_int_eq(vt->create(&in, &opt), FSDPC_OK);
  vt->destroy(opt);
#else
  ck_assert_int_eq(vt->supports(&s), FSDPC_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(stub_last_error(), "CUDA"));
  ck_assert_int_eq(vt->create(&in, &opt), FSDPC_UNSUPPORTED);
  ck_assert_ptr_null(opt);
#endif
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Five steps on several tensors against the reference.                     */

typedef struct layout {
  uint64_t numel, stride;
  int decay;
} layout;

/* Mixed: decay on and off, padding between slots, an empty tensor, and more
 * elements in all than the plugin's one-thread threshold. */
static const layout L[] = {
    {1000, 1037, 1}, {17, 64, 0}, {0, 8, 1}, {40000, 40000, 1}, {333, 400, 0},
};
#define NL ((int)(sizeof L / sizeof L[0]))
#define NSTEPS 5
#define SENTINEL 12345.0f

typedef struct run {
  float *p[NL], *g[NSTEPS][NL], *state[NL];
  double *rp[NL], *rm[NL], *rv[NL];
} run;

static void run_init(run *r, uint64_t seed) {
  stub_rng rng = {seed};
  for (int k = 0; k < NL; k++) {
    const uint64_t n = L[k].numel;
    r->p[k] = malloc((n + 1) * sizeof(float));
    r->state[k] = malloc((2 * L[k].stride + 1) * sizeof(float));
    r->rp[k] = malloc((n + 1) * sizeof(double));
    r->rm[k] = calloc(n + 1, sizeof(double));
    r->rv[k] = calloc(n + 1, sizeof(double));
    for (uint64_t i = 0; i < 2 * L[k].stride; i++)
      r->state[k][i] = SENTINEL;
    for (uint64_t i = 0; i < n; i++) {
      /* |p| in [0.5, 1.5] keeps a relative tolerance meaningful. */
      const double mag = stub_uniform(&rng, 0.5, 1.5);
      r->p[k][i] = (float)(stub_uniform(&rng, 0, 1) < 0.5 ? -mag : mag);
      r->rp[k][i] = r->p[k][i];
      r->state[k][i] = 0.0f;
      r->state[k][L[k].stride + i] = 0.0f;
    }
    for (int s = 0; s < NSTEPS; s++) {
      r->g[s][k] = malloc((n + 1) * sizeof(float));
      for (uint64_t i = 0; i < n; i++) {
        /* Gradients over six decades, so eps and sqrt both matter. */
        const double e = stub_uniform(&rng, -5.0, 1.0);
        r->g[s][k][i] = (float)(stub_uniform(&rng, -1, 1) * pow(10.0, e));
      }
    }
  }
}

static void run_free(run *r) {
  for (int k = 0; k < NL; k++) {
    free(r->p[k]);
    free(r->state[k]);
    free(r->rp[k]);
    free(r->rm[k]);
    free(r->rv[k]);
    for (int s = 0; s < NSTEPS; s++)
      free(r->g[s][k]);
  }
}

static const double WD = 0.1, B1 = 0.9, B2 = 0.999, EPS = 1e-8;
static double step_lr(int t) { return 1e-3 * (1.0 + 0.5 * t); }
static double step_scale(int t) { return t % 2 ? 0.73 : 1.0; }

static void run_plugin(run *r, fsdpc_optimizer *opt, int threads) {
  for (int t = 1; t <= NSTEPS; t++) {
    fsdpc_optim_tensor ts[NL];
    for (int k = 0; k < NL; k++)
      ts[k] = optim_test_tensor(r->p[k], r->g[t - 1][k], r->state[k], L[k].numel, L[k].stride,
                                L[k].decay);
    fsdpc_optim_step_info info = optim_test_info(t, step_lr(t), step_scale(t), threads);
    stub_clear_error();
    ck_assert_msg(vt->step(opt, ts, NL, &info) == FSDPC_OK, "step %d: %s", t, stub_last_error());
  }
}

/* torch.optim.AdamW docs, in double:
 *   theta <- theta - lr*wd*theta;  m <- b1 m + (1-b1) g;  v <- b2 v + (1-b2) g^2
 *   m_hat = m / (1-b1^t);  v_hat = v / (1-b2^t);  theta <- theta - lr m_hat/(sqrt(v_hat)+eps) */
static void run_reference(run *r) {
  for (int t = 1; t <= NSTEPS; t++) {
    const double lr = step_lr(t), gs = step_scale(t);
    for (int k = 0; k < NL; k++) {
      for (uint64_t i = 0; i < L[k].numel; i++) {
        const double g = (double)r->g[t - 1][k][i] * gs;
        double p = r->rp[k][i], m = r->rm[k][i], v = r->rv[k][i];
        if (L[k].decay)
          p -= lr * WD * p;
        m = B1 * m + (1 - B1) * g;
        v = B2 * v + (1 - B2) * g * g;
        const double mh = m / (1 - pow(B1, t)), vh = v / (1 - pow(B2, t));
        p -= lr * mh / (sqrt(vh) + EPS);
        r->rp[k][i] = p;
        r->rm[k][i] = m;
        r->rv[k][i] = v;
      }
    }
  }
}

/* |got - ref| <= 1e-6 * max(|ref|, floor); a floor only for m, which passes
 * through zero, set to the size of its inputs. */
static void expect_close(const char *what, int k, uint64_t i, float got, double ref, double floor) {
  const double tol = 1e-6 * fmax(fabs(ref), floor);
  ck_assert_msg(fabs((double)got - ref) <= tol, "%s tensor %d elem %llu: got %.9g want %.9g", what,
                k, (unsigned long long)i, (double)got, ref);
}

START_TEST(matches_reference_five_steps) {
  run r;
  run_init(&r, 0x9E3779B97F4A7C15ULL);
  fsdpc_optimizer *opt = create_ok(WD, B1, B2, EPS);
  run_plugin(&r, opt, 2);
  run_reference(&r);
  for (int k = 0; k < NL; k++) {
    const uint64_t n = L[k].numel, st = L[k].stride;
    for (uint64_t i = 0; i < n; i++) {
      expect_close("param", k, i, r.p[k][i], r.rp[k][i], 0.0);
      /* m sums gradients of either sign: judge it against the largest |g|. */
      double gmax = 0.0;
      for (int s = 0; s < NSTEPS; s++)
        gmax = fmax(gmax, fabs(r.g[s][k][i]));
      expect_close("exp_avg", k, i, r.state[k][i], r.rm[k][i], gmax);
      expect_close("exp_avg_sq", k, i, r.state[k][st + i], r.rv[k][i], 0.0);
    }
    /* Padding between and after the slots is not the plugin's to write. */
    for (uint64_t i = n; i < st; i++) {
      ck_assert_float_eq(r.state[k][i], SENTINEL);
      ck_assert_float_eq(r.state[k][st + i], SENTINEL);
    }
  }
  vt->destroy(opt);
  run_free(&r);
}
END_TEST

/* The plugin's per-element fp32 definition (adamw.c's header), one element
 * at a time with no vectorisation and no contraction (this file is built
 * with -ffp-contract=off -fno-tree-vectorize): whatever vector width the
 * plugin's kernel picked for this CPU (AVX-512, AVX2, SSE2), its bits must
 * be these. */
static void run_scalar_fp32(run *r) {
  for (int t = 1; t <= NSTEPS; t++) {
    const double lr = step_lr(t), bc1 = 1.0 - pow(B1, t), bc2 = 1.0 - pow(B2, t);
    const float gs = (float)step_scale(t), df = (float)(1.0 - lr * WD), w1 = (float)(1.0 - B1);
    const float b2 = (float)B2, w2 = (float)(1.0 - B2), bc2s = (float)sqrt(bc2);
    const float eps = (float)EPS, nss = (float)(-(lr / bc1));
    for (int k = 0; k < NL; k++) {
      float *m = r->state[k], *v = r->state[k] + L[k].stride;
      for (uint64_t i = 0; i < L[k].numel; i++) {
        const float gi = r->g[t - 1][k][i] * gs;
        const float mi = w1 < 0.5f ? m[i] + w1 * (gi - m[i]) : gi - (gi - m[i]) * (1.0f - w1);
        const float vi = v[i] * b2 + (w2 * gi) * gi;
        const float denom = sqrtf(vi) / bc2s + eps;
        m[i] = mi;
        v[i] = vi;
        r->p[k][i] = r->p[k][i] * (L[k].decay ? df : 1.0f) + (nss * mi) / denom;
      }
    }
  }
}

START_TEST(vector_kernel_matches_scalar_bits) {
  run a, b;
  run_init(&a, 7);
  run_init(&b, 7);
  fsdpc_optimizer *opt = create_ok(WD, B1, B2, EPS);
  run_plugin(&a, opt, 4);
  run_scalar_fp32(&b);
  for (int k = 0; k < NL; k++)
    for (uint64_t i = 0; i < L[k].numel; i++) {
      ck_assert_msg(memcmp(&a.p[k][i], &b.p[k][i], sizeof(float)) == 0,
                    "param tensor %d elem %llu: %.9g vs scalar %.9g", k, (unsigned long long)i,
                    (double)a.p[k][i], (double)b.p[k][i]);
      ck_assert_int_eq(memcmp(&a.state[k][i], &b.state[k][i], sizeof(float)), 0);
      ck_assert_int_eq(memcmp(&a.state[k][L[k].stride + i], &b.state[k][L[k].stride + i],
                              sizeof(float)),
                       0);
    }
  vt->destroy(opt);
  run_free(&a);
  run_free(&b);
}
END_TEST

START_TEST(thread_count_does_not_change_bits) {
  run a, b;
  run_init(&a, 42);
  run_init(&b, 42);
  fsdpc_optimizer *opt = create_ok(WD, B1, B2, EPS);
  run_plugin(&a, opt, 1);
  run_plugin(&b, opt, 3);
  for (int k = 0; k < NL; k++) {
    ck_assert_int_eq(memcmp(a.p[k], b.p[k], L[k].numel * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(a.state[k], b.state[k], 2 * L[k].stride * sizeof(float)), 0);
  }
  vt->destroy(opt);
  run_free(&a);
  run_free(&b);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Hand-computed values.                                                      */

/* With eps negligible, the first AdamW step is exactly lr * sign(g) for any
 * gradient size: m_hat = g and v_hat = g^2. A missing or wrong bias
 * correction breaks this (without it the step would be 0.1/sqrt(0.001) =
 * 3.16 times larger). */
START_TEST(first_step_is_lr_times_sign) {
  const float g[6] = {3.0f, -2e-4f, 0.5f, -7.25f, 1e-3f, -1.0f};
  float p[6] = {0}, state[12] = {0};
  fsdpc_optimizer *opt = create_ok(0.0, 0.9, 0.999, 1e-30);
  fsdpc_optim_tensor t = optim_test_tensor(p, g, state, 6, 6, 1);
  fsdpc_optim_step_info info = optim_test_info(1, 1e-3, 1.0, 1);
  ck_assert_int_eq(vt->step(opt, &t, 1, &info), FSDPC_OK);
  for (int i = 0; i < 6; i++) {
    const double want = g[i] > 0 ? -1e-3 : 1e-3;
    ck_assert_msg(fabs(p[i] - want) <= 4 * 1.2e-7 * 1e-3, "elem %d: %.9g", i, (double)p[i]);
  }
  vt->destroy(opt);
}
END_TEST

/* betas 0.5 and 0.75 make every intermediate a short binary fraction:
 * step 1 with lr 0.25, g = 2 and g = -8 from p = 1 gives exactly 0.75 and
 * 1.25, m = 1 and -4, v = 1 and 16. */
START_TEST(exact_first_step_small_betas) {
  const float g[2] = {2.0f, -8.0f};
  float p[2] = {1.0f, 1.0f}, state[4] = {0};
  fsdpc_optimizer *opt = create_ok(0.0, 0.5, 0.75, 1e-30);
  fsdpc_optim_tensor t = optim_test_tensor(p, g, state, 2, 2, 1);
  fsdpc_optim_step_info info = optim_test_info(1, 0.25, 1.0, 1);
  ck_assert_int_eq(vt->step(opt, &t, 1, &info), FSDPC_OK);
  ck_assert_float_eq(p[0], 0.75f);
  ck_assert_float_eq(p[1], 1.25f);
  ck_assert_float_eq(state[0], 1.0f);
  ck_assert_float_eq(state[1], -4.0f);
  ck_assert_float_eq(state[2], 1.0f);
  ck_assert_float_eq(state[3], 16.0f);
  vt->destroy(opt);
}
END_TEST

/* Two steps by hand, lr 0.25, wd 0.1, betas 0.5/0.75, g = 2 then 4, p = 1:
 *   step 1: p = 1*0.975 - 0.5*1/2 = 0.725            (m = 1, v = 1)
 *   step 2: p = 0.725*0.975 - (0.25/0.75)*2.5/(sqrt(4.75)/sqrt(0.4375))
 *             = 0.706875 - 0.252907074... = 0.453967925555465
 * and without decay 0.497092925555465. grad_scale 0.5 on doubled gradients
 * must give the same. */
START_TEST(two_steps_by_hand_with_decay) {
  float g[2] = {4.0f, 4.0f};
  float pd[2] = {1.0f, 1.0f}, sd[4] = {0};
  float pn[1] = {1.0f}, sn[2] = {0};
  fsdpc_optimizer *opt = create_ok(0.1, 0.5, 0.75, 1e-30);
  for (int t = 1; t <= 2; t++) {
    float gd[2] = {g[0] * (float)t, g[1] * (float)t}; /* 4 then 8, scaled by 0.5 */
    fsdpc_optim_tensor ts[2] = {optim_test_tensor(pd, gd, sd, 2, 2, 1),
                                optim_test_tensor(pn, gd, sn, 1, 1, 0)};
    fsdpc_optim_step_info info = optim_test_info(t, 0.25, 0.5, 1);
    ck_assert_int_eq(vt->step(opt, ts, 2, &info), FSDPC_OK);
    if (t == 1)
      ck_assert_float_eq_tol(pd[0], 0.725f, 1e-7f);
  }
  ck_assert_double_eq_tol(pd[0], 0.453967925555465, 1e-6);
  ck_assert_double_eq_tol(pd[1], 0.453967925555465, 1e-6);
  ck_assert_double_eq_tol(pn[0], 0.497092925555465, 1e-6);
  vt->destroy(opt);
}
END_TEST

/* Zero gradients: the Adam part is 0/eps = 0, so only decay moves p, and
 * only on tensors with decay on: p *= 1 - lr*wd. */
START_TEST(decay_only_where_asked) {
  const float g[3] = {0};
  float a[3] = {1.0f, -2.0f, 4.0f}, b[3] = {1.0f, -2.0f, 4.0f}, sa[6] = {0}, sb[6] = {0};
  fsdpc_optimizer *opt = create_ok(0.5, 0.9, 0.999, 1e-8);
  fsdpc_optim_tensor ts[2] = {optim_test_tensor(a, g, sa, 3, 3, 1),
                              optim_test_tensor(b, g, sb, 3, 3, 0)};
  fsdpc_optim_step_info info = optim_test_info(1, 0.5, 1.0, 1);
  ck_assert_int_eq(vt->step(opt, ts, 2, &info), FSDPC_OK);
  ck_assert_float_eq(a[0], 0.75f);
  ck_assert_float_eq(a[1], -1.5f);
  ck_assert_float_eq(a[2], 3.0f);
  ck_assert_float_eq(b[0], 1.0f);
  ck_assert_float_eq(b[1], -2.0f);
  ck_assert_float_eq(b[2], 4.0f);
  vt->destroy(opt);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Bad input: a status and a one-line message naming the problem.           */

static void expect_create_fails(double wd, double b1, double b2, double eps, const char *needle) {
  fsdpc_optim_init in = optim_test_init(wd, b1, b2, eps);
  fsdpc_optimizer *opt = NULL;
  stub_clear_error();
  ck_assert_int_eq(vt->create(&in, &opt), FSDPC_INVALID_USAGE);
  ck_assert_ptr_null(opt);
  ck_assert_msg(strstr(stub_last_error(), needle) != NULL, "message '%s' lacks '%s'",
                stub_last_error(), needle);
  ck_assert_ptr_null(strchr(stub_last_error(), '\n'));
}

START_TEST(bad_hyperparameters_rejected) {
  expect_create_fails(0.0, 1.0, 0.999, 1e-8, "beta1");
  expect_create_fails(0.0, -0.1, 0.999, 1e-8, "beta1");
  expect_create_fails(0.0, 0.9, 1.0, 1e-8, "beta2");
  expect_create_fails(0.0, 0.9, NAN, 1e-8, "beta2");
  expect_create_fails(0.0, 0.9, 0.999, 0.0, "eps");
  expect_create_fails(0.0, 0.9, 0.999, -1e-8, "eps");
  expect_create_fails(-0.01, 0.9, 0.999, 1e-8, "weight_decay");
  expect_create_fails(INFINITY, 0.9, 0.999, 1e-8, "weight_decay");
  ck_assert_int_eq(vt->create(NULL, &(fsdpc_optimizer *){NULL}), FSDPC_INVALID_USAGE);
}
END_TEST

START_TEST(bad_step_arguments_rejected) {
  fsdpc_optimizer *opt = create_ok(0.0, 0.9, 0.999, 1e-8);
  float p[4] = {1, 2, 3, 4}, g[4] = {1, 1, 1, 1}, s[8] = {0};
  fsdpc_optim_tensor t = optim_test_tensor(p, g, s, 4, 4, 1);
  fsdpc_optim_step_info info = optim_test_info(0, 1e-3, 1.0, 1);
  stub_clear_error();
  ck_assert_int_eq(vt->step(opt, &t, 1, &info), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(stub_last_error(), "1-based"));
  info = optim_test_info(1, -1e-3, 1.0, 1);
  ck_assert_int_eq(vt->step(opt, &t, 1, &info), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(stub_last_error(), "learning rate"));
  info = optim_test_info(1, 1e-3, NAN, 1);
  ck_assert_int_eq(vt->step(opt, &t, 1, &info), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(stub_last_error(), "grad_scale"));
  info = optim_test_info(1, 1e-3, 1.0, 1);
  t.stride = 3;
  ck_assert_int_eq(vt->step(opt, &t, 1, &info), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(stub_last_error(), "stride"));
  t.stride = 4;
  t.grad = NULL;
  ck_assert_int_eq(vt->step(opt, &t, 1, &info), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(stub_last_error(), "NULL"));
  ck_assert_int_eq(vt->step(opt, &t, 1, NULL), FSDPC_INVALID_USAGE);
  /* Nothing was touched by the refused calls. */
  ck_assert_float_eq(p[0], 1.0f);
  ck_assert_float_eq(s[0], 0.0f);
  /* An empty list is a no-op. */
  ck_assert_int_eq(vt->step(opt, NULL, 0, &info), FSDPC_OK);
  vt->destroy(opt);
}
END_TEST

int main(void) {
  Suite *s = suite_create("optim_adamw");
  TCase *tc = tcase_create("adamw");
  tcase_add_checked_fixture(tc, setup, NULL);
  tcase_add_test(tc, descriptor_and_slots);
  tcase_add_test(tc, supports_cpu_only);
  tcase_add_test(tc, matches_reference_five_steps);
  tcase_add_test(tc, vector_kernel_matches_scalar_bits);
  tcase_add_test(tc, thread_count_does_not_change_bits);
  tcase_add_test(tc, first_step_is_lr_times_sign);
  tcase_add_test(tc, exact_first_step_small_betas);
  tcase_add_test(tc, two_steps_by_hand_with_decay);
  tcase_add_test(tc, decay_only_where_asked);
  tcase_add_test(tc, bad_hyperparameters_rejected);
  tcase_add_test(tc, bad_step_arguments_rejected);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  const int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
