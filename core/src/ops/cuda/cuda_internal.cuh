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
  int gemm_sm_target; /* cuBLASLt SM count target; 0 = all */
  cudaStream_t compute, comm;
  cudaStream_t d2h; /* device-to-host copies that must not queue behind the comm stream's */
  cudaEvent_t events[FSDPC_CUDA_N_EVENTS];
  cublasLtHandle_t lt;
  void *lt_ws; /* cuBLASLt workspace */
  size_t lt_ws_bytes;
  fsdpc_lt_plan *lt_plans; /* LT_PLANS entries, built on first use (matmul.cu) */
  /* What no engine's arena holds (the arena is one cudaMalloc per engine,
   * fsdp/memplan.h): one stream-ordered pool for the rest, so that no
   * category keeps a high-water mark of its own. */
  cudaMemPool_t pool;
  int64_t arena_cur, arena_peak; /* bytes the arenas reserve */
  /* Accounting by category: the pool's allocations and the buffers placed
   * in arenas (fsdpc__cuda_account). */
  int64_t alloc_cur[FSDPC_MEM_NCAT], alloc_peak[FSDPC_MEM_NCAT];
  int64_t alloc_total_cur, alloc_total_peak;
  double *partials; /* (FSDPC_CUDA_REDUCE_BLOCKS, 2) reduction partials */
  /* The last error of the ops table's alloc / free adapters, which report
   * by NULL or not at all, until fsdpc__cuda_take_mem_error takes it. */
  fsdpc_err mem_err;
  int mem_err_set;
  /* While set (fsdpc__cuda_grad_overwrite): matmul_bwd(_acc),
   * rmsnorm_bwd(_add) and lmhead_xent WRITE dweight (=) instead of adding. */
  int grad_overwrite;
  /* fp8.cu (tensorwise): the amax kernels' count of finished blocks (0
   * between launches: the last block resets it), what the FP8 scratch's
   * input slot holds (for the next projection of the same input), and the
   * kernels and GEMMs launched (fsdpc__cuda_fp8_launches). */
  unsigned *fp8_done;
  struct {
    const void *scratch, *inp;
    int rows, cols, dir;
  } fp8_inp;
  uint64_t fp8_launches;
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

/* ---- 16-byte vector access for the memory-bound kernels ----
 * A uint4 holds 8 bf16 or 4 fp32. Kernels take the vector path only when every
 * pointer they touch is 16-byte aligned (and rows are whole vectors); anything
 * else runs a scalar path with the same arithmetic, so results do not depend
 * on the path. */
static inline bool fsdpc__aligned16(const void *p) {
  return ((uintptr_t)p & 15u) == 0;
}

static __device__ __forceinline__ void unpack_bf16x8(uint4 u, float f[8]) {
  const __nv_bfloat162 *h = (const __nv_bfloat162 *)&u;
#pragma unroll
  for (int k = 0; k < 4; k++) {
    const float2 t = __bfloat1622float2(h[k]);
    f[2 * k] = t.x, f[2 * k + 1] = t.y;
  }
}
/* Round to nearest even, like __float2bfloat16. */
static __device__ __forceinline__ uint4 pack_bf16x8(const float f[8]) {
  uint4 u;
  __nv_bfloat162 *h = (__nv_bfloat162 *)&u;
#pragma unroll
  for (int k = 0; k < 4; k++)
    h[k] = __floats2bfloat162_rn(f[2 * k], f[2 * k + 1]);
  return u;
}

/* ---- element-wise map engine (elementwise.cu, swiglu.cu) ----
 * An Op describes one element-wise function over n elements:
 *   W                 elements per 16-byte vector step (8 for bf16, 4 for fp32)
 *   Vec               the registers one vector step loads
 *   load(Vec&, v)     loads vector step v (elements [W v, W v + W))
 *   store(const Vec&, v)  computes and stores it
 *   scalar(i)         does element i alone (tails and misaligned pointers)
 * The vector kernel issues EW_UNROLL vector loads per thread before the first
 * store, so each thread keeps several 16-byte requests in flight; the grid is
 * capped at one full wave of resident blocks that stride over the rest. */
#define EW_THREADS 256
#define EW_UNROLL 4

