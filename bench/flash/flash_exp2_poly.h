/* The polynomial exp2 of the sandbox's software-exp2 variant (exp2_fma in
 * flash_exp2.cuh): its constants, and a host copy of the same steps that
 * tests/flash/test_flash_exp2.c checks against exp2. Plain C (no CUDA). */
#ifndef FSDPC_FLASH_EXP2_POLY_H
#define FSDPC_FLASH_EXP2_POLY_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* p(f) = 1 + f (C1 + f (C2 + f C3)) ~ 2^f on [-0.5, 0.5], minimax for the
 * relative error with p(0) = 1 (at most 1.02e-4). */
#define FLASH_EXP2P_C1 0.69328204f
#define FLASH_EXP2P_C2 0.24221414f
#define FLASH_EXP2P_C3 0.05502035f
/* 1.5 * 2^23: x + this, rounded to nearest, holds rint(x) in its low
 * mantissa bits (|x| < 2^22). */
#define FLASH_EXP2P_MAGIC 12582912.0f

/* Host copy of exp2_fma: x clamped to -127 (-inf gives exactly 0),
 * n = rint(x), 2^(x - n) by the polynomial, n added to the exponent bits.
 * x must be < 127. */
static inline float flash_exp2_poly_host(float x) {
  x = fmaxf(x, -127.0f);
  const float t = x + FLASH_EXP2P_MAGIC;
  const float f = x - (t - FLASH_EXP2P_MAGIC);
  const float p = fmaf(fmaf(fmaf(FLASH_EXP2P_C3, f, FLASH_EXP2P_C2), f, FLASH_EXP2P_C1), f, 1.0f);
  uint32_t pb, tb;
  memcpy(&pb, &p, sizeof pb);
  memcpy(&tb, &t, sizeof tb);
  pb += tb << 23;
  float r;
  memcpy(&r, &pb, sizeof r);
  return r;
}

#endif
