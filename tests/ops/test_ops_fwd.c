/* Forward checks of the CPU reference ops against direct formulas written
 * here in double, plus the accumulation rule (+= for parameter gradients, =
 * for activation gradients) and the RoPE tables with Llama 3 scaling. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "fd_check.h"
#include "io/dtype.h"
#include "ops/cpu/ops_cpu.h"
#include "ops/ops.h"

static void fill_nan(float *x, size_t n) {
  for (size_t i = 0; i < n; i++)
    x[i] = NAN;
}

/* ---- embedding ---- */

START_TEST(embedding_fwd_and_accumulate) {
  enum { N = 6, C = 67, V = 5 }; /* C spans two 64-column blocks */
  test_rng rng = {1};
  int32_t tokens[N] = {2, 0, 2, 4, 2, 1};
  float wte[V * C], out[N * C], dout[N * C], d1[V * C] = {0}, d2[V * C] = {0};
  rng_fill(&rng, wte, V * C, 1.0f);
  rng_fill(&rng, dout, N * C, 1.0f);
  fsdpc__cpu_embedding_fwd(out, tokens, wte, N, C);
  for (int n = 0; n < N; n++)
    ck_assert_mem_eq(out + n * C, wte + tokens[n] * C, C * 4);
  fsdpc__cpu_embedding_bwd(d1, dout, tokens, N, C);
  for (int c = 0; c < C; c++) { /* token 2 appears at rows 0, 2, 4 */
    ck_assert_float_eq_tol(d1[2 * C + c], dout[c] + dout[2 * C + c] + dout[4 * C + c], 1e-6);
    ck_assert(d1[3 * C + c] == 0.0f);
  }
  fsdpc__cpu_embedding_bwd(d2, dout, tokens, N, C);
  fsdpc__cpu_embedding_bwd(d2, dout, tokens, N, C);
  /* The second call adds token by token, so equality is up to rounding. */
  for (int i = 0; i < V * C; i++)
    ck_assert_float_eq_tol(d2[i], 2.0f * d1[i], 1e-6);
}
END_TEST

/* ---- rmsnorm ---- */

START_TEST(rmsnorm_fwd_matches_formula) {
  enum { N = 5, C = 33 };
  test_rng rng = {2};
  float inp[N * C], weight[C], out[N * C], rstd[N];
  rng_fill(&rng, inp, N * C, 3.0f);
  rng_fill(&rng, weight, C, 2.0f);
  const float eps = 1e-5f;
  fsdpc__cpu_rmsnorm_fwd(out, rstd, inp, weight, N, C, eps);
  for (int n = 0; n < N; n++) {
    double ms = 0;
    for (int c = 0; c < C; c++)
      ms += (double)inp[n * C + c] * inp[n * C + c];
    double r = 1.0 / sqrt(ms / C + eps);
    ck_assert_double_eq_tol(rstd[n], r, 1e-6 * r);
    for (int c = 0; c < C; c++)
      ck_assert_double_eq_tol(out[n * C + c], weight[c] * inp[n * C + c] * r, 1e-5);
  }
}
END_TEST

START_TEST(rmsnorm_bwd_accumulates_dweight_writes_dinp) {
  enum { N = 4, C = 70 };
  test_rng rng = {3};
  float inp[N * C], weight[C], out[N * C], rstd[N], dout[N * C];
  float dinp1[N * C], dinp2[N * C], dw1[C] = {0}, dw2[C] = {0};
  rng_fill(&rng, inp, N * C, 1.0f);
  rng_fill(&rng, weight, C, 1.0f);
  rng_fill(&rng, dout, N * C, 1.0f);
  fsdpc__cpu_rmsnorm_fwd(out, rstd, inp, weight, N, C, 1e-6f);
  fsdpc__cpu_rmsnorm_bwd(dinp1, dw1, dout, inp, weight, rstd, N, C);
  fill_nan(dinp2, N * C);
  fsdpc__cpu_rmsnorm_bwd(dinp2, dw2, dout, inp, weight, rstd, N, C);
  fsdpc__cpu_rmsnorm_bwd(dinp2, dw2, dout, inp, weight, rstd, N, C);
  ck_assert_mem_eq(dinp1, dinp2, sizeof dinp1);
  for (int c = 0; c < C; c++)
    ck_assert(dw2[c] == 2.0f * dw1[c]);
}
END_TEST

/* ---- matmul ---- */

