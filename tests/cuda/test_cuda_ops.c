/* Every CUDA op against its CPU twin (ops/cpu) on random inputs, with
 * shapes that are not multiples of any block size. Inputs are rounded to
 * bf16 first, so the CPU reference (fp32) and the kernel (bf16 storage,
 * fp32 accumulation) compute the same function; bf16 outputs must be within
 * TOL_BF16, fp32 outputs within TOL_F32, and everything finite (outputs are
 * poisoned with NaN before each kernel). Shapes cover the 16-byte vector
 * paths, sizes that are not multiples of the vector width, tensors one
 * element past an aligned address (the scalar paths), and large rows; the
 * rmsnorm backward is checked bit-identical run to run. Also: the context's
 * memory accounting and events, and one-line errors for bad shapes. */
#include "cuda_testutil.h"
#include "ops/cpu/ops_cpu.h"

/* ---- embedding ---- */

static void embedding_case(int N, int C, int V) {
  float *wte = rand_bf16_values((size_t)V * C, -1, 1);
  float *dout = rand_bf16_values((size_t)N * C, -1, 1);
  float *dwte = rand_f32((size_t)V * C, -1, 1);
  int32_t *tok = malloc(sizeof(int32_t) * N);
  for (int n = 0; n < N; n++)
    tok[n] = n % 3 == 0 ? 1 : (int32_t)urand(0, V); /* repeated tokens */
  uint16_t *d_wte = up_bf16(wte, (size_t)V * C), *d_out = dev_alloc((size_t)N * C * 2);
  uint16_t *d_dout = up_bf16(dout, (size_t)N * C);
  int32_t *d_tok = up_raw(tok, sizeof(int32_t) * N);
  float *d_dwte = up_raw(dwte, sizeof(float) * V * C);
  CK(fsdpc__cuda_embedding_fwd(g_ctx, d_out, d_tok, d_wte, N, C, V, &g_err));
  CK(fsdpc__cuda_embedding_bwd(g_ctx, d_dwte, d_dout, d_tok, N, C, V, &g_err));
  float *ref = malloc(sizeof(float) * N * C);
  fsdpc__cpu_embedding_fwd(ref, tok, wte, N, C);
  fsdpc__cpu_embedding_bwd(dwte, dout, tok, N, C);
  float *got = down_bf16(d_out, (size_t)N * C), *gdw = down_f32(d_dwte, (size_t)V * C);
  CHECK_REL("embedding_fwd (exact copy)", got, ref, (size_t)N * C, 1e-30);
  CHECK_REL("embedding_bwd dwte (fp32 +=)", gdw, dwte, (size_t)V * C, TOL_F32);
  free(got), free(gdw), free(ref), free(wte), free(dout), free(dwte), free(tok);
  dev_free(d_wte, (size_t)V * C * 2), dev_free(d_out, (size_t)N * C * 2);
  dev_free(d_dout, (size_t)N * C * 2), dev_free(d_tok, sizeof(int32_t) * N);
  dev_free(d_dwte, sizeof(float) * V * C);
}

START_TEST(embedding) {
  embedding_case(37, 200, 50); /* 16-byte copy path */
  embedding_case(41, 77, 13);  /* scalar path */
}
END_TEST

/* ---- rmsnorm ---- */

static void rmsnorm_case(int N, int C, int off) {
  const size_t nc = (size_t)N * C;
  float *x = rand_bf16_values(nc, -2, 2), *w = rand_bf16_values(C, 0.5, 1.5);
  float *dy = rand_bf16_values(nc, -1, 1), *dw = rand_f32(C, -1, 1);
  uint16_t *d_x = up_bf16_at(x, nc, off), *d_w = up_bf16_at(w, C, off);
  uint16_t *d_dy = up_bf16_at(dy, nc, off);
  uint16_t *d_y = dev_alloc_at(2, nc, off), *d_dx = dev_alloc_at(2, nc, off);
  float *d_rstd = dev_alloc(sizeof(float) * N), *d_dw = up_raw_at(dw, sizeof(float), C, off);
  CK(fsdpc__cuda_rmsnorm_fwd(g_ctx, d_y, d_rstd, d_x, d_w, N, C, 1e-5f, &g_err));
  CK(fsdpc__cuda_rmsnorm_bwd(g_ctx, d_dx, d_dw, d_dy, d_x, d_w, d_rstd, N, C, &g_err));
  float *y = malloc(sizeof(float) * nc), *rstd = malloc(sizeof(float) * N);
  float *dx = malloc(sizeof(float) * nc);
  fsdpc__cpu_rmsnorm_fwd(y, rstd, x, w, N, C, 1e-5f);
  fsdpc__cpu_rmsnorm_bwd(dx, dw, dy, x, w, rstd, N, C);
  float *gy = down_bf16(d_y, nc), *gr = down_f32(d_rstd, N), *gdx = down_bf16(d_dx, nc);
  float *gdw = down_f32(d_dw, C);
  char name[80];
  snprintf(name, sizeof name, "rmsnorm_fwd out N=%d C=%d off=%d", N, C, off);
  CHECK_REL(name, gy, y, nc, TOL_BF16);
  CHECK_REL("rmsnorm_fwd rstd (fp32)", gr, rstd, N, TOL_F32);
  CHECK_REL("rmsnorm_bwd dinp", gdx, dx, nc, TOL_BF16);
  CHECK_REL("rmsnorm_bwd dweight (fp32 +=)", gdw, dw, C, TOL_F32);
  free(x), free(w), free(dy), free(dw), free(y), free(rstd), free(dx);
  free(gy), free(gr), free(gdx), free(gdw);
  dev_free_at(d_x, 2, nc, off), dev_free_at(d_w, 2, C, off), dev_free_at(d_dy, 2, nc, off);
  dev_free_at(d_y, 2, nc, off), dev_free_at(d_dx, 2, nc, off);
  dev_free(d_rstd, sizeof(float) * N), dev_free_at(d_dw, sizeof(float), C, off);
}

