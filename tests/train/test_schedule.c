/* LR schedules: hand-computed values of the HF formulas at key steps,
 * warmup_ratio rounding, floors and every refused input. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "train/schedule.h"

static fsdpc_schedule make(const char *name, double lr, int64_t T, int64_t W, double ratio,
                           double min_lr, double min_ratio) {
  fsdpc_schedule s;
  fsdpc_err err;
  fsdpc__err_clear(&err);
  const fsdpc_status st = fsdpc__schedule_init(&s, name, lr, T, W, ratio, min_lr, min_ratio, &err);
  ck_assert_msg(st == FSDPC_OK, "init %s: %s", name, err.msg);
  return s;
}

#define LR_EQ(s, step, want)                                                                       \
  ck_assert_double_eq_tol(fsdpc__schedule_lr(&(s), (step)), (want), 1e-15)

START_TEST(warmup_is_hf_linear_from_zero) {
  /* HF: lr = base * step / W for step < W, so the first step runs at 0. */
  fsdpc_schedule s = make("constant", 2.0, 100, 10, 0.0, 0.0, 0.0);
  ck_assert_str_eq(fsdpc__schedule_name(&s), "constant");
  ck_assert_int_eq(s.warmup_steps, 10);
  LR_EQ(s, 0, 0.0);
  LR_EQ(s, 1, 0.2);
  LR_EQ(s, 5, 1.0);
  LR_EQ(s, 9, 1.8);
  LR_EQ(s, 10, 2.0);
  LR_EQ(s, 99, 2.0);
  LR_EQ(s, 1000, 2.0);
  LR_EQ(s, -3, 0.0); /* below 0 counts as 0 */
}
END_TEST

START_TEST(linear_decay) {
  /* After warmup: base * (T - step) / (T - W). */
  fsdpc_schedule s = make("linear", 1.0, 100, 10, 0.0, 0.0, 0.0);
  LR_EQ(s, 5, 0.5);
  LR_EQ(s, 10, 1.0);
  LR_EQ(s, 37, 0.7);
  LR_EQ(s, 55, 0.5);
  LR_EQ(s, 99, 1.0 / 90.0);
  LR_EQ(s, 100, 0.0);
  LR_EQ(s, 150, 0.0);
  /* No warmup: the first step runs at the full lr. */
  fsdpc_schedule n = make("linear", 3.0, 4, 0, 0.0, 0.0, 0.0);
  LR_EQ(n, 0, 3.0);
  LR_EQ(n, 1, 2.25);
  LR_EQ(n, 3, 0.75);
}
END_TEST

START_TEST(cosine_decay) {
  /* After warmup: base * 0.5 * (1 + cos(pi * (step - W) / (T - W))). */
  fsdpc_schedule s = make("cosine", 1.0, 100, 10, 0.0, 0.0, 0.0);
  LR_EQ(s, 9, 0.9);
  LR_EQ(s, 10, 1.0);
  LR_EQ(s, 25, 0.9330127018922193); /* progress 1/6: (1 + sqrt(3)/2) / 2 */
  LR_EQ(s, 55, 0.5);
  LR_EQ(s, 85, 0.0669872981077807); /* progress 5/6 */
  LR_EQ(s, 100, 0.0);
  /* HF's curve would rise again past T; we hold the final value. */
  LR_EQ(s, 145, 0.0);
  ck_assert_str_eq(fsdpc__schedule_name(&s), "cosine");
}
END_TEST

START_TEST(floors) {
  /* min_lr_ratio r: factor * (1 - r) + r, so the end is base * r. */
  fsdpc_schedule c = make("cosine", 1.0, 100, 10, 0.0, 0.0, 0.1);
  LR_EQ(c, 5, 0.5); /* warmup ignores the floor, as in HF */
  LR_EQ(c, 10, 1.0);
  LR_EQ(c, 55, 0.55);
  LR_EQ(c, 100, 0.1);
  LR_EQ(c, 500, 0.1);
  fsdpc_schedule l = make("linear", 1.0, 100, 10, 0.0, 0.0, 0.1);
  LR_EQ(l, 55, 0.55);
  LR_EQ(l, 100, 0.1);
  /* min_lr absolute: rate = min_lr / base, as HF computes it. */
  fsdpc_schedule m = make("cosine", 1e-3, 1000, 0, 0.0, 1e-4, 0.0);
  ck_assert_double_eq_tol(fsdpc__schedule_lr(&m, 0), 1e-3, 1e-18);
  ck_assert_double_eq_tol(fsdpc__schedule_lr(&m, 500), 5.5e-4, 1e-18);
  ck_assert_double_eq_tol(fsdpc__schedule_lr(&m, 1000), 1e-4, 1e-18);
  ck_assert_double_eq_tol(fsdpc__schedule_lr(&m, 2000), 1e-4, 1e-18);
}
END_TEST

