/* Finite-difference gradient checks of every CPU reference op's backward.
 * Shapes are small and odd on purpose (a chunk that does not divide N, a
 * hidden size past the 64-column blocks, repeated tokens, ignored labels),
 * and Gemma 2's ops: the (1 + w) norm, GeGLU, the soft-capped logits. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fd_check.h"
#include "ops/cpu/ops_cpu.h"

#define EPS 1e-3f
#define RTOL 1e-2

/* ---- embedding ---- */

typedef struct {
  int N, C;
  const int32_t *tokens;
  float *wte, *out;
  const float *r;
} emb_ctx;

static double emb_loss(void *p) {
  emb_ctx *c = p;
  fsdpc__cpu_embedding_fwd(c->out, c->tokens, c->wte, c->N, c->C);
  return dot_d(c->r, c->out, (size_t)c->N * c->C);
}

START_TEST(embedding_grad) {
  enum { N = 9, C = 5, V = 6 };
  test_rng rng = {11};
  int32_t tokens[N] = {0, 3, 3, 5, 1, 3, 0, 2, 5}; /* repeats; token 4 unused */
  float wte[V * C], out[N * C], r[N * C], dwte[V * C] = {0};
  rng_fill(&rng, wte, V * C, 1.0f);
  rng_fill(&rng, r, N * C, 1.0f);
  fsdpc__cpu_embedding_bwd(dwte, r, tokens, N, C);
  emb_ctx c = {N, C, tokens, wte, out, r};
  ck_assert_int_eq(fd_check("dwte", wte, dwte, V * C, emb_loss, &c, EPS, RTOL), 0);
  for (int k = 0; k < C; k++)
    ck_assert(dwte[4 * C + k] == 0.0f); /* unused row untouched */
}
END_TEST

/* ---- rmsnorm ---- */

typedef struct {
  int N, C;
  float *inp, *weight, *out, *rstd;
  const float *r;
  float offset; /* Gemma's (1 + w): the _off ops */
} rms_ctx;

static double rms_loss(void *p) {
  rms_ctx *c = p;
  if (c->offset != 0.0f)
    fsdpc__cpu_rmsnorm_off_fwd(c->out, c->rstd, c->inp, c->weight, c->N, c->C, 1e-5f, c->offset);
  else
    fsdpc__cpu_rmsnorm_fwd(c->out, c->rstd, c->inp, c->weight, c->N, c->C, 1e-5f);
  return dot_d(c->r, c->out, (size_t)c->N * c->C);
}

static void rmsnorm_grad_case(int N, int C, uint64_t seed, float offset) {
  test_rng rng = {seed};
  size_t n = (size_t)N * C;
  float *inp = malloc(n * 4), *out = malloc(n * 4), *r = malloc(n * 4), *dinp = malloc(n * 4);
  float *weight = malloc(C * 4), *dweight = calloc(C, 4), *rstd = malloc(N * 4);
  rng_fill(&rng, inp, n, 2.0f);
  for (int i = 0; i < C; i++) /* around 0 with an offset: the scale stays near 1 */
    weight[i] = 1.0f - offset + 0.5f * rng_uniform(&rng);
  rng_fill(&rng, r, n, 1.0f);
  rms_ctx c = {N, C, inp, weight, out, rstd, r, offset};
  rms_loss(&c);
  if (offset != 0.0f)
    fsdpc__cpu_rmsnorm_off_bwd(dinp, dweight, r, inp, weight, rstd, N, C, offset);
  else
    fsdpc__cpu_rmsnorm_bwd(dinp, dweight, r, inp, weight, rstd, N, C);
  ck_assert_int_eq(fd_check("rmsnorm dinp", inp, dinp, n, rms_loss, &c, EPS, RTOL), 0);
  ck_assert_int_eq(fd_check("rmsnorm dweight", weight, dweight, C, rms_loss, &c, EPS, RTOL), 0);
  free(inp), free(out), free(r), free(dinp), free(weight), free(dweight), free(rstd);
}

START_TEST(rmsnorm_grad) {
  rmsnorm_grad_case(4, 8, 21, 0.0f);
  rmsnorm_grad_case(3, 70, 22, 0.0f); /* past one 64-column dweight block */
}
END_TEST

