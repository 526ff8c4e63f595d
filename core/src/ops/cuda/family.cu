/* The decoder families' small ops on bf16 (twins of ops/cpu/bias.c and
 * residual.c's axpy): projection biases (Qwen2's q/k/v, the attention_bias
 * and mlp_bias switches) and the scaled residual adds and scalings of
 * Granite's multipliers. All memory-bound; the bias add and axpy run on the
 * map engine of cuda_internal.cuh. The bias gradient sums the rows in a fixed
 * order (per column: BB_LANES interleaved row lanes, then the lanes in
 * order), so its bits do not depend on the launch. */
#include "ops/cuda/cuda_internal.cuh"

/* y[n, o] += bias[o] (fp32 sum, one rounding). The vector path needs OC % 8
 * == 0 so that a 16-byte step never crosses a row. */
struct BiasAddOp {
  bf16 *y;
  const bf16 *bias;
  int OC;
  static constexpr int W = 8;
  struct Vec {
    uint4 y, b;
  };
  __device__ void load(Vec &r, size_t v) const {
    r.y = ((const uint4 *)y)[v];
    r.b = ((const uint4 *)bias)[(v * 8 % (size_t)OC) / 8];
  }
  __device__ void store(const Vec &r, size_t v) const {
    float a[8], b[8];
    unpack_bf16x8(r.y, a);
    unpack_bf16x8(r.b, b);
#pragma unroll
    for (int k = 0; k < 8; k++)
      a[k] += b[k];
    ((uint4 *)y)[v] = pack_bf16x8(a);
  }
  __device__ void scalar(size_t i) const {
    y[i] = __float2bfloat16(__bfloat162float(y[i]) + __bfloat162float(bias[i % (size_t)OC]));
  }
};

/* out = x + a * y, or a * y without x (fp32 arithmetic, one rounding). */
struct AxpyOp {
  bf16 *out;
  const bf16 *x, *y;
  float a;
  static constexpr int W = 8;
  struct Vec {
    uint4 x, y;
  };
  __device__ void load(Vec &r, size_t v) const {
    r.y = ((const uint4 *)y)[v];
    r.x = x ? ((const uint4 *)x)[v] : make_uint4(0, 0, 0, 0);
  }
  __device__ void store(const Vec &r, size_t v) const {
    float p[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, q[8];
    unpack_bf16x8(r.y, q);
    if (x)
      unpack_bf16x8(r.x, p);
#pragma unroll
    for (int k = 0; k < 8; k++)
      q[k] = p[k] + a * q[k];
    ((uint4 *)out)[v] = pack_bf16x8(q);
  }
  __device__ void scalar(size_t i) const {
    out[i] = __float2bfloat16((x ? __bfloat162float(x[i]) : 0.0f) + a * __bfloat162float(y[i]));
  }
};

#define BB_COLS 32  /* columns per block (one per lane: coalesced rows) */
#define BB_LANES 16 /* row lanes per column */

/* dbias[o] (+)= sum_n dy[n, o]: thread (lane, row lane l) sums rows l,
 * l + BB_LANES, ... of column o; the block adds the lanes in order. */
static __global__ void __launch_bounds__(BB_COLS *BB_LANES)
    bias_bwd_kernel(float *dbias, const bf16 *dy, int N, int OC, int overwrite) {
  __shared__ float part[BB_LANES][BB_COLS];
  const int c = threadIdx.x % BB_COLS, l = threadIdx.x / BB_COLS;
  const int o = blockIdx.x * BB_COLS + c;
  float s = 0.0f;
  if (o < OC)
    for (int n = l; n < N; n += BB_LANES)
      s += __bfloat162float(dy[(size_t)n * OC + o]);
  part[l][c] = s;
  __syncthreads();
  if (l == 0 && o < OC) {
    float t = 0.0f;
    for (int k = 0; k < BB_LANES; k++)
      t += part[k][c];
    dbias[o] = overwrite ? t : dbias[o] + t;
  }
}

extern "C" fsdpc_status fsdpc__cuda_bias_add(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *y,
                                             const fsdpc_bf16 *bias, int N, int OC,
                                             fsdpc_err *err) {
  if (!y || !bias)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda bias_add: a tensor pointer is NULL");
  if (N < 0 || OC < 1)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda bias_add: N=%d OC=%d", N, OC);
  if (N == 0)
    return FSDPC_OK;
  const BiasAddOp op = {(bf16 *)y, (const bf16 *)bias, OC};
  const bool vec = OC % 8 == 0 && fsdpc__aligned16(y) && fsdpc__aligned16(bias);
  return fsdpc__ew_launch(ctx, op, (size_t)N * OC, vec, ctx->compute, "bias_add", err);
}

extern "C" fsdpc_status fsdpc__cuda_bias_bwd(fsdpc_cuda_ctx *ctx, float *dbias,
                                             const fsdpc_bf16 *dy, int N, int OC, fsdpc_err *err) {
  if (!dbias || !dy)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda bias_bwd: a tensor pointer is NULL");
  if (N < 0 || OC < 1)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda bias_bwd: N=%d OC=%d", N, OC);
  const unsigned blocks = (unsigned)((OC + BB_COLS - 1) / BB_COLS);
  bias_bwd_kernel<<<blocks, BB_COLS * BB_LANES, 0, ctx->compute>>>(dbias, (const bf16 *)dy, N, OC,
                                                                   ctx->grad_overwrite);
  FSDPC_CUDA_LAUNCHED(err, "bias_bwd");
  return FSDPC_OK;
}

extern "C" fsdpc_status fsdpc__cuda_axpy(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *out, const fsdpc_bf16 *x,
                                         const fsdpc_bf16 *y, float a, size_t n, fsdpc_err *err) {
  if (n == 0)
    return FSDPC_OK;
  if (!out || !y)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda axpy: out or y is NULL");
  const AxpyOp op = {(bf16 *)out, (const bf16 *)x, (const bf16 *)y, a};
  const bool vec = fsdpc__aligned16(out) && fsdpc__aligned16(y) && (!x || fsdpc__aligned16(x));
  return fsdpc__ew_launch(ctx, op, n, vec, ctx->compute, "axpy", err);
}
