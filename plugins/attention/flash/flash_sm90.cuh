/* Device helpers of the sm_90a (Hopper) flash kernels: mbarriers, TMA bulk
 * tensor loads, wgmma shared-memory descriptors and fences, register
 * reallocation and named barriers. Plain inline PTX; compiled only for the
 * sm_90a target (__CUDA_ARCH_FEAT_SM90_ALL).
 *
 * Shared-memory tiles are written by TMA with the 128-byte swizzle: a tile
 * of R rows x 64 bf16 columns is R rows of 128 bytes in which 16-byte chunk
 * c of row r sits at c ^ (r % 8); 8 rows (1024 bytes) form one swizzle atom,
 * and each tile starts 1024-byte aligned. A head dim of 128 is two such
 * tiles (columns 0-63, 64-127) one after the other. wgmma reads these
 * directly through descriptors (see desc_k and desc_mn). */
#ifndef FSDPC_FLASH_SM90_CUH
#define FSDPC_FLASH_SM90_CUH

#include <cuda.h>
#include <stdint.h>

/* The first 1024-byte aligned byte of the dynamic shared memory, by an
 * integer cast: this hides from the compiler that the pointers are shared
 * memory (generic loads and stores, 64-bit address arithmetic), which
 * measured faster in the hd-64 forward (its tile table's SMEM_GENERIC). */
static __device__ __forceinline__ unsigned char *smem_align1024_generic(unsigned char *raw) {
  return (unsigned char *)(((uintptr_t)raw + 1023) & ~(uintptr_t)1023);
}

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)

static __device__ __forceinline__ uint32_t s_addr(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

/* The first 1024-byte aligned byte of a __shared__ array: GENERIC as
 * above, otherwise by an offset from the array, so that the compiler emits
 * st.shared / ld.shared with 32-bit addresses (+5-10 % in the hd-64
 * backward, 2026-11-24-flash-s8.md). */
template <bool GENERIC>
static __device__ __forceinline__ unsigned char *smem_align1024(unsigned char *raw) {
  if constexpr (GENERIC)
    return smem_align1024_generic(raw);
  else
    return raw + ((1024u - (s_addr(raw) & 1023u)) & 1023u);
}

/* ---- mbarriers ---- */

static __device__ __forceinline__ void mbar_init(uint64_t *bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(s_addr(bar)), "r"(count));
}
/* Makes the initialised barriers visible to the async proxy (TMA). */
static __device__ __forceinline__ void mbar_fence_init(void) {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
static __device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(s_addr(bar)),
               "r"(bytes)
               : "memory");
}
/* Arrives on the barrier once this thread's earlier cp.async copies have
 * landed (without raising its expected count: the arrival is one of those
 * it was initialised with). */
static __device__ __forceinline__ void mbar_arrive_cp_async(uint64_t *bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(s_addr(bar))
               : "memory");
}
static __device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(s_addr(bar)) : "memory");
}
/* Waits until the phase of parity `parity` has completed. (A suspend-time
 * hint on the try_wait was measured and dropped in session 8: commit
 * 64a0671 holds it as FLASH_MBAR_SUSPEND_NS.) */
static __device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
  asm volatile("{\n.reg .pred done;\n"
               "WAIT_%=:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
               "@!done bra WAIT_%=;\n}\n" ::"r"(s_addr(bar)),
               "r"(parity)
               : "memory");
}

/* Stores four 8 x 8 bf16 matrices, each held as an mma accumulator
 * fragment (thread t: row t / 4, columns 2 (t % 4) and + 1, packed), to the
 * rows whose shared-memory addresses lanes 8i..8i+7 give for matrix i. */
static __device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1,
                                                   uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
               "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

/* ---- TMA ---- */

/* Loads the box at coordinates (c0, c1, c2, c3) of a 4-d tensor map into
 * shared memory; completion adds the bytes to bar's transaction count. */
