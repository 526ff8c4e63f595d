/* Residual adds, casts and scaling (twins of ops/cpu/residual.c and
 * reduce.c's scale). Memory-bound: each is an Op of the map engine in
 * cuda_internal.cuh, so each thread keeps EW_UNROLL 16-byte loads per input
 * in flight when every pointer is 16-byte aligned; otherwise (and for the
 * last n % W elements) the same arithmetic runs element by element. Sums are
 * done in fp32 and rounded once to bf16 (round to nearest even). */
#include "ops/cuda/cuda_internal.cuh"

/* out = a + b (bf16; out may alias a or b: each element is read before it is
 * written, by the same thread). */
struct AddOp {
  bf16 *out;
  const bf16 *a, *b;
  static constexpr int W = 8;
  struct Vec {
    uint4 a, b;
  };
  __device__ void load(Vec &r, size_t v) const {
    r.a = ((const uint4 *)a)[v];
    r.b = ((const uint4 *)b)[v];
  }
  __device__ void store(const Vec &r, size_t v) const {
    float x[8], y[8];
    unpack_bf16x8(r.a, x);
    unpack_bf16x8(r.b, y);
#pragma unroll
    for (int k = 0; k < 8; k++)
      x[k] += y[k];
    ((uint4 *)out)[v] = pack_bf16x8(x);
  }
  __device__ void scalar(size_t i) const {
    out[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
  }
};

/* fp32 -> bf16, round to nearest even. */
struct CastF32Bf16Op {
  bf16 *out;
  const float *in;
  static constexpr int W = 8;
  struct Vec {
    float4 p, q;
  };
  __device__ void load(Vec &r, size_t v) const {
    r.p = ((const float4 *)in)[2 * v];
    r.q = ((const float4 *)in)[2 * v + 1];
  }
  __device__ void store(const Vec &r, size_t v) const {
    const float f[8] = {r.p.x, r.p.y, r.p.z, r.p.w, r.q.x, r.q.y, r.q.z, r.q.w};
    ((uint4 *)out)[v] = pack_bf16x8(f);
  }
  __device__ void scalar(size_t i) const {
    out[i] = __float2bfloat16(in[i]);
  }
};

/* bf16 -> fp32 (exact). */
struct CastBf16F32Op {
  float *out;
  const bf16 *in;
  static constexpr int W = 8;
  struct Vec {
    uint4 u;
  };
  __device__ void load(Vec &r, size_t v) const {
    r.u = ((const uint4 *)in)[v];
  }
  __device__ void store(const Vec &r, size_t v) const {
    float f[8];
    unpack_bf16x8(r.u, f);
    ((float4 *)out)[2 * v] = make_float4(f[0], f[1], f[2], f[3]);
    ((float4 *)out)[2 * v + 1] = make_float4(f[4], f[5], f[6], f[7]);
  }
  __device__ void scalar(size_t i) const {
    out[i] = __bfloat162float(in[i]);
  }
};

/* x *= s (fp32). */
struct ScaleOp {
  float *x;
  float s;
  static constexpr int W = 4;
  struct Vec {
    float4 x;
  };
  __device__ void load(Vec &r, size_t v) const {
    r.x = ((const float4 *)x)[v];
  }
  __device__ void store(const Vec &r, size_t v) const {
    ((float4 *)x)[v] = make_float4(r.x.x * s, r.x.y * s, r.x.z * s, r.x.w * s);
  }
  __device__ void scalar(size_t i) const {
    x[i] *= s;
  }
};

/* y += x (fp32). */
struct AddF32Op {
  float *y;
  const float *x;
  static constexpr int W = 4;
  struct Vec {
    float4 y, x;
  };
  __device__ void load(Vec &r, size_t v) const {
    r.y = ((const float4 *)y)[v];
    r.x = ((const float4 *)x)[v];
  }
  __device__ void store(const Vec &r, size_t v) const {
    ((float4 *)y)[v] = make_float4(r.y.x + r.x.x, r.y.y + r.x.y, r.y.z + r.x.z, r.y.w + r.x.w);
  }
  __device__ void scalar(size_t i) const {
    y[i] += x[i];
  }
};

static bool aligned16(const void *a, const void *b, const void *c) {
  return fsdpc__aligned16(a) && fsdpc__aligned16(b) && fsdpc__aligned16(c);
}

static fsdpc_status launch_add(fsdpc_cuda_ctx *ctx, bf16 *out, const bf16 *a, const bf16 *b,
                               size_t n, fsdpc_err *err) {
  const AddOp op = {out, a, b};
  return fsdpc__ew_launch(ctx, op, n, aligned16(out, a, b), ctx->compute, "add", err);
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
  const CastF32Bf16Op op = {(bf16 *)out, in};
  return fsdpc__ew_launch(ctx, op, n, aligned16(out, in, in), fsdpc__cuda_stream_or(ctx, stream),
                          "cast_f32_bf16", err);
}

extern "C" fsdpc_status fsdpc__cuda_cast_bf16_f32(fsdpc_cuda_ctx *ctx, float *out,
                                                  const fsdpc_bf16 *in, size_t n, void *stream,
                                                  fsdpc_err *err) {
  if (n == 0)
    return FSDPC_OK;
  if (!out || !in)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda cast_bf16_f32: a tensor pointer is NULL");
  const CastBf16F32Op op = {out, (const bf16 *)in};
  return fsdpc__ew_launch(ctx, op, n, aligned16(out, in, in), fsdpc__cuda_stream_or(ctx, stream),
                          "cast_bf16_f32", err);
}

extern "C" fsdpc_status fsdpc__cuda_scale(fsdpc_cuda_ctx *ctx, float *x, float s, size_t n,
                                          fsdpc_err *err) {
  if (n == 0)
    return FSDPC_OK;
  if (!x)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda scale: x is NULL");
  const ScaleOp op = {x, s};
  return fsdpc__ew_launch(ctx, op, n, fsdpc__aligned16(x), ctx->compute, "scale", err);
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
  const AddF32Op op = {y, x};
  return fsdpc__ew_launch(ctx, op, n, aligned16(y, x, x), fsdpc__cuda_stream_or(ctx, stream),
                          "add_f32_inplace", err);
}

extern "C" fsdpc_status fsdpc__cuda_add_f32_inplace(fsdpc_cuda_ctx *ctx, float *y, const float *x,
                                                    size_t n, fsdpc_err *err) {
  return fsdpc__cuda_add_f32_inplace_on(ctx, y, x, n, NULL, err);
}
