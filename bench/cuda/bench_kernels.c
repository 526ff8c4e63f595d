/* Times the CUDA ops at training-sized shapes and prints achieved bandwidth
 * (memory-bound ops: bytes read + written once each) or TFLOP/s (GEMMs).
 * Each figure is the median of 20 timed runs after 3 warm-ups, timed with
 * CUDA events on the compute stream; inputs are random (never zeros), drawn
 * from one random pool uploaded once. Usage: fsdpc_bench_cuda */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/cuda_ctx.h"
#include "ops/cuda/ops_cuda.h"

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

typedef void (*op_fn)(void *arg);

/* Median milliseconds of fn over 20 runs after 3 warm-ups. */
static float time_ms(op_fn fn, void *arg) {
  cudaStream_t s = (cudaStream_t)fsdpc__cuda_compute_stream(X);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < 3; i++)
    fn(arg);
  float t[20];
  for (int i = 0; i < 20; i++) {
    cudaEventRecord(a, s);
    fn(arg);
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    cudaEventElapsedTime(&t[i], a, b);
  }
  CU(fsdpc__cuda_sync(X, &E));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  qsort(t, 20, sizeof(float), cmp);
  return t[10];
}

static void *dalloc(size_t bytes) {
  void *p = NULL;
  CU(fsdpc__cuda_alloc(X, FSDPC_MEM_OTHER, bytes, NULL, &p, &E));
  return p;
}

/* A random pool: bf16 values in [-1, 1) (as raw bits), reused as input. */
static void *random_pool(size_t bytes) {
  uint16_t *h = malloc(bytes);
  uint64_t s = 0x1234567887654321ull;
  for (size_t i = 0; i < bytes / 2; i++) {
    s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
    float f = (float)((s * 2685821657736338717ull) >> 40) / 8388608.0f - 1.0f;
    uint32_t u;
    memcpy(&u, &f, 4);
    h[i] = (uint16_t)(u >> 16);
  }
  void *d = dalloc(bytes);
  CU(fsdpc__cuda_h2d(X, d, h, bytes, &E));
  free(h);
  return d;
}

static char *P; /* random pool */
static void *B1, *B2, *B3;
static float *RSTD, *DW, *COS, *SIN, *F32;
static int32_t *POS, *LAB;
static double *OUT2;
static void *SCR;
static size_t SCR_BYTES;

enum { NBIG = 64 << 20 };               /* elements for the elementwise ops */
enum { RN = 16384, RC = 4096 };         /* rmsnorm rows, hidden */
enum { SN = 8192, SF = 14336 };         /* swiglu rows, intermediate (8B) */
enum { QN = 16384, QH = 32, QD = 128 }; /* rope rows, heads, head dim */
enum { GN = 8192, GC = 4096, GO = 14336 };
enum { XN = 8192, XC = 2048, XV = 128256, XR = 2048 };

static void op_cast(void *a) {
  CU(fsdpc__cuda_cast_f32_bf16(X, B1, F32, NBIG, NULL, &E));
}
static void op_add(void *a) {
  CU(fsdpc__cuda_add(X, B1, (void *)P, (void *)(P + 2 * NBIG), NBIG, &E));
}
static void op_rms_f(void *a) {
  CU(fsdpc__cuda_rmsnorm_fwd(X, B1, RSTD, (void *)P, (void *)P, RN, RC, 1e-5f, &E));
}
static void op_rms_b(void *a) {
  CU(fsdpc__cuda_rmsnorm_bwd(X, B1, DW, (void *)P, (void *)(P + 2 * (size_t)RN * RC), (void *)P,
                             RSTD, RN, RC, &E));
}
static void op_swi_f(void *a) {
  CU(fsdpc__cuda_swiglu_fwd(X, B1, (void *)P, (void *)(P + 2 * (size_t)SN * SF), SN, SF, &E));
}
static void op_swi_b(void *a) {
  CU(fsdpc__cuda_swiglu_bwd(X, B1, B2, (void *)P, (void *)(P + 2 * (size_t)SN * SF), (void *)P, SN,
                            SF, &E));
}
static void op_rope(void *a) {
  CU(fsdpc__cuda_rope_fwd(X, B1, COS, SIN, POS, QN, QH, QD, QD, 8192, &E));
}
static void op_sumsq(void *a) {
  CU(fsdpc__cuda_sumsq(X, OUT2, F32, NBIG, 0, &E));
}
static void op_mm_f(void *a) {
  CU(fsdpc__cuda_matmul_fwd(X, B1, (void *)P, (void *)(P + 2 * (size_t)GN * GC), NULL, GN, GC, GO,
                            &E));
}
static void op_mm_b(void *a) {
  CU(fsdpc__cuda_matmul_bwd(X, B2, (float *)B3, (void *)P, (void *)(P + 2 * (size_t)GN * GO),
                            (void *)(P + 4 * (size_t)GN * GO), GN, GC, GO, &E));
}
/* arg: NULL = fp32 logits, else bf16 */
static void op_xent(void *a) {
  CU(fsdpc__cuda_lmhead_xent(X, OUT2, B2, (float *)B3, (void *)P, (void *)(P + 2 * (size_t)XN * XC),
                             LAB, XN, XC, XV, 1.0f / XN, XR, a != NULL, SCR, SCR_BYTES, &E));
}

static void row(const char *name, const char *shape, float ms, double bytes, double flops) {
  if (flops > 0)
    printf("| %-22s | %-28s | %8.3f | %8s | %7.1f |\n", name, shape, ms, "", flops / ms / 1e9);
  else
    printf("| %-22s | %-28s | %8.3f | %8.0f | %7s |\n", name, shape, ms, bytes / ms / 1e6, "");
}

