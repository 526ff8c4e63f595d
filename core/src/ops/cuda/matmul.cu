/* GEMMs through cuBLASLt (twin of ops/cpu/matmul.c): bf16 A and B, fp32
 * accumulation (CUBLAS_COMPUTE_32F), bf16 or fp32 C/D.
 *
 * Row-major X (r, c) is column-major X^T (c, r), so with W (OC, C), x (N, C):
 *   out (N, OC) = x W^T        ->  D(OC, N) = op_T(W) op_N(x)      m=OC n=N k=C
 *   dinp (N, C) = dout W       ->  D(C, N)  = op_N(W) op_N(dout)   m=C  n=N k=OC
 *   dW (OC, C) += dout^T x     ->  D(C, OC) = op_N(x) op_T(dout)   m=C  n=OC k=N
 * Epilogue-free fusions: the residual add of the forward rides in C with
 * beta = 1 (C = residual, D = out), and the weight gradient accumulates in
 * place with beta = 1 (C = D = dweight, fp32), so neither needs a pass.
 * A projection's bias (Qwen2's q/k/v) is added in the epilogue
 * (CUBLASLT_EPILOGUE_BIAS, bf16, one value per row of D = per output
 * feature): one rounding of acc + bias to bf16 instead of a second kernel.
 * Its gradient stays the bias_bwd reduction (family.cu): BGRADB writes the
 * column sums, while the bias gradient accumulates (+=) over micro-batches
 * like every other gradient. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/cuda_internal.cuh"

#define LT_TRY(call, what)                                                                         \
  do {                                                                                             \
    cublasStatus_t s_ = (call);                                                                    \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                             \
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cuda %s: %s failed: %s", what, #call,             \
                       cublasLtGetStatusString(s_));                                               \
      goto done;                                                                                   \
    }                                                                                              \
  } while (0)

/* A GEMM's cuBLASLt plan: descriptors and the heuristic's algorithm for one
 * shape. A training step repeats a few dozen shapes hundreds of times, so
 * plans are built once and kept (the heuristic query costs host time on
 * every call otherwise). Open addressing over a fixed table; a full table
 * still works, uncached. */
#define LT_PLANS 128
#define LT_KEY 14 /* shape, C/D type, beta, A/B types, scale mode, bias epilogue */
struct fsdpc_lt_plan {
  int used;
  long long key[LT_KEY];
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulAlgo_t algo;
};

static void plan_destroy(fsdpc_lt_plan *p) {
  if (p->lc)
    cublasLtMatrixLayoutDestroy(p->lc);
  if (p->lb)
    cublasLtMatrixLayoutDestroy(p->lb);
  if (p->la)
    cublasLtMatrixLayoutDestroy(p->la);
  if (p->op)
    cublasLtMatmulDescDestroy(p->op);
  memset(p, 0, sizeof *p);
}

extern "C" void fsdpc__cuda_lt_plans_free(fsdpc_cuda_ctx *ctx) {
  if (!ctx->lt_plans)
    return;
  for (int i = 0; i < LT_PLANS; i++)
    plan_destroy(&ctx->lt_plans[i]);
  free(ctx->lt_plans);
  ctx->lt_plans = NULL;
}