static __device__ __forceinline__ void tma_load_4d(void *dst, const CUtensorMap *map, uint64_t *bar,
                                                   int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(s_addr(dst)),
               "l"((uint64_t)map), "r"(s_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}
/* Orders this thread's generic shared-memory writes before later reads of
 * the async proxy (wgmma operands written with st.shared). */
static __device__ __forceinline__ void fence_proxy_async(void) {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
/* Adds the box at shared memory src (fp32, laid out as the map's box) to
 * the tensor at coordinates (c0, c1, c2, c3): a TMA reduce-add; elements past
 * the tensor's bounds are dropped. Completes in bulk groups (below). */
static __device__ __forceinline__ void tma_reduce_add_4d(const CUtensorMap *map, const void *src,
                                                         int c0, int c1, int c2, int c3) {
  asm volatile("cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group"
               " [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"((uint64_t)map),
               "r"(s_addr(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}
/* Stores the box at shared memory src (laid out as the map's box, e.g.
 * 128-byte swizzled bf16) to the tensor at coordinates (c0, c1, c2, c3): a
 * TMA store; elements past the tensor's bounds are dropped. Completes in
 * bulk groups (below). */
static __device__ __forceinline__ void tma_store_4d(const CUtensorMap *map, const void *src, int c0,
                                                    int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group"
               " [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"((uint64_t)map),
               "r"(s_addr(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}
static __device__ __forceinline__ void bulk_commit(void) {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
/* At most N of this thread's bulk groups still reading shared memory. */
template <int N> static __device__ __forceinline__ void bulk_wait_read(void) {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
/* At most N of this thread's bulk groups not yet complete. */
template <int N> static __device__ __forceinline__ void bulk_wait(void) {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}
static __device__ __forceinline__ void tma_prefetch_desc(const CUtensorMap *map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)map) : "memory");
}

/* ---- wgmma ---- */

/* Descriptor of a K-major operand (rows of 64 bf16 = 128 bytes, contiguous
 * along K) in a 128-byte-swizzled tile: 8-row groups 1024 bytes apart (SBO);
 * the k16 step inside the 64-column tile moves the start by 32 bytes. */
static __device__ __forceinline__ uint64_t desc_k(const void *p) {
  uint64_t d = (uint64_t)((s_addr(p) & 0x3FFFF) >> 4);
  d |= (uint64_t)(16 >> 4) << 16;   /* LBO: unused for swizzled K-major */
  d |= (uint64_t)(1024 >> 4) << 32; /* SBO */
  d |= (uint64_t)1 << 62;           /* 128-byte swizzle */
  return d;
}
/* Descriptor of an MN-major operand (B with N contiguous: V as (keys, head
 * dim)) in 128-byte-swizzled tiles of `rows` rows: K rows 128 bytes apart,
 * 8-row groups 1024 bytes apart (SBO), the next 64 columns of N one tile
 * (rows * 128 bytes) further (LBO). */
static __device__ __forceinline__ uint64_t desc_mn(const void *p, int rows) {
  uint64_t d = (uint64_t)((s_addr(p) & 0x3FFFF) >> 4);
  d |= (uint64_t)(((uint32_t)rows * 128) >> 4) << 16; /* LBO */
  d |= (uint64_t)(1024 >> 4) << 32;                   /* SBO */
  d |= (uint64_t)1 << 62;
  return d;
}
static __device__ __forceinline__ void wgmma_fence(void) {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
static __device__ __forceinline__ void wgmma_commit(void) {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N> static __device__ __forceinline__ void wgmma_wait(void) {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* Keeps the compiler from moving reads or writes of accumulator registers
 * across a wgmma issue or wait (the asm above does not name them). */
template <int N> static __device__ __forceinline__ void reg_fence(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; i++)
    asm volatile("" : "+f"(r[i])::"memory");
}
template <int N> static __device__ __forceinline__ void reg_fence_u(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; i++)
    asm volatile("" : "+r"(r[i])::"memory");
}

/* ---- warp specialisation ---- */

template <int R> static __device__ __forceinline__ void reg_alloc(void) {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R> static __device__ __forceinline__ void reg_dealloc(void) {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}
static __device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
static __device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

#endif
#endif
