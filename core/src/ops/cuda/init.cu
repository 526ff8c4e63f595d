/* The random init on the device (twin of fsdpc__model_init_range in
 * model/params.c): the same per-element function (util/init_rng.h), so
 * the fp32 values equal the CPU's bit for bit and a rank makes only the
 * elements of its own shard, straight into device memory. */
#include "ops/cuda/cuda_internal.cuh"
#include "util/init_rng.h"

/* Grid-stride over n elements: dst[i] = element elem_offset + i. */
static __global__ void init_normal_kernel(float *dst, // (n)
                                          size_t n, uint64_t key, uint64_t elem_offset,
                                          double std) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    dst[i] = fsdpc__init_normal(key, elem_offset + i, std);
}

static __global__ void fill_kernel(float *dst, size_t n, float v) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    dst[i] = v;
}

extern "C" fsdpc_status fsdpc__cuda_init_f32(fsdpc_cuda_ctx *ctx, float *dst, size_t n,
                                             uint64_t key, uint64_t elem_offset, double std,
                                             int ones, fsdpc_err *err) {
  if (n == 0)
    return FSDPC_OK;
  if (!dst)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda init_f32: dst is NULL");
  const int threads = 256;
  size_t want = (n + threads - 1) / threads;
  int blocks = want < 65536 ? (int)want : 65536;
  if (ones)
    fill_kernel<<<blocks, threads, 0, ctx->compute>>>(dst, n, 1.0f);
  else
    init_normal_kernel<<<blocks, threads, 0, ctx->compute>>>(dst, n, key, elem_offset, std);
  FSDPC_CUDA_LAUNCHED(err, "init_f32");
  return FSDPC_OK;
}
