/* The FP8 emulation (ops/fp8.h, ops/cpu/fp8_linear.c) against direct
 * computations written here: every code of both formats decoded from its
 * bit fields; encoding as "the nearest finite code after clamping, ties to
 * the even code" by search over all codes; the recipes' scales from the
 * amax; the emulated linear GEMMs as double sums over the searched codes. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fd_check.h"
#include "ops/cpu/ops_cpu.h"
#include "ops/fp8.h"

static const int MB[2] = {3, 2}, BIAS[2] = {7, 15};

/* The value of code c from its fields, in double; NaN codes give NaN. */
static double direct_decode(int c, int fmt) {
  int eb = fmt == FSDPC_FP8_E4M3 ? 4 : 5, mb = MB[fmt];
  int e = (c >> mb) & ((1 << eb) - 1), m = c & ((1 << mb) - 1);
  double s = (c & 0x80) ? -1.0 : 1.0;
  if (fmt == FSDPC_FP8_E4M3 && e == 15 && m == 7)
    return NAN;
  if (fmt == FSDPC_FP8_E5M2 && e == 31)
    return m ? NAN : s * INFINITY;
  if (e == 0)
    return s * m * pow(2.0, 1 - BIAS[fmt] - mb);
  return s * (1.0 + m / (double)(1 << mb)) * pow(2.0, e - BIAS[fmt]);
}

/* The nearest finite code to x after clamping to +-max, ties to the even
 * code, by search; NaN for NaN. */
static int direct_encode(float x, int fmt) {
  if (isnan(x))
    return -1;
  double mx = fmt == FSDPC_FP8_E4M3 ? 448.0 : 57344.0;
  double a = fabs((double)x) > mx ? mx : fabs((double)x);
  int best = -1;
  double bd = INFINITY;
  for (int c = 0; c < 128; c++) {
    double v = direct_decode(c, fmt);
    if (!isfinite(v))
      continue;
    double d = fabs(v - a);
    if (d < bd || (d == bd && (c & 1) == 0)) {
      bd = d;
      best = c;
    }
  }
  return best | (signbit(x) ? 0x80 : 0);
}

START_TEST(decode_all_codes) {
  for (int fmt = 0; fmt < 2; fmt++) {
    int nans = 0, infs = 0;
    for (int c = 0; c < 256; c++) {
      double want = direct_decode(c, fmt);
      float got = fsdpc__fp8_decode((uint8_t)c, fmt);
      if (isnan(want)) {
        ck_assert(isnan(got));
        nans++;
        continue;
      }
      ck_assert_msg((double)got == want, "fmt %d code %d: %g != %g", fmt, c, got, want);
      infs += isinf(got) != 0;
      if (isfinite(want)) /* every finite code survives a round trip */
        ck_assert_int_eq(fsdpc__fp8_encode(got, fmt), c);
    }
    ck_assert_int_eq(nans, fmt == FSDPC_FP8_E4M3 ? 2 : 6);
    ck_assert_int_eq(infs, fmt == FSDPC_FP8_E4M3 ? 0 : 2);
  }
  ck_assert(fsdpc__fp8_decode(0x7E, FSDPC_FP8_E4M3) == 448.0f);
  ck_assert(fsdpc__fp8_decode(0x01, FSDPC_FP8_E4M3) == ldexpf(1.0f, -9));
  ck_assert(fsdpc__fp8_decode(0x7B, FSDPC_FP8_E5M2) == 57344.0f);
  ck_assert(fsdpc__fp8_decode(0x01, FSDPC_FP8_E5M2) == ldexpf(1.0f, -16));
  ck_assert(fsdpc__fp8_max(FSDPC_FP8_E4M3) == 448.0f);
  ck_assert(fsdpc__fp8_max(FSDPC_FP8_E5M2) == 57344.0f);
}
END_TEST

static void check_encode(float x, int fmt) {
  int want = direct_encode(x, fmt), got = fsdpc__fp8_encode(x, fmt);
  if (want < 0) { /* NaN in, a NaN code out */
    ck_assert_msg(isnan(fsdpc__fp8_decode((uint8_t)got, fmt)), "NaN encoded as %d", got);
    return;
  }
  ck_assert_msg(got == want, "fmt %d x %.9g: code %d, want %d", fmt, x, got, want);
}

