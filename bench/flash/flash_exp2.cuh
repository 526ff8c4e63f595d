/* exp2 on the FMA pipe, for the sandbox's software-exp2 variant
 * (variants/13_swexp.cu). 2^x without the MUFU (exp) unit, for a share of
 * the softmax's exp2s where that unit is the bound (as FlashAttention-4 does
 * on Blackwell; not faster on an H200, bench/results/2026-11-24-flash-swexp.md):
 * x = n + f with n the nearest integer (the add of 1.5 * 2^23 leaves n in
 * the low mantissa bits) and f in [-0.5, 0.5], 2^f by a degree-3 polynomial
 * with p(0) = 1 (relative error at most 1.02e-4: P goes to bf16, 2^-8), then
 * n added to the exponent bits. x is clamped to -127, where f = 0 and the
 * result is exactly 0 (masked -inf entries give 0, not NaN); x must be < 127
 * (the softmax's x is <= 0). Constants and a host copy checked against exp2
 * (tests/flash/test_flash_exp2.c): flash_exp2_poly.h. */
#ifndef FSDPC_FLASH_EXP2_CUH
#define FSDPC_FLASH_EXP2_CUH

#include "flash_exp2_poly.h"

static __device__ __forceinline__ float exp2_fma(float x) {
  x = fmaxf(x, -127.0f);
  const float t = x + FLASH_EXP2P_MAGIC; /* 1.5 * 2^23 + rint(x) */
  const float f = x - (t - FLASH_EXP2P_MAGIC);
  const float p = fmaf(fmaf(fmaf(FLASH_EXP2P_C3, f, FLASH_EXP2P_C2), f, FLASH_EXP2P_C1), f, 1.0f);
  return __int_as_float(__float_as_int(p) + (__float_as_int(t) << 23));
}

#endif
