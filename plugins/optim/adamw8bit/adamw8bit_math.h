/* Internal to the adamw8bit plugin: the one per-element definition shared by
 * the CPU loop (adamw8bit.c) and the CUDA kernel (adamw8bit.cu), the
 * quantization maps, and the CUDA entry points.
 *
 * The scheme is bitsandbytes' 8-bit blockwise AdamW (Dettmers et al., "8-bit
 * Optimizers via Block-wise Quantization"), written from its documentation:
 *
 * - Each moment is stored as one byte per element, an index into a sorted
 *   table of 256 fp32 values in [-1, 1] (exp_avg: the signed dynamic map) or
 *   [0, 1] (exp_avg_sq: the unsigned dynamic map), and one fp32 scale per
 *   block of Q8_BLOCK elements: the block's absolute maximum.
 * - dequantize: value = map[code] * absmax.
 * - quantize: code = the entry of map nearest to value / absmax (an exact
 *   tie goes to the even index, as bitsandbytes' binary search does); for
 *   exp_avg a code whose sign differs from the value's moves one entry
 *   toward the value's sign, so that the sign survives quantization.
 * - A step per block: dequantize both moments, update them in fp32, take
 *   each block's new absmax, update the parameter from the fp32 moments,
 *   then quantize the moments with the new absmax.
 *
 * The dynamic map (bitsandbytes' create_dynamic_map with 7 exponent bits):
 * for i = 0..6, the midpoints of linspace(0.1, 1, n_i) (n_i = 2^i + 1 signed,
 * 2^(i+1) + 1 unsigned) times 10^(i-6), with their negatives when signed;
 * then 0 and 1; sorted ascending: 127 negatives, 0 at index 127 and the
 * positives up to 1.0 at index 255 (signed); 0 at index 0 and 1.0 at 255
 * (unsigned). Values are formed in fp32 as torch forms them.
 *
 * Where fsdpc differs (docs/optim.md): a block whose absmax is 0 quantizes
 * value / absmax as 0 (bitsandbytes divides 0 by 0; either dequantizes to 0);
 * the division is IEEE (bitsandbytes uses the fast __fdividef); a non-finite
 * gradient is not skipped (the engine refuses a non-finite gradient norm).
 */
#ifndef FSDPC_PLUGIN_ADAMW8BIT_MATH_H
#define FSDPC_PLUGIN_ADAMW8BIT_MATH_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fsdpc/plugin.h"

#ifdef __CUDACC__
#define Q8_FN static __host__ __device__ inline
#else
#define Q8_FN static inline
#endif

/* Elements per scale: bitsandbytes' block for its 2-state blockwise
 * optimizers. A CUDA thread block of 256 threads owns one block. */
#define Q8_BLOCK 256
#define Q8_CODES 256
#define Q8_MIN_8BIT_DEFAULT 4096