/* Gemma2RMSNorm: out = x r (1 + w); the same values as the plain norm with
 * weight 1 + w, and its gradients by finite differences. */
START_TEST(rmsnorm_offset_grad) {
  rmsnorm_grad_case(4, 8, 23, 1.0f);
  rmsnorm_grad_case(3, 70, 24, 1.0f);
  enum { N = 3, C = 5 };
  test_rng rng = {25};
  float x[N * C], w[C], w1[C], a[N * C], b[N * C], ra[N], rb[N];
  rng_fill(&rng, x, N * C, 2.0f);
  rng_fill(&rng, w, C, 0.5f);
  for (int i = 0; i < C; i++)
    w1[i] = 1.0f + w[i];
  fsdpc__cpu_rmsnorm_off_fwd(a, ra, x, w, N, C, 1e-6f, 1.0f);
  fsdpc__cpu_rmsnorm_fwd(b, rb, x, w1, N, C, 1e-6f);
  ck_assert_mem_eq(a, b, sizeof a);
}
END_TEST

/* ---- matmul ---- */

typedef struct {
  int N, C, OC;
  float *inp, *weight, *out;
  const float *r;
} mm_ctx;

static double mm_loss(void *p) {
  mm_ctx *c = p;
  fsdpc__cpu_matmul_fwd(c->out, c->inp, c->weight, c->N, c->C, c->OC);
  return dot_d(c->r, c->out, (size_t)c->N * c->OC);
}

START_TEST(matmul_grad) {
  enum { N = 5, C = 6, OC = 7 };
  test_rng rng = {31};
  float inp[N * C], weight[OC * C], out[N * OC], r[N * OC], dinp[N * C];
  float dweight[OC * C] = {0}, dweight2[OC * C] = {0};
  rng_fill(&rng, inp, N * C, 1.0f);
  rng_fill(&rng, weight, OC * C, 1.0f);
  rng_fill(&rng, r, N * OC, 1.0f);
  fsdpc__cpu_matmul_bwd(dinp, dweight, r, inp, weight, N, C, OC);
  mm_ctx c = {N, C, OC, inp, weight, out, r};
  ck_assert_int_eq(fd_check("matmul dinp", inp, dinp, N * C, mm_loss, &c, EPS, RTOL), 0);
  ck_assert_int_eq(fd_check("matmul dweight", weight, dweight, OC * C, mm_loss, &c, EPS, RTOL), 0);
  /* dinp = NULL skips only the input gradient. */
  fsdpc__cpu_matmul_bwd(NULL, dweight2, r, inp, weight, N, C, OC);
  ck_assert_mem_eq(dweight, dweight2, sizeof dweight);
}
END_TEST

/* ---- rope ---- */

enum { ROPE_MAXT = 16 };

typedef struct {
  int N, H, HD, RD;
  float *x, *y;
  const float *cos, *sin, *r;
  const int32_t *pos;
} rope_ctx;

static double rope_loss(void *p) {
  rope_ctx *c = p;
  size_t n = (size_t)c->N * c->H * c->HD;
  memcpy(c->y, c->x, n * sizeof(float));
  fsdpc__cpu_rope_fwd(c->y, c->cos, c->sin, c->pos, c->N, c->H, c->HD, c->RD);
  return dot_d(c->r, c->y, n);
}

/* Full rotary (RD = HD) and partial rotary (RD < HD: the last dims pass
 * through), under a yarn table (attention factor != 1: not a rotation). */
START_TEST(rope_grad) {
  enum { N = 5, H = 3, HD = 12 };
  static const int rds[] = {HD, 8};
  for (int k = 0; k < 2; k++) {
    int RD = rds[k];
    test_rng rng = {41};
    float ctab[ROPE_MAXT * HD / 2], stab[ROPE_MAXT * HD / 2];
    fsdpc_rope rp = {.type = k ? FSDPC_ROPE_YARN : FSDPC_ROPE_DEFAULT,
                     .dim = RD,
                     .max_pos = 64,
                     .theta = 10000.0,
                     .factor = 4.0,
                     .original_max_pos = 16,
                     .truncate = 1};
    fsdpc__rope_tables(ctab, stab, &rp, ROPE_MAXT, 0);
    int32_t pos[N] = {0, 3, 15, 7, 3};
    float x[N * H * HD], y[N * H * HD], r[N * H * HD], dx[N * H * HD];
    rng_fill(&rng, x, N * H * HD, 1.0f);
    rng_fill(&rng, r, N * H * HD, 1.0f);
    memcpy(dx, r, sizeof r);
    fsdpc__cpu_rope_bwd(dx, ctab, stab, pos, N, H, HD, RD);
    rope_ctx c = {N, H, HD, RD, x, y, ctab, stab, r, pos};
    ck_assert_int_eq(fd_check("rope dx", x, dx, N * H * HD, rope_loss, &c, EPS, RTOL), 0);
  }
}
END_TEST

