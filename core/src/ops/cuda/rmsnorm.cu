/* RMSNorm, forward and backward (twin of ops/cpu/rmsnorm.c), bf16 in/out,
 * fp32 statistics:  rstd = 1/sqrt(mean(x^2) + eps);  out = w * (x * rstd).
 * Backward, with r = rstd:
 *   dx_j = r w_j dy_j - (r^3 / C) x_j sum_c(dy_c w_c x_c)
 *   dw_c += sum_n dy_c x_c r
 * N = rows, C = hidden size. Accumulation rule: dweight (fp32) +=, dinp =. */
#include "ops/cuda/cuda_internal.cuh"

#define RMS_THREADS 256
/* Largest C whose fp32 dweight partials fit a block's shared memory. */
#define RMS_MAX_C (200 * 1024 / 4)

/* One block per row. */
static __global__ void rmsnorm_fwd_kernel(bf16 *out, float *rstd, const bf16 *inp,
                                          const bf16 *weight, int C, float eps) {
  __shared__ float sh[32];
  const size_t row = blockIdx.x;
  const bf16 *x = inp + row * C;
  float ss = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float v = __bfloat162float(x[c]);
    ss += v * v;
  }
  ss = block_sum(ss, sh);
  const float r = 1.0f / sqrtf(ss / (float)C + eps);
  if (threadIdx.x == 0)
    rstd[row] = r;
  bf16 *y = out + row * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x)
    y[c] = __float2bfloat16(__bfloat162float(weight[c]) * (__bfloat162float(x[c]) * r));
}

/* A fixed grid of blocks strides over rows; each thread owns columns
 * c = tid + k*blockDim of its block's dweight partial in shared memory, which
 * is added to dweight once at the end (one atomic per column per block). */
static __global__ void rmsnorm_bwd_kernel(bf16 *dinp, float *dweight, const bf16 *dout,
                                          const bf16 *inp, const bf16 *weight, const float *rstd,
                                          int N, int C) {
  extern __shared__ float dw_part[]; // (C)
  __shared__ float sh[32];
  for (int c = threadIdx.x; c < C; c += blockDim.x)
    dw_part[c] = 0.0f;
  for (int row = blockIdx.x; row < N; row += gridDim.x) {
    const bf16 *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
    const float r = rstd[row];
    float dot = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
      dot += __bfloat162float(dy[c]) * __bfloat162float(weight[c]) * __bfloat162float(x[c]);
    dot = block_sum(dot, sh);
    const float k = r * r * r * dot / (float)C;
    bf16 *dx = dinp + (size_t)row * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
      const float xv = __bfloat162float(x[c]), dyv = __bfloat162float(dy[c]);
      dx[c] = __float2bfloat16(r * __bfloat162float(weight[c]) * dyv - k * xv);
      dw_part[c] += dyv * (xv * r);
    }
  }
  for (int c = threadIdx.x; c < C; c += blockDim.x)
    atomicAdd(dweight + c, dw_part[c]);
}

static fsdpc_status launch_rmsnorm_fwd(fsdpc_cuda_ctx *ctx, bf16 *out, float *rstd, const bf16 *inp,
                                       const bf16 *weight, int N, int C, float eps,
                                       fsdpc_err *err) {
  rmsnorm_fwd_kernel<<<N, RMS_THREADS, 0, ctx->compute>>>(out, rstd, inp, weight, C, eps);
  FSDPC_CUDA_LAUNCHED(err, "rmsnorm_fwd");
  return FSDPC_OK;
}

static fsdpc_status launch_rmsnorm_bwd(fsdpc_cuda_ctx *ctx, bf16 *dinp, float *dweight,
                                       const bf16 *dout, const bf16 *inp, const bf16 *weight,
                                       const float *rstd, int N, int C, fsdpc_err *err) {
  const size_t smem = (size_t)C * sizeof(float);
  if (smem > 48 * 1024)
    FSDPC_CUDA_TRY(err,
                   cudaFuncSetAttribute(rmsnorm_bwd_kernel,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  const int grid = N < 2 * ctx->sm_count ? N : 2 * ctx->sm_count;
  rmsnorm_bwd_kernel<<<grid, RMS_THREADS, smem, ctx->compute>>>(dinp, dweight, dout, inp, weight,
                                                                rstd, N, C);
  FSDPC_CUDA_LAUNCHED(err, "rmsnorm_bwd");
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
                            eps, err);
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
  return launch_rmsnorm_bwd(ctx, (bf16 *)dinp, dweight, (const bf16 *)dout, (const bf16 *)inp,
                            (const bf16 *)weight, rstd, N, C, err);
}
