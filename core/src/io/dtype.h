/* Conversions between fp32 and the 16-bit float formats found in checkpoints.
 *
 * bf16 is the top half of an fp32; f16 is IEEE binary16. Narrowing rounds to
 * nearest, ties to even, like PyTorch's .to(torch.bfloat16), and keeps NaN a
 * (quiet) NaN with its sign instead of letting rounding turn it into inf.
 * Header-only so that the core, the CUDA host code and the tests share one
 * definition; every function is a pure bit manipulation. */
#ifndef FSDPC_IO_DTYPE_H
#define FSDPC_IO_DTYPE_H

#include <stdint.h>
#include <string.h>

static inline uint32_t fsdpc__f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float fsdpc__f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline float fsdpc__bf16_to_f32(uint16_t h) {
  return fsdpc__f32_from_bits((uint32_t)h << 16);
}

static inline uint16_t fsdpc__f32_to_bf16(float f) {
  uint32_t u = fsdpc__f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    /* NaN: keep sign and top payload bits, force the quiet bit so that a
     * payload living only in the low half does not truncate to inf. */
    return (uint16_t)((u >> 16) | 0x0040u);
  }
  /* Adding 0x7fff plus the lowest kept bit rounds to nearest, ties to even;
   * values past the largest bf16 round to inf as IEEE requires. */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static inline float fsdpc__f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1fu)
    return fsdpc__f32_from_bits(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    if (man == 0)
      return fsdpc__f32_from_bits(sign);
    /* Subnormal: man * 2^-24, exact in fp32. */
    float v = (float)man * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return fsdpc__f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t fsdpc__f32_to_f16(float f) {
  uint32_t u = fsdpc__f32_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u)
    return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u)
    return (uint16_t)(sign | 0x7c00u); /* >= 65520: inf */
  if (a < 0x38800000u) {
    /* Result is subnormal (or zero): scale so that one f16 ulp (2^-24) is
     * one unit, then round to nearest even by hand. */
    if (a < 0x33000000u)
      return sign; /* < 2^-25: rounds to zero */
    uint32_t e = a >> 23;
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e; /* m * 2^(e-150) / 2^-24 = m >> (126 - e) */
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u)))
      q++;
    return (uint16_t)(sign | q);
  }
  /* Normal: rebias the exponent, then round the 13 dropped bits to even. A
   * carry out of the mantissa correctly bumps the exponent. */
  uint32_t r = a - 0x38000000u;
  r += 0xfffu + ((r >> 13) & 1u);
  return (uint16_t)(sign | (r >> 13));
}

/* Bulk forms: dst and src do not overlap. */
static inline void fsdpc__bf16_to_f32_n(const uint16_t *src, float *dst, uint64_t n) {
  for (uint64_t i = 0; i < n; i++)
    dst[i] = fsdpc__bf16_to_f32(src[i]);
}

static inline void fsdpc__f16_to_f32_n(const uint16_t *src, float *dst, uint64_t n) {
  for (uint64_t i = 0; i < n; i++)
    dst[i] = fsdpc__f16_to_f32(src[i]);
}

static inline void fsdpc__f32_to_bf16_n(const float *src, uint16_t *dst, uint64_t n) {
  for (uint64_t i = 0; i < n; i++)
    dst[i] = fsdpc__f32_to_bf16(src[i]);
}

static inline void fsdpc__f32_to_f16_n(const float *src, uint16_t *dst, uint64_t n) {
  for (uint64_t i = 0; i < n; i++)
    dst[i] = fsdpc__f32_to_f16(src[i]);
}

#endif
