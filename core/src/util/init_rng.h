/* The random init's per-element function, shared by the C (CPU) and CUDA
 * (device) code so that both make the same fp32 value bit for bit.
 *
 * Counter-based: element e of a parameter is a function of (key, e) only,
 * where key = fsdpc__init_key(seed, name). Any rank, thread or GPU thread
 * can make any element without making the ones before it, so the initial
 * weights do not depend on the world size or on who computes them.
 *
 *   r1, r2 = splitmix64(key + 2e), splitmix64(key + 2e + 1)
 *   u1 = ((r1 >> 11) + 1) * 2^-53        in (0, 1]
 *   u2 = (r2 >> 11) * 2^-53              in [0, 1)
 *   x  = (float)(std * sqrt(-2 log u1) * cos(2 pi u2))      (Box-Muller)
 *
 * log and cos are not libm's (glibc's and CUDA's differ in the last bits):
 * they are written here with IEEE double +, -, *, / and sqrt only, each
 * correctly rounded on every conforming host and on the GPU, in a fixed
 * order. Two rules keep that order: on the device every operation is an
 * explicit round-to-nearest intrinsic (__dmul_rn, __dadd_rn, ...), which
 * nvcc never fuses into an FMA; on the host the files that use this header
 * are compiled with -ffp-contract=off. The polynomials are within a few
 * double ulps of the true functions, so the float result is the one libm's
 * formula gave (the definition before this header) except for about one
 * element in 10^8, which moves by one float ulp. */
#ifndef FSDPC_UTIL_INIT_RNG_H
#define FSDPC_UTIL_INIT_RNG_H

#include <stdint.h>

#ifdef __CUDACC__
#define FSDPC_INIT_FN static __host__ __device__ __forceinline__
#else
#define FSDPC_INIT_FN static inline
#endif

#ifdef __CUDA_ARCH__
#define FSDPC_I_MUL(a, b) __dmul_rn((a), (b))
#define FSDPC_I_ADD(a, b) __dadd_rn((a), (b))
#define FSDPC_I_SUB(a, b) __dsub_rn((a), (b))
#define FSDPC_I_DIV(a, b) __ddiv_rn((a), (b))
#define FSDPC_I_SQRT(a) __dsqrt_rn(a)
#define FSDPC_I_BITS(x) ((uint64_t)__double_as_longlong(x))
#define FSDPC_I_FROM_BITS(u) __longlong_as_double((long long)(u))
#else
#include <math.h>
#include <string.h>
#define FSDPC_I_MUL(a, b) ((a) * (b))
#define FSDPC_I_ADD(a, b) ((a) + (b))
#define FSDPC_I_SUB(a, b) ((a) - (b))
#define FSDPC_I_DIV(a, b) ((a) / (b))
#define FSDPC_I_SQRT(a) sqrt(a) /* IEEE: correctly rounded */
FSDPC_INIT_FN uint64_t fsdpc__init_bits(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}
FSDPC_INIT_FN double fsdpc__init_from_bits(uint64_t u) {
  double x;
  memcpy(&x, &u, sizeof x);
  return x;
}
#define FSDPC_I_BITS(x) fsdpc__init_bits(x)
#define FSDPC_I_FROM_BITS(u) fsdpc__init_from_bits(u)
#endif

/* splitmix64's output function of x + golden gamma (Vigna): a bijection
 * that mixes every input bit into every output bit. */
FSDPC_INIT_FN uint64_t fsdpc__init_mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* The stream of one tensor: the seed mixed with the FNV-1a hash of its name
 * (e.g. "model.layers.3.mlp.up_proj.weight"). */
FSDPC_INIT_FN uint64_t fsdpc__init_key(uint64_t seed, const char *name) {
  uint64_t h = 1469598103934665603ull;
  for (; *name; name++)
    h = (h ^ (uint8_t)*name) * 1099511628211ull;
  return fsdpc__init_mix(seed ^ h);
}

/* Two uniforms of element e: u1 in (0, 1] and the 53-bit integer j of
 * u2 = j * 2^-53 in [0, 1). */
FSDPC_INIT_FN double fsdpc__init_u1(uint64_t key, uint64_t e) {
  return FSDPC_I_MUL((double)(fsdpc__init_mix(key + 2 * e) >> 11) + 1.0, 0x1.0p-53);
}

/* log(x) for x in [2^-53, 1] (normal, positive): x = 2^k m with m in
 * [sqrt(1/2), sqrt(2)), log m = 2 atanh(s) with s = (m-1)/(m+1), the series
 * summed to 2^-60, k ln 2 in two parts (fdlibm's split). */
