/* Deterministic sum of squares in fp64 (twin of fsdpc__cpu_sumsq): pass 1,
 * a grid fixed by n strides over x and writes one fp64 partial per block;
 * pass 2, one block adds the partials in a fixed tree. Same n, same bits. */
#include "ops/cuda/cuda_internal.cuh"

#define RED_THREADS 256

static __device__ double block_sum_f64(double v, double *sh) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0)
    sh[warp] = v;
  __syncthreads();
  v = lane < nw ? sh[lane] : 0.0;
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

static __global__ void sumsq_partial_kernel(double *partials, const float *x, size_t n) {
  __shared__ double sh[32];
  double s = 0.0;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    const double v = x[i];
    s += v * v;
  }
  s = block_sum_f64(s, sh);
  if (threadIdx.x == 0)
    partials[blockIdx.x] = s;
}

static __global__ void sum_partials_kernel(double *out, const double *partials, int np,
                                           int accumulate) {
  __shared__ double sh[32];
  double s = 0.0;
  for (int i = threadIdx.x; i < np; i += blockDim.x)
    s += partials[i];
  s = block_sum_f64(s, sh);
  if (threadIdx.x == 0)
    *out = accumulate ? *out + s : s;
}

static fsdpc_status launch_sumsq(fsdpc_cuda_ctx *ctx, double *out, const float *x, size_t n,
                                 int accumulate, fsdpc_err *err) {
  const unsigned blocks = fsdpc__cuda_blocks(n, RED_THREADS * 4, FSDPC_CUDA_REDUCE_BLOCKS);
  sumsq_partial_kernel<<<blocks, RED_THREADS, 0, ctx->compute>>>(ctx->partials, x, n);
  FSDPC_CUDA_LAUNCHED(err, "sumsq");
  sum_partials_kernel<<<1, 1024, 0, ctx->compute>>>(out, ctx->partials, (int)blocks, accumulate);
  FSDPC_CUDA_LAUNCHED(err, "sumsq (combine)");
  return FSDPC_OK;
}

extern "C" fsdpc_status fsdpc__cuda_sumsq(fsdpc_cuda_ctx *ctx, double *out, const float *x,
                                          size_t n, int accumulate, fsdpc_err *err) {
  if (!out || (n > 0 && !x))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda sumsq: out or x is NULL");
  return launch_sumsq(ctx, out, x, n, accumulate, err);
}
