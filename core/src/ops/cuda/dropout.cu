/* LoRA's element-wise ops (twin of ops/cpu/dropout.c), bf16 in/out, fp32
 * math: x *= s, and inverted dropout whose mask is the counter hash of
 * (key, element) that the CPU reference uses, so both devices and every
 * recompute drop the same elements. Both are Ops of the map engine in
 * cuda_internal.cuh. */
#include "ops/cuda/cuda_internal.cuh"

static __device__ __forceinline__ uint64_t mix(uint64_t x) { /* splitmix64 */
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

struct ScaleOp {
  bf16 *x;
  float s;
  static constexpr int W = 8;
  struct Vec {
    uint4 x;
  };
  __device__ void load(Vec &r, size_t v) const {
    r.x = ((const uint4 *)x)[v];
  }
  __device__ void store(const Vec &r, size_t v) const {
    float f[8];
    unpack_bf16x8(r.x, f);
#pragma unroll
    for (int k = 0; k < 8; k++)
      f[k] *= s;
    ((uint4 *)x)[v] = pack_bf16x8(f);
  }
  __device__ void scalar(size_t i) const {
    x[i] = __float2bfloat16(__bfloat162float(x[i]) * s);
  }
};

struct DropoutOp {
  bf16 *out;
  const bf16 *inp;
  uint64_t key;
  uint32_t thr;
  float inv;
  static constexpr int W = 8;
  struct Vec {
    uint4 x;
  };
  __device__ float keep(size_t i) const {
    return (uint32_t)(mix(key + i) >> 40) >= thr ? inv : 0.0f;
  }
  __device__ void load(Vec &r, size_t v) const {
    r.x = ((const uint4 *)inp)[v];
  }
  __device__ void store(const Vec &r, size_t v) const {
    float f[8];
    unpack_bf16x8(r.x, f);
#pragma unroll
    for (int k = 0; k < 8; k++)
      f[k] *= keep(v * 8 + k);
    ((uint4 *)out)[v] = pack_bf16x8(f);
  }
  __device__ void scalar(size_t i) const {
    out[i] = __float2bfloat16(__bfloat162float(inp[i]) * keep(i));
  }
};

extern "C" fsdpc_status fsdpc__cuda_scale_bf16(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *x, size_t n,
                                               float s, fsdpc_err *err) {
  if (n == 0)
    return FSDPC_OK;
  if (!x)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda scale: the tensor pointer is NULL");
  const ScaleOp op = {(bf16 *)x, s};
  return fsdpc__ew_launch(ctx, op, n, fsdpc__aligned16(x), ctx->compute, "scale", err);
}

extern "C" fsdpc_status fsdpc__cuda_dropout(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *out,
                                            const fsdpc_bf16 *inp, size_t n, float p, uint64_t key,
                                            fsdpc_err *err) {
  if (n == 0)
    return FSDPC_OK;
  if (!out || !inp)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda dropout: a tensor pointer is NULL");
  const DropoutOp op = {(bf16 *)out, (const bf16 *)inp, key, (uint32_t)((double)p * 16777216.0),
                        1.0f / (1.0f - p)};
  return fsdpc__ew_launch(ctx, op, n, fsdpc__aligned16(out) && fsdpc__aligned16(inp), ctx->compute,
                          "dropout", err);
}
