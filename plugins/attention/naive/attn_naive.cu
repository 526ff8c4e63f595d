/* Attention plugin "naive", CUDA path: the GPU reference that materialises
 * P = softmax(scale Q K^T + mask) (B, NH, T, T) in fp32, for tests and as
 * the oracle of the flash plugin. bf16 q, k, v, out and gradients; every
 * dot product, softmax and sum in fp32. Same masks and same backward as the
 * CPU path in attn_naive.c (read its header for the formulas); D_i is taken
 * from P and dP, so the gradient is that of exactly the saved P. With a
 * logit soft-cap c (shape->softcap > 0) a score s becomes c tanh(s / c)
 * before the mask and softmax, and bwd_q recomputes s to multiply dS_ij by
 * 1 - tanh^2(s_ij / c) (P alone does not give s back).
 *
 * Kernels, each one block per row:
 *   fwd     (i, h, b): scores by one warp per key (lanes over HD, coalesced),
 *                      softmax over the row in place in P, then out_i = P_i V
 *                      with threads over HD.
 *   bwd_q   (i, h, b): dP_ij = dO_i . V_j, D_i, dS_ij = P_ij (dP_ij - D_i)
 *                      into the workspace (times the cap's derivative),
 *                      dQ_i = scale dS_i K.
 *   bwd_kv  (j, g, b): dV_j = sum over the group's heads and queries of
 *                      P_ij dO_i, dK_j = scale sum dS_ij Q_i (written =).
 * Layouts: q, out, dq, dout (B, T, NH, HD); k, v, dk, dv (B, T, KVH, HD). */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>

#include "attn_naive_cuda.h"

typedef __nv_bfloat16 bf16;
#define THREADS 128

struct dims {
  int B, T, NH, KVH, HD, rep, causal, window; /* window 0 = none */
  float scale, softcap;                       /* softcap 0 = none */
  const int32_t *doc;                         // (B, T) or NULL
};

static __device__ __forceinline__ bool allowed(const dims &d, const int32_t *doc, int i, int j) {
  return (!d.causal || j <= i) && (d.window == 0 || i - j < d.window) &&
         (doc == NULL || doc[i] == doc[j]);
}

static __device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
static __device__ float block_reduce(float v, float *sh, bool is_max) {
  for (int o = 16; o > 0; o >>= 1) {
    float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, w) : v + w;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0)
    sh[warp] = v;
  __syncthreads();
  v = lane < nw ? sh[lane] : (is_max ? -INFINITY : 0.0f);
  for (int o = 16; o > 0; o >>= 1) {
    float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, w) : v + w;
  }
  return v;
}

/* dot(a fp32 in shared memory, b bf16 row) by one warp; every lane gets it. */
static __device__ __forceinline__ float warp_dot(const float *a, const bf16 *b, int HD) {
  float s = 0.0f;
  for (int d = threadIdx.x & 31; d < HD; d += 32)
    s += a[d] * __bfloat162float(b[d]);
  return warp_sum(s);
}