START_TEST(matmul_fwd_and_accumulate) {
  enum { N = 7, C = 13, OC = 9 };
  test_rng rng = {4};
  float inp[N * C], weight[OC * C], out[N * OC], dout[N * OC];
  float dinp[N * C], dw1[OC * C] = {0}, dw2[OC * C] = {0};
  rng_fill(&rng, inp, N * C, 1.0f);
  rng_fill(&rng, weight, OC * C, 1.0f);
  rng_fill(&rng, dout, N * OC, 1.0f);
  fsdpc__cpu_matmul_fwd(out, inp, weight, N, C, OC);
  for (int n = 0; n < N; n++)
    for (int o = 0; o < OC; o++) {
      double s = 0;
      for (int c = 0; c < C; c++)
        s += (double)inp[n * C + c] * weight[o * C + c];
      ck_assert_double_eq_tol(out[n * OC + o], s, 1e-5);
    }
  fsdpc__cpu_matmul_bwd(dinp, dw1, dout, inp, weight, N, C, OC);
  fill_nan(dinp, N * C);
  fsdpc__cpu_matmul_bwd(dinp, dw2, dout, inp, weight, N, C, OC);
  fsdpc__cpu_matmul_bwd(dinp, dw2, dout, inp, weight, N, C, OC);
  for (int i = 0; i < N * C; i++)
    ck_assert(isfinite(dinp[i]));
  for (int i = 0; i < OC * C; i++)
    ck_assert_float_eq_tol(dw2[i], 2.0f * dw1[i], 1e-6);
}
END_TEST

/* ---- rope ---- */

/* A RoPE spec of the old table arguments (dim = HD; llama3 when set). */
static fsdpc_rope rope_spec(int HD, double theta, int llama3, double factor, double low,
                            double high, int orig) {
  fsdpc_rope r = {.type = llama3 ? FSDPC_ROPE_LLAMA3 : FSDPC_ROPE_DEFAULT,
                  .dim = HD,
                  .max_pos = 1 << 20,
                  .theta = theta,
                  .factor = factor,
                  .low_freq_factor = low,
                  .high_freq_factor = high,
                  .original_max_pos = orig,
                  .truncate = 1};
  return r;
}

static void tables(float *c, float *s, int maxT, int HD, double theta, int llama3, double factor,
                   double low, double high, int orig) {
  fsdpc_rope r = rope_spec(HD, theta, llama3, factor, low, high, orig);
  fsdpc__rope_tables(c, s, &r, maxT, 0);
}

START_TEST(rope_fwd_is_rotate_half_and_bwd_inverts) {
  enum { N = 6, H = 2, HD = 16, MAXT = 40 };
  test_rng rng = {5};
  float ctab[MAXT * HD / 2], stab[MAXT * HD / 2];
  const double theta = 10000.0;
  tables(ctab, stab, MAXT, HD, theta, 0, 0, 0, 0, 0);
  int32_t pos[N] = {0, 1, 39, 17, 5, 17};
  float x[N * H * HD], y[N * H * HD];
  rng_fill(&rng, x, N * H * HD, 1.0f);
  memcpy(y, x, sizeof x);
  fsdpc__cpu_rope_fwd(y, ctab, stab, pos, N, H, HD, HD);
  /* HF: q * cos + rotate_half(q) * sin, with cos/sin repeated over both
   * halves and rotate_half(q) = cat(-q[HD/2:], q[:HD/2]). */
  for (int n = 0; n < N; n++)
    for (int h = 0; h < H; h++) {
      const float *xv = x + (n * H + h) * HD;
      const float *yv = y + (n * H + h) * HD;
      for (int d = 0; d < HD; d++) {
        int i = d % (HD / 2);
        double ang = pos[n] * pow(theta, -2.0 * i / HD);
        double rot = d < HD / 2 ? -(double)xv[d + HD / 2] : (double)xv[d - HD / 2];
        ck_assert_double_eq_tol(yv[d], xv[d] * cos(ang) + rot * sin(ang), 1e-5);
      }
    }
  fsdpc__cpu_rope_bwd(y, ctab, stab, pos, N, H, HD, HD);
  for (int i = 0; i < N * H * HD; i++)
    ck_assert_float_eq_tol(y[i], x[i], 1e-6);
}
END_TEST

/* Values from HF's _compute_llama3_parameters for Llama 3.1 (theta 500000,
 * factor 8, low 1, high 4, original 8192, HD 128), evaluated in double by a
 * separate script: i = 0 is a high frequency (unchanged), i = 30 lies in the
 * smoothed band (smooth = 0.5928), i = 50 is a low frequency (divided by 8). */