START_TEST(rmsnorm) {
  rmsnorm_case(37, 333, 0);
  rmsnorm_case(300, 4096, 0); /* more rows than the backward's grid */
  rmsnorm_case(3, 16384, 0);  /* generic path, dweight partials above 48 KiB of shared memory */
  rmsnorm_case(1, 2048, 0);   /* one row: one block adds straight into dweight */
  rmsnorm_case(13, 2047, 0);  /* C not a multiple of 8 */
  rmsnorm_case(13, 100, 0);
  rmsnorm_case(1000, 2048, 0); /* the 1B hidden size, many blocks and the partial reduce */
  rmsnorm_case(77, 8192, 0);   /* largest fast-path row */
  rmsnorm_case(29, 64, 0);     /* one 32-thread block per row */
  rmsnorm_case(50, 2048, 1);   /* misaligned pointers: generic path */
  rmsnorm_case(9, 576, 1);
}
END_TEST

/* Gemma2RMSNorm: (1 + w) with w around 0, against the CPU's rmsnorm_off. */
static void rmsnorm_off_case(int N, int C, int off) {
  const size_t nc = (size_t)N * C;
  float *x = rand_bf16_values(nc, -2, 2), *w = rand_bf16_values(C, -0.5, 0.5);
  float *dy = rand_bf16_values(nc, -1, 1), *dw = rand_f32(C, -1, 1);
  uint16_t *d_x = up_bf16_at(x, nc, off), *d_w = up_bf16_at(w, C, off);
  uint16_t *d_dy = up_bf16_at(dy, nc, off);
  uint16_t *d_y = dev_alloc_at(2, nc, off), *d_dx = dev_alloc_at(2, nc, off);
  float *d_rstd = dev_alloc(sizeof(float) * N), *d_dw = up_raw_at(dw, sizeof(float), C, off);
  CK(fsdpc__cuda_rmsnorm_off_fwd(g_ctx, d_y, d_rstd, d_x, d_w, N, C, 1e-6f, 1.0f, &g_err));
  CK(fsdpc__cuda_rmsnorm_off_bwd(g_ctx, d_dx, d_dw, d_dy, d_x, d_w, d_rstd, N, C, 1.0f, &g_err));
  float *y = malloc(sizeof(float) * nc), *rstd = malloc(sizeof(float) * N);
  float *dx = malloc(sizeof(float) * nc);
  fsdpc__cpu_rmsnorm_off_fwd(y, rstd, x, w, N, C, 1e-6f, 1.0f);
  fsdpc__cpu_rmsnorm_off_bwd(dx, dw, dy, x, w, rstd, N, C, 1.0f);
  float *gy = down_bf16(d_y, nc), *gdx = down_bf16(d_dx, nc), *gdw = down_f32(d_dw, C);
  char name[80];
  snprintf(name, sizeof name, "rmsnorm_off_fwd out N=%d C=%d off=%d", N, C, off);
  CHECK_REL(name, gy, y, nc, TOL_BF16);
  CHECK_REL("rmsnorm_off_bwd dinp", gdx, dx, nc, TOL_BF16);
  CHECK_REL("rmsnorm_off_bwd dweight (fp32 +=)", gdw, dw, C, TOL_F32);
  free(x), free(w), free(dy), free(dw), free(y), free(rstd), free(dx), free(gy), free(gdx);
  free(gdw);
  dev_free_at(d_x, 2, nc, off), dev_free_at(d_w, 2, C, off), dev_free_at(d_dy, 2, nc, off);
  dev_free_at(d_y, 2, nc, off), dev_free_at(d_dx, 2, nc, off);
  dev_free(d_rstd, sizeof(float) * N), dev_free_at(d_dw, sizeof(float), C, off);
}

START_TEST(rmsnorm_off) {
  rmsnorm_off_case(37, 2304, 0); /* Gemma 2 2B's hidden size */
  rmsnorm_off_case(300, 256, 0); /* q/k-norm width rows, many blocks and the partial reduce */
  rmsnorm_off_case(1, 3584, 0);  /* one row: straight into dweight */
  rmsnorm_off_case(13, 100, 1);  /* misaligned */
  /* Gemma 3's q/k norms (issue 36): the same op on rows of head_dim, one
   * row per token and head: the 1B's 4 query heads at 2,048 tokens, and
   * the head dims of the tiny fixtures */
  rmsnorm_off_case(4 * 2048, 256, 0);
  rmsnorm_off_case(2 * 12 * 4, 8, 0);
  rmsnorm_off_case(2 * 12 * 1, 16, 1);
}
END_TEST

/* Same inputs, same bits: dinp and the fp32 dweight (fixed-order partials,
 * no atomics) over repeated runs, for the fast and the generic path. */
static void rmsnorm_determinism_case(int N, int C) {
  const size_t nc = (size_t)N * C;
  float *x = rand_bf16_values(nc, -2, 2), *w = rand_bf16_values(C, 0.5, 1.5);
  float *dy = rand_bf16_values(nc, -1, 1), *dw0 = rand_f32(C, -1, 1);
  uint16_t *d_x = up_bf16(x, nc), *d_w = up_bf16(w, C), *d_dy = up_bf16(dy, nc);
  uint16_t *d_y = dev_alloc(nc * 2), *d_dx = dev_alloc(nc * 2);
  float *d_rstd = dev_alloc(sizeof(float) * N), *d_dw = dev_alloc(sizeof(float) * C);
  CK(fsdpc__cuda_rmsnorm_fwd(g_ctx, d_y, d_rstd, d_x, d_w, N, C, 1e-5f, &g_err));
  float *first = NULL;
  uint16_t *first_dx = malloc(nc * 2), *dx = malloc(nc * 2);
  for (int rep = 0; rep < 5; rep++) {
    CK(fsdpc__cuda_h2d(g_ctx, d_dw, dw0, sizeof(float) * C, &g_err));
    CK(fsdpc__cuda_rmsnorm_bwd(g_ctx, d_dx, d_dw, d_dy, d_x, d_w, d_rstd, N, C, &g_err));
    float *got = down_f32(d_dw, C);
    CK(fsdpc__cuda_d2h(g_ctx, rep ? dx : first_dx, d_dx, nc * 2, &g_err));
    if (!first) {
      first = got;
      continue;
    }
    ck_assert_msg(memcmp(got, first, sizeof(float) * C) == 0,
                  "rmsnorm_bwd dweight N=%d C=%d differs between runs (run %d)", N, C, rep);
    ck_assert_msg(memcmp(dx, first_dx, nc * 2) == 0, "rmsnorm_bwd dinp differs between runs");
    free(got);
  }
  printf("  rmsnorm_bwd N=%d C=%d: dweight and dinp bit-identical over 5 runs\n", N, C);
  free(x), free(w), free(dy), free(dw0), free(first), free(first_dx), free(dx);
  dev_free(d_x, nc * 2), dev_free(d_w, C * 2), dev_free(d_dy, nc * 2), dev_free(d_y, nc * 2);
  dev_free(d_dx, nc * 2), dev_free(d_rstd, sizeof(float) * N), dev_free(d_dw, sizeof(float) * C);
}

