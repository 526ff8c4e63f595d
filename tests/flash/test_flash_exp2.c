/* The polynomial exp2 of the flash sandbox's software-exp2 variant
 * (bench/flash/flash_exp2_poly.h, the host copy of exp2_fma in
 * bench/flash/flash_exp2.cuh): relative error against exp2 over the softmax's
 * range, exact powers of two at integers, and 0 (not NaN) for masked
 * (-inf) and very small inputs. */
#include <check.h>
#include <math.h>

#include "flash_exp2_poly.h"

/* Every x = k / 4096 in [-125, 1]: relative error within the fit's 1.02e-4
 * (plus float rounding), and the fit is not trivially exact. */
START_TEST(relative_error) {
  double worst = 0.0;
  for (int k = -125 * 4096; k <= 4096; k++) {
    const float x = (float)k / 4096.0f;
    const double want = exp2((double)x);
    const double got = flash_exp2_poly_host(x);
    const double rel = fabs(got / want - 1.0);
    if (rel > worst)
      worst = rel;
    ck_assert_msg(rel <= 1.05e-4, "exp2_poly(%.9g) = %.9g, exp2 = %.9g (rel %.3g)", x, got, want,
                  rel);
  }
  ck_assert_msg(worst > 5e-5, "worst relative error %.3g: the polynomial is not in use?", worst);
  /* Between grid points too (odd mantissas near the fit's extremes). */
  for (float x = -3.0f; x <= 0.0f; x = nextafterf(x, 1.0f) + 1e-5f) {
    const double rel = fabs(flash_exp2_poly_host(x) / exp2((double)x) - 1.0);
    ck_assert_msg(rel <= 1.05e-4, "exp2_poly(%.9g): rel %.3g", x, rel);
  }
}
END_TEST

/* At an integer f = 0 and p(0) = 1: the result is the power of two. */
START_TEST(integers_exact) {
  for (int n = -126; n <= 10; n++)
    ck_assert_float_eq(flash_exp2_poly_host((float)n), ldexpf(1.0f, n));
}
END_TEST

/* Masked entries (-inf) and anything at or below -127 give exactly 0;
 * between -127 and -125 a tiny non-negative value, never NaN. */
START_TEST(masked_and_tiny) {
  ck_assert_float_eq(flash_exp2_poly_host(-INFINITY), 0.0f);
  ck_assert_float_eq(flash_exp2_poly_host(-127.0f), 0.0f);
  ck_assert_float_eq(flash_exp2_poly_host(-1000.0f), 0.0f);
  ck_assert_float_eq(flash_exp2_poly_host(-3.0e38f), 0.0f);
  for (float x = -127.0f; x < -125.0f; x += 1.0f / 64) {
    const float r = flash_exp2_poly_host(x);
    ck_assert_msg(r >= 0.0f && r <= ldexpf(1.0f, -124), "exp2_poly(%.9g) = %.9g", x, r);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("flash_exp2");
  TCase *tc = tcase_create("poly");
  tcase_add_test(tc, relative_error);
  tcase_add_test(tc, integers_exact);
  tcase_add_test(tc, masked_and_tiny);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
