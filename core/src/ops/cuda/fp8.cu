/* FP8 linear projections on Hopper (fsdp.mixed_precision.linear: fp8), the
 * twin of ops/cpu/fp8_linear.c with the recipes of ops/fp8.h: each GEMM's
 * bf16 operands are cast to FP8 with dynamic scales, then multiplied by
 * cuBLASLt with fp32 accumulation and the inverse scales as its A/B scale
 * pointers (scalars for tensorwise, outer vectors for rowwise).
 *
 * tensorwise casts an operand in two launches: an amax kernel whose last
 * block to finish reduces the blocks' maxima and writes the scale, and a
 * cast kernel that writes the copy and/or its transpose. dy is cast once
 * for both backward GEMMs (dy and dy^T), and a projection whose input is
 * the previous one's (k, v after q; up after gate) uses the input's copy
 * left in the scratch (inp_again). rowwise keeps a memset, an amax, a scale
 * and a cast kernel per operand and GEMM (cuBLASLt on sm_90 refuses its
 * GEMM today).
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
static __device__ void scale_of(unsigned amax, float fp8max, int pow2, float *scale, float *inv) {
  double a = __uint_as_float(amax);
  if (a < FSDPC_FP8_AMAX_EPS)
    a = FSDPC_FP8_AMAX_EPS;
  float s = (float)((double)fp8max / a);
  if (pow2 && isfinite(s) && s > 0.0f) {
    int e;
    frexpf(s, &e);
    s = ldexpf(1.0f, e - 1);
  }
  *scale = s;
  *inv = 1.0f / s;
}

__global__ void scale_kernel(const unsigned *amax, int n, float fp8max, int pow2, float *scale,
                             float *inv) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n)
    scale_of(amax[k], fp8max, pow2, &scale[k], &inv[k]);
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
  ctx->fp8_launches += 4;
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

/* bytes of the caller's scratch where it is large enough (*pooled = 0),
 * else of the context's pool (*pooled = 1: give them back with pool_put). */
static fsdpc_status scratch_or_pool(fsdpc_cuda_ctx *ctx, void *scratch, size_t scratch_bytes,
                                    size_t bytes, char **base, int *pooled, fsdpc_err *err) {
  *pooled = !(scratch && scratch_bytes >= bytes);
  if (!*pooled) {
    *base = (char *)scratch;
    return FSDPC_OK;
  }
  return fsdpc__cuda_alloc(ctx, FSDPC_MEM_ACTIVATIONS, bytes, NULL, (void **)base, err);
}

static void pool_put(fsdpc_cuda_ctx *ctx, char *base, size_t bytes, int pooled) {
  fsdpc_err e;
  if (pooled)
    (void)fsdpc__cuda_free(ctx, FSDPC_MEM_ACTIVATIONS, base, bytes, NULL, &e);
}

static fsdpc_status block_get(fsdpc_cuda_ctx *ctx, size_t ea, size_t eb, int ta, int tb, int v,
                              void *scratch, size_t scratch_bytes, fp8_block *blk, fsdpc_err *err) {
  const size_t vb = fsdpc__fp8_block_bytes(0, 0, (size_t)v) / 4;
  memset(blk, 0, sizeof *blk);
  blk->bytes = fsdpc__fp8_block_bytes(ea, eb, (size_t)v);
  FSDPC_TRY(
      scratch_or_pool(ctx, scratch, scratch_bytes, blk->bytes, &blk->base, &blk->pooled, err));
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
  pool_put(ctx, blk->base, blk->bytes, blk->pooled);
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
  ctx->fp8_launches++;
  return fsdpc__cuda_lt_gemm_typed(ctx, &g, what, err);
}

static int imax(int a, int b) {
  return a > b ? a : b;
}

static int imin(int a, int b) {
  return a < b ? a : b;
}