START_TEST(rope_tables_llama3) {
  enum { HD = 128, MAXT = 8192 };
  float *ctab = malloc(sizeof(float) * MAXT * HD / 2),
        *stab = malloc(sizeof(float) * MAXT * HD / 2);
  tables(ctab, stab, MAXT, HD, 500000.0, 1, 8.0, 1.0, 4.0, 8192);
  static const struct {
    int t, i;
    float c, s;
  } want[] = {
      {1, 0, 5.403023059e-01f, 8.414709848e-01f},
      {100, 0, 8.623188723e-01f, -5.063656411e-01f},
      {1000, 0, 5.623790763e-01f, 8.268795405e-01f},
      {8191, 0, -6.463904698e-01f, -7.630067894e-01f},
      {1, 30, 9.999990590e-01f, 1.371893137e-03f},
      {100, 30, 9.906042904e-01f, 1.367594233e-01f},
      {1000, 30, 1.975938422e-01f, 9.802839760e-01f},
      {8191, 30, 2.392622161e-01f, -9.709549897e-01f},
      {1, 50, 1.000000000e+00f, 4.411534675e-06f},
      {100, 50, 9.999999027e-01f, 4.411534531e-04f},
      {1000, 50, 9.999902692e-01f, 4.411520365e-03f},
      {8191, 50, 9.993472062e-01f, 3.612701730e-02f},
  };
  for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
    size_t o = (size_t)want[k].t * (HD / 2) + want[k].i;
    ck_assert_float_eq_tol(ctab[o], want[k].c, 1e-6);
    ck_assert_float_eq_tol(stab[o], want[k].s, 1e-6 * fabsf(want[k].s) + 1e-9);
  }
  /* The tiny llama3 fixture's settings (HD 12, original 16): even i = 0 lies
   * in the smoothed band (smooth = 0.5155); i = 1 and 5 are low frequencies. */
  tables(ctab, stab, 17, 12, 500000.0, 1, 8.0, 1.0, 4.0, 16);
  ck_assert_float_eq_tol(ctab[16 * 6 + 0], -9.784715714e-01f, 1e-6);
  ck_assert_float_eq_tol(stab[16 * 6 + 0], 2.063816466e-01f, 1e-6);
  ck_assert_float_eq_tol(ctab[16 * 6 + 1], 9.749072281e-01f, 1e-6);
  ck_assert_float_eq_tol(stab[16 * 6 + 1], 2.226115373e-01f, 1e-6);
  ck_assert_float_eq_tol(stab[16 * 6 + 5], 3.563594872e-05f, 1e-11);
  /* Without scaling, i = 50 keeps its frequency: angle = t * theta^(-100/128). */
  tables(ctab, stab, 2, HD, 500000.0, 0, 0, 0, 0, 0);
  ck_assert_float_eq_tol(stab[HD / 2 + 50], sin(pow(500000.0, -100.0 / 128)), 1e-10);
  ck_assert(ctab[0] == 1.0f && stab[0] == 0.0f);
  free(ctab);
  free(stab);
}
END_TEST

/* ---- swiglu ---- */

START_TEST(swiglu_fwd_matches_formula) {
  enum { N = 4, F = 21 };
  test_rng rng = {6};
  float gate[N * F], up[N * F], out[N * F];
  rng_fill(&rng, gate, N * F, 20.0f); /* saturated tails too */
  rng_fill(&rng, up, N * F, 1.0f);
  fsdpc__cpu_swiglu_fwd(out, gate, up, N, F);
  for (int i = 0; i < N * F; i++) {
    double g = gate[i], want = g / (1.0 + exp(-g)) * up[i];
    ck_assert_double_eq_tol(out[i], want, 1e-5 * (1.0 + fabs(want)));
  }
}
END_TEST

/* ---- cross-entropy ---- */

/* Direct log-softmax in double over the full (N, V) logits. */
static double xent_reference(const float *x, const float *w, const int32_t *labels, int N, int C,
                             int V, int64_t *count) {
  double total = 0;
  *count = 0;
  for (int n = 0; n < N; n++) {
    if (labels[n] == -100)
      continue;
    double *z = malloc(sizeof(double) * V), mx = -INFINITY, s = 0;
    for (int v = 0; v < V; v++) {
      z[v] = 0;
      for (int c = 0; c < C; c++)
        z[v] += (double)x[n * C + c] * w[v * C + c];
      mx = fmax(mx, z[v]);
    }
    for (int v = 0; v < V; v++)
      s += exp(z[v] - mx);
    total += -(z[labels[n]] - mx - log(s));
    (*count)++;
    free(z);
  }
  return total;
}

