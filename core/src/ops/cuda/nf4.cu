/* NF4 dequantization on the device (issue 37): one quantized tensor's codes
 * and scales (quant/nf4.h's layout, as inside an NF4 unit's image,
 * fsdp/nf4_unit.h) into bf16, the twin of fsdpc__nf4_dequantize followed by
 * the round-to-nearest-even bf16 cast: the same fp32 products, each rounded
 * on its own (no FMA), so the result is the CPU's bit for bit. */
#include "ops/cuda/cuda_internal.cuh"

#include <string.h>

extern "C" { /* the C module's table, unmangled */
#include "quant/nf4.h"
}

/* Codes and the 256-entry map of double quantization, by value: a
 * kernel's parameters (1.1 KiB) are under the 4 KiB limit. */
typedef struct nf4_tables {
  float nf4[FSDPC_NF4_CODES];
  float map[FSDPC_DYN_CODES];
} nf4_tables;

/* The kernels' copy of the 8-bit map (zeros without double quantization). */
static void set_map(float dst[FSDPC_DYN_CODES], const float *map, int dq) {
  if (dq)
    memcpy(dst, map, FSDPC_DYN_CODES * sizeof(float));
  else
    memset(dst, 0, FSDPC_DYN_CODES * sizeof(float));
}

/* A little-endian fp32 at any byte offset (the image packs scales after
 * codes of any length). */
__device__ static float load_f32(const uint8_t *p) {
  uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
  return __uint_as_float(u);
}

/* One thread per byte of codes: elements 2i (high nibble) and 2i + 1. */
__global__ static void nf4_dequant_kernel(bf16 *out, const uint8_t *codes, const uint8_t *qabsmax,
                                          const uint8_t *scales, const uint8_t *offset_p,
                                          uint64_t n, int block, int dq, nf4_tables t) {
  uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (2 * i >= n)
    return;
  uint8_t c = codes[i];
  float offset = dq ? load_f32(offset_p) : 0.0f;
  for (int k = 0; k < 2 && 2 * i + k < n; k++) {
    uint64_t e = 2 * i + (uint64_t)k, b = e / (uint64_t)block;
    float s = dq ? __fadd_rn(__fmul_rn(t.map[qabsmax[b]], load_f32(scales + 4 * (b / 256))), offset)
                 : load_f32(scales + 4 * b);
    out[e] = __float2bfloat16_rn(__fmul_rn(t.nf4[k ? c & 15 : c >> 4], s));
  }
}

extern "C" fsdpc_status fsdpc__cuda_nf4_dequant(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *out,
                                                const uint8_t *codes, const uint8_t *qabsmax,
                                                const uint8_t *scales, const uint8_t *offset,
                                                uint64_t n, int block, int dq, const float *map,
                                                void *stream, fsdpc_err *err) {
  if (n == 0)
    return FSDPC_OK;
  if (block < 32 || (dq && (!qabsmax || !map || !offset)) || !codes || !scales)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "cuda nf4_dequant: bad arguments (block %d)",
                       block);
  nf4_tables t;
  memcpy(t.nf4, fsdpc__nf4_table, sizeof t.nf4);
  set_map(t.map, map, dq);
  uint64_t bytes = (n + 1) / 2, threads = 256, blocks = (bytes + threads - 1) / threads;
  nf4_dequant_kernel<<<(unsigned)blocks, (unsigned)threads, 0,
                       fsdpc__cuda_stream_or(ctx, stream)>>>((bf16 *)out, codes, qabsmax, scales,
                                                             offset, n, block, dq, t);
  FSDPC_CUDA_LAUNCHED(err, "nf4_dequant");
  return FSDPC_OK;
}

/* ---- quantization (the twin of fsdpc__nf4_quantize) ---- */

/* The thresholds and the map, by value (1.1 KiB of parameters). */
typedef struct nf4_qtables {
  float thr[FSDPC_NF4_CODES - 1];
  float map[FSDPC_DYN_CODES];
} nf4_qtables;

/* |x| as the largest sign-cleared bit pattern: finite x, so the integer max
 * is fmaxf's over |x| (quant/nf4.c does the same). */
__device__ static unsigned abs_bits(float x) {
  return __float_as_uint(x) & 0x7fffffffu;
}

__device__ static uint8_t nf4_code_dev(float y, const float *thr) {
  int c = 0;
  for (int t = 0; t < FSDPC_NF4_CODES - 1; t++)
    c += y > thr[t]; /* false for NaN: code 0 */
  return (uint8_t)c;
}

/* One CTA per quantization block: its absmax (an exact max, any order),
 * then one thread per code byte; the odd tail's missing element is 0 *
 * inv, as the CPU's. */
