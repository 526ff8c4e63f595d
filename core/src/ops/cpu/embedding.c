/* Token embedding lookup and its backward.
 * N = tokens, C = hidden size, V = vocab size (not needed: tokens are
 * validated against V by the data pipeline before they reach the ops).
 * Accumulation rule: dwte is accumulated (+=); tied lm_head gradients add
 * into the same buffer. */
#include <string.h>

#include "ops/cpu/ops_cpu.h"

void fsdpc__cpu_embedding_fwd(float *out,            // (N, C)
                              const int32_t *tokens, // (N)
                              const float *wte,      // (V, C)
                              int N, int C) {
#pragma omp parallel for num_threads(fsdpc__cpu_nt()) schedule(static)
  for (int n = 0; n < N; n++) {
    memcpy(out + (size_t)n * C, wte + (size_t)tokens[n] * C, (size_t)C * sizeof(float));
  }
}

/* Rows of dwte are hit by repeated tokens, so threads split the C columns
 * instead of the N rows: no two threads write the same element, and the
 * order of additions (n ascending) is fixed, so the result is deterministic. */
void fsdpc__cpu_embedding_bwd(float *dwte,           // (V, C) +=
                              const float *dout,     // (N, C)
                              const int32_t *tokens, // (N)
                              int N, int C) {
  enum { BLOCK = 64 };
  int nblocks = (C + BLOCK - 1) / BLOCK;
#pragma omp parallel for num_threads(fsdpc__cpu_nt()) schedule(static)
  for (int blk = 0; blk < nblocks; blk++) {
    int c0 = blk * BLOCK;
    int c1 = c0 + BLOCK < C ? c0 + BLOCK : C;
    for (int n = 0; n < N; n++) {
      float *dst = dwte + (size_t)tokens[n] * C;
      const float *src = dout + (size_t)n * C;
      for (int c = c0; c < c1; c++)
        dst[c] += src[c];
    }
  }
}
