/* Greedy decoding on the device: the argmax of each fp32 logits row, so
 * that only the token ids go to the host (twin of cpu_argmax_rows in
 * ops/cpu/table.c). One block per row; each thread keeps its best (value,
 * id) over a strided slice, then warps and the block reduce, the lower id
 * winning a tie, so the result equals the CPU's left-to-right scan. */
#include "ops/cuda/cuda_internal.cuh"

#define AM_THREADS 1024

static __global__ void __launch_bounds__(AM_THREADS)
    argmax_rows_kernel(int32_t *out, const float *x, int V) {
  const float *row = x + (size_t)blockIdx.x * V;
  float best = -INFINITY;
  int id = V; /* no candidate yet: any id wins */
  for (int v = threadIdx.x; v < V; v += AM_THREADS) {
    const float y = row[v];
    if (id == V || y > best) { /* ids grow along the slice: ties keep the first */
      best = y;
      id = v;
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float b2 = __shfl_xor_sync(0xffffffffu, best, o);
    const int i2 = __shfl_xor_sync(0xffffffffu, id, o);
    if (i2 < V && (id == V || b2 > best || (b2 == best && i2 < id))) {
      best = b2;
      id = i2;
    }
  }
  __shared__ float sv[AM_THREADS / 32];
  __shared__ int si[AM_THREADS / 32];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  if (lane == 0) {
    sv[w] = best;
    si[w] = id;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float b = sv[0];
    int i = si[0];
    for (int k = 1; k < AM_THREADS / 32; k++)
      if (si[k] < V && (i == V || sv[k] > b || (sv[k] == b && si[k] < i))) {
        b = sv[k];
        i = si[k];
      }
    out[blockIdx.x] = i < V ? i : 0;
  }
}

extern "C" fsdpc_status fsdpc__cuda_argmax_rows(fsdpc_cuda_ctx *ctx, int32_t *out, const float *x,
                                                int N, int V, fsdpc_err *err) {
  if (N < 1 || V < 1 || N > 2147483647)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "cuda argmax_rows: bad shape %d x %d", N, V);
  argmax_rows_kernel<<<(unsigned)N, AM_THREADS, 0, ctx->compute>>>(out, x, V);
  FSDPC_CUDA_LAUNCHED(err, "argmax_rows");
  return FSDPC_OK;
}
