/* Device helpers shared by the flash forward and backward kernels: the bf16
 * tensor-core MMA (mma.sync m16n8k16, fp32 accumulate), ldmatrix, cp.async
 * and the swizzled shared-memory tile layout.
 *
 * Fragment layouts of mma.m16n8k16 (g = lane / 4, t = lane % 4):
 *   A 16x16 (4 regs of bf16x2): a0 (g, 2t..2t+1), a1 (g+8, ..), a2 (g, 2t+8..),
 *     a3 (g+8, 2t+8..)
 *   B 16x8 (2 regs): b0 (k = 2t..2t+1, n = g), b1 (k + 8)
 *   C 16x8 (4 floats): c0,c1 (g, 2t..2t+1), c2,c3 (g+8, ..)
 * so the C fragments of two adjacent n-tiles are exactly the A fragment of
 * the next product (P V reuses S without a trip through shared memory). */
#ifndef FSDPC_FLASH_COMMON_CUH
#define FSDPC_FLASH_COMMON_CUH

#include <cuda_bf16.h>
#include <stdint.h>

#define FLASH_LOG2E 1.4426950408889634f
#define FLASH_LN2 0.6931471805599453f

typedef __nv_bfloat16 bf16;

/* c += a b, bf16 inputs, fp32 accumulators. */
static __device__ __forceinline__ void mma_bf16(float c[4], const uint32_t a[4],
                                                const uint32_t b[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

static __device__ __forceinline__ uint32_t smem_addr(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

/* Four 8x8 b16 matrices; lane l gives the row address of matrix l / 8. */
static __device__ __forceinline__ void ldsm_x4(uint32_t r[4], const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

static __device__ __forceinline__ void ldsm_x4_t(uint32_t r[4], const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

/* 16-byte async copy; src_bytes 0 fills the destination with zeros (rows
 * past T), so no tile ever holds stale data. */
static __device__ __forceinline__ void cp_async16(void *dst, const void *src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes));
}
/* 4-byte async copy (lse, D, doc ids); src_bytes 0 writes a zero. */
static __device__ __forceinline__ void cp_async4(void *dst, const void *src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes));
}
static __device__ __forceinline__ void cp_async_commit(void) {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N> static __device__ __forceinline__ void cp_async_wait(void) {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

static __device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&v);
}

/* Logit soft-capping (Gemma): returns tanh(x) and sets dt = 1 - tanh^2(x),
 * both from e = exp(2x): tanh = 1 - 2 / (e + 1), 1 - tanh^2 = 4e / (e + 1)^2.
 * Under --use_fast_math tanhf becomes tanh.approx.f32 (relative error
 * 2^-11), which leaves 1 - tanh^2 off by 1e-3 where it is near 0; this form
 * keeps it to a few ulp. |x| is clamped at 15, past which tanh is +-1 in
 * fp32, so that e never overflows. */
static __device__ __forceinline__ float softcap_tanh(float x, float &dt) {
  const float e = __expf(2.0f * fminf(fmaxf(x, -15.0f), 15.0f));
  const float r = __fdividef(1.0f, e + 1.0f);
  dt = 4.0f * e * r * r;
  return 1.0f - 2.0f * r;
}

/* A tile of rows x COLS bf16 in shared memory, stored in 16-byte chunks with
 * chunk c of row r at c ^ (r % 8): the 8 rows one ldmatrix reads then fall in
 * 8 different bank groups instead of one. COLS is a multiple of 64. */
template <int COLS> static __device__ __forceinline__ int swz(int row, int col) {
  return row * COLS + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
}

/* swz for an ldmatrix address: row = (multiple of 8) + lane-dependent part,
 * 16-byte chunk = c + (0 or 1), c even, and x = (that 0 or 1) ^ (row % 8),
 * which depends on the lane only. Equal to swz<COLS>(row, 8 * chunk), but
 * written so that for a compile-time c the compiler needs one register per
 * c % 8 and folds the rest (row and c / 8 offsets) into immediates, instead
 * of one address register per (row, chunk) pair of an unrolled loop. */
template <int COLS> static __device__ __forceinline__ int swz_ld(int row, int c, int x) {
  return row * COLS + (((c & ~7) | ((c & 7) ^ x)) << 3);
}

/* Copies rows [row0, row0 + ROWS) of a (T, stride) bf16 matrix, columns
 * [0, COLS), into a swizzled tile; rows at or past T become zeros. */
template <int ROWS, int COLS, int NTHREADS>
static __device__ __forceinline__ void load_tile(bf16 *tile, const bf16 *src, int row0, int T,
                                                 int64_t stride) {
  constexpr int CH = COLS / 8;
#pragma unroll
  for (int i = threadIdx.x; i < ROWS * CH; i += NTHREADS) {
    int r = i / CH, c = i % CH;
    int grow = row0 + r;
    bool ok = grow < T;
    const bf16 *s = src + (ok ? (int64_t)grow * stride + c * 8 : 0);
    cp_async16(tile + swz<COLS>(r, c * 8), s, ok ? 16 : 0);
  }
}

#endif
