/* NF4: bitsandbytes' 4-bit NormalFloat blockwise quantization (QLoRA, Dettmers
 * et al. 2023), with its double quantization of the per-block scales. Written
 * from the algorithm of bitsandbytes 0.50.2.dev0 (functional.quantize_4bit,
 * quantize_blockwise and the CUDA kernels kQuantizeBlockwise /
 * kDequantizeBlockwise), the numbers of the CUDA kernels in IEEE fp32:
 *
 * - A flat tensor of n elements is cut into blocks of block_size (the last
 *   one may be short). absmax[b] = max |x| over block b; inv = 1.0f /
 *   absmax[b] (IEEE fp32; inf for a zero block); each element's code is the
 *   number of the 15 NF4 decision thresholds t with x * inv > t (a NaN
 *   product, 0 * inf in a zero block, gives code 0, as the kernel's tree).
 * - Codes are packed two a byte, element 2i in the high nibble, 2i + 1 in the
 *   low one; an odd n pads the last low nibble with the code of 0 * inv.
 * - Dequantization: x' = NF4[code] * absmax[b] in fp32.
 * - Double quantization (bitsandbytes' compress_statistics): offset = the
 *   mean of absmax; absmax - offset is quantized with the signed 8-bit
 *   dynamic map in blocks of FSDPC_NF4_DQ_BLOCK, each with its own fp32
 *   absmax2 (code: the map's nearest entry by bitsandbytes' binary search,
 *   a tie to the even index); the scale used to dequantize is then
 *   map[qabsmax[b]] * absmax2[b / 256] + offset (fp32, two roundings).
 *
 * Where fsdpc's numbers can differ from a bitsandbytes CUDA build: that
 * build uses --use_fast_math (an approximate reciprocal, denormals flushed),
 * so a product within an ulp of a threshold, or a denormal, may take the
 * neighbouring code there; and fsdpc's offset is the fp32 rounding of the
 * exact-order double sum / n, where torch's fp32 mean sums in its own order
 * (the offset is stored, so dequantization is exact either way). Non-finite
 * inputs are refused (bitsandbytes quantizes them silently). */
#ifndef FSDPC_QUANT_NF4_H
#define FSDPC_QUANT_NF4_H

#include <stdint.h>

#include "fsdpc/fsdpc.h"

enum { FSDPC_NF4_DQ_BLOCK = 256, FSDPC_NF4_CODES = 16, FSDPC_DYN_CODES = 256 };

/* One quantized tensor. The caller owns every buffer and sizes it with the
 * helpers below; absmax is needed by quantize in both modes (with
 * double_quant it holds the fp32 scales before compression, which
 * dequantization does not read). */
typedef struct fsdpc_nf4 {
  uint64_t n;       /* elements */
  int block_size;   /* 32, 64, ..., 4096 */
  int double_quant; /* 1: scales as qabsmax + absmax2 + offset */
  uint8_t *codes;   /* (n + 1) / 2 bytes */
  float *absmax;    /* blocks */
  uint8_t *qabsmax; /* blocks (double_quant) */
  float *absmax2;   /* ceil(blocks / 256) (double_quant) */
  float offset;     /* double_quant */
} fsdpc_nf4;

/* The code table (NF4[0] = -1, NF4[7] = 0, NF4[15] = 1). */
extern const float fsdpc__nf4_table[FSDPC_NF4_CODES];

/* The 15 decision thresholds, ascending (the midpoints of neighbouring
 * table entries as fp32 constants): a code is how many of them x * inv
 * exceeds. */
extern const float fsdpc__nf4_threshold[FSDPC_NF4_CODES - 1];
/* Double quantization's offset: the mean of absmax[0, nb), the fp32
 * rounding of the in-order double sum / nb (the CUDA quantizer calls it on
 * the host too). */
float fsdpc__nf4_offset(const float *absmax, uint64_t nb);

/* Block sizes bitsandbytes' quantize_4bit accepts; an error names them. */
fsdpc_status fsdpc__nf4_check_block(int64_t block_size, fsdpc_err *err);
uint64_t fsdpc__nf4_blocks(uint64_t n, int block_size);
uint64_t fsdpc__nf4_blocks2(uint64_t n, int block_size); /* absmax2 entries */
/* Bytes a quantized tensor keeps resident (codes and scales, the offset
 * included): what the planner counts for a frozen base parameter. */
uint64_t fsdpc__nf4_bytes(uint64_t n, int block_size, int double_quant);

/* The signed 8-bit dynamic map (bitsandbytes' create_dynamic_map(signed=True)),
 * ascending, with linspace's scalar fp32 formula. torch's vectorised CPU
 * linspace differs from it by up to 2 ulp in some entries (tests/gpu/
 * check_q8_maps.py on the GPU host), so bitsandbytes' own map depends on the
 * machine; it saves the map with the weights (nested_quant_map), and
 * dequantization takes whichever map the weights were made with. */
void fsdpc__dynamic_map(float map[FSDPC_DYN_CODES]);

/* Quantizes x[0, q->n) into *q (n, block_size, double_quant and buffers set
 * by the caller). what names the tensor in errors; a non-finite element is
 * refused with its index. */
fsdpc_status fsdpc__nf4_quantize(const float *x, fsdpc_nf4 *q, const char *what, fsdpc_err *err);
/* The fp32 scale that dequantizes block b. */
float fsdpc__nf4_scale(const fsdpc_nf4 *q, const float map[FSDPC_DYN_CODES], uint64_t b);
/* Elements [first, first + count) of the dequantized tensor into out (a
 * rank's shard, a unit's projection); map: fsdpc__dynamic_map's table. */
fsdpc_status fsdpc__nf4_dequantize(const fsdpc_nf4 *q, const float map[FSDPC_DYN_CODES],
                                   uint64_t first, uint64_t count, float *out, fsdpc_err *err);

#endif