int main(void) {
  if (fsdpc__cuda_device_count() < 1) {
    printf("skipped: no GPU\n");
    return 77;
  }
  fsdpc_cuda_ctx_opts o;
  fsdpc__cuda_ctx_opts_default(&o);
  CU(fsdpc__cuda_ctx_create(&o, &X, &E));
  struct cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  const size_t pool = (size_t)1 << 30; /* 1 GiB of random bf16 */
  P = random_pool(pool);
  B1 = dalloc((size_t)GN * GO * 2), B2 = dalloc((size_t)GN * GO * 2);
  B3 =
      dalloc((size_t)XV * XC * 4 > (size_t)GO * GC * 4 ? (size_t)XV * XC * 4 : (size_t)GO * GC * 4);
  F32 = dalloc((size_t)NBIG * 4);
  CU(fsdpc__cuda_cast_bf16_f32(X, F32, (void *)P, NBIG, NULL, &E));
  RSTD = dalloc(sizeof(float) * RN);
  DW = dalloc(sizeof(float) * RC);
  CU(fsdpc__cuda_memset(X, DW, 0, sizeof(float) * RC, &E));
  CU(fsdpc__cuda_rmsnorm_fwd(X, B1, RSTD, (void *)P, (void *)P, RN, RC, 1e-5f, &E));
  COS = dalloc(sizeof(float) * 8192 * QD / 2), SIN = dalloc(sizeof(float) * 8192 * QD / 2);
  const fsdpc_rope rope = {.type = FSDPC_ROPE_LLAMA3,
                           .dim = QD,
                           .max_pos = 8192,
                           .theta = 500000.0,
                           .factor = 32.0,
                           .low_freq_factor = 1.0,
                           .high_freq_factor = 4.0,
                           .original_max_pos = 8192};
  CU(fsdpc__cuda_rope_tables(X, COS, SIN, &rope, 8192, 0, &E));
  int32_t *h = malloc(sizeof(int32_t) * QN);
  for (int i = 0; i < QN; i++)
    h[i] = (i * 7919) % 8192;
  POS = dalloc(sizeof(int32_t) * QN);
  CU(fsdpc__cuda_h2d(X, POS, h, sizeof(int32_t) * QN, &E));
  for (int i = 0; i < XN; i++)
    h[i] = (int32_t)(((uint64_t)i * 2654435761u) % XV);
  LAB = dalloc(sizeof(int32_t) * XN);
  CU(fsdpc__cuda_h2d(X, LAB, h, sizeof(int32_t) * XN, &E));
  OUT2 = dalloc(2 * sizeof(double));
  SCR_BYTES = fsdpc__cuda_lmhead_xent_scratch_bytes(XN, XV, XR, 0);
  SCR = dalloc(SCR_BYTES);
  CU(fsdpc__cuda_memset(X, B3, 0, (size_t)XV * XC * 4, &E));

  printf("device: %s, %d SMs\n\n", prop.name, prop.multiProcessorCount);
  printf("| op                     | shape                        |  ms      |  GB/s    | TFLOP/s "
         "|\n");
  printf("|---|---|---:|---:|---:|\n");
  row("cast f32->bf16", "64Mi elements", time_ms(op_cast, NULL), 6.0 * NBIG, 0);
  row("add bf16", "64Mi elements", time_ms(op_add, NULL), 6.0 * NBIG, 0);
  row("sumsq f32 (fp64 acc)", "64Mi elements", time_ms(op_sumsq, NULL), 4.0 * NBIG, 0);
  row("rmsnorm fwd", "N=16384 C=4096", time_ms(op_rms_f, NULL), 4.0 * RN * RC, 0);
  row("rmsnorm bwd", "N=16384 C=4096", time_ms(op_rms_b, NULL), 6.0 * RN * RC, 0);
  row("swiglu fwd", "N=8192 F=14336", time_ms(op_swi_f, NULL), 6.0 * SN * SF, 0);
  row("swiglu bwd", "N=8192 F=14336", time_ms(op_swi_b, NULL), 10.0 * SN * SF, 0);
  row("rope fwd (in place)", "N=16384 H=32 HD=128", time_ms(op_rope, NULL), 4.0 * QN * QH * QD, 0);
  row("matmul fwd (cuBLASLt)", "N=8192 C=4096 OC=14336", time_ms(op_mm_f, NULL), 0,
      2.0 * GN * GC * GO);
  row("matmul bwd dinp+dW", "N=8192 C=4096 OC=14336", time_ms(op_mm_b, NULL), 0,
      4.0 * GN * GC * GO);
  /* fp32 and bf16 logits, each timed 3 times in turn (a power-capped GPU's
   * clock drifts: a fixed order would favour the first); the median of the 3 */
  float xt[2][3];
  for (int k = 0; k < 3; k++)
    for (int bf = 0; bf < 2; bf++)
      xt[bf][k] = time_ms(op_xent, bf ? (void *)1 : NULL);
  for (int bf = 0; bf < 2; bf++) {
    qsort(xt[bf], 3, sizeof(float), cmp);
    row(bf ? "lmhead_xent bf16 logits" : "lmhead_xent fp32 logits", "N=8192 C=2048 V=128256 R=2048",
        xt[bf][1], 0, 6.0 * XN * XC * (double)XV);
  }
  fsdpc__cuda_ctx_destroy(X);
  return 0;
}
