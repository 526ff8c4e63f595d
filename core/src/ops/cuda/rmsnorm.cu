/* RMSNorm, forward and backward (twin of ops/cpu/rmsnorm.c), bf16 in/out,
 * fp32 statistics:  rstd = 1/sqrt(mean(x^2) + eps);  out = w * (x * rstd).
 * Backward, with r = rstd:
 *   dx_j = r w_j dy_j - (r^3 / C) x_j sum_c(dy_c w_c x_c)
 *   dw_c += sum_n dy_c x_c r
 * N = rows, C = hidden size. Accumulation rule: dweight (fp32) +=, dinp =.
 * rmsnorm_off_*: w is (offset + weight), added in fp32 (Gemma2RMSNorm), on
 * the generic path.
 * rmsnorm_bwd_add also adds the residual stream's gradient into dinp before
 * its one bf16 rounding (dinp = dx + dresid): the decoder layer's separate
 * `dinp += dresid` pass is gone (one read of dresid instead of two reads and
 * a write of (N, C) bf16).
 *
 * Memory-bound. Fast path (C % 8 == 0, C <= RMS_VEC_MAX_C, all bf16 tensors
 * 16-byte aligned): a block holds a whole row in registers as K 16-byte
 * chunks per thread, so each input is read from memory once (forward: x;
 * backward: x and dy, the next row's loads issued before the current row's
 * reduction). Any other shape or alignment takes the generic path (element
 * loops over global memory, same arithmetic).
 *
 * dweight is deterministic (no float atomics): the backward grid is fixed by
 * (N, C, the device) and each block owns a contiguous range of rows; its
 * fp32 column partials go to a (G, C) scratch, then rms_dw_reduce adds the G
 * partials of each column in a fixed order into dweight. Same inputs on the
 * same device give the same bits. The scratch is the context's cuBLASLt
 * workspace (fsdpc__cuda_compute_scratch); a single block adds straight into
 * dweight. */
#include "ops/cuda/cuda_internal.cuh"

#define RMS_THREADS 256 /* generic path; the fast path picks <= 256 */
/* Largest C whose fp32 dweight partials fit a block's shared memory
 * (generic backward). */
#define RMS_MAX_C (200 * 1024 / 4)
#define RMS_VEC_MAX_C 8192       /* 256 threads x 4 chunks x 8 elements */
#define RMS_MIN_ROWS_PER_BLOCK 8 /* amortises a block's (C) partial */

/* ---- fast path: the row in registers ---- */

/* Thread t owns chunks j = t + k * blockDim.x (k < K) of nch = C / 8. */
template <int K>
static __global__ void __launch_bounds__(256)
    rms_fwd_vec(bf16 *out, float *rstd, const bf16 *inp, const bf16 *weight, int C, float eps) {
  __shared__ float sh[32];
  const int nch = C / 8;
  const size_t row = blockIdx.x;
  const uint4 *x4 = (const uint4 *)(inp + row * C), *w4 = (const uint4 *)weight;
  uint4 xv[K], wv[K];
#pragma unroll
  for (int k = 0; k < K; k++) {
    const int j = threadIdx.x + k * blockDim.x;
    if (j < nch)
      xv[k] = x4[j], wv[k] = w4[j];
  }
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < K; k++) {
    if (threadIdx.x + k * blockDim.x < nch) {
      float f[8];
      unpack_bf16x8(xv[k], f);
#pragma unroll
      for (int e = 0; e < 8; e++)
        ss += f[e] * f[e];
    }
  }
  ss = block_sum(ss, sh);
  const float r = 1.0f / sqrtf(ss / (float)C + eps);
  if (threadIdx.x == 0)
    rstd[row] = r;
  uint4 *y4 = (uint4 *)(out + row * C);
#pragma unroll
  for (int k = 0; k < K; k++) {
    const int j = threadIdx.x + k * blockDim.x;
    if (j < nch) {
      float f[8], w[8];
      unpack_bf16x8(xv[k], f);
      unpack_bf16x8(wv[k], w);
#pragma unroll
      for (int e = 0; e < 8; e++)
        f[e] = w[e] * (f[e] * r); /* HF order: x * rstd first, then weight */
      y4[j] = pack_bf16x8(f);
    }
  }
}

