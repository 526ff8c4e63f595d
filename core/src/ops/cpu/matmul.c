/* nn.Linear without bias through OpenBLAS: out = inp @ weight^T.
 * N = rows, C = in features, OC = out features.
 * Accumulation rule: dweight +=, dinp =.
 *
 * Reproducible at any thread count: a multi-threaded OpenBLAS GEMM splits
 * the output among however many threads it has, and the kernel an element
 * lands in (full micro-tile or edge) changes its rounding, so losses
 * depended on OMP_NUM_THREADS / OPENBLAS_NUM_THREADS (torchrun sets 1, the
 * fsdpc launcher does not). Here OpenBLAS runs single-threaded and every
 * GEMM is cut into output tiles of a fixed size (TILE_M x TILE_N), each a
 * sub-GEMM over the whole reduction dimension; OpenMP threads share the
 * tiles. An element's value depends on the tiling only, never on which or
 * how many threads computed it. */
#include <cblas.h>
#include <pthread.h>
#include <string.h>

#include "ops/cpu/ops_cpu.h"

/* Big enough that packing stays ~1% of the flops, small enough that the
 * tiny demo's GEMMs (1024 x 128..384) still give every core work. */
enum { TILE_M = 128, TILE_N = 256 };

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static void blas_single_threaded(void) {
  openblas_set_num_threads(1);
}

void fsdpc__cpu_sgemm(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda,
                      const float *B, int ldb, float beta, float *Cm, int ldc) {
  if (M <= 0 || N <= 0)
    return;
  if (K <= 0) { /* an empty sum; BLAS is not asked to handle K = 0 */
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++)
        Cm[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * Cm[(size_t)i * ldc + j];
    return;
  }
  pthread_once(&blas_once, blas_single_threaded);
  const int tm = (M + TILE_M - 1) / TILE_M, tn = (N + TILE_N - 1) / TILE_N;
#pragma omp parallel for num_threads(fsdpc__cpu_nt()) schedule(static) if (tm * tn > 1)
  for (int t = 0; t < tm * tn; t++) {
    int i = (t / tn) * TILE_M, j = (t % tn) * TILE_N;
    int m = M - i < TILE_M ? M - i : TILE_M, n = N - j < TILE_N ? N - j : TILE_N;
    const float *a = trans_a ? A + i : A + (size_t)i * lda; /* rows i.. of op(A) */
    const float *b = trans_b ? B + (size_t)j * ldb : B + j; /* cols j.. of op(B) */
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, K, 1.0f, a, lda, b, ldb, beta,
                Cm + (size_t)i * ldc + j, ldc);
  }
}

void fsdpc__cpu_matmul_fwd(float *out,          // (N, OC)
                           const float *inp,    // (N, C)
                           const float *weight, // (OC, C)
                           int N, int C, int OC) {
  fsdpc__cpu_sgemm(0, 1, N, OC, C, inp, C, weight, C, 0.0f, out, OC);
}

void fsdpc__cpu_matmul_bwd(float *dinp,         // (N, C) =, or NULL
                           float *dweight,      // (OC, C) +=, or NULL (a frozen weight)
                           const float *dout,   // (N, OC)
                           const float *inp,    // (N, C)
                           const float *weight, // (OC, C)
                           int N, int C, int OC) {
  if (N <= 0 || C <= 0)
    return;
  if (dinp != NULL) /* (N, OC) @ (OC, C) */
    fsdpc__cpu_sgemm(0, 0, N, C, OC, dout, OC, weight, C, 0.0f, dinp, C);
  /* (OC, N) @ (N, C), beta = 1 accumulates. */
  if (dweight != NULL)
    fsdpc__cpu_sgemm(1, 0, OC, C, N, dout, OC, inp, C, 1.0f, dweight, C);
}
