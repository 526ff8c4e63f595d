/* The sgd plugin against a double-precision reference written from the
 * torch.optim.SGD documentation's pseudo-code, plus hand-computed values.
 * The plugin is dlopened from the build tree through a stub host. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "optim_testutil.h"

static const fsdpc_optim_v1 *vt;
static const fsdpc_component_desc *desc;

static void setup(void) { desc = stub_load_optim("sgd", &vt); }

typedef struct sgd_cfg {
  double wd, momentum, dampening;
  int nesterov;
} sgd_cfg;

/* c as the real host passes it: dampening through the options table. */
static fsdpc_optim_init sgd_init(sgd_cfg c) {
  fsdpc_optim_init in = optim_test_init(c.wd, 0.9 /* ignored by sgd */, 0.0, 0.0);
  in.opts = optim_test_opt("dampening", c.dampening);
  in.momentum = c.momentum;
  in.nesterov = c.nesterov;
  return in;
}

static int32_t try_create(sgd_cfg c, fsdpc_optimizer **opt) {
  fsdpc_optim_init in = sgd_init(c);
  return optim_test_create(vt, &in, opt);
}

static fsdpc_optimizer *create_ok(sgd_cfg c) {
  fsdpc_optim_init in = sgd_init(c);
  return optim_test_create_ok(vt, &in);
}

/* ---------------------------------------------------------------------- */

START_TEST(descriptor_options_and_slots) {
  ck_assert_int_eq(desc->default_score, 10);
  ck_assert_uint_eq(desc->n_options, 1);
  const fsdpc_option_desc *o = desc->options[0];
  ck_assert_str_eq(o->key, "dampening");
  ck_assert_int_eq(o->type, FSDPC_OPT_FLOAT);
  ck_assert_str_eq(o->default_value, "0");
  ck_assert_double_eq(o->min, 0.0);
  ck_assert_double_eq(o->max, 1.0);
  fsdpc_optimizer *opt = create_ok((sgd_cfg){0.0, 0.9, 0.0, 0});
  ck_assert_uint_eq(vt->n_slots(opt), 1);
  ck_assert_str_eq(vt->slot_name(opt, 0), "momentum_buffer");
  ck_assert_ptr_null(vt->slot_name(opt, 1));
  vt->destroy(opt);
  opt = create_ok((sgd_cfg){0.0, 0.0, 0.0, 0});
  ck_assert_uint_eq(vt->n_slots(opt), 0);
  ck_assert_ptr_null(vt->slot_name(opt, 0));
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
#ifdef FSDPC_WITH_CUDA /* built with its CUDA path (tests/cuda runs it) */
  ck_assert_int_eq(vt->supports(&s), FSDPC_OK);
#else
  ck_assert_int_eq(vt->supports(&s), FSDPC_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(stub_last_error(), "CUDA"));
#endif
}
END_TEST