template <class Op>
static __global__ void __launch_bounds__(EW_THREADS) ew_vec_kernel(Op op, size_t nv, size_t n) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t v = tid;
  for (; v + (EW_UNROLL - 1) * stride < nv; v += EW_UNROLL * stride) {
    typename Op::Vec r[EW_UNROLL];
#pragma unroll
    for (int k = 0; k < EW_UNROLL; k++)
      op.load(r[k], v + k * stride);
#pragma unroll
    for (int k = 0; k < EW_UNROLL; k++)
      op.store(r[k], v + k * stride);
  }
  for (; v < nv; v += stride) {
    typename Op::Vec r;
    op.load(r, v);
    op.store(r, v);
  }
  const size_t t = nv * Op::W + tid; /* fewer than W tail elements */
  if (t < n)
    op.scalar(t);
}

template <class Op>
static __global__ void __launch_bounds__(EW_THREADS) ew_scalar_kernel(Op op, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    op.scalar(i);
}

/* Runs op over n elements on stream; vec selects the 16-byte path (the
 * caller checked the alignment of every pointer of op). */
template <class Op>
static fsdpc_status fsdpc__ew_launch(const fsdpc_cuda_ctx *ctx, const Op &op, size_t n, bool vec,
                                     cudaStream_t stream, const char *what, fsdpc_err *err) {
  const unsigned wave = (unsigned)ctx->sm_count * (2048 / EW_THREADS);
  if (vec) {
    const size_t nv = n / Op::W;
    ew_vec_kernel<Op>
        <<<fsdpc__cuda_blocks(nv, EW_THREADS * EW_UNROLL, wave), EW_THREADS, 0, stream>>>(op, nv,
                                                                                          n);
  } else {
    ew_scalar_kernel<Op>
        <<<fsdpc__cuda_blocks(n, EW_THREADS * 4, wave), EW_THREADS, 0, stream>>>(op, n);
  }
  FSDPC_CUDA_LAUNCHED(err, what);
  return FSDPC_OK;
}

/* Device scratch for a kernel on the COMPUTE stream: the cuBLASLt workspace.
 * Only GEMMs on the compute stream use it (matmul.cu, cross_entropy.cu), and
 * work on one stream runs in order, so a non-GEMM kernel there may borrow it
 * between GEMMs. Returns NULL when it is smaller than bytes. */
static inline void *fsdpc__cuda_compute_scratch(const fsdpc_cuda_ctx *ctx, size_t bytes) {
  return bytes <= ctx->lt_ws_bytes ? ctx->lt_ws : NULL;
}

/* Internal GEMM in cuBLASLt's column-major terms: D = alpha op(A) op(B) +
 * beta C, A/B bf16, fp32 accumulation, C/D of type cd (CUDA_R_16BF or
 * CUDA_R_32F); C may equal D. m x n output, k inner. */
fsdpc_status fsdpc__cuda_lt_gemm(fsdpc_cuda_ctx *ctx, int trans_a, int trans_b, int m, int n, int k,
                                 const void *A, int lda, const void *B, int ldb, const void *C,
                                 void *D, int ldcd, cudaDataType_t cd, float alpha, float beta,
                                 const char *what, fsdpc_err *err);
/* The same with any A/B types (CUDA_R_8F_E4M3 / _E5M2 for FP8, fp8.cu) and
 * fp32 dequantization scales in device memory (scale_a non-NULL): scalars,
 * or with outer set vectors of m (A) and n (B) values
 * (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F), and a bias added in the
 * epilogue. */
typedef struct fsdpc_lt_gemm {
  int trans_a, trans_b, m, n, k;
  const void *A;
  int lda;
  const void *B;
  int ldb;
  const void *C;
  void *D;
  int ldcd;
  cudaDataType_t cd;
  float alpha, beta;
  cudaDataType_t at, bt;
  const float *scale_a, *scale_b;
  int outer;
  /* bf16 vector of m values added to every column of D in the epilogue
   * (CUBLASLT_EPILOGUE_BIAS; bf16 A/B/D only); NULL: none */
  const void *bias;
} fsdpc_lt_gemm;
fsdpc_status fsdpc__cuda_lt_gemm_typed(fsdpc_cuda_ctx *ctx, const fsdpc_lt_gemm *g,
                                       const char *what, fsdpc_err *err);

#endif
