/* NF4 blockwise quantization with double-quantized scales (quant/nf4.h says
 * the algorithm). Every product and sum is rounded to fp32 on its own (the
 * file is built with -ffp-contract=off), so the CUDA kernel and the numpy
 * reference (tests/quant/nf4_ref.py) can agree bit for bit. Large tensors
 * are quantized by an OpenMP team (the caller's team size), block by block:
 * the bytes do not depend on the team. */
#include "quant/nf4.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

/* NormalFloat4: quantiles of N(0, 1) scaled to [-1, 1], with an exact 0;
 * the values bitsandbytes' get_4bit_type("nf4") lists. */
const float fsdpc__nf4_table[FSDPC_NF4_CODES] = {
    -1.0f,
    -0.6961928009986877f,
    -0.5250730514526367f,
    -0.39491748809814453f,
    -0.28444138169288635f,
    -0.18477343022823334f,
    -0.09105003625154495f,
    0.0f,
    0.07958029955625534f,
    0.16093020141124725f,
    0.24611230194568634f,
    0.33791524171829224f,
    0.44070982933044434f,
    0.5626170039176941f,
    0.7229568362236023f,
    1.0f,
};

/* The decision thresholds of bitsandbytes' NF4 tree (dQuantizeNF4): the
 * midpoints of neighbouring table entries, as fp32 constants. A value takes
 * the code of how many of them it exceeds. */
const float fsdpc__nf4_threshold[FSDPC_NF4_CODES - 1] = {
    -0.8480964004993439f,  -0.6106329262256622f,  -0.4599952697753906f,   -0.33967943489551544f,
    -0.23460740596055984f, -0.13791173323988914f, -0.045525018125772476f, 0.03979014977812767f,
    0.1202552504837513f,   0.2035212516784668f,   0.2920137718319893f,    0.3893125355243683f,
    0.5016634166240692f,   0.6427869200706482f,   0.8614784181118011f,
};

fsdpc_status fsdpc__nf4_check_block(int64_t block_size, fsdpc_err *err) {
  for (int64_t b = 32; b <= 4096; b *= 2)
    if (block_size == b)
      return FSDPC_OK;
  return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "quantization.block_size %lld is not one bitsandbytes supports; use 32, 64 "
                     "(the default), 128, 256, 512, 1024, 2048 or 4096",
                     (long long)block_size);
}

uint64_t fsdpc__nf4_blocks(uint64_t n, int block_size) {
  return n / (uint64_t)block_size + (n % (uint64_t)block_size != 0);
}

uint64_t fsdpc__nf4_blocks2(uint64_t n, int block_size) {
  uint64_t nb = fsdpc__nf4_blocks(n, block_size);
  return nb / FSDPC_NF4_DQ_BLOCK + (nb % FSDPC_NF4_DQ_BLOCK != 0);
}

uint64_t fsdpc__nf4_bytes(uint64_t n, int block_size, int double_quant) {
  uint64_t nb = fsdpc__nf4_blocks(n, block_size);
  uint64_t scales = double_quant ? nb + 4 * fsdpc__nf4_blocks2(n, block_size) + 4 : 4 * nb;
  return (n + 1) / 2 + scales;
}

/* torch.linspace(start, end, n) in fp32 by its scalar formula: the first
 * half forward from start, the second half back from end. */
static float linspace_at(float start, float end, int n, int i) {
  float step = (end - start) / (float)(n - 1);
  if (i < n / 2)
    return start + step * (float)i;
  return end - step * (float)(n - 1 - i);
}

