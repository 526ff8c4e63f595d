/* The fused lm-head cross-entropy's two variants on CUDA against their CPU
 * twins (ops/cpu/cross_entropy.c), fp32 and bf16 logits:
 * - lmhead_xent_rows (sequence objectives, issue 38): per-row seeds from
 *   the host, per-row losses back to the host (as double, widened in
 *   place), the forward-only call (no seeds) leaving dx and dweight alone;
 *   seeds all equal to grad_scale give lmhead_xent's bits.
 * - lmhead_xent_capped (Gemma 2's final soft-capping, issue 36): loss,
 *   count, dx and dweight; a cap that bites (the loss differs from the
 *   uncapped one); softcap <= 0 is a one-line error.
 * Inputs are bf16 values, so both sides compute the same function. */
#include "cuda_testutil.h"
#include "ops/cpu/ops_cpu.h"

/* One problem: x (N, C), w (V, C), labels with ignored (-100) and
 * out-of-range rows, and the device copies. */
typedef struct {
  int N, C, V, chunk, lbf16;
  float *x, *w;
  int32_t *lab;
  uint16_t *d_x, *d_w;
  int32_t *d_lab;
  double *d_out;
  void *d_s;
  size_t sb;
} xprob;

static void prob_make(xprob *p, int N, int C, int V, int chunk, int lbf16, double wmax) {
  *p = (xprob){.N = N, .C = C, .V = V, .chunk = chunk, .lbf16 = lbf16};
  p->x = rand_bf16_values((size_t)N * C, -1, 1);
  p->w = rand_bf16_values((size_t)V * C, -wmax, wmax);
  p->lab = malloc(sizeof(int32_t) * N);
  for (int i = 0; i < N; i++)
    p->lab[i] = i % 7 == 3 ? -100 : (i == 5 ? V + 5 : (int32_t)urand(0, V));
  p->d_x = up_bf16(p->x, (size_t)N * C);
  p->d_w = up_bf16(p->w, (size_t)V * C);
  p->d_lab = up_raw(p->lab, sizeof(int32_t) * N);
  p->d_out = dev_alloc(2 * sizeof(double));
  p->sb = fsdpc__cuda_lmhead_xent_scratch_bytes(N, V, chunk, lbf16);
  p->d_s = dev_alloc(p->sb);
}

static void prob_free(xprob *p) {
  free(p->x), free(p->w), free(p->lab);
  dev_free(p->d_x, (size_t)p->N * p->C * 2), dev_free(p->d_w, (size_t)p->V * p->C * 2);
  dev_free(p->d_lab, sizeof(int32_t) * p->N), dev_free(p->d_out, 2 * sizeof(double));
  dev_free(p->d_s, p->sb);
}

static int counted(const xprob *p) {
  int n = 0;
  for (int i = 0; i < p->N; i++)
    n += p->lab[i] >= 0 && p->lab[i] < p->V;
  return n;
}

/* Every element equal, bit for bit (both from the device). */
static void check_same_bits(const char *name, const float *a, const float *b, size_t n) {
  size_t diff = 0;
  for (size_t i = 0; i < n; i++)
    diff += memcmp(&a[i], &b[i], sizeof(float)) != 0;
  printf("  %-34s %zu of %zu elements differ\n", name, diff, n);
  ck_assert_msg(diff == 0, "%s: %zu elements differ", name, diff);
}

/* ---- lmhead_xent_rows ---- */