START_TEST(rmsnorm_deterministic) {
  rmsnorm_determinism_case(4096, 2048); /* fast path, hundreds of partials */
  rmsnorm_determinism_case(600, 2047);  /* generic path */
}
END_TEST

/* ---- rope ---- */

/* type: FSDPC_ROPE_*; RD < HD: partial rotary (the rest must pass through). */
static void rope_case(int N, int H, int HD, int RD, int maxT, int type, int off) {
  const int half = RD / 2;
  const size_t n = (size_t)N * H * HD, nt = (size_t)maxT * half;
  fsdpc_rope r = {.type = type,
                  .dim = RD,
                  .max_pos = maxT,
                  .theta = 500000.0,
                  .factor = 32.0,
                  .low_freq_factor = 1.0,
                  .high_freq_factor = 4.0,
                  .original_max_pos = 64,
                  .truncate = 1};
  if (type == FSDPC_ROPE_YARN)
    r.factor = 4.0;
  float *cs = malloc(sizeof(float) * nt), *sn = malloc(sizeof(float) * nt);
  fsdpc__rope_tables(cs, sn, &r, maxT, 0);
  float *d_cs = dev_alloc(sizeof(float) * nt), *d_sn = dev_alloc(sizeof(float) * nt);
  CK(fsdpc__cuda_rope_tables(g_ctx, d_cs, d_sn, &r, maxT, 0, &g_err));
  float *gcs = down_f32(d_cs, nt), *gsn = down_f32(d_sn, nt);
  ck_assert_int_eq(memcmp(gcs, cs, sizeof(float) * nt), 0); /* same host code, uploaded */
  ck_assert_int_eq(memcmp(gsn, sn, sizeof(float) * nt), 0);
  int32_t *pos = malloc(sizeof(int32_t) * N);
  for (int i = 0; i < N; i++)
    pos[i] = (int32_t)urand(0, maxT);
  int32_t *d_pos = up_raw(pos, sizeof(int32_t) * N);
  float *x = rand_bf16_values(n, -1, 1), *g = rand_bf16_values(n, -1, 1);
  uint16_t *d_x = up_bf16_at(x, n, off), *d_g = up_bf16_at(g, n, off);
  CK(fsdpc__cuda_rope_fwd(g_ctx, d_x, d_cs, d_sn, d_pos, N, H, HD, RD, maxT, &g_err));
  CK(fsdpc__cuda_rope_bwd(g_ctx, d_g, d_cs, d_sn, d_pos, N, H, HD, RD, maxT, &g_err));
  fsdpc__cpu_rope_fwd(x, cs, sn, pos, N, H, HD, RD);
  fsdpc__cpu_rope_bwd(g, cs, sn, pos, N, H, HD, RD);
  float *gx = down_bf16(d_x, n), *gg = down_bf16(d_g, n);
  char name[96];
  snprintf(name, sizeof name, "rope_fwd N=%d H=%d HD=%d RD=%d off=%d type %d", N, H, HD, RD, off,
           type);
  CHECK_REL(name, gx, x, n, TOL_BF16);
  CHECK_REL("rope_bwd", gg, g, n, TOL_BF16);
  free(cs), free(sn), free(gcs), free(gsn), free(pos), free(x), free(g), free(gx), free(gg);
  dev_free(d_cs, sizeof(float) * nt), dev_free(d_sn, sizeof(float) * nt);
  dev_free(d_pos, sizeof(int32_t) * N), dev_free_at(d_x, 2, n, off), dev_free_at(d_g, 2, n, off);
}

START_TEST(rope) {
  rope_case(19, 3, 64, 64, 100, FSDPC_ROPE_DEFAULT, 0);
  rope_case(53, 5, 128, 128, 4096, FSDPC_ROPE_LLAMA3, 0);
  rope_case(1, 1, 16, 16, 8, FSDPC_ROPE_DEFAULT, 0);     /* one 8-pair group per half */
  rope_case(13, 7, 12, 12, 50, FSDPC_ROPE_DEFAULT, 0);   /* HD/2 = 6: scalar path */
  rope_case(31, 8, 64, 64, 64, FSDPC_ROPE_LLAMA3, 1);    /* misaligned x: scalar path */
  rope_case(257, 32, 64, 64, 512, FSDPC_ROPE_LLAMA3, 0); /* 1B's q shape (fewer rows) */
  rope_case(29, 4, 96, 32, 200, FSDPC_ROPE_DEFAULT, 0);  /* Phi-3 partial rotary: vector path */
  rope_case(23, 3, 40, 12, 90, FSDPC_ROPE_YARN, 0);      /* partial, scalar path, yarn */
}
END_TEST

/* ---- the decoder families' ops: bias add and its gradient, axpy ---- */

