/* Deterministic sum of squares in fp64 (twin of fsdpc__cpu_sumsq): pass 1,
 * a grid fixed by n strides over x and writes one fp64 partial per block;
 * pass 2, one block adds the partials in a fixed tree. Same n (and the same
 * 16-byte alignment of x), same bits. Pass 1 reads 16 bytes a load with
 * RED_UNROLL loads in flight per thread when x is 16-byte aligned; the
 * squares are accumulated in fp64 (fma), as the CPU twin does. */
#include "ops/cuda/cuda_internal.cuh"

#define RED_THREADS 256
#define RED_UNROLL 4

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

static __device__ __forceinline__ double sq4(double s, float4 v) {
  s = fma((double)v.x, (double)v.x, s);
  s = fma((double)v.y, (double)v.y, s);
  s = fma((double)v.z, (double)v.z, s);
  return fma((double)v.w, (double)v.w, s);
}

/* vec: x is 16-byte aligned; the n % 4 tail goes to the first threads. */
static __global__ void __launch_bounds__(RED_THREADS)
    sumsq_partial_kernel(double *partials, const float *x, size_t n, bool vec) {
  __shared__ double sh[32];
  double s = 0.0;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (vec) {
    const float4 *x4 = (const float4 *)x;
    const size_t nv = n / 4;
    size_t v = tid;
    for (; v + (RED_UNROLL - 1) * stride < nv; v += RED_UNROLL * stride) {
      float4 r[RED_UNROLL];
#pragma unroll
      for (int k = 0; k < RED_UNROLL; k++)
        r[k] = x4[v + k * stride];
#pragma unroll
      for (int k = 0; k < RED_UNROLL; k++)
        s = sq4(s, r[k]);
    }
    for (; v < nv; v += stride)
      s = sq4(s, x4[v]);
    if (4 * nv + tid < n)
      s = fma((double)x[4 * nv + tid], (double)x[4 * nv + tid], s);
  } else {
    for (size_t i = tid; i < n; i += stride)
      s = fma((double)x[i], (double)x[i], s);
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
  /* About one wave of resident blocks (8 per SM on 132 SMs) that then loop;
   * the grid depends on n alone (not on the device), so a given buffer sums
   * in the same order on every GPU. */
  const unsigned blocks =
      fsdpc__cuda_blocks(n, RED_THREADS * 4 * RED_UNROLL, FSDPC_CUDA_REDUCE_BLOCKS);
  sumsq_partial_kernel<<<blocks, RED_THREADS, 0, ctx->compute>>>(ctx->partials, x, n,
                                                                 fsdpc__aligned16(x));
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
