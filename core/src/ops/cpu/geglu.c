/* GeGLU gate of the Gemma MLP: out = gelu(gate) * up with the tanh
 * approximation of gelu (transformers' gelu_pytorch_tanh):
 *   gelu(g) = g / 2 (1 + tanh(k (g + a g^3))), k = sqrt(2 / pi), a = 0.044715.
 * N = rows, F = intermediate size. Accumulation rule: dgate =, dup =. */
#include <math.h>

#include "ops/cpu/ops_cpu.h"

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_A 0.044715f

static inline float gelu_tanh(float g) {
  return 0.5f * g * (1.0f + tanhf(GELU_K * (g + GELU_A * g * g * g)));
}

void fsdpc__cpu_geglu_fwd(float *out,        // (N, F)
                          const float *gate, // (N, F)
                          const float *up,   // (N, F)
                          int N, int F) {
  size_t n = (size_t)N * F;
#pragma omp parallel for num_threads(fsdpc__cpu_nt()) schedule(static)
  for (size_t i = 0; i < n; i++)
    out[i] = gelu_tanh(gate[i]) * up[i];
}

/* With u = k (g + a g^3) and t = tanh(u):
 *   d gelu / dg = (1 + t) / 2 + g / 2 (1 - t^2) k (1 + 3 a g^2). */
void fsdpc__cpu_geglu_bwd(float *dgate,      // (N, F) =
                          float *dup,        // (N, F) =
                          const float *dout, // (N, F)
                          const float *gate, const float *up, int N, int F) {
  size_t n = (size_t)N * F;
#pragma omp parallel for num_threads(fsdpc__cpu_nt()) schedule(static)
  for (size_t i = 0; i < n; i++) {
    float g = gate[i], t = tanhf(GELU_K * (g + GELU_A * g * g * g));
    float dg =
        0.5f * (1.0f + t) + 0.5f * g * (1.0f - t * t) * GELU_K * (1.0f + 3.0f * GELU_A * g * g);
    dgate[i] = dout[i] * up[i] * dg;
    dup[i] = dout[i] * 0.5f * g * (1.0f + t);
  }
}