static fsdpc_status plan_build(fsdpc_cuda_ctx *ctx, fsdpc_lt_plan *p, const long long *key,
                               const char *what, fsdpc_err *err) {
  fsdpc_status st = FSDPC_OK;
  const int trans_a = (int)key[0], trans_b = (int)key[1], m = (int)key[2], n = (int)key[3],
            k = (int)key[4], lda = (int)key[5], ldb = (int)key[6], ldcd = (int)key[7];
  const cudaDataType_t cd = (cudaDataType_t)key[8];
  const cudaDataType_t at = (cudaDataType_t)key[10], bt = (cudaDataType_t)key[11];
  const int scaled = (int)key[12]; /* FP8: 1 scalar scales, 2 outer-vector (rowwise) */
  const int bias = (int)key[13];   /* bf16 bias in the epilogue */
  const cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const uint64_t ws = ctx->lt_ws_bytes;
  cublasLtMatmulPreference_t pref = NULL;
  cublasLtMatmulHeuristicResult_t heur;
  int found = 0;
  memset(p, 0, sizeof *p);
  LT_TRY(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), what);
  LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), what);
  LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), what);
  if (scaled) {
    const int32_t mode = scaled == 2 ? CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F
                                     : CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode,
                                          sizeof mode),
           what);
    LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode,
                                          sizeof mode),
           what);
  }
  if (bias) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    const cudaDataType_t bt16 = CUDA_R_16BF;
    LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi),
           what);
    LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt16,
                                          sizeof bt16),
           what);
  }
  if (ctx->gemm_sm_target > 0) {
    const int32_t sms = ctx->gemm_sm_target;
    LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms,
                                          sizeof sms),
           what);
  }
  LT_TRY(cublasLtMatrixLayoutCreate(&p->la, at, trans_a ? k : m, trans_a ? m : k, lda), what);
  LT_TRY(cublasLtMatrixLayoutCreate(&p->lb, bt, trans_b ? n : k, trans_b ? k : n, ldb), what);
  LT_TRY(cublasLtMatrixLayoutCreate(&p->lc, cd, m, n, ldcd), what);
  LT_TRY(cublasLtMatmulPreferenceCreate(&pref), what);
  LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                              sizeof ws),
         what);
  {
    /* cuBLASLt answers "unsupported value" rather than no algorithm for a
     * scale mode the GPU lacks (outer-vector scales on sm_90, CUDA 13) */
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(ctx->lt, p->op, p->la, p->lb, p->lc, p->lc,
                                                       pref, 1, &heur, &found);
    if (hs != CUBLAS_STATUS_SUCCESS && !(scaled == 2 && (hs == CUBLAS_STATUS_INVALID_VALUE ||
                                                         hs == CUBLAS_STATUS_NOT_SUPPORTED)))
      LT_TRY(hs, what);
    if (hs != CUBLAS_STATUS_SUCCESS)
      found = 0;
  }
  if (found < 1 && scaled == 2) {
    st = fsdpc__fail(err, FSDPC_UNSUPPORTED,
                     "cuda %s: fsdp.mixed_precision.fp8_recipe rowwise: this GPU's cuBLASLt has "
                     "no FP8 GEMM with outer-vector (per-row) scales "
                     "(CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F); use fp8_recipe: tensorwise",
                     what);
    goto done;
  }
  if (found < 1) {
    st = fsdpc__fail(
        err, FSDPC_UNSUPPORTED,
        "cuda %s: cuBLASLt has no algorithm for m=%d n=%d k=%d (lda %d ldb %d ldc %d%s)", what, m,
        n, k, lda, ldb, ldcd,
        scaled == 1 ? "; FP8: dimensions must be multiples of 16" : "");
    goto done;
  }
  p->algo = heur.algo;
  memcpy(p->key, key, sizeof p->key);
  p->used = 1;
done:
  if (pref)
    cublasLtMatmulPreferenceDestroy(pref);
  if (st != FSDPC_OK)
    plan_destroy(p);
  return st;
}

/* The cached plan for key, built on first use; *tmp receives an uncached
 * one (the caller destroys it) when the table is full. */
static fsdpc_status plan_get(fsdpc_cuda_ctx *ctx, const long long *key, fsdpc_lt_plan *tmp,
                             fsdpc_lt_plan **out, const char *what, fsdpc_err *err) {
  if (!ctx->lt_plans)
    ctx->lt_plans = (fsdpc_lt_plan *)calloc(LT_PLANS, sizeof(fsdpc_lt_plan));
  if (ctx->lt_plans) {
    unsigned long long h = 1469598103934665603ull;
    for (int i = 0; i < LT_KEY; i++)
      h = (h ^ (unsigned long long)key[i]) * 1099511628211ull;
    for (int probe = 0; probe < LT_PLANS; probe++) {
      fsdpc_lt_plan *p = &ctx->lt_plans[(h + probe) % LT_PLANS];
      if (p->used && memcmp(p->key, key, sizeof p->key) == 0) {
        *out = p;
        return FSDPC_OK;
      }
      if (!p->used) {
        FSDPC_TRY(plan_build(ctx, p, key, what, err));
        *out = p;
        return FSDPC_OK;
      }
    }
  }
  FSDPC_TRY(plan_build(ctx, tmp, key, what, err));
  *out = tmp;
  return FSDPC_OK;
}

