/* Shared by the CUDA tests: the GPU-or-skip entry, a device context, bf16
 * rounding on the host, uploads with poisoning, and relative-error checks.
 *
 * Every test binary here starts with cuda_test_main(): with no usable GPU it
 * prints exactly "skipped: no GPU" and returns 77, which CMake registers as
 * SKIP_RETURN_CODE so ctest reports the test as skipped. Check runs without
 * fork (CK_NOFORK): a forked child must not use its parent's CUDA context. */
#ifndef FSDPC_TESTS_CUDA_TESTUTIL_H
#define FSDPC_TESTS_CUDA_TESTUTIL_H

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/cuda_ctx.h"
#include "ops/cuda/ops_cuda.h"

#define CUDA_SKIP_CODE 77

static fsdpc_cuda_ctx *g_ctx;
static fsdpc_err g_err;

#define CK(expr)                                                                                   \
  do {                                                                                             \
    fsdpc_status st_ = (expr);                                                                     \
    ck_assert_msg(st_ == FSDPC_OK, "%s -> %d: %s", #expr, (int)st_, g_err.msg);                    \
  } while (0)

/* xorshift64* uniform in [lo, hi) */
static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static inline double urand(double lo, double hi) {
  g_rng ^= g_rng >> 12;
  g_rng ^= g_rng << 25;
  g_rng ^= g_rng >> 27;
  return lo + (hi - lo) * (double)((g_rng * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static inline uint16_t f2bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if (isnan(f))
    return (uint16_t)((u >> 16) | 0x40);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static inline float bf2f(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Fills x with uniform values in [lo, hi), rounded to bf16 (so the fp32 CPU
 * reference and the bf16 GPU kernel see the same numbers). */
static inline float *rand_bf16_values(size_t n, double lo, double hi) {
  float *x = malloc((n ? n : 1) * sizeof(float));
  for (size_t i = 0; i < n; i++)
    x[i] = bf2f(f2bf((float)urand(lo, hi)));
  return x;
}
static inline float *rand_f32(size_t n, double lo, double hi) {
  float *x = malloc((n ? n : 1) * sizeof(float));
  for (size_t i = 0; i < n; i++)
    x[i] = (float)urand(lo, hi);
  return x;
}

static inline void *dev_alloc(size_t bytes) {
  void *p = NULL;
  CK(fsdpc__cuda_alloc(g_ctx, FSDPC_MEM_OTHER, bytes ? bytes : 1, NULL, &p, &g_err));
  /* Poison: 0xFF bytes are NaN in bf16 and fp32, so an element a kernel
   * forgot to write fails the finiteness check. */
  CK(fsdpc__cuda_memset(g_ctx, p, 0xFF, bytes ? bytes : 1, &g_err));
  return p;
}
static inline void dev_free(void *p, size_t bytes) {
  CK(fsdpc__cuda_free(g_ctx, FSDPC_MEM_OTHER, p, bytes ? bytes : 1, NULL, &g_err));
}

/* Offset buffers: the kernels take 16-byte vector paths only when every
 * pointer is 16-byte aligned; a tensor that starts `off` elements past an
 * allocation (off = 1) drives the scalar paths. n elements of elem bytes;
 * free with dev_free_at and the same n and off. */
static inline void *dev_alloc_at(size_t elem, size_t n, int off) {
  return (char *)dev_alloc(elem * (n + (size_t)off)) + elem * (size_t)off;
}
static inline void dev_free_at(void *p, size_t elem, size_t n, int off) {
  dev_free((char *)p - elem * (size_t)off, elem * (n + (size_t)off));
}
static inline uint16_t *up_bf16_at(const float *x, size_t n, int off) {
  uint16_t *h = malloc((n ? n : 1) * 2), *d = dev_alloc_at(2, n, off);
  for (size_t i = 0; i < n; i++)
    h[i] = f2bf(x[i]);
  CK(fsdpc__cuda_h2d(g_ctx, d, h, n * 2, &g_err));
  free(h);
  return d;
}
static inline void *up_raw_at(const void *x, size_t elem, size_t n, int off) {
  void *d = dev_alloc_at(elem, n, off);
  CK(fsdpc__cuda_h2d(g_ctx, d, x, elem * n, &g_err));
  return d;
}
static inline uint16_t *up_bf16(const float *x, size_t n) {
  return up_bf16_at(x, n, 0);
}
static inline void *up_raw(const void *x, size_t bytes) {
  void *d = dev_alloc(bytes);
  CK(fsdpc__cuda_h2d(g_ctx, d, x, bytes, &g_err));
  return d;
}
static inline float *down_bf16(const uint16_t *d, size_t n) {
  uint16_t *h = malloc((n ? n : 1) * 2);
  CK(fsdpc__cuda_sync(g_ctx, &g_err));
  CK(fsdpc__cuda_d2h(g_ctx, h, d, n * 2, &g_err));
  float *x = malloc((n ? n : 1) * sizeof(float));
  for (size_t i = 0; i < n; i++)
    x[i] = bf2f(h[i]);
  free(h);
  return x;
}
static inline float *down_f32(const float *d, size_t n) {
  float *x = malloc((n ? n : 1) * sizeof(float));
  CK(fsdpc__cuda_sync(g_ctx, &g_err));
  CK(fsdpc__cuda_d2h(g_ctx, x, d, n * sizeof(float), &g_err));
  return x;
}

/* ||got - ref|| / ||ref||; +inf when any element of got is not finite. */
static inline double rel_err(const float *got, const float *ref, size_t n) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(got[i]))
      return INFINITY;
    double d = (double)got[i] - ref[i];
    num += d * d;
    den += (double)ref[i] * ref[i];
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Asserts rel_err < tol (NaN/inf never pass) and prints the figure. */
#define CHECK_REL(name, got, ref, n, tol)                                                          \
  do {                                                                                             \
    double e_ = rel_err(got, ref, n);                                                              \
    printf("  %-34s rel err %.3e (tol %.0e, n %zu)\n", name, e_, (double)(tol), (size_t)(n));      \
    ck_assert_msg(isfinite(e_) && e_ < (tol), "%s: relative error %g >= %g (or not finite)", name, \
                  e_, (double)(tol));                                                              \
  } while (0)

/* Tolerances: bf16 outputs land near 2e-3 (one rounding of each output);
 * fp32 outputs computed from the same inputs in another order near 1e-7. */
#define TOL_BF16 1e-2
#define TOL_F32 1e-5

/* The common main: skip without a GPU, make the context, run the suite. */
static inline int cuda_test_main(Suite *(*make_suite)(void)) {
  if (fsdpc__cuda_device_count() < 1) {
    printf("skipped: no GPU\n");
    return CUDA_SKIP_CODE;
  }
  fsdpc_cuda_ctx_opts o;
  fsdpc__cuda_ctx_opts_default(&o);
  if (fsdpc__cuda_ctx_create(&o, &g_ctx, &g_err) != FSDPC_OK) {
    printf("error: %s\n", g_err.msg);
    return 1;
  }
  SRunner *sr = srunner_create(make_suite());
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  fsdpc__cuda_ctx_destroy(g_ctx);
  return failed ? 1 : 0;
}

#endif