/* Block b handles rows [b * rpb, min(N, (b + 1) * rpb)). Its dweight partial
 * (C floats) lives in shared memory, laid out [k][e][thread] so that each
 * thread owns its chunks' columns and a warp's accesses hit 32 banks; keeping
 * it out of registers leaves room for more resident rows. It is written to
 * part[b * C + c] at the end, or added into part[c] (= dweight) when direct
 * (a single block). */
/* Register cap (minimum resident 256-thread blocks per SM): enough rows in
 * flight per SM without spilling. */
#define RMS_BWD_MIN_BLOCKS(K) ((K) == 1 ? 4 : ((K) == 2 ? 3 : 2))

template <int K>
static __global__ void __launch_bounds__(256, RMS_BWD_MIN_BLOCKS(K))
    rms_bwd_vec(bf16 *dinp, float *part, const bf16 *dout, const bf16 *dres, const bf16 *inp,
                const bf16 *weight, const float *rstd, int N, int C, int rpb, int direct) {
  extern __shared__ float acc[]; // (K, 8, blockDim.x)
  __shared__ float sh[32];
  const int nch = C / 8, T = blockDim.x;
  const uint4 *w4 = (const uint4 *)weight;
  uint4 wv[K], xv[K], dv[K], xn[K], dn[K];
  const int r0 = blockIdx.x * rpb, r1 = (int)min((long long)N, (long long)r0 + rpb);
#pragma unroll
  for (int k = 0; k < K; k++) {
    const int j = threadIdx.x + k * blockDim.x;
#pragma unroll
    for (int e = 0; e < 8; e++)
      acc[(k * 8 + e) * T + threadIdx.x] = 0.0f;
    if (j < nch) {
      wv[k] = w4[j];
      xv[k] = ((const uint4 *)(inp + (size_t)r0 * C))[j];
      dv[k] = ((const uint4 *)(dout + (size_t)r0 * C))[j];
    }
  }
  float r = rstd[r0];
  for (int row = r0; row < r1; row++) {
    /* Prefetch the next row so its loads overlap this row's reduction. */
    const bool more = row + 1 < r1;
    float rn = 0.0f;
    if (more) {
#pragma unroll
      for (int k = 0; k < K; k++) {
        const int j = threadIdx.x + k * blockDim.x;
        if (j < nch) {
          xn[k] = ((const uint4 *)(inp + (size_t)(row + 1) * C))[j];
          dn[k] = ((const uint4 *)(dout + (size_t)(row + 1) * C))[j];
        }
      }
      rn = rstd[row + 1];
    }
    /* the residual's gradient of this row: loaded before the reduction so
     * that its latency hides behind it (uniform branch: dres is per launch) */
    uint4 rv[K];
    if (dres) {
#pragma unroll
      for (int k = 0; k < K; k++) {
        const int j = threadIdx.x + k * blockDim.x;
        if (j < nch)
          rv[k] = ((const uint4 *)(dres + (size_t)row * C))[j];
      }
    }
    float dot = 0.0f;
#pragma unroll
    for (int k = 0; k < K; k++) {
      if (threadIdx.x + k * blockDim.x < nch) {
        float x[8], dy[8], w[8];
        unpack_bf16x8(xv[k], x);
        unpack_bf16x8(dv[k], dy);
        unpack_bf16x8(wv[k], w);
#pragma unroll
        for (int e = 0; e < 8; e++)
          dot += dy[e] * w[e] * x[e];
      }
    }
    dot = block_sum(dot, sh);
    const float kk = r * r * r * dot / (float)C;
    uint4 *dx4 = (uint4 *)(dinp + (size_t)row * C);
#pragma unroll
    for (int k = 0; k < K; k++) {
      const int j = threadIdx.x + k * blockDim.x;
      if (j < nch) {
        float x[8], dy[8], w[8], dx[8];
        unpack_bf16x8(xv[k], x);
        unpack_bf16x8(dv[k], dy);
        unpack_bf16x8(wv[k], w);
#pragma unroll
        for (int e = 0; e < 8; e++) {
          dx[e] = r * w[e] * dy[e] - kk * x[e];
          acc[(k * 8 + e) * T + threadIdx.x] += dy[e] * (x[e] * r);
        }
        if (dres) {
          float rr[8];
          unpack_bf16x8(rv[k], rr);
#pragma unroll
          for (int e = 0; e < 8; e++)
            dx[e] += rr[e];
        }
        dx4[j] = pack_bf16x8(dx);
      }
    }
    if (more) {
#pragma unroll
      for (int k = 0; k < K; k++)
        xv[k] = xn[k], dv[k] = dn[k];
      r = rn;
    }
  }
#pragma unroll
  for (int k = 0; k < K; k++) {
    const int j = threadIdx.x + k * blockDim.x;
    if (j < nch) {
      float a[8];
#pragma unroll
      for (int e = 0; e < 8; e++)
        a[e] = acc[(k * 8 + e) * T + threadIdx.x];
      if (direct) { /* dweight may have any alignment */
#pragma unroll
        for (int e = 0; e < 8; e++)
          part[8 * j + e] += a[e];
      } else {
        float4 *p4 = (float4 *)(part + (size_t)blockIdx.x * C + 8 * j);
        p4[0] = make_float4(a[0], a[1], a[2], a[3]);
        p4[1] = make_float4(a[4], a[5], a[6], a[7]);
      }
    }
  }
}

