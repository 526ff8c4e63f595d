/* The fused CUDA ops of the decoder layer's backward against the unfused CPU
 * ops they replace (the CPU keeps the unfused sequence, so that is the
 * oracle): rmsnorm_bwd_add = rmsnorm_bwd + add_inplace (the residual path),
 * matmul_bwd_acc = matmul_bwd into a scratch + add_inplace. Inputs are
 * rounded to bf16 first; the fused op rounds once where the unfused pair
 * rounds twice, so bf16 outputs are held to TOL_BF16 and fp32 ones to
 * TOL_F32, and NaN-poisoned outputs never pass. Also: dinp aliasing dresid,
 * the misaligned (generic) paths, the bit-identical repeat, and the weight
 * gradients written instead of added (fsdpc__cuda_grad_overwrite), and
 * matmul_bias_fwd = matmul_fwd + bias_add (the bias in the GEMM epilogue). */
#include "cuda_testutil.h"
#include "ops/cpu/ops_cpu.h"

/* ---- rmsnorm_bwd_add ---- */

static void rmsnorm_add_case(int N, int C, int off, int alias) {
  const size_t nc = (size_t)N * C;
  float *x = rand_bf16_values(nc, -2, 2), *w = rand_bf16_values(C, 0.5, 1.5);
  float *dy = rand_bf16_values(nc, -1, 1), *dr = rand_bf16_values(nc, -1, 1);
  float *dw = rand_f32(C, -1, 1);
  uint16_t *d_x = up_bf16_at(x, nc, off), *d_w = up_bf16_at(w, C, off);
  uint16_t *d_dy = up_bf16_at(dy, nc, off), *d_dr = up_bf16_at(dr, nc, off);
  /* dev_alloc fills with 0xFF bytes: NaN until the kernel writes */
  uint16_t *d_y = dev_alloc_at(2, nc, off), *d_dx = alias ? d_dr : dev_alloc_at(2, nc, off);
  float *d_rstd = dev_alloc(sizeof(float) * (N ? N : 1)), *d_dw = dev_alloc(sizeof(float) * C);
  CK(fsdpc__cuda_h2d(g_ctx, d_dw, dw, sizeof(float) * C, &g_err));
  CK(fsdpc__cuda_rmsnorm_fwd(g_ctx, d_y, d_rstd, d_x, d_w, N, C, 1e-5f, &g_err));
  CK(fsdpc__cuda_rmsnorm_bwd_add(g_ctx, d_dx, d_dw, d_dy, d_dr, d_x, d_w, d_rstd, N, C, &g_err));
  /* the CPU's unfused sequence */
  float *y = malloc(sizeof(float) * (nc ? nc : 1)), *rstd = malloc(sizeof(float) * (N ? N : 1));
  float *dx = malloc(sizeof(float) * (nc ? nc : 1));
  fsdpc__cpu_rmsnorm_fwd(y, rstd, x, w, N, C, 1e-5f);
  fsdpc__cpu_rmsnorm_bwd(dx, dw, dy, x, w, rstd, N, C);
  fsdpc__cpu_add_inplace(dx, dr, nc);
  float *gdx = down_bf16(d_dx, nc), *gdw = down_f32(d_dw, C);
  char name[96];
  snprintf(name, sizeof name, "rmsnorm_bwd_add dinp N=%d C=%d off=%d%s", N, C, off,
           alias ? " alias" : "");
  CHECK_REL(name, gdx, dx, nc, TOL_BF16);
  CHECK_REL("rmsnorm_bwd_add dweight (fp32 +=)", gdw, dw, C, TOL_F32);
  free(x), free(w), free(dy), free(dr), free(dw), free(y), free(rstd), free(dx), free(gdx),
      free(gdw);
  dev_free_at(d_x, 2, nc, off), dev_free_at(d_w, 2, C, off), dev_free_at(d_dy, 2, nc, off);
  dev_free_at(d_dr, 2, nc, off), dev_free_at(d_y, 2, nc, off);
  if (!alias)
    dev_free_at(d_dx, 2, nc, off);
  dev_free(d_rstd, sizeof(float) * (N ? N : 1)), dev_free(d_dw, sizeof(float) * C);
}