static void family_case(int N, int OC, int off) {
  const size_t n = (size_t)N * OC;
  float *y = rand_bf16_values(n, -2, 2), *b = rand_bf16_values(OC, -1, 1);
  float *x = rand_bf16_values(n, -1, 1), *db = rand_f32(OC, -1, 1);
  uint16_t *d_y = up_bf16_at(y, n, off), *d_b = up_bf16_at(b, OC, off);
  uint16_t *d_x = up_bf16_at(x, n, off), *d_o = dev_alloc_at(2, n, off);
  float *d_db = up_raw_at(db, sizeof(float), OC, off);
  CK(fsdpc__cuda_bias_bwd(g_ctx, d_db, d_y, N, OC, &g_err)); /* dy = y, before the add */
  fsdpc__cpu_bias_bwd(db, y, N, OC);
  CK(fsdpc__cuda_axpy(g_ctx, d_o, d_x, d_y, 0.37f, n, &g_err));
  float *o = malloc(sizeof(float) * n);
  fsdpc__cpu_axpy(o, x, y, 0.37f, n);
  float *go = down_bf16(d_o, n);
  CHECK_REL("axpy", go, o, n, TOL_BF16);
  CK(fsdpc__cuda_axpy(g_ctx, d_o, NULL, d_y, -1.5f, n, &g_err)); /* a * y alone */
  fsdpc__cpu_axpy(o, NULL, y, -1.5f, n);
  free(go), go = down_bf16(d_o, n);
  CHECK_REL("axpy without x", go, o, n, TOL_BF16);
  CK(fsdpc__cuda_bias_add(g_ctx, d_y, d_b, N, OC, &g_err));
  fsdpc__cpu_bias_add(y, b, N, OC);
  float *gy = down_bf16(d_y, n), *gdb = down_f32(d_db, OC);
  char name[80];
  snprintf(name, sizeof name, "bias_add N=%d OC=%d off=%d", N, OC, off);
  CHECK_REL(name, gy, y, n, TOL_BF16);
  CHECK_REL("bias_bwd (fp32 +=)", gdb, db, OC, TOL_F32);
  free(y), free(b), free(x), free(db), free(o), free(go), free(gy), free(gdb);
  dev_free_at(d_y, 2, n, off), dev_free_at(d_b, 2, OC, off), dev_free_at(d_x, 2, n, off);
  dev_free_at(d_o, 2, n, off), dev_free_at(d_db, sizeof(float), OC, off);
}

START_TEST(family_ops) {
  family_case(37, 96, 0);  /* vector paths */
  family_case(41, 77, 0);  /* OC % 8 != 0: scalar bias add, tail */
  family_case(300, 40, 1); /* misaligned: scalar paths */
  family_case(1000, 1, 0); /* one column, many rows */
}
END_TEST

/* ---- swiglu and geglu (gelu_pytorch_tanh, Gemma) ---- */

typedef fsdpc_status (*glu_fwd_fn)(fsdpc_cuda_ctx *, fsdpc_bf16 *, const fsdpc_bf16 *,
                                   const fsdpc_bf16 *, int, int, fsdpc_err *);
typedef fsdpc_status (*glu_bwd_fn)(fsdpc_cuda_ctx *, fsdpc_bf16 *, fsdpc_bf16 *,
                                   const fsdpc_bf16 *, const fsdpc_bf16 *, const fsdpc_bf16 *, int,
                                   int, fsdpc_err *);

static void glu_case(int N, int F, int off, int gelu) {
  const size_t n = (size_t)N * F;
  const char *op = gelu ? "geglu" : "swiglu";
  glu_fwd_fn gfwd = gelu ? fsdpc__cuda_geglu_fwd : fsdpc__cuda_swiglu_fwd;
  glu_bwd_fn gbwd = gelu ? fsdpc__cuda_geglu_bwd : fsdpc__cuda_swiglu_bwd;
  float *gt = rand_bf16_values(n, -4, 4), *up = rand_bf16_values(n, -2, 2);
  float *dy = rand_bf16_values(n, -1, 1);
  if (n > 2) /* saturated: silu/gelu(-100) = 0, silu/gelu(100) = 100 */
    gt[0] = -100.0f, gt[1] = 100.0f;
  uint16_t *d_gt = up_bf16_at(gt, n, off), *d_up = up_bf16_at(up, n, off);
  uint16_t *d_dy = up_bf16_at(dy, n, off), *d_y = dev_alloc_at(2, n, off);
  uint16_t *d_dg = dev_alloc_at(2, n, off), *d_du = dev_alloc_at(2, n, off);
  CK(gfwd(g_ctx, d_y, d_gt, d_up, N, F, &g_err));
  CK(gbwd(g_ctx, d_dg, d_du, d_dy, d_gt, d_up, N, F, &g_err));
  float *y = malloc(sizeof(float) * n), *dg = malloc(sizeof(float) * n);
  float *du = malloc(sizeof(float) * n);
  if (gelu) {
    fsdpc__cpu_geglu_fwd(y, gt, up, N, F);
    fsdpc__cpu_geglu_bwd(dg, du, dy, gt, up, N, F);
  } else {
    fsdpc__cpu_swiglu_fwd(y, gt, up, N, F);
    fsdpc__cpu_swiglu_bwd(dg, du, dy, gt, up, N, F);
  }
  float *gy = down_bf16(d_y, n), *gdg = down_bf16(d_dg, n), *gdu = down_bf16(d_du, n);
  char name[80];
  snprintf(name, sizeof name, "%s_fwd N=%d F=%d off=%d", op, N, F, off);
  CHECK_REL(name, gy, y, n, TOL_BF16);
  snprintf(name, sizeof name, "%s_bwd dgate", op);
  CHECK_REL(name, gdg, dg, n, TOL_BF16);
  snprintf(name, sizeof name, "%s_bwd dup", op);
  CHECK_REL(name, gdu, du, n, TOL_BF16);
  free(gt), free(up), free(dy), free(y), free(dg), free(du), free(gy), free(gdg), free(gdu);
  dev_free_at(d_gt, 2, n, off), dev_free_at(d_up, 2, n, off), dev_free_at(d_dy, 2, n, off);
  dev_free_at(d_y, 2, n, off), dev_free_at(d_dg, 2, n, off), dev_free_at(d_du, 2, n, off);
}

START_TEST(swiglu) {
  glu_case(37, 301, 0, 0); /* 16-byte path and a tail */
  glu_case(1, 13, 0, 0);   /* one vector and a 5-element tail */
  glu_case(1, 3, 0, 0);    /* tail only */
  glu_case(64, 8192, 0, 0);
  glu_case(13, 333, 1, 0); /* misaligned: scalar path */
}
END_TEST

START_TEST(geglu) {
  glu_case(37, 301, 0, 1);
  glu_case(1, 3, 0, 1);
  glu_case(64, 9216, 0, 1); /* Gemma 2 2B's intermediate size */
  glu_case(13, 333, 1, 1);
}
END_TEST

/* ---- LoRA: dropout (the CPU's mask, element for element) and bf16 scale ---- */

