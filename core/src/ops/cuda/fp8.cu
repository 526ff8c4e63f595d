/* FP8 linear projections on Hopper (fsdp.mixed_precision.linear: fp8), the
 * twin of ops/cpu/fp8_linear.c with the recipes of ops/fp8.h: each GEMM's
 * bf16 operands are cast to FP8 with dynamic scales (amax kernel, scale
 * kernel, cast kernel), then multiplied by cuBLASLt with fp32 accumulation
 * and the inverse scales as its A/B scale pointers (scalars for tensorwise,
 * outer vectors for rowwise).
 *
 * Hopper's FP8 GEMMs take only the "TN" layout (both operands K-major), so
 * the backward's operands are cast straight into transposed copies:
 *   out  D(OC, N) = W^T.x       A = W   (OC, C)  B = x  (N, C)    k = C
 *   dinp D(C, N)  = (W^T)^T.dy  A = W^T (C, OC)  B = dy (N, OC)   k = OC
 *   dW   D(C, OC) = (x^T)^T.dy^T A = x^T (C, N)  B = dy^T (OC, N) k = N
 * (row-major shapes; cuBLASLt's A op T, B op N). The FP8 copies and scales
 * live in one stream-ordered block from the context's pool per call, which
 * keeps what it frees, so a step allocates nothing from the driver. */
#include <cuda_fp8.h>
#include <math.h>
#include <string.h>

#include "ops/cuda/cuda_internal.cuh"
extern "C" {
#include "ops/fp8.h"
}

typedef __nv_fp8_storage_t fp8;

/* Non-negative floats (NaN included) order as their bits: the amax is an
 * unsigned max, exact and independent of the order of the atomics. */
static __device__ __forceinline__ unsigned abs_bits(bf16 v) {
  return __float_as_uint(fabsf(__bfloat162float(v)));
}

enum { TILE = 32, ROWS = 8 }; /* a block: 32 columns x 8 rows of threads, a 32 x 32 tile */

/* amax[axis index] (as bits, zeroed before) over a row-major (R, K) matrix. */
__global__ void amax_kernel(const bf16 *x, int R, int K, int axis, unsigned *amax) {
  __shared__ unsigned sh[ROWS][TILE];
  const int j = blockIdx.x * TILE + threadIdx.x, tx = threadIdx.x, ty = threadIdx.y;
  unsigned col = 0, all = 0;
  for (int t = 0; t < TILE / ROWS; t++) {
    const int i = blockIdx.y * TILE + ty + t * ROWS;
    unsigned v = (i < R && j < K) ? abs_bits(x[(size_t)i * K + j]) : 0u;
    col = max(col, v);
    if (axis == FSDPC_FP8_AXIS_ROW) {
      unsigned r = __reduce_max_sync(0xffffffffu, v);
      if (tx == 0 && i < R && r)
        atomicMax(&amax[i], r);
    }
  }
  if (axis == FSDPC_FP8_AXIS_ROW)
    return;
  sh[ty][tx] = col;
  __syncthreads();
  if (ty == 0) {
    for (int t = 1; t < ROWS; t++)
      col = max(col, sh[t][tx]);
    if (axis == FSDPC_FP8_AXIS_COL) {
      if (j < K && col)
        atomicMax(&amax[j], col);
    } else {
      all = __reduce_max_sync(0xffffffffu, col);
      if (tx == 0 && all)
        atomicMax(&amax[0], all);
    }
  }
}

/* scale = fp8_max / max(amax, eps) (in double, as fsdpc__fp8_scale), pow2:
 * rounded down to a power of two; inv = 1 / scale. */
__global__ void scale_kernel(const unsigned *amax, int n, float fp8max, int pow2, float *scale,
                             float *inv) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= n)
    return;
  double a = __uint_as_float(amax[k]);
  if (a < FSDPC_FP8_AMAX_EPS)
    a = FSDPC_FP8_AMAX_EPS;
  float s = (float)((double)fp8max / a);
  if (pow2 && isfinite(s) && s > 0.0f) {
    int e;
    frexpf(s, &e);
    s = ldexpf(1.0f, e - 1);
  }
  scale[k] = s;
  inv[k] = 1.0f / s;
}

/* q (R, K) and/or qt (K, R) = fp8(x * scale[axis index]), saturating and
 * rounding to nearest even (__NV_SATFINITE); the transpose through a
 * shared tile so that both writes are coalesced. */
