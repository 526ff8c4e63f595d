/* Choosing the next token: greedy, or sampling with temperature, top-k and
 * top-p (in that order, as transformers' logits processors), from a seeded
 * xoshiro256** stream per row so that a prompt's output does not depend on
 * the batch it ran in. */
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

/* i comes before j: higher probability, then lower id. */
static int before(const float *p, int32_t i, int32_t j) {
  return p[i] > p[j] || (p[i] == p[j] && i < j);
}

/* Max-heap (by `before`) of h[0..m): restores it below slot k. */
static void sift_down(int32_t *h, int m, int k, const float *p) {
  for (;;) {
    int c = 2 * k + 1;
    if (c >= m)
      return;
    if (c + 1 < m && before(p, h[c + 1], h[c]))
      c++;
    if (!before(p, h[c], h[k]))
      return;
    int32_t t = h[k];
    h[k] = h[c];
    h[c] = t;
    k = c;
  }
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
  /* The candidates in order (probability descending, lower id first on
   * ties), taken one by one off a heap only as far as top-k and top-p need:
   * the i-th lands at idx[V - 1 - i] (heapsort order), so a peaked
   * distribution costs O(V) rather than a full sort. */
  for (int k = V / 2 - 1; k >= 0; k--)
    sift_down(idx, V, k, p);
  int limit = s->top_k > 0 && s->top_k < V ? s->top_k : V;
  int use_p = s->top_p > 0.0 && s->top_p < 1.0, n = 0, m = V;
  double c = 0.0;
  while (n < limit) { /* the smallest prefix whose mass reaches top_p (at least one) */
    int32_t t = idx[0];
    idx[0] = idx[--m];
    sift_down(idx, m, 0, p);
    idx[m] = t;
    n++;
    c += p[t];
    if (use_p && c >= s->top_p)
      break;
  }
  const int32_t *ord = idx + V - n; /* ord[n - 1 - i] is the i-th */
  double mass = 0.0;
  for (int i = 0; i < n; i++)
    mass += p[ord[n - 1 - i]];
  double u = uniform(state) * mass;
  c = 0.0;
  for (int i = 0; i < n; i++) {
    c += p[ord[n - 1 - i]];
    if (u < c)
      return ord[n - 1 - i];
  }
  return ord[0];
}