static int float_order(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

void fsdpc__dynamic_map(float map[FSDPC_DYN_CODES]) {
  /* Exponent e = 0..6 covers [0.1, 1] * 10^(e - 6) with 2^e fraction steps
   * (the midpoints of 2^e + 1 boundaries), each with its negative; then 0
   * and 1 make 256. The decade is a Python float that torch rounds to fp32
   * before it multiplies. */
  static const double decade[7] = {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0};
  int k = 0;
  for (int e = 0; e < 7; e++) {
    int bounds = (1 << e) + 1;
    for (int i = 0; i + 1 < bounds; i++) {
      float mid =
          (linspace_at(0.1f, 1.0f, bounds, i) + linspace_at(0.1f, 1.0f, bounds, i + 1)) / 2.0f;
      map[k++] = (float)decade[e] * mid;
      map[k++] = -(float)decade[e] * mid;
    }
  }
  map[k++] = 0.0f;
  map[k++] = 1.0f;
  qsort(map, FSDPC_DYN_CODES, sizeof *map, float_order);
}

/* bitsandbytes' 8-bit search (dQuantize, not stochastic): a binary search
 * over the 127 odd entries finds the even entry p with map[p - 1] < x <=
 * map[p + 1]; then x goes to p or to its neighbour on x's side of map[p],
 * whichever midpoint it passes strictly (so a tie stays on the even p). */
static uint8_t dyn_code(const float map[FSDPC_DYN_CODES], float x) {
  int below = 0; /* odd entries < x */
  for (int step = 64; step > 0; step /= 2)
    if (x > map[2 * (below + step) - 1])
      below += step;
  int p = 2 * below;
  if (x > map[p]) {
    float mid = (map[p + 1] + map[p]) * 0.5f;
    return (uint8_t)(x > mid ? p + 1 : p);
  }
  if (p == 0)
    return 0;
  float mid = (map[p - 1] + map[p]) * 0.5f;
  return (uint8_t)(x < mid ? p - 1 : p);
}

/* Below this many elements a tensor is quantized on the calling thread
 * (an OpenMP team costs more than it saves). */
enum { NF4_PARALLEL_MIN = 1 << 16 };

static fsdpc_status check_finite(const float *x, uint64_t n, const char *what, fsdpc_err *err) {
  uint64_t first = n; /* the first non-finite element, whichever thread finds it */
#pragma omp parallel for schedule(static) reduction(min : first) if (n >= NF4_PARALLEL_MIN)
  for (uint64_t i = 0; i < n; i++)
    if (!isfinite(x[i]) && i < first)
      first = i;
  if (first < n)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "nf4: %s element %llu is %s; only finite weights can be quantized "
                       "(check the checkpoint or the init)",
                       what ? what : "tensor", (unsigned long long)first,
                       isnan(x[first]) ? "nan" : "inf");
  return FSDPC_OK;
}

/* Quantizes one block of len elements starting at element first (even).
 * The loops are written to vectorize (the file is built with
 * -ftree-vectorize): x is finite (checked before), so the largest |x| is
 * the largest of the sign-cleared bit patterns, an integer max; each
 * threshold is counted over the whole block before the packing. */
static void nf4_block(const float *x, uint64_t first, uint64_t len, float *absmax, uint8_t *codes) {
  const float *b = x + first;
  uint32_t mbits = 0;
  for (uint64_t i = 0; i < len; i++) {
    uint32_t u;
    memcpy(&u, &b[i], 4);
    u &= 0x7fffffffu;
    mbits = u > mbits ? u : mbits;
  }
  float m;
  memcpy(&m, &mbits, 4);
  *absmax = m;
  float inv = 1.0f / m;
  float y[4096 + 2]; /* the largest block, and the odd tail's pad */
  uint8_t c[4096 + 2];
  for (uint64_t i = 0; i < len; i++)
    y[i] = b[i] * inv;
  /* Only the last block can be odd: the kernel loads the missing element
   * as 0 and quantizes it with the block's scale too. */
  uint64_t even = len + (len & 1);
  y[len] = 0.0f * inv;
  memset(c, 0, even);
  /* a code is how many thresholds its value exceeds: none for NaN (0 *
   * inf in a zero block), code 0, as bitsandbytes' tree */
  for (int t = 0; t < FSDPC_NF4_CODES - 1; t++)
    for (uint64_t i = 0; i < even; i++)
      c[i] += y[i] > fsdpc__nf4_threshold[t];
  for (uint64_t i = 0; i < even; i += 2)
    codes[(first + i) / 2] = (uint8_t)(c[i] << 4 | c[i + 1]);
}

float fsdpc__nf4_offset(const float *absmax, uint64_t nb) {
  double sum = 0.0; /* in order: the offset is this rounding, on any device */
  for (uint64_t b = 0; b < nb; b++)
    sum += absmax[b];
  return (float)(sum / (double)nb);
}

