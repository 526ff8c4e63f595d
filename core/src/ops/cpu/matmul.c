/* nn.Linear without bias through OpenBLAS: out = inp @ weight^T.
 * N = rows, C = in features, OC = out features.
 * Accumulation rule: dweight +=, dinp =. */
#include <cblas.h>
#include <string.h>

#include "ops/cpu/ops_cpu.h"

void fsdpc__cpu_matmul_fwd(float *out,          // (N, OC)
                           const float *inp,    // (N, C)
                           const float *weight, // (OC, C)
                           int N, int C, int OC) {
  if (N <= 0 || OC <= 0)
    return;
  if (C <= 0) { /* an empty sum; BLAS is not asked to handle K = 0 */
    memset(out, 0, (size_t)N * OC * sizeof(float));
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C, 0.0f, out,
              OC);
}

void fsdpc__cpu_matmul_bwd(float *dinp,         // (N, C) =, or NULL
                           float *dweight,      // (OC, C) +=
                           const float *dout,   // (N, OC)
                           const float *inp,    // (N, C)
                           const float *weight, // (OC, C)
                           int N, int C, int OC) {
  if (N <= 0 || C <= 0)
    return;
  if (OC <= 0) {
    if (dinp != NULL)
      memset(dinp, 0, (size_t)N * C * sizeof(float));
    return;
  }
  if (dinp != NULL) {
    /* (N, OC) @ (OC, C) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, weight, C,
                0.0f, dinp, C);
  }
  /* (OC, N) @ (N, C), beta = 1 accumulates. */
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f,
              dweight, C);
}