START_TEST(xent_loss_matches_log_softmax_any_chunk) {
  enum { N = 10, C = 8, V = 37 };
  test_rng rng = {7};
  float x[N * C], w[V * C], scratch[N * V];
  int32_t labels[N];
  rng_fill(&rng, x, N * C, 1.0f);
  rng_fill(&rng, w, V * C, 1.0f);
  for (int n = 0; n < N; n++)
    labels[n] = n % 4 == 1 ? -100 : rng_int(&rng, V);
  int64_t want_count;
  double want = xent_reference(x, w, labels, N, C, V, &want_count);
  float dx_ref[N * C], dw_ref[V * C] = {0};
  for (int chunk = 1; chunk <= N; chunk++) {
    double loss;
    int64_t count;
    float dx[N * C], dw[V * C] = {0};
    fsdpc__cpu_lmhead_xent(&loss, &count, dx, dw, x, w, labels, N, C, V, 0.5f, chunk, 0, scratch);
    ck_assert_int_eq(count, want_count);
    ck_assert_double_eq_tol(loss, want, 1e-5 * want);
    if (chunk == 1) {
      memcpy(dx_ref, dx, sizeof dx);
      memcpy(dw_ref, dw, sizeof dw);
    }
    for (int i = 0; i < N * C; i++)
      ck_assert_float_eq_tol(dx[i], dx_ref[i], 1e-6);
    for (int i = 0; i < V * C; i++)
      ck_assert_float_eq_tol(dw[i], dw_ref[i], 1e-6);
    /* Evaluation (no gradients) gives the same loss. */
    double loss_eval;
    fsdpc__cpu_lmhead_xent(&loss_eval, &count, NULL, NULL, x, w, labels, N, C, V, 0.5f, chunk, 0,
                           scratch);
    ck_assert(loss_eval == loss);
  }
}
END_TEST

/* logits_bf16: the logits are rounded to bf16 (nearest even) before the
 * softmax. Inputs on a 1/1024 grid keep every logit exact in fp32 and in
 * double, so the reference rounds the same values. */
START_TEST(xent_bf16_logits_round_before_softmax) {
  enum { N = 6, C = 8, V = 29 };
  test_rng rng = {9};
  float x[N * C], w[V * C], scratch[N * V], dx[N * C];
  int32_t labels[N];
  for (int i = 0; i < N * C; i++)
    x[i] = (float)(rng_int(&rng, 33) - 16) / 16.0f;
  for (int i = 0; i < V * C; i++)
    w[i] = (float)(rng_int(&rng, 129) - 64) / 64.0f;
  for (int n = 0; n < N; n++)
    labels[n] = n == 2 ? -100 : rng_int(&rng, V);
  double want = 0.0;
  int rounded = 0;
  for (int n = 0; n < N; n++) {
    if (labels[n] < 0)
      continue;
    double z[V], mx = -INFINITY, s = 0.0;
    for (int v = 0; v < V; v++) {
      float l = 0.0f;
      for (int c = 0; c < C; c++)
        l += x[n * C + c] * w[v * C + c]; /* exact on this grid */
      z[v] = fsdpc__bf16_to_f32(fsdpc__f32_to_bf16(l));
      rounded += z[v] != l;
      mx = fmax(mx, z[v]);
    }
    for (int v = 0; v < V; v++)
      s += exp(z[v] - mx);
    want += mx + log(s) - z[labels[n]];
  }
  ck_assert_int_gt(rounded, 0); /* the case does round some logits */
  double loss, loss32;
  int64_t count;
  for (int chunk = 1; chunk <= N; chunk++) {
    fsdpc__cpu_lmhead_xent(&loss, &count, dx, NULL, x, w, labels, N, C, V, 1.0f, chunk, 1, scratch);
    ck_assert_int_eq(count, N - 1);
    ck_assert_double_eq_tol(loss, want, 1e-6 * want);
  }
  fsdpc__cpu_lmhead_xent(&loss32, &count, dx, NULL, x, w, labels, N, C, V, 1.0f, 2, 0, scratch);
  ck_assert(loss32 != loss);
}
END_TEST