/* ---- generic path: any C, any alignment ---- */

static __global__ void rms_fwd_generic(bf16 *out, float *rstd, const bf16 *inp, const bf16 *weight,
                                       int C, float eps, float offset) {
  __shared__ float sh[32];
  const size_t row = blockIdx.x;
  const bf16 *x = inp + row * C;
  float ss = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    const float v = __bfloat162float(x[c]);
    ss += v * v;
  }
  ss = block_sum(ss, sh);
  const float r = 1.0f / sqrtf(ss / (float)C + eps);
  if (threadIdx.x == 0)
    rstd[row] = r;
  bf16 *y = out + row * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x)
    y[c] = __float2bfloat16((offset + __bfloat162float(weight[c])) * (__bfloat162float(x[c]) * r));
}

/* Rows as rms_bwd_vec; thread t owns columns c = t + m * blockDim.x of the
 * block's partial, kept in shared memory (no two threads touch a column). */
static __global__ void rms_bwd_generic(bf16 *dinp, float *part, const bf16 *dout,
                                       const bf16 *dres, const bf16 *inp, const bf16 *weight,
                                       const float *rstd, int N, int C, int rpb, int direct,
                                       float offset) {
  extern __shared__ float dw_part[]; // (C)
  __shared__ float sh[32];
  for (int c = threadIdx.x; c < C; c += blockDim.x)
    dw_part[c] = 0.0f;
  const int r0 = blockIdx.x * rpb, r1 = (int)min((long long)N, (long long)r0 + rpb);
  for (int row = r0; row < r1; row++) {
    const bf16 *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
    const float r = rstd[row];
    float dot = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
      dot += __bfloat162float(dy[c]) * (offset + __bfloat162float(weight[c])) *
             __bfloat162float(x[c]);
    dot = block_sum(dot, sh);
    const float kk = r * r * r * dot / (float)C;
    bf16 *dx = dinp + (size_t)row * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
      const float xv = __bfloat162float(x[c]), dyv = __bfloat162float(dy[c]);
      const float g = r * (offset + __bfloat162float(weight[c])) * dyv - kk * xv;
      dx[c] = __float2bfloat16(dres ? g + __bfloat162float(dres[(size_t)row * C + c]) : g);
      dw_part[c] += dyv * (xv * r);
    }
  }
  float *dst = direct ? part : part + (size_t)blockIdx.x * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x)
    dst[c] = direct ? dst[c] + dw_part[c] : dw_part[c];
}