fsdpc_status fsdpc__cuda_lt_gemm_typed(fsdpc_cuda_ctx *ctx, const fsdpc_lt_gemm *g,
                                       const char *what, fsdpc_err *err) {
  fsdpc_status st = FSDPC_OK;
  const int trans_a = g->trans_a, trans_b = g->trans_b, m = g->m, n = g->n, k = g->k;
  const int lda = g->lda, ldb = g->ldb, ldcd = g->ldcd;
  const void *A = g->A, *B = g->B, *C = g->C;
  void *D = g->D;
  const float alpha = g->alpha, beta = g->beta;
  const int scaled = g->scale_a ? (g->outer ? 2 : 1) : 0;
  const int epi = g->bias != NULL; /* the bias epilogue */
  const long long key[LT_KEY] = {trans_a, trans_b,      m,     n,     k,      lda, ldb, ldcd,
                                 g->cd,   beta != 0.0f, g->at, g->bt, scaled, epi};
  fsdpc_lt_plan tmp, *p = NULL;
  memset(&tmp, 0, sizeof tmp);
  FSDPC_TRY(plan_get(ctx, key, &tmp, &p, what, err));
  if (scaled) { /* device pointers of this call, set on the (cached) descriptor */
    LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &g->scale_a,
                                          sizeof g->scale_a),
           what);
    LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &g->scale_b,
                                          sizeof g->scale_b),
           what);
  }
  if (g->bias) /* this call's vector, set on the (cached) descriptor */
    LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias,
                                          sizeof g->bias),
           what);
  LT_TRY(cublasLtMatmul(ctx->lt, p->op, &alpha, A, p->la, B, p->lb, &beta, C ? C : D, p->lc, D,
                        p->lc, &p->algo, ctx->lt_ws, ctx->lt_ws_bytes, ctx->compute),
         what);
done:
  if (p == &tmp)
    plan_destroy(&tmp);
  return st;
}

fsdpc_status fsdpc__cuda_lt_gemm(fsdpc_cuda_ctx *ctx, int trans_a, int trans_b, int m, int n, int k,
                                 const void *A, int lda, const void *B, int ldb, const void *C,
                                 void *D, int ldcd, cudaDataType_t cd, float alpha, float beta,
                                 const char *what, fsdpc_err *err) {
  const fsdpc_lt_gemm g = {trans_a, trans_b,     m,           n,    k,    A,  lda,
                           B,       ldb,         C,           D,    ldcd, cd, alpha,
                           beta,    CUDA_R_16BF, CUDA_R_16BF, NULL, NULL, 0,  NULL};
  return fsdpc__cuda_lt_gemm_typed(ctx, &g, what, err);
}

static fsdpc_status check(const char *op, int N, int C, int OC, fsdpc_err *err) {
  if (N < 0 || C < 1 || OC < 1)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda %s: bad shape N=%d C=%d OC=%d", op, N, C,
                       OC);
  return FSDPC_OK;
}

extern "C" fsdpc_status fsdpc__cuda_matmul_fwd(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *out,
                                               const fsdpc_bf16 *inp, const fsdpc_bf16 *weight,
                                               const fsdpc_bf16 *residual, int N, int C, int OC,
                                               fsdpc_err *err) {
  FSDPC_TRY(check("matmul_fwd", N, C, OC, err));
  if (!out || !inp || !weight)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda matmul_fwd: a tensor pointer is NULL");
  if (N == 0)
    return FSDPC_OK;
  return fsdpc__cuda_lt_gemm(ctx, 1, 0, OC, N, C, weight, C, inp, C, residual, out, OC, CUDA_R_16BF,
                             1.0f, residual ? 1.0f : 0.0f, "matmul_fwd", err);
}

