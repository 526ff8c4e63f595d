/* Residual additions. Element-wise, so aliasing out with a or b is safe. */
#include "ops/cpu/ops_cpu.h"

void fsdpc__cpu_add(float *out, const float *a, const float *b, size_t n) {
#pragma omp parallel for num_threads(fsdpc__cpu_nt()) schedule(static)
  for (size_t i = 0; i < n; i++)
    out[i] = a[i] + b[i];
}

void fsdpc__cpu_add_inplace(float *y, const float *x, size_t n) {
#pragma omp parallel for num_threads(fsdpc__cpu_nt()) schedule(static)
  for (size_t i = 0; i < n; i++)
    y[i] += x[i];
}

/* Granite's residual_multiplier: h = x + a * sublayer(x), and its backward
 * d(sublayer) = a * dh (x NULL). */
void fsdpc__cpu_axpy(float *out, const float *x, const float *y, float a, size_t n) {
#pragma omp parallel for num_threads(fsdpc__cpu_nt()) schedule(static)
  for (size_t i = 0; i < n; i++)
    out[i] = (x ? x[i] : 0.0f) + a * y[i];
}