START_TEST(encode_against_search) {
  for (int fmt = 0; fmt < 2; fmt++) {
    /* ties: midpoints of neighbouring codes, and one float ulp either side */
    for (int c = 0; c < 127; c++) {
      double lo = direct_decode(c, fmt), hi = direct_decode(c + 1, fmt);
      if (!isfinite(lo) || !isfinite(hi))
        continue;
      float mid = (float)((lo + hi) / 2);
      for (int s = -1; s <= 1; s += 2) {
        check_encode(s * mid, fmt);
        check_encode(s * nextafterf(mid, 0.0f), fmt);
        check_encode(s * nextafterf(mid, INFINITY), fmt);
      }
    }
    /* saturation, specials, the subnormal range and random magnitudes */
    const float special[] = {
        0.0f, -0.0f,    448.0f,         449.0f, 464.0f,         465.0f,         480.0f,
        1e6f, 57344.0f, 61440.0f,       1e30f,  INFINITY,       -INFINITY,      NAN,
        -NAN, 1e-10f,   ldexpf(1, -10), 1e-45f, ldexpf(3, -11), ldexpf(1, -17), ldexpf(3, -18)};
    for (size_t i = 0; i < sizeof special / sizeof *special; i++) {
      check_encode(special[i], fmt);
      check_encode(-special[i], fmt);
    }
    test_rng rng = {7 + (uint64_t)fmt};
    for (int i = 0; i < 20000; i++) {
      float u = rng_uniform(&rng), v = rng_uniform(&rng); /* in [-1, 1) */
      check_encode(v * ldexpf(1.0f, (int)(u * 22)), fmt);
    }
  }
  /* two known ties: 0.5 * (1 + 1.125) rounds to the even 1.0 (E4M3),
   * 464 (halfway to 480) saturates to 448 */
  ck_assert_int_eq(fsdpc__fp8_encode(1.0625f, FSDPC_FP8_E4M3), 0x38);
  ck_assert_int_eq(fsdpc__fp8_encode(464.0f, FSDPC_FP8_E4M3), 0x7E);
  ck_assert_int_eq(fsdpc__fp8_encode(-INFINITY, FSDPC_FP8_E5M2), 0xFB);
}
END_TEST

static float direct_scale(float amax, int fmt, int pow2) {
  double a = isnan(amax) ? amax : fmax((double)amax, 1e-12);
  float s = (float)((fmt == FSDPC_FP8_E4M3 ? 448.0 : 57344.0) / a);
  return pow2 && isfinite(s) && s > 0 ? (float)pow(2.0, floor(log2((double)s))) : s;
}

START_TEST(scales_and_axes) {
  const float amax[] = {1.0f, 3.0f, 0.0f, 1e-20f, 448.0f, 1e9f, 7.5e-3f, 1.0f / 3.0f};
  for (size_t i = 0; i < sizeof amax / sizeof *amax; i++)
    for (int fmt = 0; fmt < 2; fmt++)
      for (int p2 = 0; p2 < 2; p2++)
        ck_assert_float_eq(fsdpc__fp8_scale(amax[i], fmt, p2), direct_scale(amax[i], fmt, p2));
  ck_assert(fsdpc__fp8_scale(3.0f, FSDPC_FP8_E4M3, 1) == 128.0f); /* 149.3 down to 2^7 */
  ck_assert(isnan(fsdpc__fp8_scale(NAN, FSDPC_FP8_E4M3, 0)));
  /* a 3 x 4 matrix: amax of the tensor 8, rows (2, 8, 0.5), cols (4, 1, 8, 2) */
  const float x[12] = {1, -1, 2, 0, -4, 0.5f, -8, 2, 0.5f, 0, 0.25f, 0};
  float s[4];
  fsdpc__fp8_scales(x, 3, 4, FSDPC_FP8_AXIS_TENSOR, FSDPC_FP8_E4M3, 0, s);
  ck_assert_float_eq(s[0], 56.0f);
  fsdpc__fp8_scales(x, 3, 4, FSDPC_FP8_AXIS_ROW, FSDPC_FP8_E4M3, 0, s);
  ck_assert_float_eq(s[0], 224.0f);
  ck_assert_float_eq(s[1], 56.0f);
  ck_assert_float_eq(s[2], 896.0f);
  fsdpc__fp8_scales(x, 3, 4, FSDPC_FP8_AXIS_COL, FSDPC_FP8_E4M3, 1, s);
  ck_assert_float_eq(s[0], 64.0f); /* 112 down */
  ck_assert_float_eq(s[1], 256.0f);
  ck_assert_float_eq(s[2], 32.0f);
  ck_assert_float_eq(s[3], 128.0f);
  /* the cast multiplies by the scale of the element's axis */
  uint8_t q[12];
  fsdpc__fp8_scales(x, 3, 4, FSDPC_FP8_AXIS_ROW, FSDPC_FP8_E4M3, 0, s);
  fsdpc__fp8_cast(x, 3, 4, FSDPC_FP8_AXIS_ROW, s, FSDPC_FP8_E4M3, q);
  for (int i = 0; i < 12; i++)
    ck_assert_int_eq(q[i], direct_encode(x[i] * s[i / 4], FSDPC_FP8_E4M3));
  ck_assert(fsdpc__fp8_decode(q[6], FSDPC_FP8_E4M3) == -448.0f); /* each row's amax hits max */
  /* a NaN anywhere in a row makes that row's scale NaN, and only that row's */
  float y[4] = {1, NAN, 2, 3};
  fsdpc__fp8_scales(y, 2, 2, FSDPC_FP8_AXIS_ROW, FSDPC_FP8_E4M3, 0, s);
  ck_assert(isnan(s[0]) && s[1] == direct_scale(3.0f, FSDPC_FP8_E4M3, 0));
  /* the recipes' formats and power-of-two rounding (torchao) */
  ck_assert_int_eq(fsdpc__fp8_grad_format(FSDPC_FP8_TENSORWISE), FSDPC_FP8_E5M2);
  ck_assert_int_eq(fsdpc__fp8_grad_format(FSDPC_FP8_ROWWISE), FSDPC_FP8_E4M3);
  ck_assert_int_eq(fsdpc__fp8_act_format(FSDPC_FP8_TENSORWISE), FSDPC_FP8_E4M3);
  ck_assert(!fsdpc__fp8_pow2(FSDPC_FP8_TENSORWISE) && fsdpc__fp8_pow2(FSDPC_FP8_ROWWISE));
}
END_TEST

