/* How much faster than cuBLASLt's first heuristic pick is the fastest of
 * its candidates, for the GEMMs of a training step? For every linear layer
 * of the Llama-3.2-1B (micro-batch 4 x seq 2048) and Llama-3.1-8B (1 x 2048)
 * step shapes and each of its three products (forward, input gradient,
 * weight gradient: the layouts of core/src/ops/cuda/matmul.cu), asks the
 * heuristic for up to 16 algorithms and times each: one call at a time
 * (median of 15) and 40 calls back to back (the card loaded, as in a
 * step). Prints per GEMM the first pick's time and the best candidate's,
 * and the step's GEMM time with each choice, weighted by how often the
 * step runs each GEMM. Usage: fsdpc_bench_gemm_algos
 * (bench/results/2026-11-24-flash-s10.md, calls 9 and 10: 3-6 % less GEMM
 * time alone, no faster step under the 700 W cap.) */
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Exits with "call: reason" unless ok. */
static void check(int ok, const char *call, const char *reason) {
  if (ok)
    return;
  fprintf(stderr, "%s: %s\n", call, reason);
  exit(1);
}
#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    check(e_ == cudaSuccess, #x, cudaGetErrorString(e_));                                          \
  } while (0)
#define LK(x)                                                                                      \
  do {                                                                                             \
    cublasStatus_t s_ = (x);                                                                       \
    check(s_ == CUBLAS_STATUS_SUCCESS, #x, cublasLtGetStatusString(s_));                           \
  } while (0)

#define MAX_ALGOS 16
#define WS_BYTES (32u << 20)

static cublasLtHandle_t lt;
static cudaStream_t st;
static void *ws;

static int cmpf(const void *a, const void *b) {
  const float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

struct gemm {
  int ta, tb, m, n, k, lda, ldb, ldc, f32out;
  float beta;
};

static cublasLtMatmulDesc_t op;
static cublasLtMatrixLayout_t la, lb, lc;

static void setup(const struct gemm *g) {
  const cublasOperation_t ta = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  LK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  LK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, g->ta ? g->k : g->m, g->ta ? g->m : g->k, g->lda));
  LK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, g->tb ? g->n : g->k, g->tb ? g->k : g->n, g->ldb));
  LK(cublasLtMatrixLayoutCreate(&lc, g->f32out ? CUDA_R_32F : CUDA_R_16BF, g->m, g->n, g->ldc));
}

static void teardown(void) {
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatmulDescDestroy(op);
}

static int run(const struct gemm *g, const cublasLtMatmulAlgo_t *algo, const void *A, const void *B,
               void *D) {
  const float alpha = 1.0f;
  return cublasLtMatmul(lt, op, &alpha, A, la, B, lb, &g->beta, D, lc, D, lc, algo, ws, WS_BYTES,
                        st) == CUBLAS_STATUS_SUCCESS;
}

/* Median ms of one call (15 timed, after 3) and the mean ms of 40 back to back. */
static int time_algo(const struct gemm *g, const cublasLtMatmulAlgo_t *algo, const void *A,
                     const void *B, void *D, float *one, float *hot) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; i++)
    if (!run(g, algo, A, B, D))
      return 0;
  float t[15];
  for (int i = 0; i < 15; i++) {
    CK(cudaEventRecord(a, st));
    run(g, algo, A, B, D);
    CK(cudaEventRecord(b, st));
    CK(cudaEventSynchronize(b));
    CK(cudaEventElapsedTime(&t[i], a, b));
  }
  qsort(t, 15, sizeof(float), cmpf);
  *one = t[7];
  CK(cudaEventRecord(a, st));
  for (int i = 0; i < 40; i++)
    run(g, algo, A, B, D);
  CK(cudaEventRecord(b, st));
  CK(cudaEventSynchronize(b));
  CK(cudaEventElapsedTime(hot, a, b));
  *hot /= 40;
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return 1;
}