/* dweight[c] += (=, while overwriting) sum over b < G of part[b * C + c]: 32
 * columns per block,
 * warp w sums b = w, w + 32, ... in order, then warp 0 adds the 32 warp sums
 * in order. A fixed tree: the result does not depend on scheduling. */
#define RMS_RED_WARPS 32
static __global__ void __launch_bounds__(32 * RMS_RED_WARPS)
    rms_dw_reduce(float *dweight, const float *part, int G, int C, int overwrite) {
  __shared__ float sh[RMS_RED_WARPS][33];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int c = blockIdx.x * 32 + lane;
  float s = 0.0f;
  if (c < C)
    for (int b = warp; b < G; b += RMS_RED_WARPS)
      s += part[(size_t)b * C + c];
  sh[warp][lane] = s;
  __syncthreads();
  if (warp == 0 && c < C) {
    float t = 0.0f;
    for (int w = 0; w < RMS_RED_WARPS; w++)
      t += sh[w][lane];
    dweight[c] = overwrite ? t : dweight[c] + t;
  }
}

/* ---- launchers ---- */

/* Fast-path geometry for C (a multiple of 8): K chunks per thread and the
 * block size; prefers <= 128 threads (cheaper per-row block reductions, more
 * loads per thread). Returns 0 when C needs the generic path. */
static int pick_vec(int C, int *threads) {
  const int nch = C / 8;
  if (C % 8 != 0 || C > RMS_VEC_MAX_C)
    return 0;
  int K = 1;
  while (K < 4 && (nch + K - 1) / K > 128)
    K *= 2;
  const int t = (nch + K - 1) / K;
  *threads = (t + 31) / 32 * 32;
  return K;
}

static bool all_aligned(const void *a, const void *b, const void *c, const void *d) {
  return fsdpc__aligned16(a) && fsdpc__aligned16(b) && fsdpc__aligned16(c) && fsdpc__aligned16(d);
}

/* offset != 0 (Gemma's 1 + w) takes the generic path. */
static fsdpc_status launch_rmsnorm_fwd(fsdpc_cuda_ctx *ctx, bf16 *out, float *rstd, const bf16 *inp,
                                       const bf16 *weight, int N, int C, float eps, float offset,
                                       fsdpc_err *err) {
  int T = 0;
  const int K = all_aligned(out, inp, weight, weight) && offset == 0.0f ? pick_vec(C, &T) : 0;
  /* One block per row: N blocks keep enough rows in flight per SM. */
  if (K == 1)
    rms_fwd_vec<1><<<N, T, 0, ctx->compute>>>(out, rstd, inp, weight, C, eps);
  else if (K == 2)
    rms_fwd_vec<2><<<N, T, 0, ctx->compute>>>(out, rstd, inp, weight, C, eps);
  else if (K == 4)
    rms_fwd_vec<4><<<N, T, 0, ctx->compute>>>(out, rstd, inp, weight, C, eps);
  else
    rms_fwd_generic<<<N, RMS_THREADS, 0, ctx->compute>>>(out, rstd, inp, weight, C, eps, offset);
  FSDPC_CUDA_LAUNCHED(err, "rmsnorm_fwd");
  return FSDPC_OK;
}

/* Backward grid: one wave of resident blocks (the occupancy calculator's
 * count per SM), but no fewer than RMS_MIN_ROWS_PER_BLOCK rows per block and
 * no more partials than the scratch holds. Then every block gets rpb rows
 * (the last one fewer) and no block is empty. */
static fsdpc_status bwd_grid(fsdpc_cuda_ctx *ctx, const void *kernel, int T, size_t smem, int N,
                             int C, int *G, int *rpb, float **part, fsdpc_err *err) {
  int occ = 0;
  FSDPC_CUDA_TRY(err, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, T, smem));
  int64_t g = (int64_t)ctx->sm_count * (occ > 0 ? occ : 1);
  const int64_t by_rows = (N + RMS_MIN_ROWS_PER_BLOCK - 1) / RMS_MIN_ROWS_PER_BLOCK;
  if (g > by_rows)
    g = by_rows;
  const int64_t by_scratch = (int64_t)(ctx->lt_ws_bytes / ((size_t)C * sizeof(float)));
  if (g > by_scratch)
    g = by_scratch;
  if (g < 1)
    g = 1;
  *rpb = (int)((N + g - 1) / g);
  *G = (N + *rpb - 1) / *rpb;
  *part = *G > 1 ? (float *)fsdpc__cuda_compute_scratch(ctx, (size_t)*G * C * sizeof(float)) : NULL;
  return FSDPC_OK;
}