__global__ static void nf4_quant_kernel(uint8_t *codes, float *absmax, const float *x, uint64_t n,
                                        int block, nf4_qtables t) {
  __shared__ unsigned m_bits;
  uint64_t first = (uint64_t)blockIdx.x * (uint64_t)block;
  uint64_t len = n - first < (uint64_t)block ? n - first : (uint64_t)block;
  if (threadIdx.x == 0)
    m_bits = 0;
  __syncthreads();
  unsigned mine = 0;
  for (uint64_t i = threadIdx.x; i < len; i += blockDim.x)
    mine = max(mine, abs_bits(x[first + i]));
  atomicMax(&m_bits, mine);
  __syncthreads();
  float m = __uint_as_float(m_bits);
  if (threadIdx.x == 0)
    absmax[blockIdx.x] = m;
  float inv = __fdiv_rn(1.0f, m);
  for (uint64_t j = threadIdx.x; 2 * j < len; j += blockDim.x) {
    uint64_t e = first + 2 * j;
    uint8_t hi = nf4_code_dev(__fmul_rn(x[e], inv), t.thr);
    uint8_t lo = nf4_code_dev(__fmul_rn(2 * j + 1 < len ? x[e + 1] : 0.0f, inv), t.thr);
    codes[e / 2] = (uint8_t)(hi << 4 | lo);
  }
}

/* quant/nf4.c's dyn_code: bitsandbytes' search of the signed 8-bit map. */
__device__ static uint8_t dyn_code_dev(const float *map, float x) {
  int below = 0;
  for (int step = 64; step > 0; step /= 2)
    if (x > map[2 * (below + step) - 1])
      below += step;
  int p = 2 * below;
  if (x > map[p]) {
    float mid = __fmul_rn(__fadd_rn(map[p + 1], map[p]), 0.5f);
    return (uint8_t)(x > mid ? p + 1 : p);
  }
  if (p == 0)
    return 0;
  float mid = __fmul_rn(__fadd_rn(map[p - 1], map[p]), 0.5f);
  return (uint8_t)(x < mid ? p - 1 : p);
}

/* One CTA of 256 threads per 256 scales: absmax - offset, its absmax2 and
 * the 8-bit codes. */
__global__ static void nf4_dq_kernel(uint8_t *qabsmax, float *absmax2, const float *absmax,
                                     uint64_t nb, float off, nf4_qtables t) {
  __shared__ unsigned m_bits;
  uint64_t b = (uint64_t)blockIdx.x * FSDPC_NF4_DQ_BLOCK + threadIdx.x;
  if (threadIdx.x == 0)
    m_bits = 0;
  __syncthreads();
  float d = b < nb ? __fsub_rn(absmax[b], off) : 0.0f;
  atomicMax(&m_bits, b < nb ? abs_bits(d) : 0u);
  __syncthreads();
  float m = __uint_as_float(m_bits);
  if (threadIdx.x == 0)
    absmax2[blockIdx.x] = m;
  if (b < nb)
    qabsmax[b] = dyn_code_dev(t.map, __fmul_rn(d, __fdiv_rn(1.0f, m)));
}

extern "C" fsdpc_status fsdpc__cuda_nf4_quant(fsdpc_cuda_ctx *ctx, uint8_t *codes, float *absmax,
                                              uint8_t *qabsmax, float *absmax2, float *offset,
                                              const float *x, uint64_t n, int block, int dq,
                                              const float *map, void *stream, fsdpc_err *err) {
  *offset = 0.0f;
  if (n == 0)
    return FSDPC_OK;
  uint64_t nb = fsdpc__nf4_blocks(n, block), nb2 = fsdpc__nf4_blocks2(n, block);
  if (fsdpc__nf4_check_block(block, err) != FSDPC_OK || !codes || !absmax || !x ||
      (dq && (!qabsmax || !absmax2 || !map)) || nb > 0x7fffffffu)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                       "cuda nf4_quant: bad arguments (n %llu, block %d, dq %d)",
                       (unsigned long long)n, block, dq);
  cudaStream_t s = fsdpc__cuda_stream_or(ctx, stream);
  nf4_qtables t;
  memcpy(t.thr, fsdpc__nf4_threshold, sizeof t.thr);
  set_map(t.map, map, dq);
  /* finiteness is the caller's: the engine quantizes its own init or a
   * checked load; a non-finite x gives the codes of its bit pattern */
  nf4_quant_kernel<<<(unsigned)nb, 256, 0, s>>>(codes, absmax, x, n, block, t);
  FSDPC_CUDA_LAUNCHED(err, "nf4_quant");
  if (!dq)
    return FSDPC_OK;
  /* the offset: the CPU's in-order double sum, on the host */
  float *h = (float *)malloc(nb * sizeof(float));
  if (!h)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cuda nf4_quant: out of host memory (%llu scales)",
                       (unsigned long long)nb);
  cudaError_t ce = cudaMemcpyAsync(h, absmax, nb * sizeof(float), cudaMemcpyDeviceToHost, s);
  if (ce == cudaSuccess)
    ce = cudaStreamSynchronize(s);
  if (ce != cudaSuccess) {
    free(h);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cuda nf4_quant: reading the scales: %s",
                       cudaGetErrorString(ce));
  }
  *offset = fsdpc__nf4_offset(h, nb);
  free(h);
  nf4_dq_kernel<<<(unsigned)nb2, FSDPC_NF4_DQ_BLOCK, 0, s>>>(qabsmax, absmax2, absmax, nb, *offset,
                                                             t);
  FSDPC_CUDA_LAUNCHED(err, "nf4_dq");
  return FSDPC_OK;
}