/* ---- swiglu ---- */

typedef struct {
  int N, F;
  float *gate, *up, *out;
  const float *r;
} swi_ctx;

static double swi_loss(void *p) {
  swi_ctx *c = p;
  fsdpc__cpu_swiglu_fwd(c->out, c->gate, c->up, c->N, c->F);
  return dot_d(c->r, c->out, (size_t)c->N * c->F);
}

START_TEST(swiglu_grad) {
  enum { N = 3, F = 9 };
  test_rng rng = {51};
  float gate[N * F], up[N * F], out[N * F], r[N * F], dgate[N * F], dup[N * F];
  rng_fill(&rng, gate, N * F, 4.0f); /* both tails of the sigmoid */
  rng_fill(&rng, up, N * F, 1.0f);
  rng_fill(&rng, r, N * F, 1.0f);
  fsdpc__cpu_swiglu_bwd(dgate, dup, r, gate, up, N, F);
  swi_ctx c = {N, F, gate, up, out, r};
  ck_assert_int_eq(fd_check("swiglu dgate", gate, dgate, N * F, swi_loss, &c, EPS, RTOL), 0);
  ck_assert_int_eq(fd_check("swiglu dup", up, dup, N * F, swi_loss, &c, EPS, RTOL), 0);
}
END_TEST

/* ---- geglu ---- */

static double geglu_loss(void *p) {
  swi_ctx *c = p;
  fsdpc__cpu_geglu_fwd(c->out, c->gate, c->up, c->N, c->F);
  return dot_d(c->r, c->out, (size_t)c->N * c->F);
}

/* gelu_pytorch_tanh(g) * up: the values of the formula, and the gradients by
 * finite differences over both tails and the bend near 0. */
START_TEST(geglu_grad) {
  enum { N = 3, F = 9 };
  test_rng rng = {52};
  float gate[N * F], up[N * F], out[N * F], r[N * F], dgate[N * F], dup[N * F];
  rng_fill(&rng, gate, N * F, 4.0f);
  rng_fill(&rng, up, N * F, 1.0f);
  rng_fill(&rng, r, N * F, 1.0f);
  fsdpc__cpu_geglu_fwd(out, gate, up, N, F);
  for (int i = 0; i < N * F; i++) {
    double g = gate[i];
    double want = 0.5 * g * (1.0 + tanh(sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g))) * up[i];
    ck_assert_msg(fabs(out[i] - want) <= 1e-6 * (1.0 + fabs(want)), "geglu[%d] %g, want %g", i,
                  (double)out[i], want);
  }
  fsdpc__cpu_geglu_bwd(dgate, dup, r, gate, up, N, F);
  swi_ctx c = {N, F, gate, up, out, r};
  ck_assert_int_eq(fd_check("geglu dgate", gate, dgate, N * F, geglu_loss, &c, EPS, RTOL), 0);
  ck_assert_int_eq(fd_check("geglu dup", up, dup, N * F, geglu_loss, &c, EPS, RTOL), 0);
}
END_TEST

/* ---- cross-entropy ---- */

typedef struct {
  int N, C, V, chunk;
  float *x, *weight, *scratch;
  const int32_t *labels;
  float grad_scale;
  float softcap; /* final_logit_softcapping; 0 = none */
} xent_ctx;

static double xent_loss(void *p) {
  xent_ctx *c = p;
  double loss;
  int64_t count;
  fsdpc__cpu_lmhead_xent_capped(&loss, &count, NULL, NULL, c->x, c->weight, c->labels, c->N, c->C,
                                c->V, c->grad_scale, c->chunk, 0, c->softcap, c->scratch);
  return c->grad_scale * loss;
}

