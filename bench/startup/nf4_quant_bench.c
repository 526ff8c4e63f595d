/* The host NF4 quantizer's start-up cost (issue 37): quantizes the seven
 * projections of LAYERS decoder layers of a Llama shape (random normal
 * weights, block 64, double quantization) with THREADS OpenMP threads and
 * prints the wall time per layer and in all, the process CPU time (on a
 * shared machine the wall time of a team says little), and a checksum of the bytes
 * (equal for any THREADS: the quantizer's output does not depend on the
 * team).
 *   build/bin/nf4_quant_bench HIDDEN INTERMEDIATE KV_DIM LAYERS THREADS
 *   build/bin/nf4_quant_bench 2048 8192 512 16 1     (the 1B shape, 1 thread)
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "quant/nf4.h"
#include "util/clock.h"

static uint64_t fnv(uint64_t h, const void *p, uint64_t n) {
  const uint8_t *b = p;
  for (uint64_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: nf4_quant_bench HIDDEN INTERMEDIATE KV_DIM LAYERS THREADS\n");
    return 2;
  }
  uint64_t h = strtoull(argv[1], NULL, 10), f = strtoull(argv[2], NULL, 10);
  uint64_t kv = strtoull(argv[3], NULL, 10);
  int layers = atoi(argv[4]), threads = atoi(argv[5]);
  const uint64_t proj[7] = {h * h, kv * h, kv * h, h * h, f * h, f * h, h * f};
  uint64_t most = f * h;
  float *x = malloc(most * sizeof *x);
  uint8_t *codes = malloc(most / 2 + 1), *qabsmax = malloc(most / 64 + 1);
  float *absmax = malloc((most / 64 + 1) * 4), *absmax2 = malloc((most / 64 / 256 + 2) * 4);
  if (!x || !codes || !qabsmax || !absmax || !absmax2 || layers < 1 || threads < 1) {
    fprintf(stderr, "nf4_quant_bench: bad arguments or out of memory\n");
    return 1;
  }
  for (uint64_t i = 0; i < most; i++) /* a cheap spread of values, not timed */
    x[i] = (float)((int64_t)((i * 2654435761ull) % 20001) - 10000) * 2e-6f;
  omp_set_num_threads(threads);
  double total = 0;
  clock_t c0 = clock(); /* process CPU time: the work, on a shared machine */
  uint64_t sum = 1469598103934665603ull;
  fsdpc_err err;
  for (int l = 0; l < layers; l++) {
    double t0 = fsdpc__now();
    for (int j = 0; j < 7; j++) {
      fsdpc_nf4 q = {.n = proj[j], .block_size = 64, .double_quant = 1, .codes = codes,
                     .absmax = absmax, .qabsmax = qabsmax, .absmax2 = absmax2};
      if (fsdpc__nf4_quantize(x, &q, "bench", &err) != FSDPC_OK) {
        fprintf(stderr, "nf4_quant_bench: %s\n", err.msg);
        return 1;
      }
      if (l == 0)
        sum = fnv(fnv(sum, codes, (q.n + 1) / 2), qabsmax, fsdpc__nf4_blocks(q.n, 64));
    }
    total += fsdpc__now() - t0;
  }
  double cpu = (double)(clock() - c0) / CLOCKS_PER_SEC;
  uint64_t n = 0;
  for (int j = 0; j < 7; j++)
    n += proj[j];
  printf("nf4_quant_bench: %d layers x %.1f M weights, %d threads: %.3f s (%.3f s a layer, "
         "%.1f M weights/s; CPU %.3f s), bytes %016llx\n",
         layers, (double)n / 1e6, threads, total, total / layers, (double)n * layers / total / 1e6,
         cpu, (unsigned long long)sum);
  free(x), free(codes), free(qabsmax), free(absmax), free(absmax2);
  return 0;
}