int main(void) {
  CK(cudaStreamCreate(&st));
  LK(cublasLtCreate(&lt));
  CK(cudaMalloc(&ws, WS_BYTES));
  /* One pool of random bf16 bits (small values) for A and B, one output. */
  const size_t pool = (size_t)600 << 20, outb = (size_t)1200 << 20;
  unsigned short *h = malloc(pool);
  unsigned s = 12345;
  for (size_t i = 0; i < pool / 2; i++) {
    s = s * 1664525u + 1013904223u;
    h[i] = (unsigned short)(0x3c00u | ((s >> 16) & 0x7fu) | (s >> 31 ? 0x8000u : 0u));
  }
  void *P, *D;
  CK(cudaMalloc(&P, pool));
  CK(cudaMalloc(&D, outb));
  CK(cudaMemcpy(P, h, pool, cudaMemcpyHostToDevice));
  CK(cudaMemset(D, 0, outb));
  free(h);
  struct model {
    const char *name;
    int N, C, F, QD, KD, layers;
  } models[] = {{"1B", 8192, 2048, 8192, 2048, 512, 16}, {"8B", 2048, 4096, 14336, 4096, 1024, 32}};
  for (int mi = 0; mi < 2; mi++) {
    const struct model *M = &models[mi];
    struct lin {
      const char *name;
      int OC, C, residual;
    } lins[] = {{"q", M->QD, M->C, 0},  {"k", M->KD, M->C, 0},  {"v", M->KD, M->C, 0},
                {"o", M->C, M->QD, 1},  {"gate", M->F, M->C, 0}, {"up", M->F, M->C, 0},
                {"down", M->C, M->F, 1}};
    double step[2][2] = {{0, 0}, {0, 0}}; /* [first pick, best][one, hot], ms a step */
    printf("\n%s (N %d): per GEMM ms, first heuristic pick vs best of its candidates\n", M->name,
           M->N);
    printf("%-6s %-5s %6s %6s %6s | %8s %8s | %8s %8s %3s | %s\n", "layer", "prod", "m", "n", "k",
           "pick one", "hot", "best one", "hot", "idx", "algos");
    for (int li = 0; li < 7; li++) {
      const struct lin *L = &lins[li];
      const int N = M->N, C = L->C, OC = L->OC;
      struct gemm gs[3] = {
          {1, 0, OC, N, C, C, C, OC, 0, L->residual ? 1.0f : 0.0f}, /* out = x W^T (+ residual) */
          {0, 0, C, N, OC, C, OC, C, 0, 0.0f},                       /* dinp = dout W */
          {0, 1, C, OC, N, C, OC, C, 1, 0.0f},                       /* dW = dout^T x (fp32) */
      };
      const char *prod[3] = {"fwd", "dinp", "dW"};
      for (int pi = 0; pi < 3; pi++) {
        const struct gemm *g = &gs[pi];
        setup(g);
        cublasLtMatmulPreference_t pref;
        LK(cublasLtMatmulPreferenceCreate(&pref));
        const uint64_t wsb = WS_BYTES;
        LK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                                sizeof wsb));
        cublasLtMatmulHeuristicResult_t res[MAX_ALGOS];
        int found = 0;
        LK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, MAX_ALGOS, res, &found));
        cublasLtMatmulPreferenceDestroy(pref);
        /* A: the pool's start; B: after A's elements. */
        const size_t a_elems = (size_t)g->m * g->k;
        const void *A = P, *B = (const unsigned short *)P + a_elems;
        float pick1 = 0, pickh = 0, best1 = 1e30f, besth = 1e30f;
        int bi = 0;
        for (int i = 0; i < found; i++) {
          float o = 0, hh = 0;
          if (!time_algo(g, &res[i].algo, A, B, D, &o, &hh))
            continue;
          if (i == 0) {
            pick1 = o;
            pickh = hh;
          }
          if (hh < besth) {
            besth = hh;
            best1 = o;
            bi = i;
          }
        }
        teardown();
        CK(cudaStreamSynchronize(st));
        printf("%-6s %-5s %6d %6d %6d | %8.4f %8.4f | %8.4f %8.4f %3d | %d\n", L->name, prod[pi],
               g->m, g->n, g->k, pick1, pickh, best1, besth, bi, found);
        step[0][0] += M->layers * pick1;
        step[0][1] += M->layers * pickh;
        step[1][0] += M->layers * best1;
        step[1][1] += M->layers * besth;
      }
    }
    printf("%s layers' GEMMs a step (x %d layers): first pick %.2f ms one / %.2f hot; best %.2f / "
           "%.2f (%.1f %% less, hot)\n",
           M->name, M->layers, step[0][0], step[0][1], step[1][0], step[1][1],
           100.0 * (1.0 - step[1][1] / step[0][1]));
  }
  cudaFree(D);
  cudaFree(P);
  cudaFree(ws);
  cublasLtDestroy(lt);
  return 0;
}