/* ---- the emulated linear against double sums ---- */

/* The quantized value and 1/scale of element (i, j) of a row-major (R, K)
 * operand, scaled along axis (per row: over j; per column: over i). */
typedef struct dq {
  const float *x;
  int R, K, axis, fmt, pow2;
} dq;

static float dq_scale(const dq *o, int i, int j) {
  float m = 0.0f;
  for (int a = 0; a < o->R; a++)
    for (int b = 0; b < o->K; b++)
      if (o->axis == FSDPC_FP8_AXIS_TENSOR || (o->axis == FSDPC_FP8_AXIS_ROW && a == i) ||
          (o->axis == FSDPC_FP8_AXIS_COL && b == j))
        m = fmaxf(m, fabsf(o->x[a * o->K + b]));
  return direct_scale(m, o->fmt, o->pow2);
}
static double dq_val(const dq *o, int i, int j) {
  float s = dq_scale(o, i, j);
  return direct_decode(direct_encode(o->x[i * o->K + j] * s, o->fmt), o->fmt) * (1.0 / s);
}

enum { N = 5, C = 12, OC = 7 };

static void fill(test_rng *rng, float *x, int rows, int cols, int spread) {
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++) /* rows of very different magnitudes */
      x[i * cols + j] = rng_uniform(rng) * (spread ? ldexpf(1.0f, 5 * i - 10) : 1.0f);
}

static void close_to(const float *got, const double *want, int n, const char *what) {
  for (int i = 0; i < n; i++)
    ck_assert_msg(fabs(got[i] - want[i]) <= 1e-5 * (1 + fabs(want[i])), "%s[%d]: %g vs %g", what, i,
                  got[i], want[i]);
}

/* want (M, Nc) = base[e] + sum over k of a'[i, k] b'[k, j] in double, a'
 * and b' the operands as the GEMM reads them (ta: a stored (K, M); tb: b
 * stored (Nc, K)), each element quantized by dq_val. */
static void direct_gemm(const dq *a, int ta, const dq *b, int tb, const float *base, double *want) {
  int M = ta ? a->K : a->R, K = ta ? a->R : a->K, Nc = tb ? b->R : b->K;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < Nc; j++) {
      double s = 0;
      for (int k = 0; k < K; k++)
        s += (ta ? dq_val(a, k, i) : dq_val(a, i, k)) * (tb ? dq_val(b, j, k) : dq_val(b, k, j));
      want[i * Nc + j] = base[i * Nc + j] + s;
    }
}