static void rows_case(int N, int C, int V, int chunk, int lbf16) {
  xprob p;
  prob_make(&p, N, C, V, chunk, lbf16, 0.5);
  const size_t nc = (size_t)N * C, vc = (size_t)V * C;
  float *seed = malloc(sizeof(float) * N), *dw = rand_f32(vc, -0.1, 0.1);
  for (int i = 0; i < N; i++) /* signed seeds of different sizes, some zero (a prompt token) */
    seed[i] = i % 5 == 1 ? 0.0f : (float)urand(-0.3, 0.3);
  uint16_t *d_dx = dev_alloc(nc * 2);
  float *d_dw = up_raw(dw, sizeof(float) * vc);
  double *got = malloc(sizeof(double) * N), *got_fwd = malloc(sizeof(double) * N);
  double *ref = malloc(sizeof(double) * N), out[2], out_fwd[2];
  CK(fsdpc__cuda_lmhead_xent_rows(g_ctx, p.d_out, got, seed, d_dx, d_dw, p.d_x, p.d_w, p.d_lab, N,
                                  C, V, chunk, lbf16, p.d_s, p.sb, &g_err));
  CK(fsdpc__cuda_d2h(g_ctx, out, p.d_out, sizeof out, &g_err));
  float *gdx = down_bf16(d_dx, nc), *gdw = down_f32(d_dw, vc);
  /* the forward only: dx and dweight given but untouched */
  CK(fsdpc__cuda_lmhead_xent_rows(g_ctx, p.d_out, got_fwd, NULL, d_dx, d_dw, p.d_x, p.d_w, p.d_lab,
                                  N, C, V, chunk, lbf16, p.d_s, p.sb, &g_err));
  CK(fsdpc__cuda_d2h(g_ctx, out_fwd, p.d_out, sizeof out_fwd, &g_err));
  float *gdx2 = down_bf16(d_dx, nc), *gdw2 = down_f32(d_dw, vc);
  double loss = 0;
  int64_t count = 0;
  float *dx = malloc(sizeof(float) * nc), *scr = malloc(sizeof(float) * (size_t)chunk * V);
  fsdpc__cpu_lmhead_xent_rows(&loss, &count, ref, seed, dx, dw, p.x, p.w, p.lab, N, C, V, chunk,
                              lbf16, scr);
  /* bf16 logits: one logit may round the other way after another fp32
   * summation order, by one bf16 ulp (2^-8 relative) */
  const double tol = lbf16 ? 2e-2 : 1e-4;
  double worst = 0.0;
  int zeros_ok = 1;
  for (int i = 0; i < N; i++) {
    int ignored = !(p.lab[i] >= 0 && p.lab[i] < V);
    zeros_ok &= !ignored || (got[i] == 0.0 && ref[i] == 0.0);
    double d = fabs(got[i] - ref[i]);
    worst = d > worst ? d : worst;
  }
  printf("  lmhead_xent_rows N=%d C=%d V=%d R=%d logits %s: worst row loss diff %.2e (tol %g), "
         "sum %.6f vs %.6f, count %g vs %lld\n",
         N, C, V, chunk, lbf16 ? "bf16" : "fp32", worst, tol, out[0], loss, out[1],
         (long long)count);
  ck_assert(zeros_ok && worst < tol);
  ck_assert(out[1] == (double)count && count == counted(&p));
  ck_assert(fabs(out[0] - loss) < tol * N);
  for (int i = 0; i < N; i++) /* the forward gives the training call's bits */
    ck_assert(got_fwd[i] == got[i]);
  ck_assert(out_fwd[0] == out[0] && out_fwd[1] == out[1]);
  CHECK_REL("lmhead_xent_rows dx", gdx, dx, nc, TOL_BF16);
  CHECK_REL("lmhead_xent_rows dweight (+=)", gdw, dw, vc, TOL_BF16);
  check_same_bits("rows forward leaves dx", gdx2, gdx, nc);
  check_same_bits("rows forward leaves dweight", gdw2, gdw, vc);
  free(seed), free(dw), free(got), free(got_fwd), free(ref), free(gdx), free(gdw);
  free(gdx2), free(gdw2), free(dx), free(scr);
  dev_free(d_dx, nc * 2), dev_free(d_dw, sizeof(float) * vc);
  prob_free(&p);
}

