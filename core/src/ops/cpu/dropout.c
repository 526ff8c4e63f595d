/* LoRA's inverted dropout on the CPU reference whose mask is a counter hash of (key, element), so
 * any device, any thread split and a recompute give the same mask (ops.h). */
#include <stdint.h>

#include "ops/cpu/ops_cpu.h"

static uint64_t mix(uint64_t x) { /* splitmix64 */
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

void fsdpc__cpu_dropout(float *out,       // (n) =, may alias inp
                        const float *inp, // (n)
                        size_t n, float p, uint64_t key) {
  uint32_t thr = (uint32_t)((double)p * 16777216.0);
  float inv = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static) if (n > 65536)
  for (size_t i = 0; i < n; i++)
    out[i] = (uint32_t)(mix(key + i) >> 40) >= thr ? inp[i] * inv : 0.0f;
}
