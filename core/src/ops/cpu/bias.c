/* Projection biases (nn.Linear(bias=True)): the forward adds the bias to
 * every row, the backward sums the rows of the output gradient. Parameter
 * gradients +=. */
#include <stdlib.h>

#include "ops/cpu/ops_cpu.h"

void fsdpc__cpu_bias_add(float *y,          // (N, OC) +=
                         const float *bias, // (OC)
                         int N, int OC) {
#pragma omp parallel for num_threads(fsdpc__cpu_nt()) schedule(static)
  for (int n = 0; n < N; n++) {
    float *row = y + (size_t)n * OC;
    for (int o = 0; o < OC; o++)
      row[o] += bias[o];
  }
}

/* Each column is summed over the rows in double, in row order: the same
 * bits at any thread count (threads split the columns). */
void fsdpc__cpu_bias_bwd(float *dbias,    // (OC) +=
                         const float *dy, // (N, OC)
                         int N, int OC) {
#pragma omp parallel for num_threads(fsdpc__cpu_nt()) schedule(static)
  for (int o = 0; o < OC; o++) {
    double s = 0.0;
    for (int n = 0; n < N; n++)
      s += dy[(size_t)n * OC + o];
    dbias[o] += (float)s;
  }
}
