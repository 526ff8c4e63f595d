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
  if (dq)
    memcpy(t.map, map, sizeof t.map);
  else
    memset(t.map, 0, sizeof t.map);
  uint64_t bytes = (n + 1) / 2, threads = 256, blocks = (bytes + threads - 1) / threads;
  nf4_dequant_kernel<<<(unsigned)blocks, (unsigned)threads, 0,
                       fsdpc__cuda_stream_or(ctx, stream)>>>((bf16 *)out, codes, qabsmax, scales,
                                                             offset, n, block, dq, t);
  FSDPC_CUDA_LAUNCHED(err, "nf4_dequant");
  return FSDPC_OK;
}
