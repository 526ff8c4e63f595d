/* SwiGLU gate of the Llama MLP: out = silu(gate) * up, silu(g) = g * sigmoid(g).
 * N = rows, F = intermediate size. Accumulation rule: dgate =, dup =. */
#include <math.h>

#include "ops/cpu/ops_cpu.h"

static inline float sigmoidf(float g) {
  return 1.0f / (1.0f + expf(-g));
}

void fsdpc__cpu_swiglu_fwd(float *out,        // (N, F)
                           const float *gate, // (N, F)
                           const float *up,   // (N, F)
                           int N, int F) {
  size_t n = (size_t)N * F;
#pragma omp parallel for num_threads(fsdpc__cpu_nt()) schedule(static)
  for (size_t i = 0; i < n; i++)
    out[i] = gate[i] * sigmoidf(gate[i]) * up[i];
}

/* d silu / dg = s (1 + g (1 - s)) with s = sigmoid(g). */
void fsdpc__cpu_swiglu_bwd(float *dgate,      // (N, F) =
                           float *dup,        // (N, F) =
                           const float *dout, // (N, F)
                           const float *gate, const float *up, int N, int F) {
  size_t n = (size_t)N * F;
#pragma omp parallel for num_threads(fsdpc__cpu_nt()) schedule(static)
  for (size_t i = 0; i < n; i++) {
    float g = gate[i], s = sigmoidf(g);
    dgate[i] = dout[i] * up[i] * s * (1.0f + g * (1.0f - s));
    dup[i] = dout[i] * g * s;
  }
}
