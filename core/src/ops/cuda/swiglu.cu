/* SwiGLU gate of the Llama MLP (twin of ops/cpu/swiglu.c), bf16 in/out, fp32
 * math: out = silu(gate) * up, silu(g) = g * sigmoid(g);
 * d silu / dg = s (1 + g (1 - s)) with s = sigmoid(g).
 * N = rows, F = intermediate size. Accumulation rule: dgate =, dup =. */
#include "ops/cuda/cuda_internal.cuh"

static __device__ __forceinline__ float sigmoid(float g) {
  return 1.0f / (1.0f + expf(-g));
}

static __global__ void swiglu_fwd_kernel(bf16 *out, const bf16 *gate, const bf16 *up, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    const float g = __bfloat162float(gate[i]);
    out[i] = __float2bfloat16(g * sigmoid(g) * __bfloat162float(up[i]));
  }
}

static __global__ void swiglu_bwd_kernel(bf16 *dgate, bf16 *dup, const bf16 *dout, const bf16 *gate,
                                         const bf16 *up, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    const float g = __bfloat162float(gate[i]), u = __bfloat162float(up[i]);
    const float d = __bfloat162float(dout[i]), s = sigmoid(g);
    dgate[i] = __float2bfloat16(d * u * s * (1.0f + g * (1.0f - s)));
    dup[i] = __float2bfloat16(d * g * s);
  }
}

static fsdpc_status launch_swiglu_fwd(fsdpc_cuda_ctx *ctx, bf16 *out, const bf16 *gate,
                                      const bf16 *up, size_t n, fsdpc_err *err) {
  swiglu_fwd_kernel<<<fsdpc__cuda_blocks(n, 256, ctx->sm_count * 16), 256, 0, ctx->compute>>>(
      out, gate, up, n);
  FSDPC_CUDA_LAUNCHED(err, "swiglu_fwd");
  return FSDPC_OK;
}

static fsdpc_status launch_swiglu_bwd(fsdpc_cuda_ctx *ctx, bf16 *dgate, bf16 *dup, const bf16 *dout,
                                      const bf16 *gate, const bf16 *up, size_t n, fsdpc_err *err) {
  swiglu_bwd_kernel<<<fsdpc__cuda_blocks(n, 256, ctx->sm_count * 16), 256, 0, ctx->compute>>>(
      dgate, dup, dout, gate, up, n);
  FSDPC_CUDA_LAUNCHED(err, "swiglu_bwd");
  return FSDPC_OK;
}

extern "C" fsdpc_status fsdpc__cuda_swiglu_fwd(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *out,
                                               const fsdpc_bf16 *gate, const fsdpc_bf16 *up, int N,
                                               int F, fsdpc_err *err) {
  if (!out || !gate || !up || N < 0 || F < 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "cuda swiglu_fwd: NULL tensor or bad shape N=%d F=%d", N, F);
  const size_t n = (size_t)N * F;
  if (n == 0)
    return FSDPC_OK;
  return launch_swiglu_fwd(ctx, (bf16 *)out, (const bf16 *)gate, (const bf16 *)up, n, err);
}

extern "C" fsdpc_status fsdpc__cuda_swiglu_bwd(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *dgate,
                                               fsdpc_bf16 *dup, const fsdpc_bf16 *dout,
                                               const fsdpc_bf16 *gate, const fsdpc_bf16 *up, int N,
                                               int F, fsdpc_err *err) {
  if (!dgate || !dup || !dout || !gate || !up || N < 0 || F < 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "cuda swiglu_bwd: NULL tensor or bad shape N=%d F=%d", N, F);
  const size_t n = (size_t)N * F;
  if (n == 0)
    return FSDPC_OK;
  return launch_swiglu_bwd(ctx, (bf16 *)dgate, (bf16 *)dup, (const bf16 *)dout, (const bf16 *)gate,
                           (const bf16 *)up, n, err);
}