#ifdef __cplusplus
extern "C" {
#endif

/* Per-step scalars, rounded to fp32 once on the host. */
typedef struct q8_scalars {
  float grad_scale;
  float beta1, w1;    /* b1 and 1 - b1 */
  float beta2, w2;    /* b2 and 1 - b2 */
  float step_size;    /* -lr * sqrt(1 - b2^t) / (1 - b1^t) */
  float eps_c2;       /* eps * sqrt(1 - b2^t) */
  float decay_factor; /* 1 - lr*wd */
} q8_scalars;

/* The per-element arithmetic, written once: for a float here and in the
 * CUDA kernel, and for a whole SIMD register (GCC vector types, whose
 * operators take a scalar operand too) in the CPU's vector kernels
 * (adamw8bit_cpu.h); SQRT is the type's IEEE square root. Every operation
 * rounds alike in each form (no FMA contraction: see CMakeLists.txt).
 *
 * The moments' update: g scaled first, then v and m as bitsandbytes orders
 * them (v*b2 + ((1-b2)*g)*g, m*b1 + (1-b1)*g). */
#define Q8_MOMENTS(gi, g, m, v, sc, m_out, v_out)                                                  \
  do {                                                                                             \
    (gi) = (g) * (sc)->grad_scale;                                                                 \
    (v_out) = (v) * (sc)->beta2 + ((sc)->w2 * (gi)) * (gi);                                        \
    (m_out) = (m) * (sc)->beta1 + (sc)->w1 * (gi);                                                 \
  } while (0)

/* The parameter's update from the new fp32 moments; weight decay after it
 * (p * (1 - lr*wd)), as bitsandbytes applies it. */
#define Q8_PARAM(p, m, v, sc, decay, SQRT)                                                         \
  do {                                                                                             \
    (p) = (p) + (sc)->step_size * ((m) / (SQRT(v) + (sc)->eps_c2));                                \
    if (decay)                                                                                     \
      (p) = (p) * (sc)->decay_factor;                                                              \
  } while (0)

Q8_FN void q8_moments(float g, float m, float v, const q8_scalars *sc, float *m_out, float *v_out) {
  float gi;
  Q8_MOMENTS(gi, g, m, v, sc, *m_out, *v_out);
}

Q8_FN float q8_param(float p, float m, float v, const q8_scalars *sc, int decay) {
  Q8_PARAM(p, m, v, sc, decay, sqrtf);
  return p;
}

/* Index of the entry of the sorted map nearest to x, by a binary search over
 * 7 halvings from index 127; `bottom` is the map's lower end (-1 or 0). */
Q8_FN int q8_nearest(const float *map, float x, float bottom) {
  int pivot = 127, below = 0, above = 255;
  float lo = bottom, hi = 1.0f, at = map[127];
  for (int half = 64; half > 0; half >>= 1) {
    if (x > at) {
      below = pivot;
      lo = at;
      pivot += half;
    } else {
      above = pivot;
      hi = at;
      pivot -= half;
    }
    at = map[pivot];
  }
  if (x > at)
    return x > (hi + at) * 0.5f ? above : pivot;
  return x < (lo + at) * 0.5f ? below : pivot;
}

Q8_FN float q8_dequant(const float *map, uint8_t code, float absmax) {
  return map[code] * absmax;
}

/* The sign rule for exp_avg: a code whose sign differs from the value's
 * moves one entry toward the value's sign. */
Q8_FN uint8_t q8_sign_fix(const float *map, int c, float s) {
  if (!signbit(map[c]) != !signbit(s))
    c += s > 0.0f ? 1 : -1;
  return (uint8_t)c;
}

/* exp_avg: signed map, the code keeps the value's sign. */
Q8_FN uint8_t q8_quant_signed(const float *map, float s, float absmax) {
  const float x = absmax > 0.0f ? s / absmax : 0.0f;
  return q8_sign_fix(map, q8_nearest(map, x, -1.0f), s);
}

/* exp_avg_sq: unsigned map (values are >= 0). */
Q8_FN uint8_t q8_quant_unsigned(const float *map, float s, float absmax) {
  const float x = absmax > 0.0f ? s / absmax : 0.0f;
  return (uint8_t)q8_nearest(map, x, 0.0f);
}

/* Element j of a tensor with block phase ph is in block (ph + j) / Q8_BLOCK;
 * block b covers the tensor's elements [q8_lo(b), q8_hi(b)). */
Q8_FN uint64_t q8_n_blocks(uint64_t numel, uint64_t phase) {
  return numel ? (phase + numel + Q8_BLOCK - 1) / Q8_BLOCK : 0;
}
Q8_FN uint64_t q8_block_lo(uint64_t b, uint64_t phase) {
  return b * Q8_BLOCK > phase ? b * Q8_BLOCK - phase : 0;
}
Q8_FN uint64_t q8_block_hi(uint64_t b, uint64_t phase, uint64_t numel) {
  const uint64_t e = (b + 1) * Q8_BLOCK - phase;
  return e < numel ? e : numel;
}

#ifndef __CUDACC__
/* The CPU's faster route to q8_nearest's answer (the binary search's
 * branches mispredict about half the time): a table indexed by the sign, the
 * exponent (2^-24 <= |x| < 1) and the top 6 mantissa bits of x gives how
 * many map entries lie below the bucket; a bucket holds at most 2 entries,
 * so two steps find j with map[j] < x <= map[j+1]; the binary search's last
 * comparison then decides between j and j+1 (its pivot is always the even
 * one of the two, so an exact tie goes to the even index). Other x (zero,
 * tiny, +-1) go through q8_nearest. Equal to q8_nearest for every float of
 * [-2, 2] (checked exhaustively, 2.2e9 values per map), and tested on every
 * entry, every midpoint and a sample in tests/optim. */
#define Q8_FAST_EXP_MIN (127 - 24)
#define Q8_FAST_EXPS 24
#define Q8_FAST_KEYS (2 * Q8_FAST_EXPS * 64)

typedef struct q8_fastmap {
  uint8_t below[Q8_FAST_KEYS]; /* entries below the bucket's smallest value */
} q8_fastmap;

static inline uint32_t q8_bits(float x) {
  uint32_t b;
  memcpy(&b, &x, sizeof b);
  return b;
}

static inline int q8_fast_key(uint32_t b) {
  const uint32_t e = (b >> 23) & 0xFFu;
  if (e < Q8_FAST_EXP_MIN || e >= Q8_FAST_EXP_MIN + Q8_FAST_EXPS)
    return -1;
  return (int)((((b >> 31) * Q8_FAST_EXPS + (e - Q8_FAST_EXP_MIN)) << 6) | ((b >> 17) & 63u));
}

static inline void q8_fastmap_build(const float *map, q8_fastmap *fm) {
  for (uint32_t sign = 0; sign < 2; sign++)
    for (uint32_t e = Q8_FAST_EXP_MIN; e < Q8_FAST_EXP_MIN + Q8_FAST_EXPS; e++)
      for (uint32_t m = 0; m < 64; m++) {
        /* the bucket's smallest value: least magnitude when positive,
         * greatest when negative */
        const uint32_t b = (sign << 31) | (e << 23) | (m << 17) | (sign ? 0x1FFFFu : 0u);
        float lo;
        memcpy(&lo, &b, sizeof lo);
        int n = 0;
        while (n < Q8_CODES && map[n] < lo)
          n++;
        fm->below[q8_fast_key(b)] = (uint8_t)(n > 255 ? 255 : n);
      }
}

static inline int q8_nearest_fast(const float *map, const q8_fastmap *fm, float x, float bottom) {
  const int key = q8_fast_key(q8_bits(x));
  if (key < 0)
    return q8_nearest(map, x, bottom);
  /* map[j] < the bucket's smallest value <= x < 1 = map[255]: j <= 253 */
  int j = (int)fm->below[key] - 1;
  j += map[j + 1] < x;
  j += map[j + 1] < x;
  if (j < 0)
    return 0;
  const float mid = (map[j] + map[j + 1]) * 0.5f;
  /* even j: the pivot is j, x > map[pivot], j + 1 when x > mid; odd j: the
   * pivot is j + 1, x <= map[pivot], j + 1 unless x < mid. So a tie goes to
   * the odd j + 1 only when j is odd: the even index wins. Arithmetic, not
   * a branch (which would mispredict half the time). */
  return j + ((x > mid) | ((x == mid) & (j & 1)));
}

/* torch.linspace(start, end, n) in fp32 as its scalar CPU loop forms it:
 * the first half from start, the second half back from end. */
static inline void q8_linspace(float start, float end, int n, float *out) {
  const float step = (end - start) / (float)(n - 1);
  for (int i = 0; i < n; i++)
    out[i] = i < n / 2 ? start + step * (float)i : end - step * (float)(n - 1 - i);
}

static int q8_cmp(const void *a, const void *b) {
  const float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* The dynamic map: signed (exp_avg) or unsigned (exp_avg_sq). */
static inline void q8_dynamic_map(int is_signed, float map[Q8_CODES]) {
  static const float pow10[7] = {1e-6f, 1e-5f, 1e-4f, 1e-3f, 1e-2f, 1e-1f, 1.0f};
  float b[130];
  int n = 0;
  for (int i = 0; i < 7; i++) {
    const int items = is_signed ? (1 << i) + 1 : (1 << (i + 1)) + 1;
    q8_linspace(0.1f, 1.0f, items, b);
    for (int k = 0; k + 1 < items; k++) {
      const float mean = (b[k] + b[k + 1]) / 2.0f;
      map[n++] = pow10[i] * mean;
      if (is_signed)
        map[n++] = -pow10[i] * mean;
    }
  }
  map[n++] = 0.0f;
  map[n++] = 1.0f;
  qsort(map, (size_t)n, sizeof *map, q8_cmp);
}
#endif

#ifdef FSDPC_WITH_CUDA
/* Enqueues the update of every tensor on stream (a cudaStream_t); pointers
 * are device memory; maps (2 x 256 floats: signed, unsigned) too. On failure
 * writes one line into msg and returns a status. */
int32_t adamw8bit_cuda_step(const fsdpc_optim_tensor *t, uint32_t n_tensors, const q8_scalars *sc,
                            const float *maps, void *stream, char *msg, size_t cap);
/* Copies the two maps to a new device buffer (*out). */
int32_t adamw8bit_cuda_maps(const float *host_maps, float **out, char *msg, size_t cap);
void adamw8bit_cuda_free(float *p);
int32_t adamw8bit_cuda_zero(float *state, uint64_t n_floats, void *stream, char *msg, size_t cap);
#endif

#ifdef __cplusplus
}
#endif
#endif