static fsdpc_status launch_rmsnorm_bwd(fsdpc_cuda_ctx *ctx, bf16 *dinp, float *dweight,
                                       const bf16 *dout, const bf16 *dres, const bf16 *inp,
                                       const bf16 *weight, const float *rstd, int N, int C,
                                       float offset, fsdpc_err *err) {
  int T = RMS_THREADS, G = 1, rpb = N;
  float *part = NULL;
  const bool al = all_aligned(dinp, dout, inp, weight) && (!dres || fsdpc__aligned16(dres)) &&
                  offset == 0.0f;
  const int K = al ? pick_vec(C, &T) : 0;
  size_t smem = (size_t)K * 8 * T * sizeof(float); /* vec: <= 32 KiB */
  const void *kernel;
  if (K == 1)
    kernel = (const void *)rms_bwd_vec<1>;
  else if (K == 2)
    kernel = (const void *)rms_bwd_vec<2>;
  else if (K == 4)
    kernel = (const void *)rms_bwd_vec<4>;
  else {
    kernel = (const void *)rms_bwd_generic;
    smem = (size_t)C * sizeof(float);
    if (smem > 48 * 1024)
      FSDPC_CUDA_TRY(err,
                     cudaFuncSetAttribute(rms_bwd_generic,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  }
  FSDPC_TRY(bwd_grid(ctx, kernel, T, smem, N, C, &G, &rpb, &part, err));
  const int direct = G == 1;
  float *dst = direct ? dweight : part;
  if (direct && ctx->grad_overwrite) /* the single block adds into dweight: start it at 0 */
    FSDPC_CUDA_TRY(err, cudaMemsetAsync(dweight, 0, (size_t)C * sizeof(float), ctx->compute));
  if (K == 1)
    rms_bwd_vec<1>
        <<<G, T, smem, ctx->compute>>>(dinp, dst, dout, dres, inp, weight, rstd, N, C, rpb,
                                       direct);
  else if (K == 2)
    rms_bwd_vec<2>
        <<<G, T, smem, ctx->compute>>>(dinp, dst, dout, dres, inp, weight, rstd, N, C, rpb,
                                       direct);
  else if (K == 4)
    rms_bwd_vec<4>
        <<<G, T, smem, ctx->compute>>>(dinp, dst, dout, dres, inp, weight, rstd, N, C, rpb,
                                       direct);
  else
    rms_bwd_generic<<<G, RMS_THREADS, smem, ctx->compute>>>(dinp, dst, dout, dres, inp, weight,
                                                            rstd, N, C, rpb, direct, offset);
  FSDPC_CUDA_LAUNCHED(err, "rmsnorm_bwd");
  if (!direct) {
    rms_dw_reduce<<<(C + 31) / 32, 32 * RMS_RED_WARPS, 0, ctx->compute>>>(dweight, part, G, C,
                                                                          ctx->grad_overwrite);
    FSDPC_CUDA_LAUNCHED(err, "rmsnorm_bwd (dweight reduce)");
  }
  return FSDPC_OK;
}

static fsdpc_status check_shape(const char *op, int N, int C, fsdpc_err *err) {
  if (N < 0 || C < 1 || C > RMS_MAX_C)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda %s: N=%d C=%d; need N >= 0, 1 <= C <= %d",
                       op, N, C, RMS_MAX_C);
  return FSDPC_OK;
}

extern "C" fsdpc_status fsdpc__cuda_rmsnorm_fwd(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *out, float *rstd,
                                                const fsdpc_bf16 *inp, const fsdpc_bf16 *weight,
                                                int N, int C, float eps, fsdpc_err *err) {
  FSDPC_TRY(check_shape("rmsnorm_fwd", N, C, err));
  if (!out || !rstd || !inp || !weight)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda rmsnorm_fwd: a tensor pointer is NULL");
  if (!(eps >= 0.0f))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda rmsnorm_fwd: eps %g must be >= 0",
                       (double)eps);
  if (N == 0)
    return FSDPC_OK;
  return launch_rmsnorm_fwd(ctx, (bf16 *)out, rstd, (const bf16 *)inp, (const bf16 *)weight, N, C,
                            eps, 0.0f, err);
}