START_TEST(rmsnorm_bwd_add) {
  rmsnorm_add_case(1000, 2048, 0, 0); /* the 1B hidden size: fast path, partial reduce */
  rmsnorm_add_case(300, 4096, 0, 0);  /* the 8B hidden size */
  rmsnorm_add_case(77, 8192, 0, 1);   /* largest fast-path row, dinp == dresid */
  rmsnorm_add_case(1, 2048, 0, 0);    /* one block adds straight into dweight */
  rmsnorm_add_case(13, 2047, 0, 0);   /* C not a multiple of 8: generic path */
  rmsnorm_add_case(50, 2048, 1, 1);   /* misaligned: generic path, aliased */
  rmsnorm_add_case(3, 16384, 0, 0);   /* generic path, large row */
}
END_TEST

/* Same inputs, same bits (the fused backward keeps the fixed-order dweight
 * reduce of rmsnorm_bwd). */
START_TEST(rmsnorm_bwd_add_deterministic) {
  const int N = 700, C = 2048;
  const size_t nc = (size_t)N * C;
  float *x = rand_bf16_values(nc, -2, 2), *w = rand_bf16_values(C, 0.5, 1.5);
  float *dy = rand_bf16_values(nc, -1, 1), *dr = rand_bf16_values(nc, -1, 1);
  uint16_t *d_x = up_bf16_at(x, nc, 0), *d_w = up_bf16_at(w, C, 0), *d_dy = up_bf16_at(dy, nc, 0);
  uint16_t *d_dr = up_bf16_at(dr, nc, 0), *d_y = dev_alloc(nc * 2), *d_dx = dev_alloc(nc * 2);
  float *d_rstd = dev_alloc(sizeof(float) * N), *d_dw = dev_alloc(sizeof(float) * C);
  CK(fsdpc__cuda_rmsnorm_fwd(g_ctx, d_y, d_rstd, d_x, d_w, N, C, 1e-5f, &g_err));
  uint16_t *first = malloc(nc * 2), *now = malloc(nc * 2);
  float *fdw = malloc(sizeof(float) * C), *ndw = malloc(sizeof(float) * C);
  for (int rep = 0; rep < 3; rep++) {
    CK(fsdpc__cuda_memset(g_ctx, d_dw, 0, sizeof(float) * C, &g_err));
    CK(fsdpc__cuda_rmsnorm_bwd_add(g_ctx, d_dx, d_dw, d_dy, d_dr, d_x, d_w, d_rstd, N, C, &g_err));
    CK(fsdpc__cuda_sync(g_ctx, &g_err));
    CK(fsdpc__cuda_d2h(g_ctx, rep ? now : first, d_dx, nc * 2, &g_err));
    CK(fsdpc__cuda_d2h(g_ctx, rep ? ndw : fdw, d_dw, sizeof(float) * C, &g_err));
    if (rep) {
      ck_assert_int_eq(memcmp(first, now, nc * 2), 0);
      ck_assert_int_eq(memcmp(fdw, ndw, sizeof(float) * C), 0);
    }
  }
  printf("  rmsnorm_bwd_add: 3 runs bit-identical (dinp, dweight)\n");
  free(x), free(w), free(dy), free(dr), free(first), free(now), free(fdw), free(ndw);
  dev_free(d_x, nc * 2), dev_free(d_w, C * 2), dev_free(d_dy, nc * 2), dev_free(d_dr, nc * 2);
  dev_free(d_y, nc * 2), dev_free(d_dx, nc * 2);
  dev_free(d_rstd, sizeof(float) * N), dev_free(d_dw, sizeof(float) * C);
}
END_TEST

/* ---- matmul_bwd_acc ---- */