static fsdpc_status check(const char *op, int N, int C, int OC, fsdpc_err *err) {
  if (N < 0 || C < 1 || OC < 1)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda %s: bad shape N=%d C=%d OC=%d", op, N, C,
                       OC);
  return FSDPC_OK;
}

/* ---- tensorwise ---- */

enum { AMAX_THREADS = 256, AMAX_BLOCKS = 1024 }; /* blocks: <= the context's partials */
enum { SV_INV = 4 }; /* an operand's 1/scale, 16 bytes after its scale (GEMM scale pointers) */

/* The max of two |bf16| per 32-bit word, as 16-bit halves: |x| as bits
 * orders as abs_bits does (NaN above inf), so the result is the same. */
static __device__ __forceinline__ unsigned amax2(unsigned m, unsigned w) {
  return __vmaxu2(m, w & 0x7fff7fffu);
}

static __device__ unsigned block_max(unsigned m, unsigned *sh) {
  m = __reduce_max_sync(0xffffffffu, m);
  __syncthreads(); /* sh may be read by a previous call */
  if ((threadIdx.x & 31) == 0)
    sh[threadIdx.x >> 5] = m;
  __syncthreads();
  for (int w = 0; w < AMAX_THREADS / 32; w++)
    m = max(m, sh[w]);
  return m;
}

/* sv[0] = the scale of x's amax (n values), sv[SV_INV] = 1 / sv[0]. Each block
 * writes its max to part; the last block to finish (done counts them, and
 * that block sets it back to 0) reduces them and writes the scale: no
 * memset and no scale kernel. */