static __global__ void fwd_kernel(const dims D, const bf16 *q, const bf16 *k, const bf16 *v,
                                  bf16 *out, float *P) {
  __shared__ float qi[ATTN_NAIVE_CUDA_MAX_HD], sh[32];
  const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / D.rep, T = D.T, HD = D.HD;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  const int32_t *doc = D.doc ? D.doc + (size_t)b * T : NULL;
  const size_t qo = (((size_t)b * T + i) * D.NH + h) * HD;
  float *prow = P + (((size_t)b * D.NH + h) * T + i) * T; // (T)
  for (int d = threadIdx.x; d < HD; d += blockDim.x)
    qi[d] = __bfloat162float(q[qo + d]);
  __syncthreads();
  const int jend = D.causal ? i + 1 : T;
  for (int j = warp; j < jend; j += nw) {
    float s = -INFINITY;
    if (allowed(D, doc, i, j)) {
      s = D.scale * warp_dot(qi, k + (((size_t)b * T + j) * D.KVH + g) * HD, HD);
      if (D.softcap > 0.0f) /* as the CPU path: divide, tanh, multiply */
        s = tanhf(s / D.softcap) * D.softcap;
    }
    if (lane == 0)
      prow[j] = s;
  }
  __syncthreads();
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < jend; j += blockDim.x)
    mx = fmaxf(mx, prow[j]);
  mx = block_reduce(mx, sh, true); /* finite: a query always sees itself */
  float sum = 0.0f;
  for (int j = threadIdx.x; j < T; j += blockDim.x) {
    const float e = j < jend && prow[j] != -INFINITY ? expf(prow[j] - mx) : 0.0f;
    prow[j] = e;
    sum += e;
  }
  sum = block_reduce(sum, sh, false);
  const float inv = 1.0f / sum;
  for (int j = threadIdx.x; j < jend; j += blockDim.x)
    prow[j] *= inv;
  __syncthreads();
  for (int d = threadIdx.x; d < HD; d += blockDim.x) {
    float o = 0.0f;
    for (int j = 0; j < jend; j++) {
      const float p = prow[j];
      if (p != 0.0f)
        o += p * __bfloat162float(v[(((size_t)b * T + j) * D.KVH + g) * HD + d]);
    }
    out[qo + d] = __float2bfloat16(o);
  }
}

static __global__ void bwd_q_kernel(const dims D, const bf16 *q, const bf16 *k, const bf16 *v,
                                    const bf16 *dout, const float *P, float *dS, bf16 *dq) {
  __shared__ float doi[ATTN_NAIVE_CUDA_MAX_HD], qi[ATTN_NAIVE_CUDA_MAX_HD], sh[32];
  const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / D.rep, T = D.T, HD = D.HD;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  const int32_t *doc = D.doc ? D.doc + (size_t)b * T : NULL;
  const size_t qo = (((size_t)b * T + i) * D.NH + h) * HD;
  const size_t ro = (((size_t)b * D.NH + h) * T + i) * T;
  const float *prow = P + ro;
  float *srow = dS + ro;
  for (int d = threadIdx.x; d < HD; d += blockDim.x) {
    doi[d] = __bfloat162float(dout[qo + d]);
    qi[d] = __bfloat162float(q[qo + d]);
  }
  __syncthreads();
  const int jend = D.causal ? i + 1 : T;
  for (int j = warp; j < T; j += nw) {
    float dp = 0.0f;
    if (j < jend && allowed(D, doc, i, j))
      dp = warp_dot(doi, v + (((size_t)b * T + j) * D.KVH + g) * HD, HD);
    if (lane == 0)
      srow[j] = dp; /* dP for now */
  }
  __syncthreads();
  float Dsum = 0.0f;
  for (int j = threadIdx.x; j < jend; j += blockDim.x)
    Dsum += prow[j] * srow[j];
  Dsum = block_reduce(Dsum, sh, false);
  for (int j = threadIdx.x; j < T; j += blockDim.x)
    srow[j] = prow[j] * (srow[j] - Dsum); /* P = 0 where masked, so dS = 0 there */
  __syncthreads();
  if (D.softcap > 0.0f) { /* through the cap: d(c tanh(s / c))/ds = 1 - tanh^2 */
    for (int j = warp; j < jend; j += nw) {
      if (!allowed(D, doc, i, j))
        continue; /* warp-uniform */
      const float t =
          tanhf(D.scale * warp_dot(qi, k + (((size_t)b * T + j) * D.KVH + g) * HD, HD) / D.softcap);
      if (lane == 0)
        srow[j] *= 1.0f - t * t;
    }
    __syncthreads();
  }
  for (int d = threadIdx.x; d < HD; d += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < jend; j++) {
      const float ds = srow[j];
      if (ds != 0.0f)
        acc += ds * __bfloat162float(k[(((size_t)b * T + j) * D.KVH + g) * HD + d]);
    }
    dq[qo + d] = __float2bfloat16(D.scale * acc);
  }
}