extern "C" fsdpc_status fsdpc__cuda_matmul_bias_fwd(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *out,
                                                    const fsdpc_bf16 *inp, const fsdpc_bf16 *weight,
                                                    const fsdpc_bf16 *bias,
                                                    const fsdpc_bf16 *residual, int N, int C,
                                                    int OC, fsdpc_err *err) {
  FSDPC_TRY(check("matmul_bias_fwd", N, C, OC, err));
  if (!out || !inp || !weight || !bias)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda matmul_bias_fwd: a tensor pointer is NULL");
  if (N == 0)
    return FSDPC_OK;
  /* cuBLASLt wants the epilogue's vector 16-byte aligned; a bias that
   * sits elsewhere in its unit's flat buffer takes the two-pass path */
  if ((uintptr_t)bias % 16 != 0) {
    FSDPC_TRY(fsdpc__cuda_matmul_fwd(ctx, out, inp, weight, residual, N, C, OC, err));
    return fsdpc__cuda_bias_add(ctx, out, bias, N, OC, err);
  }
  fsdpc_lt_gemm g;
  memset(&g, 0, sizeof g);
  g.trans_a = 1, g.m = OC, g.n = N, g.k = C;
  g.A = weight, g.lda = C, g.B = inp, g.ldb = C;
  g.C = residual, g.D = out, g.ldcd = OC, g.cd = CUDA_R_16BF;
  g.alpha = 1.0f, g.beta = residual ? 1.0f : 0.0f;
  g.at = g.bt = CUDA_R_16BF;
  g.bias = bias;
  return fsdpc__cuda_lt_gemm_typed(ctx, &g, "matmul_bias_fwd", err);
}

static fsdpc_status matmul_bwd(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *dinp, int dinp_acc, float *dweight,
                               const fsdpc_bf16 *dout, const fsdpc_bf16 *inp,
                               const fsdpc_bf16 *weight, int N, int C, int OC, fsdpc_err *err) {
  FSDPC_TRY(check("matmul_bwd", N, C, OC, err));
  if (!dout || (dinp && !weight) || (dweight && !inp))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda matmul_bwd: a tensor pointer is NULL");
  if (N == 0)
    return FSDPC_OK;
  if (dinp) /* dinp_acc: the sum rides in C (beta 1), rounded to bf16 once */
    FSDPC_TRY(fsdpc__cuda_lt_gemm(ctx, 0, 0, C, N, OC, weight, C, dout, OC, dinp_acc ? dinp : NULL,
                                  dinp, C, CUDA_R_16BF, 1.0f, dinp_acc ? 1.0f : 0.0f,
                                  dinp_acc ? "matmul_bwd (dinp +=)" : "matmul_bwd (dinp)", err));
  if (dweight) /* += (beta 1), or = (beta 0: no read of the old gradient) while overwriting */
    FSDPC_TRY(fsdpc__cuda_lt_gemm(
        ctx, 0, 1, C, OC, N, inp, C, dout, OC, ctx->grad_overwrite ? NULL : dweight, dweight, C,
        CUDA_R_32F, 1.0f, ctx->grad_overwrite ? 0.0f : 1.0f,
        ctx->grad_overwrite ? "matmul_bwd (dweight =)" : "matmul_bwd (dweight)", err));
  return FSDPC_OK;
}

extern "C" fsdpc_status fsdpc__cuda_matmul_bwd(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *dinp,
                                               float *dweight, const fsdpc_bf16 *dout,
                                               const fsdpc_bf16 *inp, const fsdpc_bf16 *weight,
                                               int N, int C, int OC, fsdpc_err *err) {
  return matmul_bwd(ctx, dinp, 0, dweight, dout, inp, weight, N, C, OC, err);
}

extern "C" fsdpc_status fsdpc__cuda_matmul_bwd_acc(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *dinp,
                                                   float *dweight, const fsdpc_bf16 *dout,
                                                   const fsdpc_bf16 *inp, const fsdpc_bf16 *weight,
                                                   int N, int C, int OC, fsdpc_err *err) {
  return matmul_bwd(ctx, dinp, 1, dweight, dout, inp, weight, N, C, OC, err);
}

extern "C" void fsdpc__cuda_grad_overwrite(fsdpc_cuda_ctx *ctx, int on) {
  ctx->grad_overwrite = on != 0;
}

extern "C" fsdpc_status fsdpc__cuda_logits(fsdpc_cuda_ctx *ctx, float *out, const fsdpc_bf16 *x,
                                           const fsdpc_bf16 *weight, int N, int C, int V,
                                           fsdpc_err *err) {
  FSDPC_TRY(check("logits", N, C, V, err));
  if (!out || !x || !weight)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda logits: a tensor pointer is NULL");
  if (N == 0)
    return FSDPC_OK;
  return fsdpc__cuda_lt_gemm(ctx, 1, 0, V, N, C, weight, C, x, C, NULL, out, V, CUDA_R_32F, 1.0f,
                             0.0f, "logits", err);
}