START_TEST(warmup_ratio_rounds_up) {
  ck_assert_int_eq(make("linear", 1.0, 100, 0, 0.05, 0, 0).warmup_steps, 5);
  ck_assert_int_eq(make("linear", 1.0, 100, 0, 0.015, 0, 0).warmup_steps, 2);
  ck_assert_int_eq(make("linear", 1.0, 1000, 0, 0.03, 0, 0).warmup_steps, 30);
  ck_assert_int_eq(make("linear", 1.0, 7, 0, 0.1, 0, 0).warmup_steps, 1);
  /* HF's math.ceil of the double product: 0.07 * 100 = 7.000000000000001. */
  ck_assert_int_eq(make("linear", 1.0, 100, 0, 0.07, 0, 0).warmup_steps, 8);
  /* warmup_steps wins over the ratio. */
  ck_assert_int_eq(make("linear", 1.0, 100, 3, 0.5, 0, 0).warmup_steps, 3);
  fsdpc_schedule s = make("cosine", 1.0, 100, 0, 0.05, 0, 0);
  LR_EQ(s, 4, 0.8);
  LR_EQ(s, 5, 1.0);
}
END_TEST

static void expect_fail(const char *name, double lr, int64_t T, int64_t W, double ratio,
                        double min_lr, double min_ratio, const char *needle) {
  fsdpc_schedule s;
  fsdpc_err err;
  fsdpc__err_clear(&err);
  ck_assert_int_eq(fsdpc__schedule_init(&s, name, lr, T, W, ratio, min_lr, min_ratio, &err),
                   FSDPC_INVALID_USAGE);
  ck_assert_int_eq(err.status, FSDPC_INVALID_USAGE);
  ck_assert_msg(strstr(err.msg, needle) != NULL, "message '%s' lacks '%s'", err.msg, needle);
  ck_assert_ptr_null(strchr(err.msg, '\n'));
}

START_TEST(bad_input_rejected) {
  expect_fail("cosin", 1.0, 100, 0, 0, 0, 0, "unknown schedule 'cosin'");
  expect_fail(NULL, 1.0, 100, 0, 0, 0, 0, "unknown schedule");
  expect_fail("linear", -1.0, 100, 0, 0, 0, 0, "lr = -1");
  expect_fail("linear", NAN, 100, 0, 0, 0, 0, "lr = nan");
  expect_fail("linear", 1.0, 0, 0, 0, 0, 0, "max_steps = 0");
  expect_fail("linear", 1.0, 100, -1, 0, 0, 0, "warmup_steps = -1");
  expect_fail("linear", 1.0, 100, 100, 0, 0, 0, "100 warmup steps leave no step");
  expect_fail("linear", 1.0, 100, 0, 1.0, 0, 0, "(from warmup_ratio)");
  expect_fail("linear", 1.0, 100, 0, -0.1, 0, 0, "warmup_ratio");
  expect_fail("linear", 1.0, 100, 0, 1.5, 0, 0, "warmup_ratio");
  expect_fail("linear", 1.0, 100, 0, 0, -1e-5, 0, "min_lr");
  expect_fail("linear", 1.0, 100, 0, 0, 0, 1.5, "min_lr_ratio");
  expect_fail("linear", 1.0, 100, 0, 0, 1e-5, 0.1, "give one");
  expect_fail("cosine", 1e-4, 100, 0, 0, 1e-3, 0, "above lr");
  expect_fail("constant", 1.0, 100, 0, 0, 0, 0.1, "no effect with schedule 'constant'");
}
END_TEST

int main(void) {
  Suite *s = suite_create("schedule");
  TCase *tc = tcase_create("schedule");
  tcase_add_test(tc, warmup_is_hf_linear_from_zero);
  tcase_add_test(tc, linear_decay);
  tcase_add_test(tc, cosine_decay);
  tcase_add_test(tc, floors);
  tcase_add_test(tc, warmup_ratio_rounds_up);
  tcase_add_test(tc, bad_input_rejected);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  const int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