/* Seeds all equal to grad_scale: lmhead_xent's dx and dweight, bit for bit. */
static void rows_equal_seed_case(int N, int C, int V, int chunk, int lbf16) {
  xprob p;
  prob_make(&p, N, C, V, chunk, lbf16, 0.5);
  const size_t nc = (size_t)N * C, vc = (size_t)V * C;
  const float gs = 1.0f / (float)counted(&p);
  float *seed = malloc(sizeof(float) * N);
  for (int i = 0; i < N; i++)
    seed[i] = gs;
  uint16_t *d_dx1 = dev_alloc(nc * 2), *d_dx2 = dev_alloc(nc * 2);
  float *d_dw1 = dev_alloc(sizeof(float) * vc), *d_dw2 = dev_alloc(sizeof(float) * vc);
  CK(fsdpc__cuda_memset(g_ctx, d_dw1, 0, sizeof(float) * vc, &g_err));
  CK(fsdpc__cuda_memset(g_ctx, d_dw2, 0, sizeof(float) * vc, &g_err));
  double *rl = malloc(sizeof(double) * N), o1[2], o2[2];
  CK(fsdpc__cuda_lmhead_xent(g_ctx, p.d_out, d_dx1, d_dw1, p.d_x, p.d_w, p.d_lab, N, C, V, gs,
                             chunk, lbf16, p.d_s, p.sb, &g_err));
  CK(fsdpc__cuda_d2h(g_ctx, o1, p.d_out, sizeof o1, &g_err));
  CK(fsdpc__cuda_lmhead_xent_rows(g_ctx, p.d_out, rl, seed, d_dx2, d_dw2, p.d_x, p.d_w, p.d_lab, N,
                                  C, V, chunk, lbf16, p.d_s, p.sb, &g_err));
  CK(fsdpc__cuda_d2h(g_ctx, o2, p.d_out, sizeof o2, &g_err));
  ck_assert(o1[0] == o2[0] && o1[1] == o2[1]);
  float *a = down_bf16(d_dx1, nc), *b = down_bf16(d_dx2, nc);
  float *c = down_f32(d_dw1, vc), *d = down_f32(d_dw2, vc);
  check_same_bits("rows (seed = grad_scale) dx", b, a, nc);
  check_same_bits("rows (seed = grad_scale) dweight", d, c, vc);
  free(seed), free(rl), free(a), free(b), free(c), free(d);
  dev_free(d_dx1, nc * 2), dev_free(d_dx2, nc * 2);
  dev_free(d_dw1, sizeof(float) * vc), dev_free(d_dw2, sizeof(float) * vc);
  prob_free(&p);
}

START_TEST(lmhead_xent_rows) {
  for (int lbf16 = 0; lbf16 <= 1; lbf16++) {
    rows_case(37, 64, 1001, 16, lbf16);   /* several chunks, odd N: the in-place widening */
    rows_case(70, 64, 32000, 32, lbf16);  /* 16-byte vectors */
    rows_case(19, 32, 1004, 8, lbf16);    /* V % 8 != 0 */
    rows_case(64, 128, 32003, 64, lbf16); /* element by element, one chunk */
    rows_equal_seed_case(37, 64, 1001, 16, lbf16);
  }
}
END_TEST

/* ---- lmhead_xent_capped ---- */

