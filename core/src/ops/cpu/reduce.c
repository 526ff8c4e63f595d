/* Reductions over flat fp32 buffers (gradient norm, clipping).
 *
 * An OpenMP `reduction(+:)` clause combines thread partials in whatever order
 * threads finish, which makes the last bits of the grad norm differ from run
 * to run. Here each thread sums a fixed contiguous slice in double and the
 * partials are added in thread order, so a given thread count always gives
 * the same bits. */
#include <omp.h>

#include "ops/cpu/ops_cpu.h"

enum { MAX_PARTIALS = 256 };

double fsdpc__cpu_sumsq(const float *x, size_t n) {
  double partial[MAX_PARTIALS] = {0};
  int nt = omp_get_max_threads();
  if (nt > MAX_PARTIALS)
    nt = MAX_PARTIALS;
  if ((size_t)nt > n / 4096 + 1)
    nt = (int)(n / 4096 + 1); /* small inputs: fewer threads */
#pragma omp parallel num_threads(nt)
  {
    int t = omp_get_thread_num(), k = omp_get_num_threads();
    size_t lo = n * t / k, hi = n * (t + 1) / k;
    double s = 0.0;
    for (size_t i = lo; i < hi; i++)
      s += (double)x[i] * x[i];
    partial[t] = s;
  }
  double total = 0.0;
  for (int t = 0; t < nt; t++)
    total += partial[t];
  return total;
}

void fsdpc__cpu_scale(float *x, float s, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++)
    x[i] *= s;
}