__global__ void cast_kernel(const bf16 *x, int R, int K, int axis, const float *scale,
                            __nv_fp8_interpretation_t fmt, fp8 *q, fp8 *qt) {
  __shared__ fp8 tile[TILE][TILE + 1];
  const int j = blockIdx.x * TILE + threadIdx.x, tx = threadIdx.x, ty = threadIdx.y;
  for (int t = 0; t < TILE / ROWS; t++) {
    const int r = ty + t * ROWS, i = blockIdx.y * TILE + r;
    if (i >= R || j >= K)
      continue;
    const float s = scale[axis == FSDPC_FP8_AXIS_TENSOR ? 0 : axis == FSDPC_FP8_AXIS_ROW ? i : j];
    fp8 v = __nv_cvt_float_to_fp8(__bfloat162float(x[(size_t)i * K + j]) * s, __NV_SATFINITE, fmt);
    if (q)
      q[(size_t)i * K + j] = v;
    tile[r][tx] = v;
  }
  if (!qt)
    return;
  __syncthreads();
  for (int t = 0; t < TILE / ROWS; t++) { /* row jj of qt = column jj of x */
    const int r = ty + t * ROWS, jj = blockIdx.x * TILE + r, ii = blockIdx.y * TILE + tx;
    if (jj < K && ii < R)
      qt[(size_t)jj * R + ii] = tile[tx][r];
  }
}

/* One quantized operand: its FP8 copies and 1/scale along its axis. */
typedef struct fp8_operand {
  fp8 *q, *qt;
  float *inv;
} fp8_operand;

static fsdpc_status quantize(fsdpc_cuda_ctx *ctx, const bf16 *x, int R, int K, int axis, int fmt,
                             int pow2, unsigned *amax, float *scale, const fp8_operand *o,
                             fsdpc_err *err) {
  const int n = axis == FSDPC_FP8_AXIS_TENSOR ? 1 : axis == FSDPC_FP8_AXIS_ROW ? R : K;
  const dim3 block(TILE, ROWS), grid((K + TILE - 1) / TILE, (R + TILE - 1) / TILE);
  FSDPC_CUDA_TRY(err, cudaMemsetAsync(amax, 0, (size_t)n * sizeof(unsigned), ctx->compute));
  amax_kernel<<<grid, block, 0, ctx->compute>>>(x, R, K, axis, amax);
  FSDPC_CUDA_LAUNCHED(err, "fp8 amax");
  scale_kernel<<<(n + 255) / 256, 256, 0, ctx->compute>>>(amax, n, fsdpc__fp8_max(fmt), pow2, scale,
                                                          o->inv);
  FSDPC_CUDA_LAUNCHED(err, "fp8 scale");
  cast_kernel<<<grid, block, 0, ctx->compute>>>(
      x, R, K, axis, scale, fmt == FSDPC_FP8_E4M3 ? __NV_E4M3 : __NV_E5M2, o->q, o->qt);
  FSDPC_CUDA_LAUNCHED(err, "fp8 cast");
  return FSDPC_OK;
}

static cudaDataType_t lt_type(int fmt) {
  return fmt == FSDPC_FP8_E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2;
}

/* A call's block (fsdpc__fp8_block_bytes): the caller's scratch, or the
 * pool's; two operands' FP8 copies (each plain or transposed) and
 * per-axis vectors of up to v values. */
typedef struct fp8_block {
  char *base;
  size_t bytes;
  int pooled;
  unsigned *amax;
  float *scale;
  fp8_operand a, b;
} fp8_block;

static fsdpc_status block_get(fsdpc_cuda_ctx *ctx, size_t ea, size_t eb, int ta, int tb, int v,
                              void *scratch, size_t scratch_bytes, fp8_block *blk, fsdpc_err *err) {
  const size_t vb = fsdpc__fp8_block_bytes(0, 0, (size_t)v) / 4;
  memset(blk, 0, sizeof *blk);
  blk->bytes = fsdpc__fp8_block_bytes(ea, eb, (size_t)v);
  if (scratch && scratch_bytes >= blk->bytes) {
    blk->base = (char *)scratch;
  } else {
    FSDPC_TRY(
        fsdpc__cuda_alloc(ctx, FSDPC_MEM_ACTIVATIONS, blk->bytes, NULL, (void **)&blk->base, err));
    blk->pooled = 1;
  }
  char *p = blk->base;
  (ta ? blk->a.qt : blk->a.q) = (fp8 *)p;
  p += fsdpc__fp8_block_bytes(ea, 0, 0);
  (tb ? blk->b.qt : blk->b.q) = (fp8 *)p;
  p += fsdpc__fp8_block_bytes(eb, 0, 0);
  blk->amax = (unsigned *)p;
  blk->scale = (float *)(p + vb);
  blk->a.inv = (float *)(p + 2 * vb);
  blk->b.inv = (float *)(p + 3 * vb);
  return FSDPC_OK;
}