__global__ void __launch_bounds__(AMAX_THREADS)
    tensor_amax_kernel(const bf16 *x, size_t n, unsigned *part, unsigned *done, float fp8max,
                       float *sv) {
  __shared__ unsigned sh[AMAX_THREADS / 32];
  __shared__ int last;
  const unsigned short *h = (const unsigned short *)x;
  const size_t stride = (size_t)gridDim.x * AMAX_THREADS;
  size_t i = (size_t)blockIdx.x * AMAX_THREADS + threadIdx.x, head = 0;
  unsigned m = 0;
  if (((uintptr_t)x & 15) == 0) {
    const uint4 *v = (const uint4 *)x;
    for (size_t k = i; k < n / 8; k += stride) {
      const uint4 u = __ldg(v + k);
      m = amax2(amax2(amax2(amax2(m, u.x), u.y), u.z), u.w);
    }
    head = n / 8 * 8;
  }
  for (size_t k = head + i; k < n; k += stride)
    m = __vmaxu2(m, h[k] & 0x7fffu);
  m = block_max(max(m & 0xffffu, m >> 16), sh);
  if (threadIdx.x == 0) {
    part[blockIdx.x] = m;
    __threadfence();
    last = atomicAdd(done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last)
    return;
  m = 0;
  for (unsigned b = threadIdx.x; b < gridDim.x; b += AMAX_THREADS)
    m = max(m, __ldcg(part + b));
  m = block_max(m, sh);
  if (threadIdx.x == 0) {
    scale_of(m << 16, fp8max, 0, &sv[0], &sv[SV_INV]);
    *done = 0;
  }
}

static __device__ __forceinline__ unsigned cast4(uint2 w, float s, __nv_fp8_interpretation_t fmt) {
  const float f[4] = {__uint_as_float(w.x << 16), __uint_as_float(w.x & 0xffff0000u),
                      __uint_as_float(w.y << 16), __uint_as_float(w.y & 0xffff0000u)};
  unsigned r = 0;
  for (int t = 0; t < 4; t++)
    r |= (unsigned)__nv_cvt_float_to_fp8(f[t] * s, __NV_SATFINITE, fmt) << (8 * t);
  return r;
}

/* q = fp8(x * sv[0]) over n values (as cast_kernel, without a transpose). */
__global__ void tensor_cast_kernel(const bf16 *x, size_t n, const float *sv,
                                   __nv_fp8_interpretation_t fmt, fp8 *q) {
  const float s = sv[0];
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, head = 0;
  if (((uintptr_t)x & 15) == 0 && ((uintptr_t)q & 7) == 0) {
    const uint4 *v = (const uint4 *)x;
    for (size_t k = i; k < n / 8; k += stride) {
      const uint4 u = __ldg(v + k);
      ((uint2 *)q)[k] =
          make_uint2(cast4(make_uint2(u.x, u.y), s, fmt), cast4(make_uint2(u.z, u.w), s, fmt));
    }
    head = n / 8 * 8;
  }
  for (size_t k = head + i; k < n; k += stride)
    q[k] = __nv_cvt_float_to_fp8(__bfloat162float(x[k]) * s, __NV_SATFINITE, fmt);
}

enum { TT_ROWS = 128, TT_COLS = 64, TT_THREADS = 256 };

/* q (R, K) and/or qt (K, R) = fp8(x * sv[0]) over a 128 x 64 tile a
 * block: 16-byte loads (8 values a thread), the plain copy written from
 * registers (8 bytes a thread), the transpose through shared memory (32
 * rows of one column, 32 bytes a thread). Needs x 16-byte aligned, K % 8
 * == 0 and R % 16 == 0 (qt's rows stay 16-byte aligned). */
__global__ void __launch_bounds__(TT_THREADS)
    tile_cast_kernel(const bf16 *x, int R, int K, const float *sv, __nv_fp8_interpretation_t fmt,
                     fp8 *q, fp8 *qt) {
  __shared__ __align__(16) unsigned char tile[TT_ROWS][TT_COLS];
  const float s = sv[0];
  const int r0 = blockIdx.y * TT_ROWS, c0 = blockIdx.x * TT_COLS, cv = (threadIdx.x & 7) * 8;
  for (int p = 0; p < TT_ROWS / 32; p++) {
    const int r = (threadIdx.x >> 3) + p * 32, i = r0 + r, j = c0 + cv;
    if (i < R && j < K) {
      const uint4 u = __ldg((const uint4 *)(x + (size_t)i * K + j));
      const uint2 v = make_uint2(cast4(make_uint2(u.x, u.y), s, fmt),
                                 cast4(make_uint2(u.z, u.w), s, fmt));
      if (q)
        *(uint2 *)(q + (size_t)i * K + j) = v;
      *(uint2 *)&tile[r][cv] = v;
    }
  }
  if (!qt)
    return;
  __syncthreads();
  const int c = threadIdx.x & (TT_COLS - 1), rs = (threadIdx.x / TT_COLS) * 32, j = c0 + c;
  const int i = r0 + rs;
  if (j >= K || i >= R)
    return;
  unsigned w[8];
  for (int t = 0; t < 8; t++)
    w[t] = tile[rs + 4 * t][c] | tile[rs + 4 * t + 1][c] << 8 | tile[rs + 4 * t + 2][c] << 16 |
           (unsigned)tile[rs + 4 * t + 3][c] << 24;
  unsigned char *dst = (unsigned char *)qt + (size_t)j * R + i;
  if (i + 32 <= R) {
    ((uint4 *)dst)[0] = make_uint4(w[0], w[1], w[2], w[3]);
    ((uint4 *)dst)[1] = make_uint4(w[4], w[5], w[6], w[7]);
  } else {
    for (int t = 0; t < 32 && i + t < R; t++)
      dst[t] = (unsigned char)(w[t >> 2] >> (8 * (t & 3)));
  }
}

/* A row-major (R, K) operand cast with one scale into q and/or its
 * transpose qt; sv: its scale (sv[0], 1 / scale at sv[SV_INV]). Two launches. */
static fsdpc_status tensor_cast(fsdpc_cuda_ctx *ctx, const bf16 *x, int R, int K, int fmt,
                                float *sv, fp8 *q, fp8 *qt, fsdpc_err *err) {
  const size_t n = (size_t)R * K;
  const unsigned cap = (unsigned)imax(1, imin(AMAX_BLOCKS, ctx->sm_count * 8));
  const __nv_fp8_interpretation_t f = fmt == FSDPC_FP8_E4M3 ? __NV_E4M3 : __NV_E5M2;
  tensor_amax_kernel<<<fsdpc__cuda_blocks(n, AMAX_THREADS * 32, cap), AMAX_THREADS, 0,
                       ctx->compute>>>(x, n, (unsigned *)ctx->partials, ctx->fp8_done,
                                       fsdpc__fp8_max(fmt), sv);
  FSDPC_CUDA_LAUNCHED(err, "fp8 amax (tensorwise)");
  if (qt && ((uintptr_t)x & 15) == 0 && K % 8 == 0 && R % 16 == 0) {
    const dim3 grid((K + TT_COLS - 1) / TT_COLS, (R + TT_ROWS - 1) / TT_ROWS);
    tile_cast_kernel<<<grid, TT_THREADS, 0, ctx->compute>>>(x, R, K, sv, f, q, qt);
  } else if (qt) { /* any shape or address: the rowwise recipe's tile kernel */
    const dim3 block(TILE, ROWS), grid((K + TILE - 1) / TILE, (R + TILE - 1) / TILE);
    cast_kernel<<<grid, block, 0, ctx->compute>>>(x, R, K, FSDPC_FP8_AXIS_TENSOR, sv, f, q, qt);
  } else {
    tensor_cast_kernel<<<fsdpc__cuda_blocks(n, 256 * 8 * 4, (unsigned)ctx->sm_count * 16), 256, 0,
                         ctx->compute>>>(x, n, sv, f, q);
  }
  FSDPC_CUDA_LAUNCHED(err, "fp8 cast (tensorwise)");
  ctx->fp8_launches += 2;
  return FSDPC_OK;
}

static size_t up256(size_t n) {
  return (n + 255) & ~(size_t)255;
}

/* The tensorwise block (fsdpc__fp8_tensor_block_bytes): scale and 1/scale
 * of x, W, dy; x's copy (or x^T) at a fixed offset; then W (forward), or
 * dy, dy^T, W^T (backward). */
typedef struct tw_block {
  char *base;
  size_t bytes;
  int pooled;
  float *sx, *sw, *sg;
  fp8 *x, *w, *g, *gt;
} tw_block;

enum { DIR_FWD = 1, DIR_BWD = 2 };

static fsdpc_status tw_get(fsdpc_cuda_ctx *ctx, int N, int in, int out, int dir, void *scratch,
                           size_t scratch_bytes, tw_block *b, fsdpc_err *err) {
  memset(b, 0, sizeof *b);
  b->bytes = fsdpc__fp8_tensor_block_bytes((size_t)N, (size_t)in, (size_t)out);
  FSDPC_TRY(scratch_or_pool(ctx, scratch, scratch_bytes, b->bytes, &b->base, &b->pooled, err));
  b->sx = (float *)b->base, b->sw = b->sx + 16, b->sg = b->sx + 32; /* 64 bytes each */
  b->x = (fp8 *)(b->base + 256);
  char *p = (char *)b->x + up256((size_t)N * in);
  if (dir == DIR_FWD) {
    b->w = (fp8 *)p;
  } else {
    b->g = (fp8 *)p;
    b->gt = (fp8 *)(p + up256((size_t)N * out));
    b->w = (fp8 *)(p + 2 * up256((size_t)N * out));
  }
  return FSDPC_OK;
}

/* The input's FP8 copy (x, or x^T in the backward) into b: kept from the
 * previous call where the caller says it is the same input (again) and the
 * scratch holds that very cast; cast otherwise. */
static fsdpc_status tw_input(fsdpc_cuda_ctx *ctx, const tw_block *b, const bf16 *x, int again,
                             int N, int C, int dir, fsdpc_err *err) {
  const int fmt = fsdpc__fp8_act_format(FSDPC_FP8_TENSORWISE);
  if (again && !b->pooled && ctx->fp8_inp.scratch == b->base && ctx->fp8_inp.inp == x &&
      ctx->fp8_inp.rows == N && ctx->fp8_inp.cols == C && ctx->fp8_inp.dir == dir)
    return FSDPC_OK;
  ctx->fp8_inp.scratch = NULL;
  FSDPC_TRY(tensor_cast(ctx, x, N, C, fmt, b->sx, dir == DIR_FWD ? b->x : NULL,
                        dir == DIR_FWD ? NULL : b->x, err));
  if (!b->pooled) {
    ctx->fp8_inp.scratch = b->base, ctx->fp8_inp.inp = x;
    ctx->fp8_inp.rows = N, ctx->fp8_inp.cols = C, ctx->fp8_inp.dir = dir;
  }
  return FSDPC_OK;
}

static fsdpc_status tw_put(fsdpc_cuda_ctx *ctx, tw_block *b, fsdpc_status st) {
  if (st != FSDPC_OK)
    ctx->fp8_inp.scratch = NULL; /* what the scratch holds is unknown */
  pool_put(ctx, b->base, b->bytes, b->pooled);
  return st;
}

static fsdpc_status tw_fwd(fsdpc_cuda_ctx *ctx, bf16 *out, const bf16 *inp, int again,
                           const bf16 *weight, const bf16 *residual, int N, int C, int OC,
                           void *scratch, size_t scratch_bytes, fsdpc_err *err) {
  const int fmt = fsdpc__fp8_act_format(FSDPC_FP8_TENSORWISE);
  tw_block b;
  FSDPC_TRY(tw_get(ctx, N, C, OC, DIR_FWD, scratch, scratch_bytes, &b, err));
  fsdpc_status st = tw_input(ctx, &b, inp, again, N, C, DIR_FWD, err);
  if (st == FSDPC_OK)
    st = tensor_cast(ctx, weight, OC, C, fmt, b.sw, b.w, NULL, err);
  if (st == FSDPC_OK) {
    const tn_operand a = {b.w, fmt, b.sw + SV_INV}, x = {b.x, fmt, b.sx + SV_INV};
    st = gemm_tn(ctx, OC, N, C, &a, &x, 0, residual, out, CUDA_R_16BF, residual != NULL,
                 "fp8 matmul_fwd", err);
  }
  return tw_put(ctx, &b, st);
}

/* dy cast once into dy and dy^T (one scale serves both GEMMs); the weight
 * gradient first, as the input's copy may be the previous projection's. */
static fsdpc_status tw_bwd(fsdpc_cuda_ctx *ctx, bf16 *dinp, int acc, float *dweight,
                           const bf16 *dout, const bf16 *inp, int again, const bf16 *weight, int N,
                           int C, int OC, void *scratch, size_t scratch_bytes, fsdpc_err *err) {
  const int xf = fsdpc__fp8_act_format(FSDPC_FP8_TENSORWISE);
  const int gf = fsdpc__fp8_grad_format(FSDPC_FP8_TENSORWISE);
  tw_block b;
  if (!again) /* a new input: what the scratch holds is another's (even at this address) */
    ctx->fp8_inp.scratch = NULL;
  FSDPC_TRY(tw_get(ctx, N, C, OC, DIR_BWD, scratch, scratch_bytes, &b, err));
  fsdpc_status st =
      tensor_cast(ctx, dout, N, OC, gf, b.sg, dinp ? b.g : NULL, dweight ? b.gt : NULL, err);
  if (!dweight && !b.pooled && (size_t)ctx->fp8_inp.rows * ctx->fp8_inp.cols > (size_t)N * C)
    ctx->fp8_inp.scratch = NULL; /* dy's copies overlap the larger input copy kept there */
  if (st == FSDPC_OK && dweight) {
    st = tw_input(ctx, &b, inp, again, N, C, DIR_BWD, err);
    const int ow = ctx->grad_overwrite;
    const tn_operand a = {b.x, xf, b.sx + SV_INV}, g = {b.gt, gf, b.sg + SV_INV};
    if (st == FSDPC_OK)
      st = gemm_tn(ctx, C, OC, N, &a, &g, 0, ow ? NULL : dweight, dweight, CUDA_R_32F, !ow,
                   ow ? "fp8 matmul_bwd (dweight =)" : "fp8 matmul_bwd (dweight)", err);
  }
  if (st == FSDPC_OK && dinp) {
    st = tensor_cast(ctx, weight, OC, C, xf, b.sw, NULL, b.w, err);
    const tn_operand a = {b.w, xf, b.sw + SV_INV}, g = {b.g, gf, b.sg + SV_INV};
    if (st == FSDPC_OK)
      st = gemm_tn(ctx, C, N, OC, &a, &g, 0, acc ? dinp : NULL, dinp, CUDA_R_16BF, acc,
                   acc ? "fp8 matmul_bwd (dinp +=)" : "fp8 matmul_bwd (dinp)", err);
  }
  return tw_put(ctx, &b, st);
}

extern "C" uint64_t fsdpc__cuda_fp8_launches(const fsdpc_cuda_ctx *ctx) {
  return ctx->fp8_launches;
}

extern "C" fsdpc_status fsdpc__cuda_fp8_matmul_fwd(fsdpc_cuda_ctx *ctx, int recipe, fsdpc_bf16 *out,
                                                   const fsdpc_bf16 *inp, int inp_again,
                                                   const fsdpc_bf16 *weight,
                                                   const fsdpc_bf16 *residual, int N, int C, int OC,
                                                   void *scratch, size_t scratch_bytes,
                                                   fsdpc_err *err) {
  FSDPC_TRY(check("fp8 matmul_fwd", N, C, OC, err));
  if (N == 0)
    return FSDPC_OK;
  if (recipe == FSDPC_FP8_TENSORWISE)
    return tw_fwd(ctx, (bf16 *)out, (const bf16 *)inp, inp_again, (const bf16 *)weight,
                  (const bf16 *)residual, N, C, OC, scratch, scratch_bytes, err);
  ctx->fp8_inp.scratch = NULL; /* rowwise overwrites the scratch */
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
                                                   int inp_again, const fsdpc_bf16 *weight, int N,
                                                   int C, int OC, void *scratch,
                                                   size_t scratch_bytes, fsdpc_err *err) {
  FSDPC_TRY(check("fp8 matmul_bwd", N, C, OC, err));
  if (!dout || (dinp && !weight) || (dweight && !inp))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda fp8 matmul_bwd: a tensor pointer is NULL");
  if (N == 0)
    return FSDPC_OK;
  if (!dinp && !dweight)
    return FSDPC_OK;
  if (recipe == FSDPC_FP8_TENSORWISE)
    return tw_bwd(ctx, (bf16 *)dinp, dinp_acc, dweight, (const bf16 *)dout, (const bf16 *)inp,
                  inp_again, (const bf16 *)weight, N, C, OC, scratch, scratch_bytes, err);
  ctx->fp8_inp.scratch = NULL; /* rowwise overwrites the scratch */
  if (dinp)
    FSDPC_TRY(bwd_dinp(ctx, recipe, (bf16 *)dinp, dinp_acc, (const bf16 *)dout,
                       (const bf16 *)weight, N, C, OC, scratch, scratch_bytes, err));
  if (dweight)
    FSDPC_TRY(bwd_dweight(ctx, recipe, dweight, (const bf16 *)dout, (const bf16 *)inp, N, C, OC,
                          scratch, scratch_bytes, err));
  return FSDPC_OK;
}