static void lora_case(size_t n, int off, float p) {
  float *x = rand_bf16_values(n, -3, 3);
  uint16_t *d_x = up_bf16_at(x, n, off), *d_y = dev_alloc_at(2, n, off);
  const uint64_t key = 0x1234567887654321ull;
  CK(fsdpc__cuda_dropout(g_ctx, d_y, d_x, n, p, key, &g_err));
  float *ref = malloc(sizeof(float) * (n ? n : 1));
  fsdpc__cpu_dropout(ref, x, n, p, key);
  float *got = down_bf16(d_y, n);
  size_t dropped = 0;
  for (size_t i = 0; i < n; i++) {
    ck_assert_msg((got[i] == 0.0f) == (ref[i] == 0.0f) || x[i] == 0.0f,
                  "dropout mask differs at %zu (n %zu off %d)", i, n, off);
    dropped += ref[i] == 0.0f && x[i] != 0.0f;
  }
  if (n > 1000)
    ck_assert_msg(dropped > n * p * 0.8 && dropped < n * p * 1.2, "dropped %zu of %zu at p %g",
                  dropped, n, p);
  char name[80];
  snprintf(name, sizeof name, "dropout n=%zu off=%d", n, off);
  CHECK_REL(name, got, ref, n, TOL_BF16);
  CK(fsdpc__cuda_scale_bf16(g_ctx, d_x, n, 0.375f, &g_err));
  float *gs = down_bf16(d_x, n);
  for (size_t i = 0; i < n; i++)
    ref[i] = x[i] * 0.375f;
  CHECK_REL("scale_bf16", gs, ref, n, TOL_BF16);
  free(x), free(ref), free(got), free(gs);
  dev_free_at(d_x, 2, n, off), dev_free_at(d_y, 2, n, off);
}

START_TEST(lora_dropout_scale) {
  lora_case(4099, 0, 0.1f); /* 16-byte path and a tail */
  lora_case(777, 1, 0.5f);  /* misaligned: scalar path */
  lora_case(65536, 0, 0.05f);
}
END_TEST

/* ---- residual add, casts, scale ---- */

static void elementwise_case(size_t n, int off) {
  float *a = rand_bf16_values(n, -3, 3), *b = rand_bf16_values(n, -3, 3);
  uint16_t *d_a = up_bf16_at(a, n, off), *d_b = up_bf16_at(b, n, off);
  uint16_t *d_o = dev_alloc_at(2, n, off);
  CK(fsdpc__cuda_add(g_ctx, d_o, d_a, d_b, n, &g_err));
  CK(fsdpc__cuda_add_inplace(g_ctx, d_a, d_b, n, &g_err)); /* a += b */
  float *ref = malloc(sizeof(float) * n);
  fsdpc__cpu_add(ref, a, b, n);
  float *go = down_bf16(d_o, n), *ga = down_bf16(d_a, n);
  CHECK_REL("add", go, ref, n, TOL_BF16);
  CHECK_REL("add_inplace", ga, ref, n, TOL_BF16);
  /* Casts: f32 -> bf16 must round exactly as the host does (nearest even). */
  float *f = rand_f32(n, -100, 100);
  if (n > 3)
    f[1] = bf2f(0x3f80) + bf2f(0x3c00) * 0.5f; /* a tie: 1 + 2^-8, rounds to even (1.0) */
  float *d_f = up_raw_at(f, sizeof(float), n, off), *d_f2 = dev_alloc_at(sizeof(float), n, off);
  CK(fsdpc__cuda_cast_f32_bf16(g_ctx, d_o, d_f, n, NULL, &g_err));
  CK(fsdpc__cuda_cast_bf16_f32(g_ctx, d_f2, d_o, n, fsdpc__cuda_comm_stream(g_ctx), &g_err));
  CK(fsdpc__cuda_sync(g_ctx, &g_err));
  uint16_t *h = malloc(n * 2);
  CK(fsdpc__cuda_d2h(g_ctx, h, d_o, n * 2, &g_err));
  size_t mismatches = 0;
  for (size_t i = 0; i < n; i++)
    mismatches += h[i] != f2bf(f[i]);
  ck_assert_msg(mismatches == 0, "cast_f32_bf16: %zu of %zu differ from round-to-nearest-even",
                mismatches, n);
  float *back = down_f32(d_f2, n);
  for (size_t i = 0; i < n; i++)
    ck_assert_msg(back[i] == bf2f(h[i]), "cast_bf16_f32 not exact at %zu", i);
  /* scale (fp32) */
  CK(fsdpc__cuda_scale(g_ctx, d_f, 0.37f, n, &g_err));
  for (size_t i = 0; i < n; i++)
    f[i] *= 0.37f;
  float *gf = down_f32(d_f, n);
  CHECK_REL("scale (fp32)", gf, f, n, TOL_F32);
  /* fp32 y += x: d_f2 (the bf16 values) += d_f (the scaled values) */
  CK(fsdpc__cuda_add_f32_inplace(g_ctx, d_f2, d_f, n, &g_err));
  float *gs = down_f32(d_f2, n);
  for (size_t i = 0; i < n; i++)
    back[i] += f[i];
  CHECK_REL("add_f32_inplace", gs, back, n, TOL_F32);
  free(gs);
  printf("  casts n=%zu off=%d: bit-exact\n", n, off);
  free(a), free(b), free(ref), free(go), free(ga), free(f), free(h), free(back), free(gf);
  dev_free_at(d_a, 2, n, off), dev_free_at(d_b, 2, n, off), dev_free_at(d_o, 2, n, off);
  dev_free_at(d_f, sizeof(float), n, off), dev_free_at(d_f2, sizeof(float), n, off);
}

START_TEST(elementwise) {
  elementwise_case(1001, 0);    /* scalar tail */
  elementwise_case(65536, 0);   /* 16-byte path */
  elementwise_case(100003, 0);  /* both */
  elementwise_case(1, 0);       /* tail only */
  elementwise_case(13, 0);      /* one vector and a tail */
  elementwise_case(4000037, 0); /* several strides of the capped grid */
  elementwise_case(1001, 1);    /* misaligned: scalar path */
  elementwise_case(13, 1);
}
END_TEST