START_TEST(linear_against_direct) {
  for (int recipe = FSDPC_FP8_TENSORWISE; recipe <= FSDPC_FP8_ROWWISE; recipe++) {
    int row = recipe == FSDPC_FP8_ROWWISE, p2 = row, gf = fsdpc__fp8_grad_format(recipe);
    int ax_r = row ? FSDPC_FP8_AXIS_ROW : 0, ax_c = row ? FSDPC_FP8_AXIS_COL : 0;
    test_rng rng = {11};
    float x[N * C], w[OC * C], dy[N * OC], res[N * OC], out[N * OC], dx[N * C], dw[OC * C];
    float dx0[N * C], dw0[OC * C];
    fill(&rng, x, N, C, 1);
    fill(&rng, w, OC, C, 0);
    fill(&rng, dy, N, OC, 1);
    fill(&rng, res, N, OC, 0);
    fill(&rng, dx0, N, C, 0);
    fill(&rng, dw0, OC, C, 0);
    memcpy(dx, dx0, sizeof dx);
    memcpy(dw, dw0, sizeof dw);
    double want[OC * C]; /* the largest of the three outputs */
    /* out = x W^T + res: x per row, W per row (output column) */
    ck_assert_int_eq(fsdpc__cpu_fp8_linear_fwd(recipe, out, x, w, res, N, C, OC, NULL), FSDPC_OK);
    dq qx = {x, N, C, ax_r, 0, p2}, qw = {w, OC, C, ax_r, 0, p2};
    direct_gemm(&qx, 0, &qw, 1, res, want);
    close_to(out, want, N * OC, "out");
    /* dinp += dy W: dy per row, W per column */
    ck_assert_int_eq(fsdpc__cpu_fp8_linear_bwd(recipe, dx, 1, NULL, dy, x, w, N, C, OC, NULL),
                     FSDPC_OK);
    dq qg = {dy, N, OC, ax_r, gf, p2}, qwc = {w, OC, C, ax_c, 0, p2};
    direct_gemm(&qg, 0, &qwc, 0, dx0, want);
    close_to(dx, want, N * C, "dinp +=");
    /* dW += dy^T x: both per column */
    ck_assert_int_eq(fsdpc__cpu_fp8_linear_bwd(recipe, NULL, 0, dw, dy, x, w, N, C, OC, NULL),
                     FSDPC_OK);
    dq qgc = {dy, N, OC, ax_c, gf, p2}, qxc = {x, N, C, ax_c, 0, p2};
    direct_gemm(&qgc, 1, &qxc, 0, dw0, want);
    close_to(dw, want, OC * C, "dweight +=");
  }
}
END_TEST

/* Rows of magnitudes 2^-10 .. 2^10: one tensor scale flushes the small rows
 * toward zero (E4M3 keeps 2^-9 * amax / 448 at best), a scale per row
 * keeps each row's relative precision. */
START_TEST(rowwise_beats_tensorwise_on_spread_rows) {
  test_rng rng = {5};
  float x[N * C], w[OC * C], exact[N * OC], t[N * OC], r[N * OC];
  fill(&rng, x, N, C, 1);
  fill(&rng, w, OC, C, 0);
  fsdpc__cpu_matmul_fwd(exact, x, w, N, C, OC);
  ck_assert_int_eq(fsdpc__cpu_fp8_linear_fwd(FSDPC_FP8_TENSORWISE, t, x, w, NULL, N, C, OC, NULL),
                   FSDPC_OK);
  ck_assert_int_eq(fsdpc__cpu_fp8_linear_fwd(FSDPC_FP8_ROWWISE, r, x, w, NULL, N, C, OC, NULL),
                   FSDPC_OK);
  double et = 0, er = 0, n0 = 0; /* relative error of the smallest row */
  for (int o = 0; o < OC; o++) {
    et += fabs(t[o] - exact[o]);
    er += fabs(r[o] - exact[o]);
    n0 += fabs(exact[o]);
  }
  ck_assert_msg(er < et / 4, "rowwise %g vs tensorwise %g (row 0 error)", er, et);
  ck_assert_msg(er < 0.1 * n0 && et > 0, "rowwise error %g of %g", er, n0);
}
END_TEST

Suite *fp8_suite(void) {
  Suite *s = suite_create("fp8");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, decode_all_codes);
  tcase_add_test(tc, encode_against_search);
  tcase_add_test(tc, scales_and_axes);
  tcase_add_test(tc, linear_against_direct);
  tcase_add_test(tc, rowwise_beats_tensorwise_on_spread_rows);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(fp8_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
