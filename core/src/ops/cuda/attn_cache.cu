/* Attention over a KV cache on bf16 (twin of ops/cpu/attn_cache.c), for
 * decoding: each (row, query head) is one block of 4 warps; the warps split
 * the cached keys 0..pos (the last `window` of them with a sliding window), each keeps an online
 * softmax (max, sum, fp32 accumulator with HD/32 elements per lane), and the block merges the four
 * at the end. Memory-bound on reading the cache once per query head group;
 * fp32 accumulation throughout. */
#include "ops/cuda/cuda_internal.cuh"

#define AC_WARPS 4
#define AC_MAX_PER_LANE 8 /* head_dim <= 256 */

static __global__ void kv_store_kernel(bf16 *kc, bf16 *vc, const bf16 *k, const bf16 *v,
                                       const int32_t *pos, int n, int maxT, int KD, size_t total) {
  for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
       idx += (size_t)gridDim.x * blockDim.x) {
    const size_t r = idx / KD, d = idx % KD;
    const size_t dst = ((r / n) * (size_t)maxT + (size_t)pos[r]) * KD + d;
    kc[dst] = k[idx];
    vc[dst] = v[idx];
  }
}

static __global__ void __launch_bounds__(AC_WARPS * 32)
    attn_cached_kernel(bf16 *out, const bf16 *q, const bf16 *kc, const bf16 *vc, const int32_t *pos,
                       int n, int NH, int KVH, int HD, int maxT, float scale, int window,
                       float softcap) {
  const int h = blockIdx.x, r = blockIdx.y, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const int KD = KVH * HD, kvh = h / (NH / KVH), per = (HD + 31) / 32;
  const bf16 *qr = q + ((size_t)r * NH + h) * HD;
  const bf16 *kb = kc + (size_t)(r / n) * maxT * KD + (size_t)kvh * HD;
  const bf16 *vb = vc + (size_t)(r / n) * maxT * KD + (size_t)kvh * HD;
  float qv[AC_MAX_PER_LANE], acc[AC_MAX_PER_LANE];
#pragma unroll
  for (int j = 0; j < AC_MAX_PER_LANE; j++) {
    const int d = lane + 32 * j;
    qv[j] = j < per && d < HD ? __bfloat162float(qr[d]) * scale : 0.0f;
    acc[j] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  const int last = pos[r];
  const int first = window > 0 && last - window + 1 > 0 ? last - window + 1 : 0;
  for (int t = first + w; t <= last; t += AC_WARPS) {
    const bf16 *kt = kb + (size_t)t * KD, *vt = vb + (size_t)t * KD;
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < AC_MAX_PER_LANE; j++) {
      const int d = lane + 32 * j;
      if (j < per && d < HD)
        s += qv[j] * __bfloat162float(kt[d]);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      s += __shfl_xor_sync(0xffffffffu, s, o);
    if (softcap > 0.0f) /* Gemma 2: the scaled score capped */
      s = softcap * tanhf(s / softcap);
    const float mn = fmaxf(m, s), corr = __expf(m - mn), p = __expf(s - mn);
    l = l * corr + p;
#pragma unroll
    for (int j = 0; j < AC_MAX_PER_LANE; j++) {
      const int d = lane + 32 * j;
      if (j < per && d < HD)
        acc[j] = acc[j] * corr + p * __bfloat162float(vt[d]);
    }
    m = mn;
  }
  __shared__ float sm[AC_WARPS], sl[AC_WARPS], sacc[AC_WARPS][AC_MAX_PER_LANE * 32];
  if (lane == 0) {
    sm[w] = m;
    sl[w] = l;
  }
#pragma unroll
  for (int j = 0; j < AC_MAX_PER_LANE; j++)
    sacc[w][lane + 32 * j] = acc[j];
  __syncthreads();
  float M = -INFINITY;
  for (int i = 0; i < AC_WARPS; i++)
    M = fmaxf(M, sm[i]);
  float L = 0.0f;
  for (int i = 0; i < AC_WARPS; i++)
    if (sl[i] > 0.0f)
      L += sl[i] * __expf(sm[i] - M);
  bf16 *o = out + ((size_t)r * NH + h) * HD;
  for (int d = threadIdx.x; d < HD; d += blockDim.x) {
    float a = 0.0f;
    for (int i = 0; i < AC_WARPS; i++)
      if (sl[i] > 0.0f)
        a += sacc[i][d] * __expf(sm[i] - M);
    o[d] = __float2bfloat16(a / L);
  }
}

extern "C" fsdpc_status fsdpc__cuda_kv_store(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *kc, fsdpc_bf16 *vc,
                                             const fsdpc_bf16 *k, const fsdpc_bf16 *v,
                                             const int32_t *pos, int B, int n, int maxT, int KD,
                                             fsdpc_err *err) {
  if (B < 1 || n < 1 || KD < 1 || maxT < 1)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "cuda kv_store: bad shape");
  const size_t total = (size_t)B * n * KD;
  kv_store_kernel<<<fsdpc__cuda_blocks(total, 256, 65535), 256, 0, ctx->compute>>>(
      (bf16 *)kc, (bf16 *)vc, (const bf16 *)k, (const bf16 *)v, pos, n, maxT, KD, total);
  FSDPC_CUDA_LAUNCHED(err, "kv_store");
  return FSDPC_OK;
}

extern "C" fsdpc_status fsdpc__cuda_attn_cached(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *out,
                                                const fsdpc_bf16 *q, const fsdpc_bf16 *kc,
                                                const fsdpc_bf16 *vc, const int32_t *pos, int B,
                                                int n, int NH, int KVH, int HD, int maxT,
                                                float scale, int window, float softcap,
                                                fsdpc_err *err) {
  if (HD > 32 * AC_MAX_PER_LANE || KVH < 1 || NH % KVH != 0 || B * n > 65535)
    return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                       "cuda attn_cached: head_dim %d (at most %d), %d heads over %d kv heads, "
                       "%d rows (at most 65535)",
                       HD, 32 * AC_MAX_PER_LANE, NH, KVH, B * n);
  dim3 grid((unsigned)NH, (unsigned)(B * n));
  attn_cached_kernel<<<grid, AC_WARPS * 32, 0, ctx->compute>>>(
      (bf16 *)out, (const bf16 *)q, (const bf16 *)kc, (const bf16 *)vc, pos, n, NH, KVH, HD, maxT,
      scale, window, softcap);
  FSDPC_CUDA_LAUNCHED(err, "attn_cached");
  return FSDPC_OK;
}