static void block_put(fsdpc_cuda_ctx *ctx, fp8_block *blk) {
  fsdpc_err e;
  if (blk->pooled)
    (void)fsdpc__cuda_free(ctx, FSDPC_MEM_ACTIVATIONS, blk->base, blk->bytes, NULL, &e);
}

/* An FP8 GEMM operand: data (K-major), format, device 1/scale(s). */
typedef struct tn_operand {
  const fp8 *data;
  int fmt;
  const float *inv;
} tn_operand;

/* D (m, n; column-major, ld m) = A^T (k x m stored, ld k) . B (k x n, ld
 * k) scaled by both operands' 1/scale (vectors of m and n when outer), +
 * C when accumulate (C = D or a residual of D's type). */
static fsdpc_status gemm_tn(fsdpc_cuda_ctx *ctx, int m, int n, int k, const tn_operand *a,
                            const tn_operand *b, int outer, const void *C, void *D,
                            cudaDataType_t cd, int accumulate, const char *what, fsdpc_err *err) {
  fsdpc_lt_gemm g;
  memset(&g, 0, sizeof g);
  g.trans_a = 1;
  g.m = m, g.n = n, g.k = k;
  g.A = a->data, g.lda = k, g.at = lt_type(a->fmt), g.scale_a = a->inv;
  g.B = b->data, g.ldb = k, g.bt = lt_type(b->fmt), g.scale_b = b->inv;
  g.C = C, g.D = D, g.ldcd = m, g.cd = cd;
  g.alpha = 1.0f, g.beta = accumulate ? 1.0f : 0.0f;
  g.outer = outer;
  return fsdpc__cuda_lt_gemm_typed(ctx, &g, what, err);
}

static int imax(int a, int b) {
  return a > b ? a : b;
}

static fsdpc_status check(const char *op, int N, int C, int OC, fsdpc_err *err) {
  if (N < 0 || C < 1 || OC < 1)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda %s: bad shape N=%d C=%d OC=%d", op, N, C,
                       OC);
  return FSDPC_OK;
}

extern "C" fsdpc_status fsdpc__cuda_fp8_matmul_fwd(fsdpc_cuda_ctx *ctx, int recipe, fsdpc_bf16 *out,
                                                   const fsdpc_bf16 *inp, const fsdpc_bf16 *weight,
                                                   const fsdpc_bf16 *residual, int N, int C, int OC,
                                                   void *scratch, size_t scratch_bytes,
                                                   fsdpc_err *err) {
  FSDPC_TRY(check("fp8 matmul_fwd", N, C, OC, err));
  if (N == 0)
    return FSDPC_OK;
  const int row = recipe == FSDPC_FP8_ROWWISE, fmt = fsdpc__fp8_act_format(recipe);
  const int ax = row ? FSDPC_FP8_AXIS_ROW : FSDPC_FP8_AXIS_TENSOR, p2 = fsdpc__fp8_pow2(recipe);
  fp8_block k; /* a = W, b = x */
  FSDPC_TRY(block_get(ctx, (size_t)OC * C, (size_t)N * C, 0, 0, imax(N, OC), scratch, scratch_bytes,
                      &k, err));
  fsdpc_status st =
      quantize(ctx, (const bf16 *)weight, OC, C, ax, fmt, p2, k.amax, k.scale, &k.a, err);
  if (st == FSDPC_OK)
    st = quantize(ctx, (const bf16 *)inp, N, C, ax, fmt, p2, k.amax, k.scale, &k.b, err);
  if (st == FSDPC_OK) {
    const tn_operand a = {k.a.q, fmt, k.a.inv}, b = {k.b.q, fmt, k.b.inv};
    st = gemm_tn(ctx, OC, N, C, &a, &b, row, residual, out, CUDA_R_16BF, residual != NULL,
                 "fp8 matmul_fwd", err);
  }
  block_put(ctx, &k);
  return st;
}