extern "C" fsdpc_status fsdpc__cuda_rmsnorm_off_fwd(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *out,
                                                    float *rstd, const fsdpc_bf16 *inp,
                                                    const fsdpc_bf16 *weight, int N, int C,
                                                    float eps, float offset, fsdpc_err *err) {
  FSDPC_TRY(check_shape("rmsnorm_off_fwd", N, C, err));
  if (!out || !rstd || !inp || !weight)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda rmsnorm_off_fwd: a tensor pointer is NULL");
  if (!(eps >= 0.0f))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda rmsnorm_off_fwd: eps %g must be >= 0",
                       (double)eps);
  if (N == 0)
    return FSDPC_OK;
  return launch_rmsnorm_fwd(ctx, (bf16 *)out, rstd, (const bf16 *)inp, (const bf16 *)weight, N, C,
                            eps, offset, err);
}

extern "C" fsdpc_status fsdpc__cuda_rmsnorm_off_bwd(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *dinp,
                                                    float *dweight, const fsdpc_bf16 *dout,
                                                    const fsdpc_bf16 *inp,
                                                    const fsdpc_bf16 *weight, const float *rstd,
                                                    int N, int C, float offset, fsdpc_err *err) {
  FSDPC_TRY(check_shape("rmsnorm_off_bwd", N, C, err));
  if (!dinp || !dweight || !dout || !inp || !weight || !rstd)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda rmsnorm_off_bwd: a tensor pointer is NULL");
  if (N == 0)
    return FSDPC_OK;
  return launch_rmsnorm_bwd(ctx, (bf16 *)dinp, dweight, (const bf16 *)dout, NULL,
                            (const bf16 *)inp, (const bf16 *)weight, rstd, N, C, offset, err);
}

extern "C" fsdpc_status fsdpc__cuda_rmsnorm_bwd(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *dinp,
                                                float *dweight, const fsdpc_bf16 *dout,
                                                const fsdpc_bf16 *inp, const fsdpc_bf16 *weight,
                                                const float *rstd, int N, int C, fsdpc_err *err) {
  FSDPC_TRY(check_shape("rmsnorm_bwd", N, C, err));
  if (!dinp || !dweight || !dout || !inp || !weight || !rstd)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda rmsnorm_bwd: a tensor pointer is NULL");
  if (N == 0)
    return FSDPC_OK;
  return launch_rmsnorm_bwd(ctx, (bf16 *)dinp, dweight, (const bf16 *)dout, NULL,
                            (const bf16 *)inp, (const bf16 *)weight, rstd, N, C, 0.0f, err);
}

extern "C" fsdpc_status fsdpc__cuda_rmsnorm_bwd_add(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *dinp,
                                                    float *dweight, const fsdpc_bf16 *dout,
                                                    const fsdpc_bf16 *dresid,
                                                    const fsdpc_bf16 *inp,
                                                    const fsdpc_bf16 *weight, const float *rstd,
                                                    int N, int C, fsdpc_err *err) {
  FSDPC_TRY(check_shape("rmsnorm_bwd_add", N, C, err));
  if (!dinp || !dweight || !dout || !dresid || !inp || !weight || !rstd)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda rmsnorm_bwd_add: a tensor pointer is NULL");
  if (N == 0)
    return FSDPC_OK;
  return launch_rmsnorm_bwd(ctx, (bf16 *)dinp, dweight, (const bf16 *)dout, (const bf16 *)dresid,
                            (const bf16 *)inp, (const bf16 *)weight, rstd, N, C, 0.0f, err);
}