START_TEST(xent_stable_and_accumulates) {
  enum { N = 3, C = 4, V = 5 };
  /* Logits of ~1e4 overflow exp() without the max subtraction. */
  float x[N * C] = {100, 0, 0, 0, 0, 100, 0, 0, 0, 0, -100, 0};
  float w[V * C] = {100, 0, 0, 0, 99, 0, 0, 0, 0, 100, 0, 0, 0, 0, 100, 0, 0, 0, 0, 1};
  int32_t labels[N] = {1, 2, 4};
  float scratch[2 * V], dx[N * C], dw1[V * C] = {0}, dw2[V * C] = {0};
  double loss;
  int64_t count;
  fsdpc__cpu_lmhead_xent(&loss, &count, dx, dw1, x, w, labels, N, C, V, 1.0f, 2, 0, scratch);
  /* row 0: logits (1e4, 9900, 0, 0, 0), label 1: loss = log(1 + e^100) ~ 100.
   * row 1: label 2 is the max (1e4 vs 0): loss ~ 0.
   * row 2: logits (0, 0, 0, -1e4, 0), label 4: loss = log(4). */
  ck_assert_double_eq_tol(loss, 100.0 + log1p(exp(-100.0)) + 0.0 + log(4.0), 1e-9);
  for (int i = 0; i < N * C; i++)
    ck_assert(isfinite(dx[i]));
  fsdpc__cpu_lmhead_xent(&loss, &count, dx, dw2, x, w, labels, N, C, V, 1.0f, 2, 0, scratch);
  fsdpc__cpu_lmhead_xent(&loss, &count, dx, dw2, x, w, labels, N, C, V, 1.0f, 2, 0, scratch);
  for (int i = 0; i < V * C; i++)
    ck_assert_float_eq_tol(dw2[i], 2.0f * dw1[i], 1e-3);
  /* grad_scale scales the gradient linearly. */
  float dx_half[N * C];
  fsdpc__cpu_lmhead_xent(&loss, &count, dx_half, NULL, x, w, labels, N, C, V, 0.5f, 2, 0, scratch);
  for (int i = 0; i < N * C; i++)
    ck_assert_float_eq_tol(dx_half[i], 0.5f * dx[i], 1e-4);
}
END_TEST

START_TEST(logits_match_matmul) {
  enum { N = 3, C = 5, V = 4 };
  test_rng rng = {8};
  float x[N * C], w[V * C], a[N * V], b[N * V];
  rng_fill(&rng, x, N * C, 1.0f);
  rng_fill(&rng, w, V * C, 1.0f);
  fsdpc__cpu_logits(a, x, w, N, C, V);
  fsdpc__cpu_matmul_fwd(b, x, w, N, C, V);
  ck_assert_mem_eq(a, b, sizeof a);
}
END_TEST

/* ---- residual, reduce ---- */

START_TEST(residual_and_reduce) {
  enum { n = 100003 };
  test_rng rng = {9};
  float *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4);
  rng_fill(&rng, a, n, 1.0f);
  rng_fill(&rng, b, n, 1.0f);
  fsdpc__cpu_add(c, a, b, n);
  for (int i = 0; i < n; i++)
    ck_assert(c[i] == a[i] + b[i]);
  fsdpc__cpu_add(a, a, b, n); /* out aliases a */
  ck_assert_mem_eq(a, c, (size_t)n * 4);
  fsdpc__cpu_add_inplace(c, b, n);
  double want = 0;
  for (int i = 0; i < n; i++) {
    ck_assert(c[i] == a[i] + b[i]);
    want += (double)c[i] * c[i];
  }
  double got = fsdpc__cpu_sumsq(c, n);
  ck_assert_double_eq_tol(got, want, 1e-12 * want);
  ck_assert(fsdpc__cpu_sumsq(c, n) == got); /* same bits every call */
  ck_assert(fsdpc__cpu_sumsq(c, 0) == 0.0);
  fsdpc__cpu_scale(c, 0.5f, n);
  for (int i = 0; i < n; i++)
    ck_assert(c[i] == 0.5f * (a[i] + b[i]));
  free(a), free(b), free(c);
}
END_TEST

/* train.threads reaches the CPU ops per call: the caller's OpenMP setting
 * is never changed, the team size is set for the call only, and the
 * results do not depend on it. */
