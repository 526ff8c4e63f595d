/* GEMMs through cuBLASLt (twin of ops/cpu/matmul.c): bf16 A and B, fp32
 * accumulation (CUBLAS_COMPUTE_32F), bf16 or fp32 C/D.
 *
 * Row-major X (r, c) is column-major X^T (c, r), so with W (OC, C), x (N, C):
 *   out (N, OC) = x W^T        ->  D(OC, N) = op_T(W) op_N(x)      m=OC n=N k=C
 *   dinp (N, C) = dout W       ->  D(C, N)  = op_N(W) op_N(dout)   m=C  n=N k=OC
 *   dW (OC, C) += dout^T x     ->  D(C, OC) = op_N(x) op_T(dout)   m=C  n=OC k=N
 * Epilogue-free fusions: the residual add of the forward rides in C with
 * beta = 1 (C = residual, D = out), and the weight gradient accumulates in
 * place with beta = 1 (C = D = dweight, fp32), so neither needs a pass. */
#include <stdio.h>

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

fsdpc_status fsdpc__cuda_lt_gemm(fsdpc_cuda_ctx *ctx, int trans_a, int trans_b, int m, int n, int k,
                                 const void *A, int lda, const void *B, int ldb, const void *C,
                                 void *D, int ldcd, cudaDataType_t cd, float alpha, float beta,
                                 const char *what, fsdpc_err *err) {
  fsdpc_status st = FSDPC_OK;
  cublasLtMatmulDesc_t op = NULL;
  cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
  cublasLtMatmulPreference_t pref = NULL;
  cublasLtMatmulHeuristicResult_t heur;
  int found = 0;
  const cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const uint64_t ws = ctx->lt_ws_bytes;
  LT_TRY(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), what);
  LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), what);
  LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), what);
  LT_TRY(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, trans_a ? k : m, trans_a ? m : k, lda), what);
  LT_TRY(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, trans_b ? n : k, trans_b ? k : n, ldb), what);
  LT_TRY(cublasLtMatrixLayoutCreate(&lc, cd, m, n, ldcd), what);
  LT_TRY(cublasLtMatmulPreferenceCreate(&pref), what);
  LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                              sizeof ws),
         what);
  LT_TRY(cublasLtMatmulAlgoGetHeuristic(ctx->lt, op, la, lb, lc, lc, pref, 1, &heur, &found), what);
  if (found < 1) {
    st = fsdpc__fail(err, FSDPC_UNSUPPORTED,
                     "cuda %s: cuBLASLt has no algorithm for m=%d n=%d k=%d (lda %d ldb %d ldc %d)",
                     what, m, n, k, lda, ldb, ldcd);
    goto done;
  }
  LT_TRY(cublasLtMatmul(ctx->lt, op, &alpha, A, la, B, lb, &beta, C ? C : D, lc, D, lc, &heur.algo,
                        ctx->lt_ws, ctx->lt_ws_bytes, ctx->compute),
         what);
done:
  if (pref)
    cublasLtMatmulPreferenceDestroy(pref);
  if (lc)
    cublasLtMatrixLayoutDestroy(lc);
  if (lb)
    cublasLtMatrixLayoutDestroy(lb);
  if (la)
    cublasLtMatrixLayoutDestroy(la);
  if (op)
    cublasLtMatmulDescDestroy(op);
  return st;
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

extern "C" fsdpc_status fsdpc__cuda_matmul_bwd(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *dinp,
                                               float *dweight, const fsdpc_bf16 *dout,
                                               const fsdpc_bf16 *inp, const fsdpc_bf16 *weight,
                                               int N, int C, int OC, fsdpc_err *err) {
  FSDPC_TRY(check("matmul_bwd", N, C, OC, err));
  if (!dout || (dinp && !weight) || (dweight && !inp))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda matmul_bwd: a tensor pointer is NULL");
  if (N == 0)
    return FSDPC_OK;
  if (dinp)
    FSDPC_TRY(fsdpc__cuda_lt_gemm(ctx, 0, 0, C, N, OC, weight, C, dout, OC, NULL, dinp, C,
                                  CUDA_R_16BF, 1.0f, 0.0f, "matmul_bwd (dinp)", err));
  if (dweight)
    FSDPC_TRY(fsdpc__cuda_lt_gemm(ctx, 0, 1, C, OC, N, inp, C, dout, OC, dweight, dweight, C,
                                  CUDA_R_32F, 1.0f, 1.0f, "matmul_bwd (dweight)", err));
  return FSDPC_OK;
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
