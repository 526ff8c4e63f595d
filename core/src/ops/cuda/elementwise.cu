/* Residual adds, casts and scaling (twins of ops/cpu/residual.c and
 * reduce.c's scale). Memory-bound: each thread moves 8 elements, with
 * 16-byte loads and stores when every pointer is 16-byte aligned, and the
 * last n % 8 elements by a scalar tail. The sums are done in fp32 and
 * rounded once to bf16 (round to nearest even). */
#include "ops/cuda/cuda_internal.cuh"

#define EW_THREADS 256

/* Loads/stores 8 consecutive elements; aligned selects 16-byte accesses. */
struct bf16x8 {
  bf16 v[8];
};
struct f32x8 {
  float v[8];
};

static __device__ __forceinline__ void load8(f32x8 &o, const bf16 *p, bool aligned) {
  if (aligned) {
    uint4 u = *(const uint4 *)p;
    const bf16 *b = (const bf16 *)&u;
#pragma unroll
    for (int k = 0; k < 8; k++)
      o.v[k] = __bfloat162float(b[k]);
  } else {
#pragma unroll
    for (int k = 0; k < 8; k++)
      o.v[k] = __bfloat162float(p[k]);
  }
}
static __device__ __forceinline__ void store8(bf16 *p, const f32x8 &o, bool aligned) {
  if (aligned) {
    uint4 u;
    bf16 *b = (bf16 *)&u;
#pragma unroll
    for (int k = 0; k < 8; k++)
      b[k] = __float2bfloat16(o.v[k]);
    *(uint4 *)p = u;
  } else {
#pragma unroll
    for (int k = 0; k < 8; k++)
      p[k] = __float2bfloat16(o.v[k]);
  }
}

/* out = a + b over n elements (a, b, out bf16). */
static __global__ void add_kernel(bf16 *out, const bf16 *a, const bf16 *b, size_t n, bool aligned) {
  const size_t n8 = n / 8;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8;
       i += (size_t)gridDim.x * blockDim.x) {
    f32x8 x, y;
    load8(x, a + 8 * i, aligned);
    load8(y, b + 8 * i, aligned);
#pragma unroll
    for (int k = 0; k < 8; k++)
      x.v[k] += y.v[k];
    store8(out + 8 * i, x, aligned);
  }
  if (blockIdx.x == 0)
    for (size_t i = 8 * n8 + threadIdx.x; i < n; i += blockDim.x)
      out[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
}

static __global__ void cast_f32_bf16_kernel(bf16 *out, const float *in, size_t n, bool aligned) {
  const size_t n8 = n / 8;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8;
       i += (size_t)gridDim.x * blockDim.x) {
    f32x8 x;
    if (aligned) {
      float4 p = ((const float4 *)in)[2 * i], q = ((const float4 *)in)[2 * i + 1];
      x.v[0] = p.x, x.v[1] = p.y, x.v[2] = p.z, x.v[3] = p.w;
      x.v[4] = q.x, x.v[5] = q.y, x.v[6] = q.z, x.v[7] = q.w;
    } else {
#pragma unroll
      for (int k = 0; k < 8; k++)
        x.v[k] = in[8 * i + k];
    }
    store8(out + 8 * i, x, aligned);
  }
  if (blockIdx.x == 0)
    for (size_t i = 8 * n8 + threadIdx.x; i < n; i += blockDim.x)
      out[i] = __float2bfloat16(in[i]);
}

static __global__ void cast_bf16_f32_kernel(float *out, const bf16 *in, size_t n, bool aligned) {
  const size_t n8 = n / 8;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8;
       i += (size_t)gridDim.x * blockDim.x) {
    f32x8 x;
    load8(x, in + 8 * i, aligned);
    if (aligned) {
      ((float4 *)out)[2 * i] = make_float4(x.v[0], x.v[1], x.v[2], x.v[3]);
      ((float4 *)out)[2 * i + 1] = make_float4(x.v[4], x.v[5], x.v[6], x.v[7]);
    } else {
#pragma unroll
      for (int k = 0; k < 8; k++)
        out[8 * i + k] = x.v[k];
    }
  }
  if (blockIdx.x == 0)
    for (size_t i = 8 * n8 + threadIdx.x; i < n; i += blockDim.x)
      out[i] = __bfloat162float(in[i]);
}

static __global__ void scale_kernel(float *x, float s, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    x[i] *= s;
}

static __global__ void add_f32_kernel(float *y, const float *x, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    y[i] += x[i];
}

static bool aligned16(const void *a, const void *b, const void *c) {
  return (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) & 15u) == 0;
}