static fsdpc_status bwd_dinp(fsdpc_cuda_ctx *ctx, int recipe, bf16 *dinp, int acc, const bf16 *dout,
                             const bf16 *weight, int N, int C, int OC, void *scratch,
                             size_t scratch_bytes, fsdpc_err *err) {
  const int row = recipe == FSDPC_FP8_ROWWISE, p2 = fsdpc__fp8_pow2(recipe);
  const int wf = fsdpc__fp8_act_format(recipe), gf = fsdpc__fp8_grad_format(recipe);
  fp8_block k; /* a = W^T (scales per column of W), b = dy (per row) */
  FSDPC_TRY(block_get(ctx, (size_t)OC * C, (size_t)N * OC, 1, 0, imax(N, C), scratch, scratch_bytes,
                      &k, err));
  fsdpc_status st = quantize(ctx, weight, OC, C, row ? FSDPC_FP8_AXIS_COL : FSDPC_FP8_AXIS_TENSOR,
                             wf, p2, k.amax, k.scale, &k.a, err);
  if (st == FSDPC_OK)
    st = quantize(ctx, dout, N, OC, row ? FSDPC_FP8_AXIS_ROW : FSDPC_FP8_AXIS_TENSOR, gf, p2,
                  k.amax, k.scale, &k.b, err);
  if (st == FSDPC_OK) {
    const tn_operand a = {k.a.qt, wf, k.a.inv}, b = {k.b.q, gf, k.b.inv};
    st = gemm_tn(ctx, C, N, OC, &a, &b, row, acc ? dinp : NULL, dinp, CUDA_R_16BF, acc,
                 acc ? "fp8 matmul_bwd (dinp +=)" : "fp8 matmul_bwd (dinp)", err);
  }
  block_put(ctx, &k);
  return st;
}

static fsdpc_status bwd_dweight(fsdpc_cuda_ctx *ctx, int recipe, float *dweight, const bf16 *dout,
                                const bf16 *inp, int N, int C, int OC, void *scratch,
                                size_t scratch_bytes, fsdpc_err *err) {
  const int row = recipe == FSDPC_FP8_ROWWISE, p2 = fsdpc__fp8_pow2(recipe);
  const int xf = fsdpc__fp8_act_format(recipe), gf = fsdpc__fp8_grad_format(recipe);
  const int ax = row ? FSDPC_FP8_AXIS_COL : FSDPC_FP8_AXIS_TENSOR;
  fp8_block k; /* a = x^T, b = dy^T, both scaled per column */
  FSDPC_TRY(block_get(ctx, (size_t)N * C, (size_t)N * OC, 1, 1, imax(C, OC), scratch, scratch_bytes,
                      &k, err));
  fsdpc_status st = quantize(ctx, inp, N, C, ax, xf, p2, k.amax, k.scale, &k.a, err);
  if (st == FSDPC_OK)
    st = quantize(ctx, dout, N, OC, ax, gf, p2, k.amax, k.scale, &k.b, err);
  if (st == FSDPC_OK) {
    const int ow = ctx->grad_overwrite;
    const tn_operand a = {k.a.qt, xf, k.a.inv}, b = {k.b.qt, gf, k.b.inv};
    st = gemm_tn(ctx, C, OC, N, &a, &b, row, ow ? NULL : dweight, dweight, CUDA_R_32F, !ow,
                 ow ? "fp8 matmul_bwd (dweight =)" : "fp8 matmul_bwd (dweight)", err);
  }
  block_put(ctx, &k);
  return st;
}

extern "C" fsdpc_status fsdpc__cuda_fp8_matmul_bwd(fsdpc_cuda_ctx *ctx, int recipe,
                                                   fsdpc_bf16 *dinp, int dinp_acc, float *dweight,
                                                   const fsdpc_bf16 *dout, const fsdpc_bf16 *inp,
                                                   const fsdpc_bf16 *weight, int N, int C, int OC,
                                                   void *scratch, size_t scratch_bytes,
                                                   fsdpc_err *err) {
  FSDPC_TRY(check("fp8 matmul_bwd", N, C, OC, err));
  if (!dout || (dinp && !weight) || (dweight && !inp))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda fp8 matmul_bwd: a tensor pointer is NULL");
  if (N == 0)
    return FSDPC_OK;
  if (dinp)
    FSDPC_TRY(bwd_dinp(ctx, recipe, (bf16 *)dinp, dinp_acc, (const bf16 *)dout,
                       (const bf16 *)weight, N, C, OC, scratch, scratch_bytes, err));
  if (dweight)
    FSDPC_TRY(bwd_dweight(ctx, recipe, dweight, (const bf16 *)dout, (const bf16 *)inp, N, C, OC,
                          scratch, scratch_bytes, err));
  return FSDPC_OK;
}