/* Without plugin options (opts NULL) dampening takes its declared default 0. */
START_TEST(no_options_means_defaults) {
  fsdpc_optim_init in;
  memset(&in, 0, sizeof in);
  in.struct_size = sizeof in;
  in.momentum = 0.9;
  in.nesterov = 1; /* legal only with dampening 0 */
  in.device = FSDPC_DEVICE_CPU;
  fsdpc_optimizer *opt = NULL;
  ck_assert_int_eq(vt->create(&in, &opt), FSDPC_OK);
  vt->destroy(opt);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Five steps on several tensors against the reference.                     */

typedef struct layout {
  uint64_t numel, stride;
  int decay;
} layout;

static const layout L[] = {
    {1000, 1037, 1}, {17, 64, 0}, {0, 8, 1}, {40000, 40000, 1}, {333, 400, 0},
};
#define NL ((int)(sizeof L / sizeof L[0]))
#define NSTEPS 5
#define SENTINEL 12345.0f

typedef struct run {
  float *p[NL], *g[NSTEPS][NL], *state[NL];
  double *rp[NL], *rb[NL];
} run;

static void run_init(run *r, uint64_t seed) {
  stub_rng rng = {seed};
  for (int k = 0; k < NL; k++) {
    const uint64_t n = L[k].numel;
    r->p[k] = malloc((n + 1) * sizeof(float));
    r->state[k] = malloc((L[k].stride + 1) * sizeof(float));
    r->rp[k] = malloc((n + 1) * sizeof(double));
    r->rb[k] = calloc(n + 1, sizeof(double));
    for (uint64_t i = 0; i < L[k].stride; i++)
      r->state[k][i] = SENTINEL;
    for (uint64_t i = 0; i < n; i++) {
      const double mag = stub_uniform(&rng, 0.5, 1.5);
      r->p[k][i] = (float)(stub_uniform(&rng, 0, 1) < 0.5 ? -mag : mag);
      r->rp[k][i] = r->p[k][i];
      r->state[k][i] = 0.0f;
    }
    for (int s = 0; s < NSTEPS; s++) {
      r->g[s][k] = malloc((n + 1) * sizeof(float));
      for (uint64_t i = 0; i < n; i++)
        r->g[s][k][i] = (float)stub_uniform(&rng, -1, 1);
    }
  }
}

static void run_free(run *r) {
  for (int k = 0; k < NL; k++) {
    free(r->p[k]);
    free(r->state[k]);
    free(r->rp[k]);
    free(r->rb[k]);
    for (int s = 0; s < NSTEPS; s++)
      free(r->g[s][k]);
  }
}

static double step_lr(int t) { return 0.01 * (1.0 + 0.5 * t); }
static double step_scale(int t) { return t % 2 ? 0.73 : 1.0; }

static void run_plugin(run *r, fsdpc_optimizer *opt, int threads, int with_state) {
  for (int t = 1; t <= NSTEPS; t++) {
    fsdpc_optim_tensor ts[NL];
    for (int k = 0; k < NL; k++)
      ts[k] = optim_test_tensor(r->p[k], r->g[t - 1][k], with_state ? r->state[k] : NULL,
                                L[k].numel, L[k].stride, L[k].decay);
    fsdpc_optim_step_info info = optim_test_info(t, step_lr(t), step_scale(t), threads);
    stub_clear_error();
    ck_assert_msg(vt->step(opt, ts, NL, &info) == FSDPC_OK, "step %d: %s", t, stub_last_error());
  }
}

/* torch.optim.SGD docs, in double:
 *   g <- g + wd*theta;  if mu != 0: b <- (t > 1) ? mu*b + (1-tau)*g : g;
 *   g <- nesterov ? g + mu*b : b;  theta <- theta - lr*g */
static void run_reference(run *r, sgd_cfg c) {
  for (int t = 1; t <= NSTEPS; t++) {
    const double lr = step_lr(t), gs = step_scale(t);
    for (int k = 0; k < NL; k++) {
      for (uint64_t i = 0; i < L[k].numel; i++) {
        double g = (double)r->g[t - 1][k][i] * gs, p = r->rp[k][i];
        if (L[k].decay && c.wd != 0)
          g += c.wd * p;
        if (c.momentum != 0) {
          double b = r->rb[k][i];
          b = t > 1 ? c.momentum * b + (1 - c.dampening) * g : g;
          r->rb[k][i] = b;
          g = c.nesterov ? g + c.momentum * b : b;
        }
        r->rp[k][i] = p - lr * g;
      }
    }
  }
}

static void expect_close(const char *what, int k, uint64_t i, float got, double ref, double floor) {
  const double tol = 1e-6 * fmax(fabs(ref), floor);
  ck_assert_msg(fabs((double)got - ref) <= tol, "%s tensor %d elem %llu: got %.9g want %.9g", what,
                k, (unsigned long long)i, (double)got, ref);
}

static void check_against_reference(sgd_cfg c) {
  run r;
  run_init(&r, 0x243F6A8885A308D3ULL);
  fsdpc_optimizer *opt = create_ok(c);
  const int with_state = vt->n_slots(opt) == 1;
  run_plugin(&r, opt, 2, with_state);
  run_reference(&r, c);
  for (int k = 0; k < NL; k++) {
    for (uint64_t i = 0; i < L[k].numel; i++) {
      expect_close("param", k, i, r.p[k][i], r.rp[k][i], 0.0);
      /* The buffer sums terms of either sign (|g| <= 1, |wd*p| < 1): judge
       * it against that size. */
      if (with_state)
        expect_close("momentum_buffer", k, i, r.state[k][i], r.rb[k][i], 1.0);
    }
    for (uint64_t i = L[k].numel; i < L[k].stride; i++)
      ck_assert_float_eq(r.state[k][i], SENTINEL);
  }
  vt->destroy(opt);
  run_free(&r);
}

START_TEST(reference_momentum) { check_against_reference((sgd_cfg){0.01, 0.9, 0.0, 0}); }
END_TEST
START_TEST(reference_momentum_dampening) { check_against_reference((sgd_cfg){0.01, 0.9, 0.3, 0}); }
END_TEST
START_TEST(reference_nesterov) { check_against_reference((sgd_cfg){0.05, 0.8, 0.0, 1}); }
END_TEST
START_TEST(reference_plain_no_state) { check_against_reference((sgd_cfg){0.01, 0.0, 0.0, 0}); }
END_TEST

START_TEST(thread_count_does_not_change_bits) {
  run a, b;
  run_init(&a, 7);
  run_init(&b, 7);
  fsdpc_optimizer *opt = create_ok((sgd_cfg){0.01, 0.9, 0.1, 0});
  run_plugin(&a, opt, 1, 1);
  run_plugin(&b, opt, 3, 1);
  for (int k = 0; k < NL; k++) {
    ck_assert_int_eq(memcmp(a.p[k], b.p[k], L[k].numel * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(a.state[k], b.state[k], L[k].stride * sizeof(float)), 0);
  }
  vt->destroy(opt);
  run_free(&a);
  run_free(&b);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Hand-computed values.                                                      */

/* mu 0.9, tau 0.5, lr 0.1, g = 2 twice from p = 1, buffer starting at junk:
 *   step 1: buf = 2 (the gradient itself, no dampening), p = 1 - 0.2 = 0.8
 *   step 2: buf = 0.9*2 + 0.5*2 = 2.8, p = 0.8 - 0.28 = 0.52
 * A dampened first step would give buf = 1 and p = 0.9. */
START_TEST(first_step_copies_gradient) {
  const float g[1] = {2.0f};
  float p[1] = {1.0f}, buf[1] = {99.0f};
  fsdpc_optimizer *opt = create_ok((sgd_cfg){0.0, 0.9, 0.5, 0});
  fsdpc_optim_tensor t = optim_test_tensor(p, g, buf, 1, 1, 1);
  fsdpc_optim_step_info info = optim_test_info(1, 0.1, 1.0, 1);
  ck_assert_int_eq(vt->step(opt, &t, 1, &info), FSDPC_OK);
  ck_assert_float_eq(buf[0], 2.0f);
  ck_assert_float_eq_tol(p[0], 0.8f, 1e-7f);
  info.step = 2;
  ck_assert_int_eq(vt->step(opt, &t, 1, &info), FSDPC_OK);
  ck_assert_float_eq_tol(buf[0], 2.8f, 2e-7f);
  ck_assert_float_eq_tol(p[0], 0.52f, 1e-7f);
  vt->destroy(opt);
}
END_TEST

/* Nesterov, mu 0.9, lr 0.1, g = 1 twice from p = 1:
 *   step 1: buf = 1, d = 1 + 0.9 = 1.9, p = 0.81
 *   step 2: buf = 1.9, d = 1 + 1.71 = 2.71, p = 0.539
 * A resumed run (step 7, saved buffer 1.9) continues from the buffer. */
START_TEST(nesterov_by_hand_and_resume) {
  const float g[1] = {1.0f};
  float p[1] = {1.0f}, buf[1] = {0.0f};
  fsdpc_optimizer *opt = create_ok((sgd_cfg){0.0, 0.9, 0.0, 1});
  fsdpc_optim_tensor t = optim_test_tensor(p, g, buf, 1, 1, 1);
  fsdpc_optim_step_info info = optim_test_info(1, 0.1, 1.0, 1);
  ck_assert_int_eq(vt->step(opt, &t, 1, &info), FSDPC_OK);
  ck_assert_float_eq_tol(p[0], 0.81f, 1e-7f);
  info.step = 2;
  ck_assert_int_eq(vt->step(opt, &t, 1, &info), FSDPC_OK);
  ck_assert_float_eq_tol(buf[0], 1.9f, 2e-7f);
  ck_assert_float_eq_tol(p[0], 0.539f, 1e-7f);
  p[0] = 1.0f;
  buf[0] = 1.9f;
  info.step = 7;
  ck_assert_int_eq(vt->step(opt, &t, 1, &info), FSDPC_OK);
  /* buf = 0.9*1.9 + 1 = 2.71, p = 1 - 0.1*(1 + 0.9*2.71) = 0.6561 */
  ck_assert_float_eq_tol(buf[0], 2.71f, 2e-7f);
  ck_assert_float_eq_tol(p[0], 0.6561f, 1e-7f);
  vt->destroy(opt);
}
END_TEST

/* Plain SGD with coupled L2 and clipping: p - lr*(s*g + wd*p), decay only
 * where asked. lr 0.5, s 0.5, wd 0.25, g = 2, p = 4: 4 - 0.5*(1 + 1) = 3;
 * without decay 4 - 0.5 = 3.5. */
START_TEST(plain_sgd_with_l2_by_hand) {
  const float g[1] = {2.0f};
  float a[1] = {4.0f}, b[1] = {4.0f};
  fsdpc_optimizer *opt = create_ok((sgd_cfg){0.25, 0.0, 0.0, 0});
  fsdpc_optim_tensor ts[2] = {optim_test_tensor(a, g, NULL, 1, 0, 1),
                              optim_test_tensor(b, g, NULL, 1, 0, 0)};
  fsdpc_optim_step_info info = optim_test_info(3, 0.5, 0.5, 1);
  ck_assert_int_eq(vt->step(opt, ts, 2, &info), FSDPC_OK);
  ck_assert_float_eq(a[0], 3.0f);
  ck_assert_float_eq(b[0], 3.5f);
  vt->destroy(opt);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Bad input.                                                                 */

static void expect_create_fails(sgd_cfg c, const char *needle) {
  fsdpc_optimizer *opt = (fsdpc_optimizer *)(uintptr_t)1; /* must be reset to NULL */
  ck_assert_int_eq(try_create(c, &opt), FSDPC_INVALID_USAGE);
  ck_assert_ptr_null(opt);
  ck_assert_msg(strstr(stub_last_error(), needle) != NULL, "message '%s' lacks '%s'",
                stub_last_error(), needle);
  ck_assert_ptr_null(strchr(stub_last_error(), '\n'));
}

START_TEST(bad_hyperparameters_rejected) {
  expect_create_fails((sgd_cfg){0.0, -0.1, 0.0, 0}, "momentum");
  expect_create_fails((sgd_cfg){0.0, NAN, 0.0, 0}, "momentum");
  expect_create_fails((sgd_cfg){-1e-4, 0.9, 0.0, 0}, "weight_decay");
  expect_create_fails((sgd_cfg){0.0, 0.9, 1.5, 0}, "dampening");
  expect_create_fails((sgd_cfg){0.0, 0.0, 0.0, 1}, "nesterov needs momentum > 0");
  expect_create_fails((sgd_cfg){0.0, 0.9, 0.1, 1}, "dampening 0");
  /* The host's option lookup failing is passed through with its message. */
  static stub_opts empty;
  fsdpc_optim_init in = optim_test_init(0.0, 0.0, 0.0, 0.0);
  in.opts = (const fsdpc_opts *)&empty;
  fsdpc_optimizer *opt = NULL;
  ck_assert_int_eq(optim_test_create(vt, &in, &opt), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(stub_last_error(), "dampening"));
  in.opts = NULL;
  in.device = 7; /* no such device */
  ck_assert_int_eq(vt->create(&in, &opt), FSDPC_UNSUPPORTED);
}
END_TEST

START_TEST(bad_step_arguments_rejected) {
  fsdpc_optimizer *opt = create_ok((sgd_cfg){0.0, 0.9, 0.0, 0});
  float p[2] = {1, 2}, g[2] = {1, 1};
  fsdpc_optim_tensor t = optim_test_tensor(p, g, NULL, 2, 2, 1); /* momentum needs state */
  fsdpc_optim_step_info info = optim_test_info(1, 0.1, 1.0, 1);
  stub_clear_error();
  ck_assert_int_eq(vt->step(opt, &t, 1, &info), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(stub_last_error(), "state"));
  float s[2] = {0};
  t.state = s;
  info.step = 0;
  ck_assert_int_eq(vt->step(opt, &t, 1, &info), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(stub_last_error(), "1-based"));
  info = optim_test_info(1, INFINITY, 1.0, 1);
  ck_assert_int_eq(vt->step(opt, &t, 1, &info), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(stub_last_error(), "learning rate"));
  ck_assert_float_eq(p[0], 1.0f);
  vt->destroy(opt);
}
END_TEST

int main(void) {
  Suite *s = suite_create("optim_sgd");
  TCase *tc = tcase_create("sgd");
  tcase_add_checked_fixture(tc, setup, NULL);
  tcase_add_test(tc, descriptor_options_and_slots);
  tcase_add_test(tc, supports_cpu_only);
  tcase_add_test(tc, no_options_means_defaults);
  tcase_add_test(tc, reference_momentum);
  tcase_add_test(tc, reference_momentum_dampening);
  tcase_add_test(tc, reference_nesterov);
  tcase_add_test(tc, reference_plain_no_state);
  tcase_add_test(tc, thread_count_does_not_change_bits);
  tcase_add_test(tc, first_step_copies_gradient);
  tcase_add_test(tc, nesterov_by_hand_and_resume);
  tcase_add_test(tc, plain_sgd_with_l2_by_hand);
  tcase_add_test(tc, bad_hyperparameters_rejected);
  tcase_add_test(tc, bad_step_arguments_rejected);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  const int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
