/* Rotary position embedding on bf16 activations (twin of ops/cpu/rope.c),
 * Hugging Face rotate_half convention: element i pairs with i + RD/2.
 * N = rows, H = heads in the tensor, HD = head dim, RD = rotary dims (even,
 * <= HD; partial rotary turns the first RD and passes the rest through). The
 * rotation is done in fp32 with the fp32 cos/sin tables of
 * fsdpc__rope_tables (which carry the RoPE variant's frequencies and
 * attention factor). Backward rotates by the opposite angle (the transpose).
 * Both work in place.
 * Memory-bound (x read and written once; the tables stay in L2): when RD/2
 * and HD are multiples of 8 and x and the tables are 16-byte aligned, a
 * thread rotates 8 pairs with 16-byte accesses (x[i..i+7] against
 * x[i+RD/2..]); otherwise one pair per thread. */
#include <stdlib.h>

#include "ops/cuda/cuda_internal.cuh"

extern "C" {
#include "ops/cpu/ops_cpu.h"
}

static __device__ __forceinline__ int clamp_pos(int p, int maxT) {
  return p < 0 ? 0 : (p >= maxT ? maxT - 1 : p); /* never read outside the table */
}

/* One thread per (row, head, i < RD/2) pair. */
static __global__ void rope_kernel(bf16 *x, const float *cos, const float *sin, const int32_t *pos,
                                   int N, int H, int HD, int half, int maxT, float sign) {
  const size_t total = (size_t)N * H * half;
  for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
       idx += (size_t)gridDim.x * blockDim.x) {
    const int i = (int)(idx % half);
    const size_t nh = idx / half; /* row * H + head */
    const int p = clamp_pos(pos[nh / H], maxT);
    const float c = cos[(size_t)p * half + i], s = sign * sin[(size_t)p * half + i];
    bf16 *v = x + nh * HD;
    const float a = __bfloat162float(v[i]), b = __bfloat162float(v[i + half]);
    v[i] = __float2bfloat16(a * c - b * s);
    v[i + half] = __float2bfloat16(b * c + a * s);
  }
}

/* One thread per (row, head, group of 8 pairs); half % 8 == 0, everything
 * 16-byte aligned. groups = half / 8. */
static __global__ void __launch_bounds__(256)
    rope_vec_kernel(bf16 *x, const float *cos, const float *sin, const int32_t *pos, size_t total,
                    int H, int HD, int half, int groups, int maxT, float sign) {
  const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= total)
    return;
  const int i = (int)(idx % groups) * 8;
  const size_t nh = idx / groups; /* row * H + head */
  uint4 *lo = (uint4 *)(x + nh * HD + i), *hi = (uint4 *)(x + nh * HD + half + i);
  const uint4 ul = *lo, uh = *hi; /* issue the x loads before the table reads */
  const int p = clamp_pos(pos[nh / H], maxT);
  const float4 *c4 = (const float4 *)(cos + (size_t)p * half + i);
  const float4 *s4 = (const float4 *)(sin + (size_t)p * half + i);
  const float4 c0 = c4[0], c1 = c4[1], s0 = s4[0], s1 = s4[1];
  const float c[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
  const float sn[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
  float a[8], b[8], ya[8], yb[8];
  unpack_bf16x8(ul, a);
  unpack_bf16x8(uh, b);
#pragma unroll
  for (int k = 0; k < 8; k++) {
    const float s = sign * sn[k];
    ya[k] = a[k] * c[k] - b[k] * s;
    yb[k] = b[k] * c[k] + a[k] * s;
  }
  *lo = pack_bf16x8(ya);
  *hi = pack_bf16x8(yb);
}

static fsdpc_status launch_rope(fsdpc_cuda_ctx *ctx, bf16 *x, const float *cos, const float *sin,
                                const int32_t *pos, int N, int H, int HD, int RD, int maxT,
                                float sign, fsdpc_err *err) {
  const int half = RD / 2;
  const size_t groups = (size_t)N * H * (half / 8), vblocks = (groups + 255) / 256;
  if (half % 8 == 0 && HD % 8 == 0 && vblocks <= 0x7fffffffu && fsdpc__aligned16(x) &&
      fsdpc__aligned16(cos) && fsdpc__aligned16(sin)) {
    const size_t total = groups, blocks = vblocks; /* one group per thread: all in flight */
    rope_vec_kernel<<<(unsigned)blocks, 256, 0, ctx->compute>>>(x, cos, sin, pos, total, H, HD,
                                                                half, half / 8, maxT, sign);
  } else {
    const size_t total = (size_t)N * H * half;
    const unsigned blocks = fsdpc__cuda_blocks(total, 256, (unsigned)ctx->sm_count * 16);
    rope_kernel<<<blocks, 256, 0, ctx->compute>>>(x, cos, sin, pos, N, H, HD, half, maxT, sign);
  }
  FSDPC_CUDA_LAUNCHED(err, "rope");
  return FSDPC_OK;
}

static fsdpc_status check(const char *op, const void *x, const float *cos, const float *sin,
                          const int32_t *pos, int N, int H, int HD, int RD, int maxT,
                          fsdpc_err *err) {
  if (!x || !cos || !sin || !pos)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda %s: a tensor pointer is NULL", op);
  if (N < 0 || H < 1 || RD < 2 || RD % 2 != 0 || RD > HD || maxT < 1)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "cuda %s: N=%d H=%d HD=%d RD=%d maxT=%d; the rotary dims must be even, >= 2 "
                       "and at most the head dim",
                       op, N, H, HD, RD, maxT);
  return FSDPC_OK;
}