static __global__ void bwd_kv_kernel(const dims D, const bf16 *q, const bf16 *dout, const float *P,
                                     const float *dS, bf16 *dk, bf16 *dv) {
  const int j = blockIdx.x, g = blockIdx.y, b = blockIdx.z, T = D.T, HD = D.HD;
  const size_t ko = (((size_t)b * T + j) * D.KVH + g) * HD;
  const int istart = D.causal ? j : 0;
  for (int d = threadIdx.x; d < HD; d += blockDim.x) {
    float acc_k = 0.0f, acc_v = 0.0f;
    for (int h = g * D.rep; h < (g + 1) * D.rep; h++) {
      const size_t base = ((size_t)b * D.NH + h) * T * T + j;
      for (int i = istart; i < T; i++) {
        const float p = P[base + (size_t)i * T], ds = dS[base + (size_t)i * T];
        if (p == 0.0f && ds == 0.0f)
          continue;
        const size_t qo = (((size_t)b * T + i) * D.NH + h) * HD + d;
        acc_v += p * __bfloat162float(dout[qo]);
        acc_k += ds * __bfloat162float(q[qo]);
      }
    }
    dk[ko + d] = __float2bfloat16(D.scale * acc_k);
    dv[ko + d] = __float2bfloat16(acc_v);
  }
}

static dims make_dims(const fsdpc_attn_shape *s) {
  dims d;
  d.B = s->B, d.T = s->T, d.NH = s->NH, d.KVH = s->KVH, d.HD = s->HD;
  d.rep = s->NH / s->KVH, d.causal = s->causal != 0, d.scale = s->scale;
  d.doc = FSDPC_HAS_FIELD(s, fsdpc_attn_shape, doc_ids) ? s->doc_ids : NULL;
  d.window = FSDPC_HAS_FIELD(s, fsdpc_attn_shape, window) && s->window > 0 ? s->window : 0;
  d.softcap =
      FSDPC_HAS_FIELD(s, fsdpc_attn_shape, softcap) && s->softcap > 0.0f ? s->softcap : 0.0f;
  return d;
}

static int32_t launched(const char *what, char *msg, size_t cap) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess)
    return FSDPC_OK;
  snprintf(msg, cap, "attention naive: launching %s failed: %s", what, cudaGetErrorString(e));
  return FSDPC_SYSTEM_ERROR;
}

extern "C" int32_t attn_naive_cuda_forward(const fsdpc_attn_shape *s, const void *q, const void *k,
                                           const void *v, void *out, void *saved, void *stream,
                                           char *msg, size_t cap) {
  const dims d = make_dims(s);
  const dim3 grid(d.T, d.NH, d.B);
  fwd_kernel<<<grid, THREADS, 0, (cudaStream_t)stream>>>(
      d, (const bf16 *)q, (const bf16 *)k, (const bf16 *)v, (bf16 *)out, (float *)saved);
  return launched("forward", msg, cap);
}

extern "C" int32_t attn_naive_cuda_backward(const fsdpc_attn_shape *s, const void *q, const void *k,
                                            const void *v, const void *dout, const void *saved,
                                            void *dq, void *dk, void *dv, void *workspace,
                                            void *stream, char *msg, size_t cap) {
  const dims d = make_dims(s);
  cudaStream_t st = (cudaStream_t)stream;
  float *dS = (float *)workspace;
  bwd_q_kernel<<<dim3(d.T, d.NH, d.B), THREADS, 0, st>>>(d, (const bf16 *)q, (const bf16 *)k,
                                                         (const bf16 *)v, (const bf16 *)dout,
                                                         (const float *)saved, dS, (bf16 *)dq);
  int32_t r = launched("backward (dq)", msg, cap);
  if (r != FSDPC_OK)
    return r;
  bwd_kv_kernel<<<dim3(d.T, d.KVH, d.B), THREADS, 0, st>>>(
      d, (const bf16 *)q, (const bf16 *)dout, (const float *)saved, dS, (bf16 *)dk, (bf16 *)dv);
  return launched("backward (dk, dv)", msg, cap);
}