static void matmul_acc_case(int N, int C, int OC) {
  const size_t nc = (size_t)N * C, no = (size_t)N * OC, wc = (size_t)OC * C;
  float *x = rand_bf16_values(nc, -1, 1), *w = rand_bf16_values(wc, -0.1, 0.1);
  float *dy = rand_bf16_values(no, -1, 1), *acc = rand_bf16_values(nc, -1, 1);
  float *dw = rand_f32(wc, -1, 1);
  uint16_t *d_x = up_bf16_at(x, nc, 0), *d_w = up_bf16_at(w, wc, 0), *d_dy = up_bf16_at(dy, no, 0);
  uint16_t *d_dx = up_bf16_at(acc, nc, 0);
  float *d_dw = dev_alloc(sizeof(float) * wc);
  CK(fsdpc__cuda_h2d(g_ctx, d_dw, dw, sizeof(float) * wc, &g_err));
  CK(fsdpc__cuda_matmul_bwd_acc(g_ctx, d_dx, d_dw, d_dy, d_x, d_w, N, C, OC, &g_err));
  /* unfused: dinp into a scratch, then y += scratch */
  float *dx = malloc(sizeof(float) * nc);
  fsdpc__cpu_matmul_bwd(dx, dw, dy, x, w, N, C, OC);
  fsdpc__cpu_add_inplace(acc, dx, nc);
  float *gdx = down_bf16(d_dx, nc), *gdw = down_f32(d_dw, wc);
  char name[96];
  snprintf(name, sizeof name, "matmul_bwd_acc dinp += N=%d C=%d OC=%d", N, C, OC);
  CHECK_REL(name, gdx, acc, nc, TOL_BF16);
  CHECK_REL("matmul_bwd_acc dweight (fp32 +=)", gdw, dw, wc, TOL_F32);
  free(x), free(w), free(dy), free(acc), free(dw), free(dx), free(gdx), free(gdw);
  dev_free(d_x, nc * 2), dev_free(d_w, wc * 2), dev_free(d_dy, no * 2), dev_free(d_dx, nc * 2);
  dev_free(d_dw, sizeof(float) * wc);
}

START_TEST(matmul_bwd_acc) {
  matmul_acc_case(256, 512, 128); /* k / v projections: OC < C */
  matmul_acc_case(100, 64, 352);  /* gate / up: OC > C */
  matmul_acc_case(33, 40, 24);    /* odd sizes */
}
END_TEST

/* ---- matmul_bias_fwd: the projection's bias in the GEMM's epilogue ---- */

/* matmul_bias_fwd against the CPU's matmul_fwd then bias_add (the
 * unfused oracle), with and without the residual in C; boff shifts the
 * bias by elements (1: not 16-byte aligned, the two-pass fallback). The
 * output starts NaN (dev_alloc's fill) unless a residual is given. */
static void matmul_bias_case(int N, int C, int OC, int residual, int boff) {
  const size_t nc = (size_t)N * C, no = (size_t)N * OC, wc = (size_t)OC * C;
  float *x = rand_bf16_values(nc, -1, 1), *w = rand_bf16_values(wc, -0.1, 0.1);
  float *b = rand_bf16_values(OC, -1, 1), *r = rand_bf16_values(no, -1, 1);
  uint16_t *d_x = up_bf16_at(x, nc, 0), *d_w = up_bf16_at(w, wc, 0), *d_b = up_bf16_at(b, OC, boff);
  uint16_t *d_y = residual ? up_bf16_at(r, no, 0) : dev_alloc_at(2, no, 0);
  CK(fsdpc__cuda_matmul_bias_fwd(g_ctx, d_y, d_x, d_w, d_b, residual ? d_y : NULL, N, C, OC,
                                 &g_err));
  float *y = malloc(sizeof(float) * no);
  fsdpc__cpu_matmul_fwd(y, x, w, N, C, OC);
  if (residual)
    fsdpc__cpu_add_inplace(y, r, no);
  fsdpc__cpu_bias_add(y, b, N, OC);
  float *gy = down_bf16(d_y, no);
  char name[96];
  snprintf(name, sizeof name, "matmul_bias_fwd N=%d C=%d OC=%d%s%s", N, C, OC,
           residual ? " +res" : "", boff ? " unaligned" : "");
  CHECK_REL(name, gy, y, no, TOL_BF16);
  free(x), free(w), free(b), free(r), free(y), free(gy);
  dev_free(d_x, nc * 2), dev_free(d_w, wc * 2), dev_free_at(d_b, 2, OC, boff),
      dev_free(d_y, no * 2);
}

