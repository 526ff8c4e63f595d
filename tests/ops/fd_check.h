/* Helpers shared by the op tests: a seeded RNG and a central finite-difference
 * gradient check.
 *
 * A gradient is checked on the scalar L = sum_k r_k y_k (r fixed random, y the
 * op's output), summed in double so that outputs which a perturbation does not
 * touch cancel exactly. The analytic gradient comes from the op's backward
 * with dout = r.
 *
 * The finite differences run on one thread: they are thousands of tiny
 * calls, and on a loaded machine each parallel region's barrier can wait a
 * whole scheduler slice for a descheduled worker. The analytic gradients and
 * the forward checks still run with every thread. */
#ifndef FSDPC_TESTS_OPS_FD_CHECK_H
#define FSDPC_TESTS_OPS_FD_CHECK_H

#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* xorshift64*: reproducible across platforms, unlike rand(). */
typedef struct {
  uint64_t s;
} test_rng;

static inline uint64_t rng_next(test_rng *r) {
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return r->s * 2685821657736338717ULL;
}
/* Uniform in [-1, 1). */
static inline float rng_uniform(test_rng *r) {
  return (float)((double)(rng_next(r) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}
static inline void rng_fill(test_rng *r, float *x, size_t n, float amp) {
  for (size_t i = 0; i < n; i++)
    x[i] = amp * rng_uniform(r);
}
static inline int rng_int(test_rng *r, int n) {
  return (int)(rng_next(r) % (uint64_t)n);
}

/* sum_k r_k y_k in double. */
static inline double dot_d(const float *r, const float *y, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; i++)
    s += (double)r[i] * y[i];
  return s;
}

typedef double (*fd_loss_fn)(void *ctx);

/* Compares the analytic gradient grad (n) of loss(ctx) with respect to x (n)
 * against central differences with step eps. An element passes when
 * |g - fd| <= rtol * max(|g|, |fd|) + rtol * 0.1 * max_k |fd_k|: relative
 * where the gradient is large, and only near-zero entries get the absolute
 * slack that fp32 rounding needs. Returns the number of failing elements and
 * prints the first few. */
static inline int fd_check(const char *what, float *x, const float *grad, size_t n, fd_loss_fn loss,
                           void *ctx, float eps, double rtol) {
  double fd_max = 0.0;
  double *fd = (double *)malloc(n * sizeof(double));
  int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  for (size_t i = 0; i < n; i++) {
    float save = x[i];
    float xp = save + eps, xm = save - eps;
    x[i] = xp;
    double lp = loss(ctx);
    x[i] = xm;
    double lm = loss(ctx);
    x[i] = save;
    fd[i] = (lp - lm) / ((double)xp - (double)xm);
    if (fabs(fd[i]) > fd_max)
      fd_max = fabs(fd[i]);
  }
  omp_set_num_threads(threads);
  int bad = 0;
  for (size_t i = 0; i < n; i++) {
    double g = grad[i], a = fabs(g) > fabs(fd[i]) ? fabs(g) : fabs(fd[i]);
    if (fabs(g - fd[i]) > rtol * a + rtol * 0.1 * fd_max) {
      if (bad < 5)
        fprintf(stderr, "%s[%zu]: analytic %.7g, finite difference %.7g\n", what, i, g, fd[i]);
      bad++;
    }
  }
  if (fd_max == 0.0) {
    fprintf(stderr, "%s: every finite difference is zero; the check would be vacuous\n", what);
    bad++;
  }
  free(fd);
  return bad;
}

#endif