START_TEST(xent_grad) {
  enum { N = 7, C = 6, V = 11, CHUNK = 3 }; /* 3 does not divide 7 */
  test_rng rng = {61};
  float x[N * C], weight[V * C], dx[N * C], dweight[V * C] = {0}, scratch[CHUNK * V];
  int32_t labels[N] = {4, -100, 0, 10, 4, -100, 7};
  rng_fill(&rng, x, N * C, 1.0f);
  rng_fill(&rng, weight, V * C, 1.0f);
  for (int i = 0; i < N * C; i++)
    dx[i] = NAN; /* dx is written, never read */
  float grad_scale = 1.0f / 5.0f;
  double loss;
  int64_t count;
  fsdpc__cpu_lmhead_xent(&loss, &count, dx, dweight, x, weight, labels, N, C, V, grad_scale, CHUNK,
                         0, scratch);
  ck_assert_int_eq(count, 5);
  for (int k = 0; k < C; k++)
    ck_assert(dx[1 * C + k] == 0.0f && dx[5 * C + k] == 0.0f);
  xent_ctx c = {N, C, V, CHUNK, x, weight, scratch, labels, grad_scale, 0.0f};
  ck_assert_int_eq(fd_check("xent dx", x, dx, N * C, xent_loss, &c, EPS, RTOL), 0);
  ck_assert_int_eq(fd_check("xent dweight", weight, dweight, V * C, xent_loss, &c, EPS, RTOL), 0);
}
END_TEST

/* Final logit soft-capping (Gemma 2): the loss of c tanh(z / c) computed
 * here in double, and the gradients through the cap by finite differences,
 * with logits well past the cap. */
START_TEST(xent_capped_grad) {
  enum { N = 7, C = 6, V = 11, CHUNK = 3 };
  const float cap = 1.5f;
  test_rng rng = {62};
  float x[N * C], weight[V * C], dx[N * C], dweight[V * C] = {0}, scratch[CHUNK * V];
  int32_t labels[N] = {4, -100, 0, 10, 4, -100, 7};
  rng_fill(&rng, x, N * C, 1.5f);
  rng_fill(&rng, weight, V * C, 1.5f);
  float grad_scale = 1.0f / 5.0f;
  double loss, want = 0.0, zmax = 0.0;
  int64_t count;
  fsdpc__cpu_lmhead_xent_capped(&loss, &count, dx, dweight, x, weight, labels, N, C, V, grad_scale,
                                CHUNK, 0, cap, scratch);
  ck_assert_int_eq(count, 5);
  for (int n = 0; n < N; n++) {
    if (labels[n] < 0)
      continue;
    double z[V], mx = -INFINITY, sum = 0.0;
    for (int v = 0; v < V; v++) {
      z[v] = 0.0;
      for (int k = 0; k < C; k++)
        z[v] += (double)x[n * C + k] * weight[v * C + k];
      zmax = fmax(zmax, fabs(z[v]));
      z[v] = cap * tanh(z[v] / cap);
      mx = fmax(mx, z[v]);
    }
    for (int v = 0; v < V; v++)
      sum += exp(z[v] - mx);
    want += mx + log(sum) - z[labels[n]];
  }
  ck_assert_msg(zmax > 2.0 * cap, "logits %g do not reach past the cap", zmax);
  ck_assert_msg(fabs(loss - want) <= 1e-5 * want, "capped loss %.9g, want %.9g", loss, want);
  xent_ctx c = {N, C, V, CHUNK, x, weight, scratch, labels, grad_scale, cap};
  ck_assert_int_eq(fd_check("xent capped dx", x, dx, N * C, xent_loss, &c, EPS, RTOL), 0);
  ck_assert_int_eq(
      fd_check("xent capped dweight", weight, dweight, V * C, xent_loss, &c, EPS, RTOL), 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("ops_grad");
  TCase *tc = tcase_create("finite_differences");
  tcase_add_test(tc, embedding_grad);
  tcase_add_test(tc, rmsnorm_grad);
  tcase_add_test(tc, rmsnorm_offset_grad);
  tcase_add_test(tc, matmul_grad);
  tcase_add_test(tc, rope_grad);
  tcase_add_test(tc, swiglu_grad);
  tcase_add_test(tc, geglu_grad);
  tcase_add_test(tc, xent_grad);
  tcase_add_test(tc, xent_capped_grad);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