START_TEST(cpu_team_is_per_call) {
  omp_set_num_threads(3); /* the caller's own setting */
  ck_assert_int_eq(fsdpc__cpu_nt(), 3);
  ck_assert_int_eq(fsdpc__cpu_team_set(2), 0);
  ck_assert_int_eq(fsdpc__cpu_nt(), 2);
  ck_assert_int_eq(fsdpc__cpu_team_set(0), 2);
  ck_assert_int_eq(fsdpc__cpu_nt(), 3);

  enum { N = 300, C = 70, OC = 290 }; /* several GEMM output tiles */
  float *x = malloc(sizeof(float) * N * C), *w = malloc(sizeof(float) * OC * C);
  float *o1 = malloc(sizeof(float) * N * OC), *o4 = malloc(sizeof(float) * N * OC);
  test_rng rng = {11};
  rng_fill(&rng, x, N * C, 1.0f);
  rng_fill(&rng, w, OC * C, 1.0f);
  int one = 1, four = 4;
  fsdpc_ops t1, t4;
  fsdpc__ops_cpu_team(&t1, &one);
  fsdpc__ops_cpu_team(&t4, &four);
  fsdpc_err err;
  ck_assert_int_eq(t1.matmul_fwd(t1.ctx, o1, x, w, NULL, N, C, OC, &err), FSDPC_OK);
  ck_assert_int_eq(t4.matmul_fwd(t4.ctx, o4, x, w, NULL, N, C, OC, &err), FSDPC_OK);
  ck_assert_int_eq(memcmp(o1, o4, sizeof(float) * N * OC), 0);
  ck_assert_int_eq(omp_get_max_threads(), 3); /* untouched */
  ck_assert_int_eq(fsdpc__cpu_nt(), 3);       /* the call's team is gone */
  free(x), free(w), free(o1), free(o4);
}
END_TEST

/* A device that keeps the error behind a failed alloc or free. */
static int kept;
static fsdpc_status fake_take(void *ctx, fsdpc_err *err) {
  if (!kept)
    return FSDPC_OK;
  kept = 0;
  return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cuda: an illegal memory access (a fault)");
}

/* A failed alloc reads as the device's reason when it has one, and as out
 * of memory only otherwise; a failed free is not dropped. */
START_TEST(oom_reports_the_device_reason) {
  fsdpc_ops dev = *fsdpc__ops_cpu();
  dev.take_error = fake_take;
  fsdpc_err err;
  kept = 1;
  ck_assert_int_eq(fsdpc__ops_oom(&dev, &err, "gathering unit %s (%d bytes)", "layers.3", 64),
                   FSDPC_SYSTEM_ERROR);
  ck_assert_str_eq(err.msg, "gathering unit layers.3 (64 bytes): cuda: an illegal memory access "
                            "(a fault)");
  ck_assert_int_eq(fsdpc__ops_oom(&dev, &err, "gathering unit %s", "layers.3"), FSDPC_SYSTEM_ERROR);
  ck_assert_str_eq(err.msg, "out of memory gathering unit layers.3");
  ck_assert_int_eq(fsdpc__ops_oom(fsdpc__ops_cpu(), &err, "for %s", "x"), FSDPC_SYSTEM_ERROR);
  ck_assert_str_eq(err.msg, "out of memory for x");
  kept = 1;
  ck_assert_int_eq(fsdpc__ops_freed(&dev, &err), FSDPC_SYSTEM_ERROR);
  ck_assert_int_eq(fsdpc__ops_freed(&dev, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__ops_freed(fsdpc__ops_cpu(), &err), FSDPC_OK);
}
END_TEST

int main(void) {
  Suite *s = suite_create("ops_fwd");
  TCase *tc = tcase_create("forward");
  tcase_add_test(tc, embedding_fwd_and_accumulate);
  tcase_add_test(tc, rmsnorm_fwd_matches_formula);
  tcase_add_test(tc, rmsnorm_bwd_accumulates_dweight_writes_dinp);
  tcase_add_test(tc, matmul_fwd_and_accumulate);
  tcase_add_test(tc, rope_fwd_is_rotate_half_and_bwd_inverts);
  tcase_add_test(tc, rope_tables_llama3);
  tcase_add_test(tc, swiglu_fwd_matches_formula);
  tcase_add_test(tc, xent_loss_matches_log_softmax_any_chunk);
  tcase_add_test(tc, xent_stable_and_accumulates);
  tcase_add_test(tc, xent_bf16_logits_round_before_softmax);
  tcase_add_test(tc, logits_match_matmul);
  tcase_add_test(tc, residual_and_reduce);
  tcase_add_test(tc, cpu_team_is_per_call);
  tcase_add_test(tc, oom_reports_the_device_reason);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
