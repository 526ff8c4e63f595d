/* Times the memory-bound CUDA ops at the shapes of one Llama-3.2-1B training
 * step (N = 8192 tokens, C = 2048, F = 8192, 32 heads x 64, 8 KV heads; one
 * decoder layer's 60,821,504 parameters for the casts and the grad norm) and
 * prints achieved bandwidth: bytes that must move (each input read once,
 * each output written once) over the median time of 50 runs after 5
 * warm-ups (CUDA events on the compute stream). Inputs are random bf16
 * values (never zeros) from one pool uploaded once.
 *
 * Usage: fsdpc_bench_ew [PEAK_GBPS]   (default 4800, an H200's HBM3e; the
 * last column is the share of it). Exits 77 without a GPU. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/cuda_ctx.h"
#include "ops/cuda/ops_cuda.h"

enum { WARMUP = 5, RUNS = 50 };
enum { N = 8192, C = 2048, F = 8192, NH = 32, KVH = 8, HD = 64, MAXT = 8192 };
#define LAYER_PARAMS ((size_t)60821504) /* q,o 2048^2; k,v 512x2048; mlp 3x2048x8192; 2 norms */

static fsdpc_cuda_ctx *X;
static fsdpc_err E;

#define CU(expr)                                                                                   \
  do {                                                                                             \
    if ((expr) != FSDPC_OK) {                                                                      \
      fprintf(stderr, "%s: %s\n", #expr, E.msg);                                                   \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static int cmp(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* Device buffers, all from the random pool or written by the ops. */
static uint16_t *A, *B, *D, *O1, *O2; /* bf16, N*F each */
static float *RSTD, *DW, *COS, *SIN, *F1, *F2;
static int32_t *POS;
static double *ACC;

typedef void (*op_fn)(void);

static void op_rms_fwd(void) {
  CU(fsdpc__cuda_rmsnorm_fwd(X, O1, RSTD, A, B, N, C, 1e-5f, &E));
}
static void op_rms_bwd(void) {
  CU(fsdpc__cuda_rmsnorm_bwd(X, O2, DW, D, A, B, RSTD, N, C, &E));
}
static void op_swi_fwd(void) {
  CU(fsdpc__cuda_swiglu_fwd(X, O1, A, B, N, F, &E));
}
static void op_swi_bwd(void) {
  CU(fsdpc__cuda_swiglu_bwd(X, O1, O2, D, A, B, N, F, &E));
}
static void op_rope_q(void) {
  CU(fsdpc__cuda_rope_fwd(X, O1, COS, SIN, POS, N, NH, HD, HD, MAXT, &E));
}
static void op_rope_k(void) {
  CU(fsdpc__cuda_rope_bwd(X, O1, COS, SIN, POS, N, KVH, HD, HD, MAXT, &E));
}
static void op_add(void) {
  CU(fsdpc__cuda_add(X, O1, A, B, (size_t)N * C, &E));
}
static void op_cast_down(void) {
  CU(fsdpc__cuda_cast_f32_bf16(X, O1, F1, LAYER_PARAMS, NULL, &E));
}
static void op_cast_up(void) {
  CU(fsdpc__cuda_cast_bf16_f32(X, F2, A, LAYER_PARAMS, NULL, &E));
}
static void op_sumsq(void) {
  CU(fsdpc__cuda_sumsq(X, ACC, F1, LAYER_PARAMS, 0, &E));
}
static void op_add_f32(void) {
  CU(fsdpc__cuda_add_f32_inplace(X, F2, F1, LAYER_PARAMS, &E));
}
static void op_scale(void) {
  CU(fsdpc__cuda_scale(X, F2, 0.999f, LAYER_PARAMS, &E));
}

static float time_ms(op_fn fn) {
  cudaStream_t s = (cudaStream_t)fsdpc__cuda_compute_stream(X);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < WARMUP; i++)
    fn();
  float t[RUNS];
  for (int i = 0; i < RUNS; i++) {
    cudaEventRecord(a, s);
    fn();
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    cudaEventElapsedTime(&t[i], a, b);
  }
  CU(fsdpc__cuda_sync(X, &E));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  qsort(t, RUNS, sizeof(float), cmp);
  return t[RUNS / 2];
}

static void *dalloc(size_t bytes) {
  void *p = NULL;
  CU(fsdpc__cuda_alloc(X, FSDPC_MEM_OTHER, bytes, NULL, &p, &E));
  return p;
}

/* bf16 values uniform in [-1, 1) as raw bits; xorshift so runs repeat. */
static void *random_bf16(size_t n, uint64_t seed) {
  uint16_t *h = malloc(n * 2);
  uint64_t s = seed;
  for (size_t i = 0; i < n; i++) {
    s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
    float f = (float)((s * 2685821657736338717ull) >> 40) / 8388608.0f - 1.0f;
    uint32_t u;
    memcpy(&u, &f, 4);
    h[i] = (uint16_t)(u >> 16);
  }
  void *d = dalloc(n * 2);
  CU(fsdpc__cuda_h2d(X, d, h, n * 2, &E));
  free(h);
  return d;
}

static void row(const char *name, const char *shape, op_fn fn, double bytes, double peak) {
  const float ms = time_ms(fn);
  const double gbps = bytes / ms / 1e6;
  printf("| %-22s | %-24s | %8.4f | %8.1f | %7.0f | %5.1f%% |\n", name, shape, ms, bytes / 1e6,
         gbps, 100.0 * gbps / peak);
}

int main(int argc, char **argv) {
  const double peak = argc > 1 ? atof(argv[1]) : 4800.0;
  if (fsdpc__cuda_device_count() < 1) {
    printf("skipped: no GPU\n");
    return 77;
  }
  fsdpc_cuda_ctx_opts o;
  fsdpc__cuda_ctx_opts_default(&o);
  CU(fsdpc__cuda_ctx_create(&o, &X, &E));
  struct cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, fsdpc__cuda_ctx_device(X));
  const size_t nf = (size_t)N * F;
  A = random_bf16(nf, 0x1234567887654321ull);
  B = random_bf16(nf, 0x0fedcba987654321ull);
  D = random_bf16(nf, 0x5555aaaa5555aaaaull);
  O1 = dalloc(nf * 2), O2 = dalloc(nf * 2);
  F1 = dalloc(LAYER_PARAMS * 4), F2 = dalloc(LAYER_PARAMS * 4);
  CU(fsdpc__cuda_cast_bf16_f32(X, F1, A, LAYER_PARAMS, NULL, &E));
  RSTD = dalloc(sizeof(float) * N), DW = dalloc(sizeof(float) * C);
  CU(fsdpc__cuda_memset(X, DW, 0, sizeof(float) * C, &E));
  CU(fsdpc__cuda_rmsnorm_fwd(X, O1, RSTD, A, B, N, C, 1e-5f, &E));
  COS = dalloc(sizeof(float) * MAXT * HD / 2), SIN = dalloc(sizeof(float) * MAXT * HD / 2);
  const fsdpc_rope rope = {.type = FSDPC_ROPE_LLAMA3,
                           .dim = HD,
                           .max_pos = MAXT,
                           .theta = 500000.0,
                           .factor = 32.0,
                           .low_freq_factor = 1.0,
                           .high_freq_factor = 4.0,
                           .original_max_pos = 8192};
  CU(fsdpc__cuda_rope_tables(X, COS, SIN, &rope, MAXT, 0, &E));
  int32_t *h = malloc(sizeof(int32_t) * N);
  for (int i = 0; i < N; i++)
    h[i] = i % 2048; /* 4 sequences of 2048 */
  POS = dalloc(sizeof(int32_t) * N);
  CU(fsdpc__cuda_h2d(X, POS, h, sizeof(int32_t) * N, &E));
  free(h);
  ACC = dalloc(sizeof(double));
  CU(fsdpc__cuda_memset(X, O1, 0, nf * 2, &E)); /* rope works in place on O1: finite values */
  CU(fsdpc__cuda_add(X, O1, A, B, nf, &E));

  const double nc = (double)N * C, nfd = (double)nf, lp = (double)LAYER_PARAMS;
  printf("device: %s, %d SMs; peak for the %% column: %.0f GB/s\n\n", prop.name,
         prop.multiProcessorCount, peak);
  printf("| op                     | shape                    |       ms |       MB |    GB/s | "
         "of peak |\n");
  printf("|---|---|---:|---:|---:|---:|\n");
  row("rmsnorm fwd", "N=8192 C=2048", op_rms_fwd, 4 * nc + 4.0 * N, peak);
  row("rmsnorm bwd", "N=8192 C=2048", op_rms_bwd, 6 * nc + 4.0 * N + 8.0 * C, peak);
  row("swiglu fwd", "N=8192 F=8192", op_swi_fwd, 6 * nfd, peak);
  row("swiglu bwd", "N=8192 F=8192", op_swi_bwd, 10 * nfd, peak);
  row("rope q (in place)", "N=8192 H=32 HD=64", op_rope_q, 4.0 * N * NH * HD, peak);
  row("rope k bwd (in place)", "N=8192 H=8 HD=64", op_rope_k, 4.0 * N * KVH * HD, peak);
  row("add bf16", "8192 x 2048", op_add, 6 * nc, peak);
  row("cast f32->bf16", "60.8M (one layer)", op_cast_down, 6 * lp, peak);
  row("cast bf16->f32", "60.8M (one layer)", op_cast_up, 6 * lp, peak);
  row("sumsq f32 (fp64 acc)", "60.8M (one layer)", op_sumsq, 4 * lp, peak);
  row("add f32 in place", "60.8M (one layer)", op_add_f32, 12 * lp, peak);
  row("scale f32", "60.8M (one layer)", op_scale, 8 * lp, peak);
  fsdpc__cuda_ctx_destroy(X);
  return 0;
}
