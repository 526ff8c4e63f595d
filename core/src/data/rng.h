/* Deterministic, platform-independent random numbers for the data pipeline.
 *
 * splitmix64 turns a seed into a well-mixed state; xoshiro256** generates the
 * stream; bounded draws use rejection (no modulo bias, no floating point), so
 * the same seed gives the same shuffle on every compiler and CPU. These are
 * the published reference algorithms (Vigna), bit for bit. */
#ifndef FSDPC_DATA_RNG_H
#define FSDPC_DATA_RNG_H

#include <stdint.h>

typedef struct fsdpc_rng {
  uint64_t s[4];
} fsdpc_rng;

/* Advances *x and returns the next splitmix64 output. */
static inline uint64_t fsdpc__splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static inline void fsdpc__rng_seed(fsdpc_rng *r, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++)
    r->s[i] = fsdpc__splitmix64(&x);
}

static inline uint64_t fsdpc__rng_next(fsdpc_rng *r) {
  uint64_t *s = r->s;
  uint64_t x = s[1] * 5;
  uint64_t result = ((x << 7) | (x >> 57)) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = (s[3] << 45) | (s[3] >> 19);
  return result;
}

/* Uniform in [0, n), n >= 1. Rejects the top (2^64 mod n) values. */
static inline uint64_t fsdpc__rng_below(fsdpc_rng *r, uint64_t n) {
  uint64_t threshold = (0 - n) % n; /* == 2^64 mod n */
  for (;;) {
    uint64_t x = fsdpc__rng_next(r);
    if (x >= threshold)
      return x % n;
  }
}

/* Fisher-Yates (Durstenfeld) shuffle of a[0..n) in place, from the back. */
static inline void fsdpc__rng_shuffle_i64(fsdpc_rng *r, int64_t *a, int64_t n) {
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)fsdpc__rng_below(r, (uint64_t)i + 1);
    int64_t t = a[i];
    a[i] = a[j];
    a[j] = t;
  }
}

#endif