static unsigned ew_blocks(const fsdpc_cuda_ctx *ctx, size_t n8) {
  return fsdpc__cuda_blocks(n8, EW_THREADS, (unsigned)ctx->sm_count * 8);
}

static fsdpc_status launch_add(fsdpc_cuda_ctx *ctx, bf16 *out, const bf16 *a, const bf16 *b,
                               size_t n, fsdpc_err *err) {
  add_kernel<<<ew_blocks(ctx, n / 8), EW_THREADS, 0, ctx->compute>>>(out, a, b, n,
                                                                     aligned16(out, a, b));
  FSDPC_CUDA_LAUNCHED(err, "add");
  return FSDPC_OK;
}

extern "C" fsdpc_status fsdpc__cuda_add(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *out, const fsdpc_bf16 *a,
                                        const fsdpc_bf16 *b, size_t n, fsdpc_err *err) {
  if (n == 0)
    return FSDPC_OK;
  if (!out || !a || !b)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda add: a tensor pointer is NULL");
  return launch_add(ctx, (bf16 *)out, (const bf16 *)a, (const bf16 *)b, n, err);
}

extern "C" fsdpc_status fsdpc__cuda_add_inplace(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *y,
                                                const fsdpc_bf16 *x, size_t n, fsdpc_err *err) {
  if (n == 0)
    return FSDPC_OK;
  if (!y || !x)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda add_inplace: a tensor pointer is NULL");
  return launch_add(ctx, (bf16 *)y, (const bf16 *)y, (const bf16 *)x, n, err);
}

extern "C" fsdpc_status fsdpc__cuda_cast_f32_bf16(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *out,
                                                  const float *in, size_t n, void *stream,
                                                  fsdpc_err *err) {
  if (n == 0)
    return FSDPC_OK;
  if (!out || !in)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda cast_f32_bf16: a tensor pointer is NULL");
  cast_f32_bf16_kernel<<<ew_blocks(ctx, n / 8), EW_THREADS, 0,
                         fsdpc__cuda_stream_or(ctx, stream)>>>((bf16 *)out, in, n,
                                                               aligned16(out, in, NULL));
  FSDPC_CUDA_LAUNCHED(err, "cast_f32_bf16");
  return FSDPC_OK;
}

extern "C" fsdpc_status fsdpc__cuda_cast_bf16_f32(fsdpc_cuda_ctx *ctx, float *out,
                                                  const fsdpc_bf16 *in, size_t n, void *stream,
                                                  fsdpc_err *err) {
  if (n == 0)
    return FSDPC_OK;
  if (!out || !in)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda cast_bf16_f32: a tensor pointer is NULL");
  cast_bf16_f32_kernel<<<ew_blocks(ctx, n / 8), EW_THREADS, 0,
                         fsdpc__cuda_stream_or(ctx, stream)>>>(out, (const bf16 *)in, n,
                                                               aligned16(out, in, NULL));
  FSDPC_CUDA_LAUNCHED(err, "cast_bf16_f32");
  return FSDPC_OK;
}

extern "C" fsdpc_status fsdpc__cuda_scale(fsdpc_cuda_ctx *ctx, float *x, float s, size_t n,
                                          fsdpc_err *err) {
  if (n == 0)
    return FSDPC_OK;
  if (!x)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda scale: x is NULL");
  scale_kernel<<<fsdpc__cuda_blocks(n, EW_THREADS, ctx->sm_count * 8), EW_THREADS, 0,
                 ctx->compute>>>(x, s, n);
  FSDPC_CUDA_LAUNCHED(err, "scale");
  return FSDPC_OK;
}

/* y += x in fp32 (gradient shards accumulating reduce-scattered grads), on
 * stream (NULL = the compute stream). */
extern "C" fsdpc_status fsdpc__cuda_add_f32_inplace_on(fsdpc_cuda_ctx *ctx, float *y,
                                                       const float *x, size_t n, void *stream,
                                                       fsdpc_err *err) {
  if (n == 0)
    return FSDPC_OK;
  if (!y || !x)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda add_f32_inplace: a tensor pointer is NULL");
  add_f32_kernel<<<fsdpc__cuda_blocks(n, EW_THREADS, (unsigned)ctx->sm_count * 8), EW_THREADS, 0,
                   fsdpc__cuda_stream_or(ctx, stream)>>>(y, x, n);
  FSDPC_CUDA_LAUNCHED(err, "add_f32_inplace");
  return FSDPC_OK;
}

extern "C" fsdpc_status fsdpc__cuda_add_f32_inplace(fsdpc_cuda_ctx *ctx, float *y, const float *x,
                                                    size_t n, fsdpc_err *err) {
  return fsdpc__cuda_add_f32_inplace_on(ctx, y, x, n, NULL, err);
}