FSDPC_INIT_FN double fsdpc__init_log(double x) {
  uint64_t b = FSDPC_I_BITS(x);
  int k = (int)((b >> 52) & 0x7ff) - 1023;
  double m = FSDPC_I_FROM_BITS((b & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull);
  if (m > 1.4142135623730951) {
    m = FSDPC_I_MUL(m, 0.5);
    k += 1;
  }
  double f = FSDPC_I_SUB(m, 1.0); /* exact */
  double s = FSDPC_I_DIV(f, FSDPC_I_ADD(2.0, f));
  double z = FSDPC_I_MUL(s, s);
  /* R = z (2/3 + z (2/5 + ... + z 2/25)) */
  double r = 2.0 / 25.0;
  r = FSDPC_I_ADD(2.0 / 23.0, FSDPC_I_MUL(z, r));
  r = FSDPC_I_ADD(2.0 / 21.0, FSDPC_I_MUL(z, r));
  r = FSDPC_I_ADD(2.0 / 19.0, FSDPC_I_MUL(z, r));
  r = FSDPC_I_ADD(2.0 / 17.0, FSDPC_I_MUL(z, r));
  r = FSDPC_I_ADD(2.0 / 15.0, FSDPC_I_MUL(z, r));
  r = FSDPC_I_ADD(2.0 / 13.0, FSDPC_I_MUL(z, r));
  r = FSDPC_I_ADD(2.0 / 11.0, FSDPC_I_MUL(z, r));
  r = FSDPC_I_ADD(2.0 / 9.0, FSDPC_I_MUL(z, r));
  r = FSDPC_I_ADD(2.0 / 7.0, FSDPC_I_MUL(z, r));
  r = FSDPC_I_ADD(2.0 / 5.0, FSDPC_I_MUL(z, r));
  r = FSDPC_I_ADD(2.0 / 3.0, FSDPC_I_MUL(z, r));
  r = FSDPC_I_MUL(z, r);
  /* log(1+f) = f - hfsq + s (hfsq + R), hfsq = f^2 / 2 */
  double hfsq = FSDPC_I_MUL(FSDPC_I_MUL(0.5, f), f);
  double dk = (double)k;
  const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
  double lg = FSDPC_I_MUL(s, FSDPC_I_ADD(hfsq, r));
  double t = FSDPC_I_SUB(hfsq, FSDPC_I_ADD(lg, FSDPC_I_MUL(dk, ln2_lo)));
  return FSDPC_I_SUB(FSDPC_I_MUL(dk, ln2_hi), FSDPC_I_SUB(t, f));
}

/* cos(2 pi j 2^-53) for a 53-bit integer j: the quadrant and the offset in
 * it come from j's bits exactly, t = d * pi/2 in [-pi/4, pi/4], then the
 * Taylor series of sin or cos to t^17 / t^18. */
FSDPC_INIT_FN double fsdpc__init_cos_turn(uint64_t j) {
  uint64_t q = (j + (1ull << 50)) >> 51; /* nearest quarter turn, 0..4 */
  int64_t d = (int64_t)j - (int64_t)(q << 51);
  double t = FSDPC_I_MUL(FSDPC_I_MUL((double)d, 0x1.0p-51), 1.5707963267948966);
  double z = FSDPC_I_MUL(t, t);
  double v;
  if (q & 1) { /* sin t = t + t z (-1/3! + z (1/5! - ...)) */
    double p = 1.0 / 355687428096000.0;
    p = FSDPC_I_SUB(FSDPC_I_MUL(z, p), 1.0 / 1307674368000.0);
    p = FSDPC_I_ADD(FSDPC_I_MUL(z, p), 1.0 / 6227020800.0);
    p = FSDPC_I_SUB(FSDPC_I_MUL(z, p), 1.0 / 39916800.0);
    p = FSDPC_I_ADD(FSDPC_I_MUL(z, p), 1.0 / 362880.0);
    p = FSDPC_I_SUB(FSDPC_I_MUL(z, p), 1.0 / 5040.0);
    p = FSDPC_I_ADD(FSDPC_I_MUL(z, p), 1.0 / 120.0);
    p = FSDPC_I_SUB(FSDPC_I_MUL(z, p), 1.0 / 6.0);
    v = FSDPC_I_ADD(t, FSDPC_I_MUL(FSDPC_I_MUL(t, z), p));
  } else { /* cos t = 1 - z (1/2! - z (1/4! - ...)) */
    double p = 1.0 / 6402373705728000.0;
    p = FSDPC_I_SUB(1.0 / 20922789888000.0, FSDPC_I_MUL(z, p));
    p = FSDPC_I_SUB(1.0 / 87178291200.0, FSDPC_I_MUL(z, p));
    p = FSDPC_I_SUB(1.0 / 479001600.0, FSDPC_I_MUL(z, p));
    p = FSDPC_I_SUB(1.0 / 3628800.0, FSDPC_I_MUL(z, p));
    p = FSDPC_I_SUB(1.0 / 40320.0, FSDPC_I_MUL(z, p));
    p = FSDPC_I_SUB(1.0 / 720.0, FSDPC_I_MUL(z, p));
    p = FSDPC_I_SUB(1.0 / 24.0, FSDPC_I_MUL(z, p));
    p = FSDPC_I_SUB(0.5, FSDPC_I_MUL(z, p));
    v = FSDPC_I_SUB(1.0, FSDPC_I_MUL(z, p));
  }
  /* quadrant q: cos, -sin, -cos, sin, cos */
  return (q == 1 || q == 2) ? -v : v;
}

/* Element e of a normal(0, std^2) tensor with stream key. */
FSDPC_INIT_FN float fsdpc__init_normal(uint64_t key, uint64_t e, double std) {
  double u1 = fsdpc__init_u1(key, e);
  uint64_t j = fsdpc__init_mix(key + 2 * e + 1) >> 11;
  double r = FSDPC_I_SQRT(FSDPC_I_MUL(-2.0, fsdpc__init_log(u1)));
  return (float)FSDPC_I_MUL(FSDPC_I_MUL(std, r), fsdpc__init_cos_turn(j));
}

#endif
