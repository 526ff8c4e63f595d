/* GeGLU gate of the Gemma MLP (twin of ops/cpu/geglu.c), bf16 in/out, fp32
 * math: out = gelu(gate) * up with gelu's tanh approximation (transformers'
 * gelu_pytorch_tanh), gelu(g) = g / 2 (1 + tanh(k (g + a g^3))),
 * k = sqrt(2 / pi), a = 0.044715; with t = tanh(k (g + a g^3)):
 *   d gelu / dg = (1 + t) / 2 + g / 2 (1 - t^2) k (1 + 3 a g^2).
 * N = rows, F = intermediate size. Accumulation rule: dgate =, dup =.
 * Ops of the map engine in cuda_internal.cuh, as swiglu.cu's. */
#include "ops/cuda/cuda_internal.cuh"

#define GELU_K 0.7978845608028654f
#define GELU_A 0.044715f

static __device__ __forceinline__ float gelu_t(float g) {
  return tanhf(GELU_K * (g + GELU_A * g * g * g));
}

struct GegluFwdOp {
  bf16 *out;
  const bf16 *gate, *up;
  static constexpr int W = 8;
  struct Vec {
    uint4 g, u;
  };
  __device__ void load(Vec &r, size_t v) const {
    r.g = ((const uint4 *)gate)[v];
    r.u = ((const uint4 *)up)[v];
  }
  __device__ void store(const Vec &r, size_t v) const {
    float g[8], u[8];
    unpack_bf16x8(r.g, g);
    unpack_bf16x8(r.u, u);
#pragma unroll
    for (int k = 0; k < 8; k++)
      g[k] = 0.5f * g[k] * (1.0f + gelu_t(g[k])) * u[k];
    ((uint4 *)out)[v] = pack_bf16x8(g);
  }
  __device__ void scalar(size_t i) const {
    const float g = __bfloat162float(gate[i]);
    out[i] = __float2bfloat16(0.5f * g * (1.0f + gelu_t(g)) * __bfloat162float(up[i]));
  }
};

struct GegluBwdOp {
  bf16 *dgate, *dup;
  const bf16 *dout, *gate, *up;
  static constexpr int W = 8;
  struct Vec {
    uint4 d, g, u;
  };
  __device__ void load(Vec &r, size_t v) const {
    r.d = ((const uint4 *)dout)[v];
    r.g = ((const uint4 *)gate)[v];
    r.u = ((const uint4 *)up)[v];
  }
  static __device__ __forceinline__ void one(float d, float g, float u, float &dg, float &du) {
    const float t = gelu_t(g);
    const float dgelu =
        0.5f * (1.0f + t) + 0.5f * g * (1.0f - t * t) * GELU_K * (1.0f + 3.0f * GELU_A * g * g);
    dg = d * u * dgelu;
    du = d * 0.5f * g * (1.0f + t);
  }
  __device__ void store(const Vec &r, size_t v) const {
    float d[8], g[8], u[8];
    unpack_bf16x8(r.d, d);
    unpack_bf16x8(r.g, g);
    unpack_bf16x8(r.u, u);
#pragma unroll
    for (int k = 0; k < 8; k++)
      one(d[k], g[k], u[k], d[k], u[k]); /* d <- dgate, u <- dup */
    ((uint4 *)dgate)[v] = pack_bf16x8(d);
    ((uint4 *)dup)[v] = pack_bf16x8(u);
  }
  __device__ void scalar(size_t i) const {
    float dg, du;
    one(__bfloat162float(dout[i]), __bfloat162float(gate[i]), __bfloat162float(up[i]), dg, du);
    dgate[i] = __float2bfloat16(dg);
    dup[i] = __float2bfloat16(du);
  }
};

extern "C" fsdpc_status fsdpc__cuda_geglu_fwd(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *out,
                                              const fsdpc_bf16 *gate, const fsdpc_bf16 *up, int N,
                                              int F, fsdpc_err *err) {
  if (!out || !gate || !up || N < 0 || F < 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "cuda geglu_fwd: NULL tensor or bad shape N=%d F=%d", N, F);
  const size_t n = (size_t)N * F;
  if (n == 0)
    return FSDPC_OK;
  const GegluFwdOp op = {(bf16 *)out, (const bf16 *)gate, (const bf16 *)up};
  const bool vec = fsdpc__aligned16(out) && fsdpc__aligned16(gate) && fsdpc__aligned16(up);
  return fsdpc__ew_launch(ctx, op, n, vec, ctx->compute, "geglu_fwd", err);
}

extern "C" fsdpc_status fsdpc__cuda_geglu_bwd(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *dgate,
                                              fsdpc_bf16 *dup, const fsdpc_bf16 *dout,
                                              const fsdpc_bf16 *gate, const fsdpc_bf16 *up, int N,
                                              int F, fsdpc_err *err) {
  if (!dgate || !dup || !dout || !gate || !up || N < 0 || F < 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "cuda geglu_bwd: NULL tensor or bad shape N=%d F=%d", N, F);
  const size_t n = (size_t)N * F;
  if (n == 0)
    return FSDPC_OK;
  const GegluBwdOp op = {(bf16 *)dgate, (bf16 *)dup, (const bf16 *)dout, (const bf16 *)gate,
                         (const bf16 *)up};
  const bool vec = fsdpc__aligned16(dgate) && fsdpc__aligned16(dup) && fsdpc__aligned16(dout) &&
                   fsdpc__aligned16(gate) && fsdpc__aligned16(up);
  return fsdpc__ew_launch(ctx, op, n, vec, ctx->compute, "geglu_bwd", err);
}