/* Double quantization of absmax[0, nb): offset, then 8-bit codes of
 * absmax - offset in blocks of 256 with their own absmax2. */
static void compress_scales(const float *absmax, uint64_t nb, uint8_t *qabsmax, float *absmax2,
                            float *offset) {
  float off = fsdpc__nf4_offset(absmax, nb);
  *offset = off;
  float map[FSDPC_DYN_CODES];
  fsdpc__dynamic_map(map);
  /* each block of 256 scales on its own: any team gives the same bytes */
  uint64_t nb2 = nb / FSDPC_NF4_DQ_BLOCK + (nb % FSDPC_NF4_DQ_BLOCK != 0);
#pragma omp parallel for schedule(static) if (nb >= NF4_PARALLEL_MIN / FSDPC_NF4_DQ_BLOCK)
  for (uint64_t k = 0; k < nb2; k++) {
    uint64_t b0 = k * FSDPC_NF4_DQ_BLOCK;
    uint64_t len = nb - b0 < FSDPC_NF4_DQ_BLOCK ? nb - b0 : FSDPC_NF4_DQ_BLOCK;
    float m = 0.0f;
    for (uint64_t i = 0; i < len; i++)
      m = fmaxf(m, fabsf(absmax[b0 + i] - off));
    absmax2[b0 / FSDPC_NF4_DQ_BLOCK] = m;
    float inv = 1.0f / m;
    for (uint64_t i = 0; i < len; i++)
      qabsmax[b0 + i] = dyn_code(map, (absmax[b0 + i] - off) * inv);
  }
}

fsdpc_status fsdpc__nf4_quantize(const float *x, fsdpc_nf4 *q, const char *what, fsdpc_err *err) {
  FSDPC_TRY(fsdpc__nf4_check_block(q->block_size, err));
  if (q->n == 0)
    return FSDPC_OK;
  if (!x || !q->codes || !q->absmax || (q->double_quant && (!q->qabsmax || !q->absmax2)))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "nf4: quantizing %s without its buffers",
                       what ? what : "a tensor");
  FSDPC_TRY(check_finite(x, q->n, what, err));
  uint64_t bs = (uint64_t)q->block_size, nb = fsdpc__nf4_blocks(q->n, q->block_size);
  /* blocks are independent (their own absmax, whole code bytes: a block
   * size is even), so a team of threads writes what one thread would */
#pragma omp parallel for schedule(static) if (q->n >= NF4_PARALLEL_MIN)
  for (uint64_t b = 0; b < nb; b++) {
    uint64_t len = b + 1 < nb ? bs : q->n - b * bs;
    nf4_block(x, b * bs, len, &q->absmax[b], q->codes);
  }
  q->offset = 0.0f;
  if (q->double_quant)
    compress_scales(q->absmax, nb, q->qabsmax, q->absmax2, &q->offset);
  return FSDPC_OK;
}

float fsdpc__nf4_scale(const fsdpc_nf4 *q, const float map[FSDPC_DYN_CODES], uint64_t b) {
  if (!q->double_quant)
    return q->absmax[b];
  float s = map[q->qabsmax[b]] * q->absmax2[b / FSDPC_NF4_DQ_BLOCK];
  return s + q->offset;
}

fsdpc_status fsdpc__nf4_dequantize(const fsdpc_nf4 *q, const float map[FSDPC_DYN_CODES],
                                   uint64_t first, uint64_t count, float *out, fsdpc_err *err) {
  if (first > q->n || count > q->n - first)
    return fsdpc__fail(
        err, FSDPC_INVALID_USAGE, "nf4: elements [%llu, %llu) are outside the tensor's %llu",
        (unsigned long long)first, (unsigned long long)(first + count), (unsigned long long)q->n);
  uint64_t bs = (uint64_t)q->block_size;
  for (uint64_t i = first; i < first + count;) {
    uint64_t b = i / bs, end = (b + 1) * bs < first + count ? (b + 1) * bs : first + count;
    float s = fsdpc__nf4_scale(q, map, b);
    for (; i < end; i++) {
      uint8_t byte = q->codes[i / 2];
      out[i - first] = fsdpc__nf4_table[i & 1 ? byte & 15 : byte >> 4] * s;
    }
  }
  return FSDPC_OK;
}