/* ---- sum of squares ---- */

START_TEST(sumsq) {
  const size_t n = 1000003;
  float *x = rand_f32(n, -2, 2);
  float *d_x = up_raw(x, sizeof(float) * n);
  double *d_out = dev_alloc(sizeof(double)), got = 0, got2 = 0;
  CK(fsdpc__cuda_sumsq(g_ctx, d_out, d_x, n, 0, &g_err));
  CK(fsdpc__cuda_sync(g_ctx, &g_err));
  CK(fsdpc__cuda_d2h(g_ctx, &got, d_out, sizeof got, &g_err));
  CK(fsdpc__cuda_sumsq(g_ctx, d_out, d_x, 1001, 1, &g_err)); /* accumulate a second buffer */
  CK(fsdpc__cuda_d2h(g_ctx, &got2, d_out, sizeof got2, &g_err));
  double ref = fsdpc__cpu_sumsq(x, n), ref2 = ref + fsdpc__cpu_sumsq(x, 1001);
  printf("  sumsq rel err %.3e, accumulated %.3e\n", fabs(got - ref) / ref,
         fabs(got2 - ref2) / ref2);
  ck_assert(isfinite(got) && fabs(got - ref) / ref < 1e-12);
  ck_assert(isfinite(got2) && fabs(got2 - ref2) / ref2 < 1e-12);
  /* Deterministic: the same input gives the same bits. */
  double again = 0;
  CK(fsdpc__cuda_sumsq(g_ctx, d_out, d_x, n, 0, &g_err));
  CK(fsdpc__cuda_d2h(g_ctx, &again, d_out, sizeof again, &g_err));
  ck_assert(memcmp(&again, &got, sizeof got) == 0);
  /* Small n (tail only, one vector and a tail), and x one float past an
   * aligned address (scalar path), each against the CPU and repeated. */
  const size_t ns[] = {1, 13, 4099, n - 1};
  for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++)
    for (int off = 0; off <= 1; off++) {
      const size_t m = ns[t];
      double g1 = 0, g2 = 0, r = fsdpc__cpu_sumsq(x + off, m);
      CK(fsdpc__cuda_sumsq(g_ctx, d_out, d_x + off, m, 0, &g_err));
      CK(fsdpc__cuda_d2h(g_ctx, &g1, d_out, sizeof g1, &g_err));
      CK(fsdpc__cuda_sumsq(g_ctx, d_out, d_x + off, m, 0, &g_err));
      CK(fsdpc__cuda_d2h(g_ctx, &g2, d_out, sizeof g2, &g_err));
      ck_assert_msg(isfinite(g1) && fabs(g1 - r) / r < 1e-12, "sumsq n=%zu off=%d: %.17g vs %.17g",
                    m, off, g1, r);
      ck_assert(memcmp(&g1, &g2, sizeof g1) == 0);
    }
  free(x);
  dev_free(d_x, sizeof(float) * n), dev_free(d_out, sizeof(double));
}
END_TEST

/* ---- matmul (cuBLASLt) ---- */

static void matmul_case(int N, int C, int OC) {
  const size_t nc = (size_t)N * C, no = (size_t)N * OC, oc = (size_t)OC * C;
  float *x = rand_bf16_values(nc, -1, 1), *w = rand_bf16_values(oc, -0.5, 0.5);
  float *res = rand_bf16_values(no, -1, 1), *dy = rand_bf16_values(no, -1, 1);
  float *dw = rand_f32(oc, -1, 1);
  uint16_t *d_x = up_bf16(x, nc), *d_w = up_bf16(w, oc), *d_res = up_bf16(res, no);
  uint16_t *d_dy = up_bf16(dy, no), *d_y = dev_alloc(no * 2), *d_y2 = dev_alloc(no * 2);
  uint16_t *d_dx = dev_alloc(nc * 2);
  float *d_dw = up_raw(dw, sizeof(float) * oc);
  CK(fsdpc__cuda_matmul_fwd(g_ctx, d_y, d_x, d_w, NULL, N, C, OC, &g_err));
  CK(fsdpc__cuda_matmul_fwd(g_ctx, d_y2, d_x, d_w, d_res, N, C, OC, &g_err));
  CK(fsdpc__cuda_matmul_bwd(g_ctx, d_dx, d_dw, d_dy, d_x, d_w, N, C, OC, &g_err));
  float *y = malloc(sizeof(float) * no), *y2 = malloc(sizeof(float) * no);
  float *dx = malloc(sizeof(float) * nc);
  fsdpc__cpu_matmul_fwd(y, x, w, N, C, OC);
  fsdpc__cpu_add(y2, y, res, no);
  fsdpc__cpu_matmul_bwd(dx, dw, dy, x, w, N, C, OC);
  float *gy = down_bf16(d_y, no), *gy2 = down_bf16(d_y2, no), *gdx = down_bf16(d_dx, nc);
  float *gdw = down_f32(d_dw, oc);
  char name[64];
  snprintf(name, sizeof name, "matmul_fwd N=%d C=%d OC=%d", N, C, OC);
  CHECK_REL(name, gy, y, no, TOL_BF16);
  CHECK_REL("matmul_fwd + residual (beta=1)", gy2, y2, no, TOL_BF16);
  CHECK_REL("matmul_bwd dinp", gdx, dx, nc, TOL_BF16);
  CHECK_REL("matmul_bwd dweight (fp32 +=)", gdw, dw, oc, TOL_F32);
  free(x), free(w), free(res), free(dy), free(dw), free(y), free(y2), free(dx);
  free(gy), free(gy2), free(gdx), free(gdw);
  dev_free(d_x, nc * 2), dev_free(d_w, oc * 2), dev_free(d_res, no * 2), dev_free(d_dy, no * 2);
  dev_free(d_y, no * 2), dev_free(d_y2, no * 2), dev_free(d_dx, nc * 2);
  dev_free(d_dw, sizeof(float) * oc);
}

START_TEST(matmul) {
  matmul_case(37, 72, 100);
  matmul_case(256, 512, 384);
  matmul_case(33, 77, 45); /* odd leading dimensions */
}
END_TEST

/* ---- fused lm_head + cross-entropy ---- */

