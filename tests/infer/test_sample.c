/* fsdpc__sample against a plain reference (softmax, full sort by
 * probability then id, top-k, top-p, one uniform draw over the kept mass):
 * the same token for every seed, setting and logits shape, ties included;
 * greedy is the argmax. The library takes candidates off a heap only as far
 * as top-k/top-p need, which must not change a single pick. */
#define _GNU_SOURCE /* qsort_r */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "data/rng.h"
#include "infer/infer.h"

static int by_p_desc(const void *a, const void *b, void *ctx) {
  const float *p = ctx;
  int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
  if (p[i] != p[j])
    return p[i] > p[j] ? -1 : 1;
  return i < j ? -1 : i > j;
}

static double uniform(uint64_t *state) {
  fsdpc_rng r;
  fsdpc__rng_seed(&r, *state);
  uint64_t x = fsdpc__rng_next(&r);
  *state = fsdpc__rng_next(&r);
  return (double)(x >> 11) * 0x1.0p-53;
}

static int32_t reference(const float *logits, int V, const fsdpc_sampling *s, uint64_t *state) {
  float *p = malloc((size_t)V * sizeof *p);
  int32_t *idx = malloc((size_t)V * sizeof *idx);
  int best = 0;
  for (int v = 1; v < V; v++)
    if (logits[v] > logits[best])
      best = v;
  double sum = 0.0;
  for (int v = 0; v < V; v++) {
    p[v] = (float)exp((logits[v] - logits[best]) / s->temperature);
    sum += p[v];
    idx[v] = v;
  }
  for (int v = 0; v < V; v++)
    p[v] = (float)(p[v] / sum);
  qsort_r(idx, (size_t)V, sizeof *idx, by_p_desc, p);
  int n = s->top_k > 0 && s->top_k < V ? s->top_k : V;
  if (s->top_p > 0.0 && s->top_p < 1.0) {
    double c = 0.0;
    int k = 0;
    while (k < n) {
      c += p[idx[k++]];
      if (c >= s->top_p)
        break;
    }
    n = k;
  }
  double mass = 0.0;
  for (int i = 0; i < n; i++)
    mass += p[idx[i]];
  double u = uniform(state) * mass, c = 0.0;
  int32_t out = idx[n - 1];
  for (int i = 0; i < n; i++) {
    c += p[idx[i]];
    if (u < c) {
      out = idx[i];
      break;
    }
  }
  free(p);
  free(idx);
  return out;
}

START_TEST(sample_equals_reference) {
  const int Vs[] = {1, 2, 7, 64, 1000, 5003};
  const double temps[] = {0.3, 1.0, 2.5};
  const int topk[] = {0, 1, 5, 50};
  const double topp[] = {1.0, 0.9, 0.5, 0.01};
  fsdpc_rng g;
  fsdpc__rng_seed(&g, 7);
  int cases = 0;
  for (size_t a = 0; a < sizeof Vs / sizeof Vs[0]; a++) {
    int V = Vs[a];
    float *x = malloc((size_t)V * sizeof *x), *sp = malloc((size_t)V * sizeof *sp);
    int32_t *si = malloc((size_t)V * sizeof *si);
    for (int shape = 0; shape < 3; shape++) {
      for (int v = 0; v < V; v++) {
        double r = (double)(fsdpc__rng_next(&g) >> 11) * 0x1.0p-53;
        /* 0: spread; 1: peaked; 2: coarse values, many exact ties */
        x[v] = shape == 0   ? (float)(4.0 * r)
               : shape == 1 ? (float)(v % 97 == 3 ? 12.0 + r : r)
                            : (float)floor(8.0 * r) * 0.5f;
      }
      for (size_t t = 0; t < 3; t++)
        for (size_t k = 0; k < 4; k++)
          for (size_t q = 0; q < 4; q++)
            for (uint64_t seed = 1; seed <= 2; seed++) {
              fsdpc_sampling s = {.temperature = temps[t], .top_k = topk[k], .top_p = topp[q]};
              uint64_t s1 = seed * 0x9e3779b97f4a7c15ull, s2 = s1;
              for (int draw = 0; draw < 2; draw++) {
                int32_t want = reference(x, V, &s, &s1);
                int32_t got = fsdpc__sample(x, V, &s, &s2, sp, si);
                ck_assert_msg(got == want,
                              "V %d shape %d T %g top_k %d top_p %g seed %llu draw %d: %d, "
                              "reference %d",
                              V, shape, s.temperature, s.top_k, s.top_p, (unsigned long long)seed,
                              draw, got, want);
                ck_assert_uint_eq(s1, s2);
                cases++;
              }
            }
      fsdpc_sampling greedy = {0};
      int32_t am = 0;
      for (int v = 1; v < V; v++)
        if (x[v] > x[am])
          am = v;
      ck_assert_int_eq(fsdpc__sample(x, V, &greedy, NULL, sp, si), am);
    }
    free(x);
    free(sp);
    free(si);
  }
  ck_assert_int_gt(cases, 3000);
}
END_TEST

int main(void) {
  Suite *su = suite_create("sample");
  TCase *tc = tcase_create("sample");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, sample_equals_reference);
  suite_add_tcase(su, tc);
  SRunner *sr = srunner_create(su);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