extern "C" fsdpc_status fsdpc__cuda_rope_fwd(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *x, const float *cos,
                                             const float *sin, const int32_t *pos, int N, int H,
                                             int HD, int RD, int maxT, fsdpc_err *err) {
  FSDPC_TRY(check("rope_fwd", x, cos, sin, pos, N, H, HD, RD, maxT, err));
  if (N == 0)
    return FSDPC_OK;
  return launch_rope(ctx, (bf16 *)x, cos, sin, pos, N, H, HD, RD, maxT, 1.0f, err);
}

extern "C" fsdpc_status fsdpc__cuda_rope_bwd(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *dx, const float *cos,
                                             const float *sin, const int32_t *pos, int N, int H,
                                             int HD, int RD, int maxT, fsdpc_err *err) {
  FSDPC_TRY(check("rope_bwd", dx, cos, sin, pos, N, H, HD, RD, maxT, err));
  if (N == 0)
    return FSDPC_OK;
  return launch_rope(ctx, (bf16 *)dx, cos, sin, pos, N, H, HD, RD, maxT, -1.0f, err);
}

extern "C" fsdpc_status fsdpc__cuda_rope_tables(fsdpc_cuda_ctx *ctx, float *cos, float *sin,
                                                const fsdpc_rope *r, int maxT, int use_long,
                                                fsdpc_err *err) {
  if (!cos || !sin || !r || maxT < 1 || r->dim < 2 || r->dim % 2 != 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "cuda rope_tables: maxT=%d dim=%d (dim even) and non-NULL tables needed",
                       maxT, r ? r->dim : 0);
  const size_t n = (size_t)maxT * (r->dim / 2);
  float *hc = (float *)malloc(n * sizeof(float)), *hs = (float *)malloc(n * sizeof(float));
  if (!hc || !hs) {
    free(hc);
    free(hs);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cuda rope_tables: out of host memory");
  }
  fsdpc__rope_tables(hc, hs, r, maxT, use_long);
  fsdpc_status st = fsdpc__cuda_h2d(ctx, cos, hc, n * sizeof(float), err);
  if (st == FSDPC_OK)
    st = fsdpc__cuda_h2d(ctx, sin, hs, n * sizeof(float), err);
  free(hc);
  free(hs);
  return st;
}