/* The CUDA op against the CPU reference with the same logits dtype (bf16:
 * both round the same fp32-accumulated logits to bf16). */
static void xent_case_dt(int N, int C, int V, int chunk, int lbf16) {
  const size_t nc = (size_t)N * C, vc = (size_t)V * C;
  float *x = rand_bf16_values(nc, -1, 1), *w = rand_bf16_values(vc, -0.5, 0.5);
  float *dw = rand_f32(vc, -0.1, 0.1);
  int32_t *lab = malloc(sizeof(int32_t) * N);
  for (int i = 0; i < N; i++)
    lab[i] = i % 7 == 3 ? -100 : (i == 5 ? V + 5 : (int32_t)urand(0, V));
  if (N > 9)
    lab[9] = V - 1; /* the last column: the end of a row's last vector */
  int counted = 0;
  for (int i = 0; i < N; i++)
    counted += lab[i] >= 0 && lab[i] < V;
  const float gs = 1.0f / (float)counted;
  uint16_t *d_x = up_bf16(x, nc), *d_w = up_bf16(w, vc), *d_dx = dev_alloc(nc * 2);
  float *d_dw = up_raw(dw, sizeof(float) * vc);
  int32_t *d_lab = up_raw(lab, sizeof(int32_t) * N);
  double *d_out = dev_alloc(2 * sizeof(double)), got[2], got_eval[2];
  size_t sb = fsdpc__cuda_lmhead_xent_scratch_bytes(N, V, chunk, lbf16);
  void *d_s = dev_alloc(sb);
  CK(fsdpc__cuda_lmhead_xent(g_ctx, d_out, d_dx, d_dw, d_x, d_w, d_lab, N, C, V, gs, chunk, lbf16,
                             d_s, sb, &g_err));
  CK(fsdpc__cuda_sync(g_ctx, &g_err));
  CK(fsdpc__cuda_d2h(g_ctx, got, d_out, sizeof got, &g_err));
  CK(fsdpc__cuda_lmhead_xent(g_ctx, d_out, NULL, NULL, d_x, d_w, d_lab, N, C, V, gs, chunk, lbf16,
                             d_s, sb, &g_err));
  CK(fsdpc__cuda_d2h(g_ctx, got_eval, d_out, sizeof got_eval, &g_err));
  double loss = 0;
  int64_t count = 0;
  float *dx = malloc(sizeof(float) * nc), *scr = malloc(sizeof(float) * (size_t)chunk * V);
  fsdpc__cpu_lmhead_xent(&loss, &count, dx, dw, x, w, lab, N, C, V, gs, chunk, lbf16, scr);
  printf("  lmhead_xent N=%d C=%d V=%d R=%d logits %s: loss %.6f vs %.6f (rel %.2e), count %g vs "
         "%lld\n",
         N, C, V, chunk, lbf16 ? "bf16" : "fp32", got[0], loss, fabs(got[0] - loss) / loss, got[1],
         (long long)count);
  /* bf16 logits: a logit near a rounding midpoint may round the other way
   * after a different fp32 summation order (one bf16 ulp of one logit) */
  ck_assert(isfinite(got[0]) && fabs(got[0] - loss) / loss < (lbf16 ? 1e-3 : 1e-4));
  ck_assert(got[1] == (double)count && count == counted);
  ck_assert(got_eval[0] == got[0] && got_eval[1] == got[1]);
  float *gdx = down_bf16(d_dx, nc), *gdw = down_f32(d_dw, vc);
  CHECK_REL("lmhead_xent dx", gdx, dx, nc, TOL_BF16);
  /* dweight accumulates bf16 gradients of the logits: a bf16 path. */
  CHECK_REL("lmhead_xent dweight (+=)", gdw, dw, vc, TOL_BF16);
  free(x), free(w), free(dw), free(lab), free(dx), free(scr), free(gdx), free(gdw);
  dev_free(d_x, nc * 2), dev_free(d_w, vc * 2), dev_free(d_dx, nc * 2);
  dev_free(d_dw, sizeof(float) * vc), dev_free(d_lab, sizeof(int32_t) * N);
  dev_free(d_out, 2 * sizeof(double)), dev_free(d_s, sb);
}

static void xent_case(int N, int C, int V, int chunk) {
  xent_case_dt(N, C, V, chunk, 0);
  xent_case_dt(N, C, V, chunk, 1);
}

START_TEST(lmhead_xent) {
  xent_case(37, 64, 1001, 16); /* several chunks, a short last one */
  xent_case(70, 128, 32003, 64); /* V % 4 != 0: element by element */
  /* V % 8 == 0: 16-byte vectors of fp32 and bf16 logits (Llama 2, Llama 3) */
  xent_case(70, 64, 32000, 32);
  xent_case(70, 64, 128256, 32);
  xent_case(19, 32, 1004, 8); /* V % 4 == 0, V % 8 != 0: fp32 vectors, bf16 by element */
}
END_TEST

/* ---- the context: memory accounting, events, errors ---- */

