/* The MLP's gated activations, bf16 in/out, fp32 math: SwiGLU of the Llama
 * MLP (twin of ops/cpu/swiglu.c), out = silu(gate) * up, silu(g) = g *
 * sigmoid(g); GeGLU of Gemma's (twin of ops/cpu/geglu.c), gelu's tanh
 * approximation for silu (struct GeluTanh).
 * d silu / dg = s (1 + g (1 - s)) with s = sigmoid(g).
 * N = rows, F = intermediate size. Accumulation rule: dgate =, dup =.
 * Memory-bound (6 and 10 bytes an element): both are Ops of the map engine in
 * cuda_internal.cuh (16-byte accesses, several in flight per thread). The
 * sigmoid uses the hardware exp2 and reciprocal (__expf, __frcp_rn): a few
 * ulp in fp32, far below the bf16 rounding of the result, and it keeps the
 * kernels off the arithmetic limit. */
#include "ops/cuda/cuda_internal.cuh"

static __device__ __forceinline__ float sigmoid(float g) {
  return __frcp_rn(1.0f + __expf(-g)); /* g -> -inf: 1/inf = 0; g -> +inf: 1 */
}

/* The two gates' elementwise math: out = act(g) * u, and (dgate, dup) from
 * dout. Each keeps its own order of operations. */
struct Silu {
  static __device__ __forceinline__ float fwd(float g, float u) { return g * sigmoid(g) * u; }
  static __device__ __forceinline__ void bwd(float d, float g, float u, float &dg, float &du) {
    const float s = sigmoid(g);
    dg = d * u * s * (1.0f + g * (1.0f - s));
    du = d * g * s;
  }
};

/* gelu_pytorch_tanh (Gemma): gelu(g) = g / 2 (1 + t), t = tanh(k (g + a g^3)),
 * k = sqrt(2 / pi), a = 0.044715; d gelu / dg = (1 + t) / 2 + g / 2 (1 - t^2)
 * k (1 + 3 a g^2) (twin of ops/cpu/geglu.c). */
struct GeluTanh {
  static constexpr float K = 0.7978845608028654f, A = 0.044715f;
  static __device__ __forceinline__ float fwd(float g, float u) {
    return 0.5f * g * (1.0f + tanhf(K * (g + A * g * g * g))) * u;
  }
  static __device__ __forceinline__ void bwd(float d, float g, float u, float &dg, float &du) {
    const float t = tanhf(K * (g + A * g * g * g));
    dg = d * u * (0.5f * (1.0f + t) + 0.5f * g * (1.0f - t * t) * K * (1.0f + 3.0f * A * g * g));
    du = d * 0.5f * g * (1.0f + t);
  }
};

template <typename Act> struct GluFwdOp {
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
      g[k] = Act::fwd(g[k], u[k]);
    ((uint4 *)out)[v] = pack_bf16x8(g);
  }
  __device__ void scalar(size_t i) const {
    out[i] = __float2bfloat16(Act::fwd(__bfloat162float(gate[i]), __bfloat162float(up[i])));
  }
};

template <typename Act> struct GluBwdOp {
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
  __device__ void store(const Vec &r, size_t v) const {
    float d[8], g[8], u[8];
    unpack_bf16x8(r.d, d);
    unpack_bf16x8(r.g, g);
    unpack_bf16x8(r.u, u);
#pragma unroll
    for (int k = 0; k < 8; k++)
      Act::bwd(d[k], g[k], u[k], d[k], u[k]); /* d <- dgate, u <- dup */
    ((uint4 *)dgate)[v] = pack_bf16x8(d);
    ((uint4 *)dup)[v] = pack_bf16x8(u);
  }
  __device__ void scalar(size_t i) const {
    float dg, du;
    Act::bwd(__bfloat162float(dout[i]), __bfloat162float(gate[i]), __bfloat162float(up[i]), dg,
             du);
    dgate[i] = __float2bfloat16(dg);
    dup[i] = __float2bfloat16(du);
  }
};

template <typename Act>
static fsdpc_status launch_glu_fwd(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *out, const fsdpc_bf16 *gate,
                                   const fsdpc_bf16 *up, int N, int F, const char *what,
                                   fsdpc_err *err) {
  if (!out || !gate || !up || N < 0 || F < 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda %s: NULL tensor or bad shape N=%d F=%d",
                       what, N, F);
  const size_t n = (size_t)N * F;
  if (n == 0)
    return FSDPC_OK;
  const GluFwdOp<Act> op = {(bf16 *)out, (const bf16 *)gate, (const bf16 *)up};
  const bool vec = fsdpc__aligned16(out) && fsdpc__aligned16(gate) && fsdpc__aligned16(up);
  return fsdpc__ew_launch(ctx, op, n, vec, ctx->compute, what, err);
}

template <typename Act>
static fsdpc_status launch_glu_bwd(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *dgate, fsdpc_bf16 *dup,
                                   const fsdpc_bf16 *dout, const fsdpc_bf16 *gate,
                                   const fsdpc_bf16 *up, int N, int F, const char *what,
                                   fsdpc_err *err) {
  if (!dgate || !dup || !dout || !gate || !up || N < 0 || F < 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda %s: NULL tensor or bad shape N=%d F=%d",
                       what, N, F);
  const size_t n = (size_t)N * F;
  if (n == 0)
    return FSDPC_OK;
  const GluBwdOp<Act> op = {(bf16 *)dgate, (bf16 *)dup, (const bf16 *)dout, (const bf16 *)gate,
                            (const bf16 *)up};
  const bool vec = fsdpc__aligned16(dgate) && fsdpc__aligned16(dup) && fsdpc__aligned16(dout) &&
                   fsdpc__aligned16(gate) && fsdpc__aligned16(up);
  return fsdpc__ew_launch(ctx, op, n, vec, ctx->compute, what, err);
}

extern "C" fsdpc_status fsdpc__cuda_swiglu_fwd(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *out,
                                               const fsdpc_bf16 *gate, const fsdpc_bf16 *up, int N,
                                               int F, fsdpc_err *err) {
  return launch_glu_fwd<Silu>(ctx, out, gate, up, N, F, "swiglu_fwd", err);
}

extern "C" fsdpc_status fsdpc__cuda_swiglu_bwd(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *dgate,
                                               fsdpc_bf16 *dup, const fsdpc_bf16 *dout,
                                               const fsdpc_bf16 *gate, const fsdpc_bf16 *up, int N,
                                               int F, fsdpc_err *err) {
  return launch_glu_bwd<Silu>(ctx, dgate, dup, dout, gate, up, N, F, "swiglu_bwd", err);
}

extern "C" fsdpc_status fsdpc__cuda_geglu_fwd(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *out,
                                              const fsdpc_bf16 *gate, const fsdpc_bf16 *up, int N,
                                              int F, fsdpc_err *err) {
  return launch_glu_fwd<GeluTanh>(ctx, out, gate, up, N, F, "geglu_fwd", err);
}

extern "C" fsdpc_status fsdpc__cuda_geglu_bwd(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *dgate,
                                              fsdpc_bf16 *dup, const fsdpc_bf16 *dout,
                                              const fsdpc_bf16 *gate, const fsdpc_bf16 *up, int N,
                                              int F, fsdpc_err *err) {
  return launch_glu_bwd<GeluTanh>(ctx, dgate, dup, dout, gate, up, N, F, "geglu_bwd", err);
}
