/* RMSNorm as Hugging Face LlamaRMSNorm computes it in fp32:
 *   rstd = 1 / sqrt(mean(x^2) + eps);  out = weight * (x * rstd)
 * and Gemma2RMSNorm: (offset + weight) for weight, offset 1, added in fp32
 * (the _off variants; offset 0 is the plain norm bit for bit).
 * N = rows, C = hidden size. The mean of squares is accumulated in double so
 * the oracle does not depend on summation order.
 * Accumulation rule: dweight +=, dinp =. */
#include <math.h>

#include "ops/cpu/ops_cpu.h"

void fsdpc__cpu_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *weight, int N,
                            int C, float eps) {
  fsdpc__cpu_rmsnorm_off_fwd(out, rstd, inp, weight, N, C, eps, 0.0f);
}

void fsdpc__cpu_rmsnorm_bwd(float *dinp, float *dweight, const float *dout, const float *inp,
                            const float *weight, const float *rstd, int N, int C) {
  fsdpc__cpu_rmsnorm_off_bwd(dinp, dweight, dout, inp, weight, rstd, N, C, 0.0f);
}

void fsdpc__cpu_rmsnorm_off_fwd(float *out,          // (N, C)
                                float *rstd,         // (N)
                                const float *inp,    // (N, C)
                                const float *weight, // (C)
                                int N, int C, float eps, float offset) {
#pragma omp parallel for num_threads(fsdpc__cpu_nt()) schedule(static)
  for (int n = 0; n < N; n++) {
    const float *x = inp + (size_t)n * C;
    float *y = out + (size_t)n * C;
    double ss = 0.0;
    for (int c = 0; c < C; c++)
      ss += (double)x[c] * x[c];
    float r = (float)(1.0 / sqrt(ss / C + (double)eps));
    rstd[n] = r;
    /* HF multiplies x by rstd first, then by weight; keep that rounding. */
    for (int c = 0; c < C; c++)
      y[c] = (offset + weight[c]) * (x[c] * r);
  }
}

/* (w_c below is offset + weight_c; dweight is the same either way.)
 * With y_c = w_c x_c r and r = (mean(x^2) + eps)^(-1/2), dr/dx_j = -r^3 x_j / C:
 *   dx_j = r w_j dy_j - (r^3 / C) x_j sum_c(dy_c w_c x_c)
 *   dw_c += sum_n dy_c x_c r */
void fsdpc__cpu_rmsnorm_off_bwd(float *dinp,         // (N, C) =
                                float *dweight,      // (C) +=
                                const float *dout,   // (N, C)
                                const float *inp,    // (N, C)
                                const float *weight, // (C)
                                const float *rstd,   // (N)
                                int N, int C, float offset) {
#pragma omp parallel for num_threads(fsdpc__cpu_nt()) schedule(static)
  for (int n = 0; n < N; n++) {
    const float *x = inp + (size_t)n * C;
    const float *dy = dout + (size_t)n * C;
    float *dx = dinp + (size_t)n * C;
    double r = rstd[n];
    double dot = 0.0;
    for (int c = 0; c < C; c++)
      dot += (double)dy[c] * (offset + weight[c]) * x[c];
    double k = r * r * r * dot / C;
    for (int c = 0; c < C; c++)
      dx[c] = (float)(r * (offset + weight[c]) * dy[c] - k * x[c]);
  }
  /* dweight sums over rows: split columns across threads so that nothing
   * races and the order of additions is fixed. */
  enum { BLOCK = 64 };
  int nblocks = (C + BLOCK - 1) / BLOCK;
#pragma omp parallel for num_threads(fsdpc__cpu_nt()) schedule(static)
  for (int blk = 0; blk < nblocks; blk++) {
    int c0 = blk * BLOCK;
    int c1 = c0 + BLOCK < C ? c0 + BLOCK : C;
    double acc[BLOCK] = {0};
    for (int n = 0; n < N; n++) {
      const float *x = inp + (size_t)n * C;
      const float *dy = dout + (size_t)n * C;
      float r = rstd[n];
      for (int c = c0; c < c1; c++)
        acc[c - c0] += (double)dy[c] * (x[c] * r);
    }
    for (int c = c0; c < c1; c++)
      dweight[c] += (float)acc[c - c0];
  }
}
