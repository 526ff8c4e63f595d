/* Reductions over flat fp32 buffers (gradient norm, clipping).
 *
 * An OpenMP `reduction(+:)` clause combines thread partials in whatever order
 * threads finish, and per-thread slices change with the thread count; either
 * changes the last bits of the grad norm. Here the buffer is cut into blocks
 * of a fixed size, each block is summed in double (in parallel), and the
 * block sums are added in block order: the same bits for any thread count. */
#include <omp.h>
#include <stdlib.h>

#include "ops/cpu/ops_cpu.h"

enum { SUMSQ_BLOCK = 8192, STACK_BLOCKS = 512 };

double fsdpc__cpu_sumsq(const float *x, size_t n) {
  size_t nb = (n + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;
  double stack[STACK_BLOCKS], *part = nb <= STACK_BLOCKS ? stack : malloc(nb * sizeof(double));
  double total = 0.0;
  if (!part) { /* no memory for the partials: one serial pass, same blocks */
    for (size_t b = 0; b < nb; b++) {
      double s = 0.0;
      for (size_t i = b * SUMSQ_BLOCK; i < n && i < (b + 1) * SUMSQ_BLOCK; i++)
        s += (double)x[i] * x[i];
      total += s;
    }
    return total;
  }
#pragma omp parallel for num_threads(fsdpc__cpu_nt()) schedule(static) if (nb > 1)
  for (size_t b = 0; b < nb; b++) {
    size_t lo = b * SUMSQ_BLOCK, hi = lo + SUMSQ_BLOCK < n ? lo + SUMSQ_BLOCK : n;
    double s = 0.0;
    for (size_t i = lo; i < hi; i++)
      s += (double)x[i] * x[i];
    part[b] = s;
  }
  for (size_t b = 0; b < nb; b++)
    total += part[b];
  if (part != stack)
    free(part);
  return total;
}

void fsdpc__cpu_scale(float *x, float s, size_t n) {
#pragma omp parallel for num_threads(fsdpc__cpu_nt()) schedule(static)
  for (size_t i = 0; i < n; i++)
    x[i] *= s;
}