static void capped_case(int N, int C, int V, int chunk, int lbf16, float cap) {
  xprob p;
  prob_make(&p, N, C, V, chunk, lbf16, 1.0); /* logits of a few units: the cap bites */
  const size_t nc = (size_t)N * C, vc = (size_t)V * C;
  const float gs = 1.0f / (float)counted(&p);
  float *dw = rand_f32(vc, -0.1, 0.1);
  uint16_t *d_dx = dev_alloc(nc * 2);
  float *d_dw = up_raw(dw, sizeof(float) * vc);
  double got[2], got_eval[2], plain[2];
  CK(fsdpc__cuda_lmhead_xent_capped(g_ctx, p.d_out, d_dx, d_dw, p.d_x, p.d_w, p.d_lab, N, C, V, gs,
                                    chunk, lbf16, cap, p.d_s, p.sb, &g_err));
  CK(fsdpc__cuda_d2h(g_ctx, got, p.d_out, sizeof got, &g_err));
  CK(fsdpc__cuda_lmhead_xent_capped(g_ctx, p.d_out, NULL, NULL, p.d_x, p.d_w, p.d_lab, N, C, V, gs,
                                    chunk, lbf16, cap, p.d_s, p.sb, &g_err));
  CK(fsdpc__cuda_d2h(g_ctx, got_eval, p.d_out, sizeof got_eval, &g_err));
  CK(fsdpc__cuda_lmhead_xent(g_ctx, p.d_out, NULL, NULL, p.d_x, p.d_w, p.d_lab, N, C, V, gs, chunk,
                             lbf16, p.d_s, p.sb, &g_err));
  CK(fsdpc__cuda_d2h(g_ctx, plain, p.d_out, sizeof plain, &g_err));
  double loss = 0, loss_plain = 0;
  int64_t count = 0;
  float *dx = malloc(sizeof(float) * nc), *scr = malloc(sizeof(float) * (size_t)chunk * V);
  fsdpc__cpu_lmhead_xent_capped(&loss, &count, dx, dw, p.x, p.w, p.lab, N, C, V, gs, chunk, lbf16,
                                cap, scr);
  fsdpc__cpu_lmhead_xent(&loss_plain, &count, NULL, NULL, p.x, p.w, p.lab, N, C, V, gs, chunk,
                         lbf16, scr);
  printf("  lmhead_xent_capped N=%d C=%d V=%d R=%d cap %g logits %s: loss %.6f vs %.6f (rel "
         "%.2e); uncapped %.6f\n",
         N, C, V, chunk, (double)cap, lbf16 ? "bf16" : "fp32", got[0], loss,
         fabs(got[0] - loss) / loss, plain[0]);
  ck_assert(isfinite(got[0]) && fabs(got[0] - loss) / loss < (lbf16 ? 1e-3 : 1e-4));
  ck_assert(got[1] == (double)count && count == counted(&p));
  /* the forward-only call: the same loss (fp32 logits come from a second
   * cuBLASLt GEMM call, not always bit for bit the first) */
  printf("  lmhead_xent_capped forward only: loss %.9f vs %.9f (rel %.2e)\n", got_eval[0], got[0],
         fabs(got_eval[0] - got[0]) / got[0]);
  ck_assert(fabs(got_eval[0] - got[0]) <= 1e-6 * got[0] && got_eval[1] == got[1]);
  /* the cap changes the function (else this test could not fail) */
  ck_assert(fabs(plain[0] - loss_plain) / loss_plain < 1e-3);
  ck_assert(fabs(plain[0] - got[0]) / got[0] > 1e-2);
  float *gdx = down_bf16(d_dx, nc), *gdw = down_f32(d_dw, vc);
  CHECK_REL("lmhead_xent_capped dx", gdx, dx, nc, TOL_BF16);
  CHECK_REL("lmhead_xent_capped dweight (+=)", gdw, dw, vc, TOL_BF16);
  free(dw), free(dx), free(scr), free(gdx), free(gdw);
  dev_free(d_dx, nc * 2), dev_free(d_dw, sizeof(float) * vc);
  prob_free(&p);
}

START_TEST(lmhead_xent_capped) {
  for (int lbf16 = 0; lbf16 <= 1; lbf16++) {
    capped_case(37, 64, 1001, 16, lbf16, 2.0f);
    capped_case(70, 64, 32000, 32, lbf16, 3.0f);
    capped_case(19, 32, 1004, 8, lbf16, 1.5f);
    capped_case(40, 64, 32003, 64, lbf16, 2.5f);
  }
}
END_TEST

START_TEST(bad_softcap_is_one_line_error) {
  fsdpc_err e;
  uint16_t *d = dev_alloc(1 << 16);
  ck_assert_int_eq(fsdpc__cuda_lmhead_xent_capped(g_ctx, (double *)d, NULL, NULL, d, d,
                                                  (int32_t *)d, 4, 8, 100, 1.0f, 2, 0, 0.0f, d,
                                                  1 << 16, &e),
                   FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(e.msg, "softcap"));
  ck_assert_ptr_null(strchr(e.msg, '\n'));
  ck_assert_int_eq(fsdpc__cuda_lmhead_xent_rows(g_ctx, (double *)d, NULL, NULL, NULL, NULL, d, d,
                                                (int32_t *)d, 4, 8, 100, 2, 0, d, 16, &e),
                   FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(e.msg, "lmhead_xent_rows: scratch"));
  dev_free(d, 1 << 16);
}
END_TEST

static Suite *make_suite(void) {
  Suite *s = suite_create("cuda_xent");
  TCase *tc = tcase_create("xent");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, lmhead_xent_rows);
  tcase_add_test(tc, lmhead_xent_capped);
  tcase_add_test(tc, bad_softcap_is_one_line_error);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  return cuda_test_main(make_suite);
}
