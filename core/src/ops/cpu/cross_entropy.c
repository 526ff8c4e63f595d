/* Fused lm_head + softmax cross-entropy, chunked over rows.
 * N = rows (tokens), C = hidden size, V = vocab size, R = chunk_rows.
 *
 * Per chunk of R rows: logits = x @ weight^T into scratch (R, V); each row's
 * log-sum-exp is taken with the max subtracted and the exp-sum in double;
 * the row's gradient (softmax - onehot) * grad_scale overwrites its logits in
 * scratch; then dx = dlogits @ weight (=) and dweight += dlogits^T @ x. So no
 * more than R * V logits ever exist, whatever N is.
 *
 * Labels are ignore_index (-100) or in [0, V) (the data pipeline checks token
 * ids); any other label is treated like ignore_index, never read out of
 * bounds. Per-row losses are computed in parallel and summed in row order,
 * so the loss bits depend neither on thread timing nor on the thread count.
 * Accumulation rule: dweight +=, dx =. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "io/dtype.h"
#include "ops/cpu/ops_cpu.h"

enum { IGNORE_INDEX = -100, MAX_CHUNK_ROWS = 256 };

/* Loss of one row; when want_grad, replaces the row's logits by
 * grad_scale * (softmax - onehot), times d(capped)/d(logit) = 1 - (z /
 * softcap)^2 when the logits z were soft-capped (softcap > 0). */
static double xent_row(float *logits, int label, int V, float grad_scale, int want_grad,
                       float softcap) {
  float mx = logits[0];
  for (int v = 1; v < V; v++)
    mx = logits[v] > mx ? logits[v] : mx;
  double sum = 0.0;
  for (int v = 0; v < V; v++)
    sum += exp((double)logits[v] - mx);
  double lse = (double)mx + log(sum);
  double loss = lse - (double)logits[label];
  if (want_grad) {
    for (int v = 0; v < V; v++) {
      float z = logits[v];
      float g = (float)(grad_scale * exp((double)z - lse)) - (v == label ? grad_scale : 0.0f);
      if (softcap > 0.0f) {
        float t = z / softcap;
        g *= 1.0f - t * t;
      }
      logits[v] = g;
    }
  }
  return loss;
}

/* Every entry point: row_seed (N) replaces grad_scale row by row when
 * given; row_loss (N) receives each row's loss (0 for an ignored row);
 * softcap > 0 soft-caps the logits first. */
static void lmhead_xent(double *loss_sum, int64_t *count, double *row_loss, const float *row_seed,
                        float *dx, float *dweight, const float *x, const float *weight,
                        const int32_t *labels, int N, int C, int V, float grad_scale,
                        int chunk_rows, int logits_bf16, float softcap, float *scratch) {
  double total = 0.0;
  int64_t counted = 0;
  int want_grad = dx != NULL || dweight != NULL;
  if (chunk_rows < 1)
    chunk_rows = 1;
  if (chunk_rows > MAX_CHUNK_ROWS) /* the scratch holds at least this many rows */
    chunk_rows = MAX_CHUNK_ROWS;
  for (int r0 = 0; r0 < N && V > 0; r0 += chunk_rows) {
    int R = N - r0 < chunk_rows ? N - r0 : chunk_rows;
    const float *xc = x + (size_t)r0 * C;
    const int32_t *lc = labels + r0;
    fsdpc__cpu_logits(scratch, xc, weight, R, C, V);

    /* Per-row losses in parallel, summed in row order: the same bits for
     * any thread count. */
    double rowloss[MAX_CHUNK_ROWS];
#pragma omp parallel for num_threads(fsdpc__cpu_nt()) schedule(static) if (R > 1)
    for (int r = 0; r < R; r++) {
      float *row = scratch + (size_t)r * V;
      int label = lc[r];
      if (label < 0 || label >= V) { /* ignore_index (or invalid): no loss, no grad */
        if (want_grad)
          memset(row, 0, (size_t)V * sizeof(float));
        rowloss[r] = -1.0;
        continue;
      }
      if (logits_bf16) /* each row by its own thread */
        for (int v = 0; v < V; v++)
          row[v] = fsdpc__bf16_to_f32(fsdpc__f32_to_bf16(row[v]));
      if (softcap > 0.0f) /* as transformers: divide, tanh, multiply, in fp32 */
        for (int v = 0; v < V; v++)
          row[v] = tanhf(row[v] / softcap) * softcap;
      rowloss[r] =
          xent_row(row, label, V, row_seed ? row_seed[r0 + r] : grad_scale, want_grad, softcap);
    }
    for (int r = 0; r < R; r++) {
      if (row_loss)
        row_loss[r0 + r] = rowloss[r] >= 0.0 ? rowloss[r] : 0.0;
      if (rowloss[r] >= 0.0) {
        total += rowloss[r];
        counted++;
      }
    }
    if (dx != NULL) {
      /* (R, V) @ (V, C) */
      fsdpc__cpu_sgemm(0, 0, R, C, V, scratch, V, weight, C, 0.0f, dx + (size_t)r0 * C, C);
    }
    if (dweight != NULL) {
      /* (V, R) @ (R, C), beta = 1 accumulates. */
      fsdpc__cpu_sgemm(1, 0, V, C, R, scratch, V, xc, C, 1.0f, dweight, C);
    }
  }
  if (V <= 0 && dx != NULL)
    memset(dx, 0, (size_t)N * C * sizeof(float));
  *loss_sum = total;
  *count = counted;
}

void fsdpc__cpu_lmhead_xent(double *loss_sum, int64_t *count, float *dx, float *dweight,
                            const float *x, const float *weight, const int32_t *labels, int N,
                            int C, int V, float grad_scale, int chunk_rows, int logits_bf16,
                            float *scratch) {
  lmhead_xent(loss_sum, count, NULL, NULL, dx, dweight, x, weight, labels, N, C, V, grad_scale,
              chunk_rows, logits_bf16, 0.0f, scratch);
}

void fsdpc__cpu_lmhead_xent_capped(double *loss_sum, int64_t *count, float *dx, float *dweight,
                                   const float *x, const float *weight, const int32_t *labels,
                                   int N, int C, int V, float grad_scale, int chunk_rows,
                                   int logits_bf16, float softcap, float *scratch) {
  lmhead_xent(loss_sum, count, NULL, NULL, dx, dweight, x, weight, labels, N, C, V, grad_scale,
              chunk_rows, logits_bf16, softcap, scratch);
}

void fsdpc__cpu_lmhead_xent_rows(double *loss_sum, int64_t *count, double *row_loss,
                                 const float *row_seed, float *dx, float *dweight, const float *x,
                                 const float *weight, const int32_t *labels, int N, int C, int V,
                                 int chunk_rows, int logits_bf16, float *scratch) {
  int bwd = row_seed != NULL;
  lmhead_xent(loss_sum, count, row_loss, row_seed, bwd ? dx : NULL, bwd ? dweight : NULL, x, weight,
              labels, N, C, V, 0.0f, chunk_rows, logits_bf16, 0.0f, scratch);
}

void fsdpc__cpu_logits(float *out,          // (N, V)
                       const float *x,      // (N, C)
                       const float *weight, // (V, C)
                       int N, int C, int V) {
  fsdpc__cpu_matmul_fwd(out, x, weight, N, C, V);
}