START_TEST(matmul_bias_fwd) {
  matmul_bias_case(256, 512, 512, 0, 0); /* q: OC = C */
  matmul_bias_case(100, 64, 32, 0, 0);   /* k / v: OC < C */
  matmul_bias_case(33, 40, 24, 1, 0);    /* odd sizes, the residual in C (o with bias) */
  matmul_bias_case(64, 64, 96, 0, 1);    /* a bias off 16 bytes: matmul_fwd + bias_add */
  /* bit-identical on repeat: the cached plan with its epilogue */
  const int N = 64, C = 128, OC = 192;
  const size_t no = (size_t)N * OC;
  float *x = rand_bf16_values((size_t)N * C, -1, 1), *w = rand_bf16_values((size_t)OC * C, -1, 1);
  float *b = rand_bf16_values(OC, -1, 1);
  uint16_t *d_x = up_bf16_at(x, (size_t)N * C, 0), *d_w = up_bf16_at(w, (size_t)OC * C, 0);
  uint16_t *d_b = up_bf16_at(b, OC, 0), *d_y = dev_alloc_at(2, no, 0);
  uint16_t *first = malloc(no * 2), *now = malloc(no * 2);
  for (int run = 0; run < 3; run++) {
    CK(fsdpc__cuda_matmul_bias_fwd(g_ctx, d_y, d_x, d_w, d_b, NULL, N, C, OC, &g_err));
    CK(fsdpc__cuda_d2h(g_ctx, run ? now : first, d_y, no * 2, &g_err));
    if (run)
      ck_assert_int_eq(memcmp(first, now, no * 2), 0);
  }
  free(x), free(w), free(b), free(first), free(now);
  dev_free(d_x, (size_t)N * C * 2), dev_free(d_w, (size_t)OC * C * 2), dev_free(d_b, OC * 2);
  dev_free(d_y, no * 2);
}
END_TEST

/* ---- grad_overwrite: the weight gradient written, not added ---- */

/* With fsdpc__cuda_grad_overwrite on, dweight starts NaN (dev_alloc's 0xFF
 * fill) and must come out as the CPU's gradient added into zeros; turned
 * off again, a second call adds into it (the later micro-batches). */
static void overwrite_matmul_case(int N, int C, int OC, int acc) {
  const size_t nc = (size_t)N * C, no = (size_t)N * OC, wc = (size_t)OC * C;
  float *x = rand_bf16_values(nc, -1, 1), *w = rand_bf16_values(wc, -0.1, 0.1);
  float *dy = rand_bf16_values(no, -1, 1);
  uint16_t *d_x = up_bf16_at(x, nc, 0), *d_w = up_bf16_at(w, wc, 0), *d_dy = up_bf16_at(dy, no, 0);
  uint16_t *d_dx = up_bf16_at(x, nc, 0); /* any finite dinp for the += variant */
  float *d_dw = dev_alloc(sizeof(float) * wc);
  float *dx = malloc(sizeof(float) * nc), *dw = calloc(wc, sizeof(float));
  char name[96];
  for (int call = 0; call < 2; call++) {
    fsdpc__cuda_grad_overwrite(g_ctx, call == 0);
    CK((acc ? fsdpc__cuda_matmul_bwd_acc : fsdpc__cuda_matmul_bwd)(g_ctx, d_dx, d_dw, d_dy, d_x,
                                                                   d_w, N, C, OC, &g_err));
    fsdpc__cpu_matmul_bwd(dx, dw, dy, x, w, N, C, OC);
    float *gdw = down_f32(d_dw, wc);
    snprintf(name, sizeof name, "matmul_bwd%s dweight %s N=%d C=%d OC=%d", acc ? "_acc" : "",
             call ? "+= after =" : "= (overwrite)", N, C, OC);
    CHECK_REL(name, gdw, dw, wc, TOL_F32);
    free(gdw);
  }
  free(x), free(w), free(dy), free(dx), free(dw);
  dev_free(d_x, nc * 2), dev_free(d_w, wc * 2), dev_free(d_dy, no * 2), dev_free(d_dx, nc * 2);
  dev_free(d_dw, sizeof(float) * wc);
}

