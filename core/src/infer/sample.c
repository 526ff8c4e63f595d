/* Choosing the next token: greedy, or sampling with temperature, top-k and
 * top-p (in that order, as transformers' logits processors), from a seeded
 * xoshiro256** stream per row so that a prompt's output does not depend on
 * the batch it ran in. */
#define _GNU_SOURCE /* qsort_r */
#include <math.h>
#include <stdlib.h>

#include "data/rng.h"
#include "infer/infer.h"

static int32_t argmax(const float *x, int V) {
  int32_t best = 0;
  for (int v = 1; v < V; v++)
    if (x[v] > x[best])
      best = v;
  return best;
}

/* Indexes by probability, descending (ties: lower id first). */
static int by_p_desc(const void *a, const void *b, void *ctx) {
  const float *p = ctx;
  int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
  if (p[i] != p[j])
    return p[i] > p[j] ? -1 : 1;
  return i < j ? -1 : i > j;
}

/* A uniform double in [0, 1) from the 53 high bits. */
static double uniform(uint64_t *state) {
  fsdpc_rng r;
  fsdpc__rng_seed(&r, *state);
  uint64_t x = fsdpc__rng_next(&r);
  *state = fsdpc__rng_next(&r); /* the next draw starts from here */
  return (double)(x >> 11) * 0x1.0p-53;
}

int32_t fsdpc__sample(const float *logits, int V, const fsdpc_sampling *s, uint64_t *state,
                      float *p, int32_t *idx) {
  if (!s || s->temperature <= 0.0 || !p || !idx)
    return argmax(logits, V);
  /* softmax(logits / T) */
  float mx = logits[argmax(logits, V)];
  double sum = 0.0;
  for (int v = 0; v < V; v++) {
    p[v] = (float)exp((logits[v] - mx) / s->temperature);
    sum += p[v];
    idx[v] = v;
  }
  for (int v = 0; v < V; v++)
    p[v] = (float)(p[v] / sum);
  qsort_r(idx, (size_t)V, sizeof *idx, by_p_desc, p);
  int n = V;
  if (s->top_k > 0 && s->top_k < n)
    n = s->top_k;
  if (s->top_p > 0.0 && s->top_p < 1.0) {
    double c = 0.0;
    int k = 0;
    while (k < n) { /* the smallest prefix whose mass reaches top_p (at least one) */
      c += p[idx[k++]];
      if (c >= s->top_p)
        break;
    }
    n = k;
  }
  double mass = 0.0;
  for (int i = 0; i < n; i++)
    mass += p[idx[i]];
  double u = uniform(state) * mass, c = 0.0;
  for (int i = 0; i < n; i++) {
    c += p[idx[i]];
    if (u < c)
      return idx[i];
  }
  return idx[n - 1];
}