START_TEST(ctx_memory_and_events) {
  fsdpc_cuda_mem_stats s0, s1, s2, s3;
  CK(fsdpc__cuda_sync(g_ctx, &g_err));
  CK(fsdpc__cuda_mem_reset_peak(g_ctx, &g_err));
  CK(fsdpc__cuda_mem_stats(g_ctx, &s0, &g_err));
  void *a = NULL, *p = NULL;
  CK(fsdpc__cuda_alloc(g_ctx, FSDPC_MEM_ACTIVATIONS, 10 << 20, NULL, &a, &g_err));
  CK(fsdpc__cuda_alloc(g_ctx, FSDPC_MEM_PARAMS, 3 << 20, NULL, &p, &g_err));
  CK(fsdpc__cuda_mem_stats(g_ctx, &s1, &g_err));
  ck_assert_int_eq(s1.allocated[FSDPC_MEM_ACTIVATIONS] - s0.allocated[FSDPC_MEM_ACTIVATIONS],
                   10 << 20);
  ck_assert_int_eq(s1.allocated[FSDPC_MEM_PARAMS] - s0.allocated[FSDPC_MEM_PARAMS], 3 << 20);
  ck_assert_int_ge(s1.pool_reserved, 13 << 20); /* one pool for every category */
  ck_assert_int_ge(s1.total_allocated_peak, s0.total_allocated + (13 << 20));
  /* Events order the comm stream after the compute stream. */
  CK(fsdpc__cuda_memset(g_ctx, a, 0x5A, 10 << 20, &g_err));
  CK(fsdpc__cuda_event_record(g_ctx, 3, NULL, &g_err));
  CK(fsdpc__cuda_stream_wait_event(g_ctx, fsdpc__cuda_comm_stream(g_ctx), 3, &g_err));
  CK(fsdpc__cuda_cast_bf16_f32(g_ctx, p, a, 100, fsdpc__cuda_comm_stream(g_ctx), &g_err));
  CK(fsdpc__cuda_free(g_ctx, FSDPC_MEM_ACTIVATIONS, a, 10 << 20, NULL, &g_err));
  CK(fsdpc__cuda_sync(g_ctx, &g_err));
  float h[100];
  CK(fsdpc__cuda_d2h(g_ctx, h, p, sizeof h, &g_err));
  ck_assert(h[99] == bf2f(0x5A5A));
  CK(fsdpc__cuda_free(g_ctx, FSDPC_MEM_PARAMS, p, 3 << 20, NULL, &g_err));
  CK(fsdpc__cuda_sync(g_ctx, &g_err));
  CK(fsdpc__cuda_mem_stats(g_ctx, &s2, &g_err));
  ck_assert_int_eq(s2.allocated[FSDPC_MEM_ACTIVATIONS], s0.allocated[FSDPC_MEM_ACTIVATIONS]);
  ck_assert_int_ge(s2.allocated_peak[FSDPC_MEM_ACTIVATIONS], 10 << 20);
  /* The release threshold keeps freed memory reserved: re-allocating the
   * same size after a sync does not grow the reservation. */
  ck_assert_int_ge(s2.pool_reserved, 13 << 20);
  CK(fsdpc__cuda_alloc(g_ctx, FSDPC_MEM_ACTIVATIONS, 10 << 20, NULL, &a, &g_err));
  CK(fsdpc__cuda_mem_stats(g_ctx, &s3, &g_err));
  ck_assert_int_eq(s3.pool_reserved, s2.pool_reserved);
  CK(fsdpc__cuda_free(g_ctx, FSDPC_MEM_ACTIVATIONS, a, 10 << 20, NULL, &g_err));
  CK(fsdpc__cuda_mem_reset_peak(g_ctx, &g_err));
  CK(fsdpc__cuda_mem_stats(g_ctx, &s3, &g_err));
  ck_assert_int_eq(s3.allocated_peak[FSDPC_MEM_ACTIVATIONS], s3.allocated[FSDPC_MEM_ACTIVATIONS]);
  /* An arena: reserved once, outside the pool; buffers in it are accounted. */
  void *ar = NULL;
  CK(fsdpc__cuda_arena_alloc(g_ctx, 6 << 20, &ar, &g_err));
  fsdpc__cuda_account(g_ctx, FSDPC_MEM_COMM, 4 << 20);
  fsdpc_cuda_mem_stats s4;
  CK(fsdpc__cuda_mem_stats(g_ctx, &s4, &g_err));
  ck_assert_int_eq(s4.arena - s3.arena, 6 << 20);
  ck_assert_int_eq(s4.total_reserved, s4.arena + s4.pool_reserved);
  ck_assert_int_eq(s4.allocated[FSDPC_MEM_COMM] - s3.allocated[FSDPC_MEM_COMM], 4 << 20);
  fsdpc__cuda_account(g_ctx, FSDPC_MEM_COMM, -(4 << 20));
  fsdpc__cuda_arena_free(g_ctx, ar, 6 << 20);
  CK(fsdpc__cuda_mem_trim(g_ctx, &g_err));
  printf("  memory: pool reserved %lld MiB after free, peak allocated %lld MiB\n",
         (long long)(s2.pool_reserved >> 20),
         (long long)(s2.allocated_peak[FSDPC_MEM_ACTIVATIONS] >> 20));
}
END_TEST

START_TEST(bad_shapes_are_one_line_errors) {
  fsdpc_err e;
  uint16_t *d = dev_alloc(64);
  ck_assert_int_eq(
      fsdpc__cuda_rope_fwd(g_ctx, d, (float *)d, (float *)d, (int32_t *)d, 1, 1, 8, 7, 4, &e),
      FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(e.msg, "rotary dims must be even"));
  ck_assert_ptr_null(strchr(e.msg, '\n'));
  ck_assert_int_eq(fsdpc__cuda_lmhead_xent(g_ctx, (double *)d, NULL, NULL, d, d, (int32_t *)d, 4, 8,
                                           100, 1.0f, 2, 0, d, 16, &e),
                   FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(e.msg, "scratch"));
  ck_assert_int_eq(fsdpc__cuda_matmul_fwd(g_ctx, d, NULL, d, NULL, 2, 2, 2, &e),
                   FSDPC_INVALID_USAGE);
  void *q = NULL;
  ck_assert_int_eq(fsdpc__cuda_alloc(g_ctx, FSDPC_MEM_OTHER, (size_t)1 << 50, NULL, &q, &e),
                   FSDPC_SYSTEM_ERROR);
  ck_assert_ptr_nonnull(strstr(e.msg, "out of memory"));
  dev_free(d, 64);
}
END_TEST

static Suite *make_suite(void) {
  Suite *s = suite_create("cuda_ops");
  TCase *tc = tcase_create("ops");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, embedding);
  tcase_add_test(tc, rmsnorm);
  tcase_add_test(tc, rmsnorm_deterministic);
  tcase_add_test(tc, rope);
  tcase_add_test(tc, family_ops);
  tcase_add_test(tc, swiglu);
  tcase_add_test(tc, geglu);
  tcase_add_test(tc, rmsnorm_off);
  tcase_add_test(tc, lora_dropout_scale);
  tcase_add_test(tc, elementwise);
  tcase_add_test(tc, sumsq);
  tcase_add_test(tc, matmul);
  tcase_add_test(tc, lmhead_xent);
  tcase_add_test(tc, ctx_memory_and_events);
  tcase_add_test(tc, bad_shapes_are_one_line_errors);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  return cuda_test_main(make_suite);
}