static void overwrite_rmsnorm_case(int N, int C, int off) {
  const size_t nc = (size_t)N * C;
  float *x = rand_bf16_values(nc, -2, 2), *w = rand_bf16_values(C, 0.5, 1.5);
  float *dy = rand_bf16_values(nc, -1, 1), *dr = rand_bf16_values(nc, -1, 1);
  uint16_t *d_x = up_bf16_at(x, nc, off), *d_w = up_bf16_at(w, C, off);
  uint16_t *d_dy = up_bf16_at(dy, nc, off), *d_dr = up_bf16_at(dr, nc, off);
  uint16_t *d_y = dev_alloc_at(2, nc, off), *d_dx = dev_alloc_at(2, nc, off);
  float *d_rstd = dev_alloc(sizeof(float) * N), *d_dw = dev_alloc(sizeof(float) * C);
  CK(fsdpc__cuda_rmsnorm_fwd(g_ctx, d_y, d_rstd, d_x, d_w, N, C, 1e-5f, &g_err));
  float *y = malloc(sizeof(float) * nc), *rstd = malloc(sizeof(float) * N);
  float *dx = malloc(sizeof(float) * nc), *dw = calloc(C, sizeof(float));
  fsdpc__cpu_rmsnorm_fwd(y, rstd, x, w, N, C, 1e-5f);
  char name[96];
  for (int call = 0; call < 3; call++) { /* =, then +=, then = with the residual fusion */
    fsdpc__cuda_grad_overwrite(g_ctx, call != 1);
    if (call == 2) {
      CK(fsdpc__cuda_rmsnorm_bwd_add(g_ctx, d_dx, d_dw, d_dy, d_dr, d_x, d_w, d_rstd, N, C,
                                     &g_err));
      memset(dw, 0, sizeof(float) * C);
    } else {
      CK(fsdpc__cuda_rmsnorm_bwd(g_ctx, d_dx, d_dw, d_dy, d_x, d_w, d_rstd, N, C, &g_err));
    }
    fsdpc__cpu_rmsnorm_bwd(dx, dw, dy, x, w, rstd, N, C);
    float *gdw = down_f32(d_dw, C);
    snprintf(name, sizeof name, "rmsnorm_bwd%s dweight %s N=%d C=%d off=%d",
             call == 2 ? "_add" : "", call == 1 ? "+= after =" : "= (overwrite)", N, C, off);
    CHECK_REL(name, gdw, dw, C, TOL_F32);
    free(gdw);
  }
  fsdpc__cuda_grad_overwrite(g_ctx, 0);
  free(x), free(w), free(dy), free(dr), free(y), free(rstd), free(dx), free(dw);
  dev_free_at(d_x, 2, nc, off), dev_free_at(d_w, 2, C, off), dev_free_at(d_dy, 2, nc, off);
  dev_free_at(d_dr, 2, nc, off), dev_free_at(d_y, 2, nc, off), dev_free_at(d_dx, 2, nc, off);
  dev_free(d_rstd, sizeof(float) * N), dev_free(d_dw, sizeof(float) * C);
}

/* lmhead_xent over several row chunks: the first chunk writes dW, the others
 * add; against the same op adding into a zeroed dW (both on the device). */
