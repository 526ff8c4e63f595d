/* The random init's per-element function (util/init_rng.h):
 * - its log and cos are within a few double ulps of libm's, so the float
 *   weights are those of the libm formula used before (at most one float
 *   ulp apart, on a handful of elements per million at most);
 * - a few known elements, pinned (the CUDA init is checked against the same
 *   function in tests/fsdp/test_init_world.c);
 * - mean and variance of a large sample;
 * - fsdpc__model_init_range is this function (norm weights are 1). */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/llama.h"
#include "util/init_rng.h"

/* The definition before init_rng.h: the same uniforms through libm. */
static float libm_normal(uint64_t key, uint64_t e, double std) {
  double u1 = ((double)(fsdpc__init_mix(key + 2 * e) >> 11) + 1.0) * 0x1.0p-53;
  double u2 = (double)(fsdpc__init_mix(key + 2 * e + 1) >> 11) * 0x1.0p-53;
  return (float)(std * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

static int64_t ulp_diff(float a, float b) {
  int32_t ia, ib;
  memcpy(&ia, &a, 4);
  memcpy(&ib, &b, 4);
  if (ia < 0)
    ia = INT32_MIN - ia;
  if (ib < 0)
    ib = INT32_MIN - ib;
  return llabs((int64_t)ia - (int64_t)ib);
}

START_TEST(log_and_cos_match_libm) {
  double worst_log = 0, worst_cos = 0;
  for (uint64_t e = 0; e < 200000; e++) {
    double u1 = fsdpc__init_u1(0x1234, e);
    double a = fsdpc__init_log(u1), b = log(u1);
    double rel = b == 0 ? fabs(a) : fabs(a - b) / fabs(b);
    if (rel > worst_log)
      worst_log = rel;
    uint64_t j = fsdpc__init_mix(0x1234 + 2 * e + 1) >> 11;
    double c = fsdpc__init_cos_turn(j), d = cos(2.0 * M_PI * (double)j * 0x1.0p-53);
    if (fabs(c - d) > worst_cos)
      worst_cos = fabs(c - d);
  }
  ck_assert_msg(worst_log < 8e-16, "log: worst relative error %g", worst_log);
  ck_assert_msg(worst_cos < 8e-16, "cos: worst absolute error %g", worst_cos);
  /* exact corners */
  ck_assert(fsdpc__init_log(1.0) == 0.0);
  ck_assert(fsdpc__init_cos_turn(0) == 1.0);
  ck_assert(fsdpc__init_cos_turn(1ull << 52) == -1.0); /* half a turn */
  ck_assert(fabs(fsdpc__init_log(0x1.0p-53) - log(0x1.0p-53)) < 1e-13);
}
END_TEST

START_TEST(floats_equal_libm_formula) {
  const char *names[] = {"model.embed_tokens.weight", "model.layers.0.mlp.up_proj.weight"};
  int64_t differ = 0, worst = 0, n = 1 << 20;
  for (int t = 0; t < 2; t++) {
    uint64_t key = fsdpc__init_key(1234, names[t]);
    for (int64_t e = 0; e < n; e++) {
      float a = fsdpc__init_normal(key, (uint64_t)e, 0.02), b = libm_normal(key, (uint64_t)e, 0.02);
      int64_t d = ulp_diff(a, b);
      if (d)
        differ++;
      if (d > worst)
        worst = d;
    }
  }
  ck_assert_msg(worst <= 1, "worst difference %lld float ulps", (long long)worst);
  ck_assert_msg(differ <= 8, "%lld of %lld elements differ from the libm formula",
                (long long)differ, (long long)(2 * n));
}
END_TEST

START_TEST(known_elements) {
  /* seed 1234 (the configs' default), std 0.02 */
  uint64_t key = fsdpc__init_key(1234, "model.layers.0.self_attn.q_proj.weight");
  ck_assert_uint_eq(key, 0xd43ecec95a19eff2ull);
  const uint64_t at[] = {0, 1, 2, 1000003, 4000000000ull};
  const float want[] = {0x1.c4e45ap-8f, 0x1.53c3bep-8f, 0x1.c3f728p-6f, -0x1.9b1006p-10f,
                        -0x1.8f2bcap-8f};
  for (int i = 0; i < 5; i++) {
    float v = fsdpc__init_normal(key, at[i], 0.02);
    ck_assert_msg(memcmp(&v, &want[i], 4) == 0, "element %llu: %a, want %a",
                  (unsigned long long)at[i], v, want[i]);
  }
}
END_TEST

START_TEST(moments) {
  uint64_t key = fsdpc__init_key(7, "lm_head.weight");
  double s = 0, s2 = 0;
  int n = 1 << 21;
  for (int e = 0; e < n; e++) {
    double v = fsdpc__init_normal(key, (uint64_t)e, 1.0);
    s += v;
    s2 += v * v;
  }
  double mean = s / n, var = s2 / n - mean * mean;
  ck_assert_msg(fabs(mean) < 0.003, "mean %g", mean);
  ck_assert_msg(fabs(var - 1.0) < 0.005, "variance %g", var);
}
END_TEST

START_TEST(init_range_is_this_function) {
  fsdpc_param_info p = {.kind = FSDPC_P_UP};
  snprintf(p.name, sizeof p.name, "%s", "model.layers.3.mlp.up_proj.weight");
  float got[1000];
  fsdpc__model_init_range(&p, 42, 0.05, 777, 1000, got);
  uint64_t key = fsdpc__init_key(42, p.name);
  for (int i = 0; i < 1000; i++) {
    float w = fsdpc__init_normal(key, 777 + (uint64_t)i, 0.05);
    ck_assert(memcmp(&got[i], &w, 4) == 0);
  }
  p.kind = FSDPC_P_LN2;
  fsdpc__model_init_range(&p, 42, 0.05, 0, 10, got);
  for (int i = 0; i < 10; i++)
    ck_assert(got[i] == 1.0f);
}
END_TEST

int main(void) {
  Suite *s = suite_create("init_rng");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, log_and_cos_match_libm);
  tcase_add_test(tc, floats_equal_libm_formula);
  tcase_add_test(tc, known_elements);
  tcase_add_test(tc, moments);
  tcase_add_test(tc, init_range_is_this_function);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
