/* Internal to core/src/ops/cuda: the context struct, error macros and bf16
 * helpers shared by the .cu files. Never included from C. */
#ifndef FSDPC_OPS_CUDA_INTERNAL_CUH
#define FSDPC_OPS_CUDA_INTERNAL_CUH

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "ops/cuda/cuda_ctx.h"
#include "ops/cuda/ops_cuda.h"

/* Partials of the deterministic two-pass reductions (sum of squares, loss). */
#define FSDPC_CUDA_REDUCE_BLOCKS 1024

typedef struct fsdpc_lt_plan fsdpc_lt_plan; /* matmul.cu: cached cuBLASLt plans */
extern "C" void fsdpc__cuda_lt_plans_free(fsdpc_cuda_ctx *ctx);

struct fsdpc_cuda_ctx {
  int device, sm_count;
  cudaStream_t compute, comm;
  cudaEvent_t events[FSDPC_CUDA_N_EVENTS];
  cublasLtHandle_t lt;
  void *lt_ws; /* cuBLASLt workspace */
  size_t lt_ws_bytes;
  fsdpc_lt_plan *lt_plans; /* LT_PLANS entries, built on first use (matmul.cu) */
  cudaMemPool_t pools[FSDPC_MEM_NCAT];
  int64_t alloc_cur[FSDPC_MEM_NCAT], alloc_peak[FSDPC_MEM_NCAT];
  int64_t alloc_total_cur, alloc_total_peak;
  double *partials; /* (FSDPC_CUDA_REDUCE_BLOCKS, 2) reduction partials */
};

typedef __nv_bfloat16 bf16;

/* Returns an fsdpc status from a failed CUDA runtime call, naming the call. */
#define FSDPC_CUDA_TRY(err, call)                                                                  \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess)                                                                         \
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cuda: %s failed: %s (%s)", #call,               \
                         cudaGetErrorString(e_), cudaGetErrorName(e_));                            \
  } while (0)

/* After a launch: a bad configuration shows up here, a fault later at sync. */
#define FSDPC_CUDA_LAUNCHED(err, what)                                                             \
  do {                                                                                             \
    cudaError_t e_ = cudaGetLastError();                                                           \
    if (e_ != cudaSuccess)                                                                         \
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cuda: launching %s failed: %s", what,           \
                         cudaGetErrorString(e_));                                                  \
  } while (0)

static inline cudaStream_t fsdpc__cuda_stream_or(const fsdpc_cuda_ctx *ctx, void *stream) {
  return stream ? (cudaStream_t)stream : ctx->compute;
}

static inline unsigned fsdpc__cuda_blocks(size_t n, unsigned threads, unsigned cap) {
  size_t b = (n + threads - 1) / threads;
  if (b < 1)
    b = 1;
  return (unsigned)(b < cap ? b : cap);
}

/* Warp and block sums (fp32). The block version needs blockDim.x a multiple
 * of 32 and a shared array of 32 floats; every thread gets the total. */
static __device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
static __device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
static __device__ __forceinline__ float block_sum(float v, float *sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads(); /* sh may still be read from a previous call */
  if (lane == 0)
    sh[warp] = v;
  __syncthreads();
  v = lane < nw ? sh[lane] : 0.0f;
  return warp_sum(v);
}
static __device__ __forceinline__ float block_max(float v, float *sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0)
    sh[warp] = v;
  __syncthreads();
  v = lane < nw ? sh[lane] : -INFINITY;
  return warp_max(v);
}

/* Internal GEMM in cuBLASLt's column-major terms: D = alpha op(A) op(B) +
 * beta C, A/B bf16, fp32 accumulation, C/D of type cd (CUDA_R_16BF or
 * CUDA_R_32F); C may equal D. m x n output, k inner. */
fsdpc_status fsdpc__cuda_lt_gemm(fsdpc_cuda_ctx *ctx, int trans_a, int trans_b, int m, int n, int k,
                                 const void *A, int lda, const void *B, int ldb, const void *C,
                                 void *D, int ldcd, cudaDataType_t cd, float alpha, float beta,
                                 const char *what, fsdpc_err *err);

#endif