static void overwrite_xent_case(int N, int C, int V, int chunk) {
  const size_t nc = (size_t)N * C, vc = (size_t)V * C;
  float *x = rand_bf16_values(nc, -1, 1), *w = rand_bf16_values(vc, -0.5, 0.5);
  int32_t *lab = malloc(sizeof(int32_t) * N);
  for (int i = 0; i < N; i++)
    lab[i] = i % 7 == 3 ? -100 : (int32_t)urand(0, V);
  uint16_t *d_x = up_bf16_at(x, nc, 0), *d_w = up_bf16_at(w, vc, 0), *d_dx = dev_alloc(nc * 2);
  int32_t *d_lab = dev_alloc(sizeof(int32_t) * N);
  CK(fsdpc__cuda_h2d(g_ctx, d_lab, lab, sizeof(int32_t) * N, &g_err));
  float *d_ow = dev_alloc(sizeof(float) * vc), *d_acc = dev_alloc(sizeof(float) * vc);
  CK(fsdpc__cuda_memset(g_ctx, d_acc, 0, sizeof(float) * vc, &g_err));
  double *d_out = dev_alloc(2 * sizeof(double));
  size_t sb = fsdpc__cuda_lmhead_xent_scratch_bytes(N, V, chunk, 0);
  void *d_s = dev_alloc(sb);
  fsdpc__cuda_grad_overwrite(g_ctx, 1);
  CK(fsdpc__cuda_lmhead_xent(g_ctx, d_out, d_dx, d_ow, d_x, d_w, d_lab, N, C, V, 0.01f, chunk, 0,
                             d_s, sb, &g_err));
  fsdpc__cuda_grad_overwrite(g_ctx, 0);
  CK(fsdpc__cuda_lmhead_xent(g_ctx, d_out, d_dx, d_acc, d_x, d_w, d_lab, N, C, V, 0.01f, chunk, 0,
                             d_s, sb, &g_err));
  float *gow = down_f32(d_ow, vc), *gacc = down_f32(d_acc, vc);
  char name[96];
  snprintf(name, sizeof name, "lmhead_xent dweight = vs += into zeros N=%d V=%d R=%d", N, V, chunk);
  CHECK_REL(name, gow, gacc, vc, TOL_F32);
  free(x), free(w), free(lab), free(gow), free(gacc);
  dev_free(d_x, nc * 2), dev_free(d_w, vc * 2), dev_free(d_dx, nc * 2);
  dev_free(d_lab, sizeof(int32_t) * N), dev_free(d_ow, sizeof(float) * vc);
  dev_free(d_acc, sizeof(float) * vc), dev_free(d_out, 2 * sizeof(double)), dev_free(d_s, sb);
}

START_TEST(grad_overwrite) {
  overwrite_xent_case(37, 64, 1001, 16); /* several chunks, a short last one */
  overwrite_matmul_case(256, 512, 128, 0);
  overwrite_matmul_case(100, 64, 352, 1);
  overwrite_matmul_case(33, 40, 24, 1);
  overwrite_rmsnorm_case(1000, 2048, 0); /* partial reduce */
  overwrite_rmsnorm_case(1, 2048, 0);    /* one block adds straight into dweight */
  overwrite_rmsnorm_case(13, 2047, 0);   /* generic path */
  overwrite_rmsnorm_case(50, 2048, 1);   /* misaligned */
  fsdpc__cuda_grad_overwrite(g_ctx, 0);
}
END_TEST

static Suite *make_suite(void) {
  Suite *s = suite_create("cuda_fused");
  TCase *tc = tcase_create("fused");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, rmsnorm_bwd_add);
  tcase_add_test(tc, rmsnorm_bwd_add_deterministic);
  tcase_add_test(tc, matmul_bwd_acc);
  tcase_add_test(tc, matmul_bias_fwd);
  tcase_add_test(tc, grad_overwrite);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  return cuda_test_main(make_suite);
}
