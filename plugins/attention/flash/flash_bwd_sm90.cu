/* Flash attention backward for Hopper (sm_90a): the main dK / dV / dQ
 * kernel with wgmma, TMA and warp specialisation. flash_bwd (flash_bwd.cu)
 * runs the row dots D and the dQ conversion around it, as for the mma.sync
 * kernel it replaces on CC 9.0.
 *
 * One CTA owns BN = 128 keys of one (batch, kv head) and has 3 warpgroups:
 *  - warpgroup 0, the producer: one thread loads K and V once, then streams
 *    the query steps (every query head of the GQA group, every block of BM
 *    queries that can see the keys) through ST stages of Q and dO tiles,
 *    each behind a "full" mbarrier and both behind an "empty" one; the
 *    producer warp's lanes copy the step's lse and D values beside them
 *    (plain loads: a 1-d TMA box running past a short tensor faulted, call 3
 *    of bench/results/2026-11-23-flash-hopper.md) and arrive on the same
 *    "full" barriers.
 *  - warpgroups 1 and 2 own 64 keys each and, per query step, compute the
 *    transposed products (queries along N), so that they are directly the
 *    register A operands of the next ones:
 *      S^T = K Q^T, dP^T = V dO^T            (wgmma, both from shared memory)
 *      P^T = exp(scale S^T - lse), dS^T = P^T (dP^T - D)    (registers)
 *      dV += P^T dO, dK += dS^T Q            (wgmma, A from registers)
 *    dS^T also goes to shared memory (bf16), where the two warpgroups
 *    together compute dQ_step = dS K (each a 64 x 64 piece: hd 128 splits
 *    the head dim, hd 64 the queries); each warpgroup stages its piece in
 *    shared memory (fp32), which is added to the fp32 dq accumulator with
 *    TMA reduce-adds (BWD90_TMADQ; per-thread vector atomics before): at
 *    hd 128 by a writer warp of the producer warpgroup, one per consumer
 *    warpgroup, which only arrives at the staging barrier a step later
 *    (BWD90_*_DQWARP); at hd 64 by one of its own threads.
 *    dK and dV stay in registers to the end, then go through the free Q / dO
 *    stages to TMA stores (BWD90_EPI).
 *  - the products of a step are issued dV, (barrier), dQ, dK, so that the
 *    dQ epilogue runs under dK (BWD90_*_OVL), and the grid is dispatched in
 *    chunks of (batch, kv head) pairs for L2 reuse (BWD90_GRID_CH).
 *
 * hd 64 takes BM = 128 queries a step, hd 128 BM = 64 (the accumulators of
 * the widest phase then fit the 240 registers a consumer thread gets). */
#include <cuda.h>
#include <cuda_runtime.h>
#include <math.h>

#include <type_traits>

#include "flash.h"
#include "flash_common.cuh"
#include "flash_sm90.cuh"
#include "flash_tma.cuh"
#include "flash_wgmma.cuh"

#define BWD90_BN 128
#ifndef BWD90_64_ST
#define BWD90_64_ST 2
#endif
#ifndef BWD90_128_ST
#define BWD90_128_ST 3
#endif
/* dS^T buffers in shared memory: 2 lets a warpgroup write step i's while the
 * other may still read step i - 1's for dQ (one barrier a step, not two). */
#ifndef BWD90_DSB
#define BWD90_DSB 2
#endif
/* Issue order of a step's products (OVL):
 *  0: dV, dK, the barrier, dQ, then wait for all three;
 *  1: dV before the barrier that waits for the other warpgroup's dS^T, then
 *     dQ, then dK; the dQ epilogue runs while dK is still in the tensor
 *     cores, and the step ends once dK is done;
 *  2: as 1, but the step does not wait for dK: the next step's S^T and dP^T
 *     queue behind it, and the Q / dO stage is released once they are in
 *     (too many live registers at hd 64: the compiler serialises the wgmmas).
 * Fastest measured: 1 at hd 64, 2 at hd 128
 * (bench/results/2026-11-24-flash-bwd.md). */
#ifndef BWD90_64_OVL
#define BWD90_64_OVL 1
#endif
#ifndef BWD90_128_OVL
#define BWD90_128_OVL 2
#endif
/* TMADQ 1: each warpgroup writes its fp32 dQ piece to shared memory and one
 * thread adds it to dq_acc with TMA reduce-adds (cp.reduce.async.bulk.tensor);
 * 0: 16 vector atomics (red.global.add.v2.f32) a thread. */
#ifndef BWD90_TMADQ
#define BWD90_TMADQ 1
#endif
#ifndef BWD90_64_TMADQ
#define BWD90_64_TMADQ BWD90_TMADQ
#endif
#ifndef BWD90_128_TMADQ
#define BWD90_128_TMADQ BWD90_TMADQ
#endif
/* Order of the CTAs (one a (batch, kv head, key block)) over the grid, i.e.
 * which run together: 0, key block slowest (every (batch, kv head) of the
 * heaviest causal key block first); GRID_CH > 0, the key blocks of
 * GRID_CH (batch, kv head) pairs at a time, heaviest first within them, so
 * that the CTAs running together share their Q, dO and dq rows in L2
 * (16: up to +13 % at T 2048, bench/results/2026-11-24-flash-bwd.md). */
/* As FWD90_64_SWEXP for the probabilities recomputed here: of each
 * thread's exp2s, those of query group i (8 queries) with i % k == 0
 * (k = BWD90_64_SWEXP at head dim 64, BWD90_128_SWEXP above) run on the FMA
 * pipe; 0 = none (the default: slower at every k tried,
 * 2026-11-24-flash-swexp.md). */
#ifndef BWD90_SWEXP
#define BWD90_SWEXP 0
#endif
#ifndef BWD90_64_SWEXP
#define BWD90_64_SWEXP BWD90_SWEXP
#endif
#ifndef BWD90_128_SWEXP
#define BWD90_128_SWEXP 0
#endif
#ifndef BWD90_GRID_CH
#define BWD90_GRID_CH -1
#endif
/* GRID_CH -1: the chunk chosen per launch from the size of a pair's fp32
 * dQ rows (rep heads x T x hd x 4 bytes): as many pairs as hold BWD90_L2_DQ
 * MiB of them, at least 1 and at most BWD90_GRID_CH_MAX. Measured
 * (2026-11-24-flash-s9.md): 2 pairs at T 8192, GQA 4, hd 128 (16 MiB a
 * pair) +3-4 % against 16; chunks above 16 lose at T 2048. */
#ifndef BWD90_L2_DQ
#define BWD90_L2_DQ 32
#endif
#ifndef BWD90_GRID_CH_MAX
#define BWD90_GRID_CH_MAX 16
#endif
/* dS^T to shared memory: 1, one stmatrix.x4 per 16 queries (four 8 x 8
 * fragments a warp); 0, one 4-byte store per fragment register. Measured
 * (2026-11-24-flash-s8.md): +1-2 % at hd 64, mixed at hd 128 (-1 to -3 %
 * at T 2048); with the dQ writer warps +0-1 % at hd 128 too
 * (2026-11-24-flash-s9.md). */
#ifdef BWD90_STSM
#define BWD90_64_STSM BWD90_STSM
#define BWD90_128_STSM BWD90_STSM
#endif
#ifndef BWD90_64_STSM
#define BWD90_64_STSM 1
#endif
#ifndef BWD90_128_STSM
#define BWD90_128_STSM 1
#endif
/* PERSIST 1: one CTA an SM walks every gridDim.x-th tile (batch, kv head,
 * key block) in the grid's order; the Q / dO stage ring runs on across its
 * tiles and the next tile's K / V load as soon as the last step has read
 * them, under the dK / dV stores. 2: the same, but after its first tile
 * (blockIdx.x) a CTA takes the next one in the grid's order from a global
 * counter (atomicAdd), which the producer passes to the consumers in shared
 * memory beside the K / V barrier. 0: one CTA a tile. */
#ifndef BWD90_PERSIST
#define BWD90_PERSIST 0
#endif
/* DQWARP 1 (with TMADQ): warps 1 and 2 of the producer warpgroup issue the
 * dQ reduce-adds, one for each consumer warpgroup (FlashAttention-3's
 * arrangement). The consumer warpgroup fences its staged piece and arrives
 * for its writer only after the next step's S^T product, when its stores
 * are long done, and goes on; 0: the warpgroup fences, waits at a barrier
 * and one of its threads issues them. ncu's stall sampling put the staging
 * (stores, fence, barrier) at 16 % of the hd-128 backward's warp samples;
 * measured (2026-11-24-flash-s9.md): +3-7 % at hd 128, -1 to -6 % at hd 64;
 * arriving at once instead of a step later gained less at hd 128 (commit
 * 93592f1 holds that variant, BWD90_DQDEFER 0). */
#ifdef BWD90_DQWARP
#define BWD90_64_DQWARP BWD90_DQWARP
#define BWD90_128_DQWARP BWD90_DQWARP
#endif
#ifndef BWD90_64_DQWARP
#define BWD90_64_DQWARP 0
#endif
#ifndef BWD90_128_DQWARP
#define BWD90_128_DQWARP 1
#endif
static_assert(!(BWD90_64_DQWARP || BWD90_128_DQWARP) || BWD90_PERSIST == 0,
              "DQWARP: one tile a CTA");
/* LDCP 1: the producer warp copies a step's lse and D with cp.async, whose
 * completion arrives on the stage's barrier, instead of loading them into
 * registers and storing them (which held the warp for the loads' latency
 * every step; ncu had hd 64's consumers waiting for stages 6.7 % of their
 * samples). Measured (2026-11-24-flash-s9.md): +2-7 % at hd 64, -0.5 to
 * -3 % at hd 128. */
#ifdef BWD90_LDCP
#define BWD90_64_LDCP BWD90_LDCP
#define BWD90_128_LDCP BWD90_LDCP
#endif
#ifndef BWD90_64_LDCP
#define BWD90_64_LDCP 1
#endif
#ifndef BWD90_128_LDCP
#define BWD90_128_LDCP 0
#endif
/* dK / dV epilogue: 1, staged in the free Q / dO stages (128-byte
 * swizzled) and stored with TMA by one thread a warpgroup; 0, 4-byte
 * stores from registers (8 rows x 16 bytes a warp instruction), which
 * held the hd-128 CTA for about 10,000 cycles at its end (clock stamps,
 * BWD90_DIAG_TIMES: 3.8 % of the SMs' time at T 8192, 12 % at T 2048). */
#ifndef BWD90_EPI
#define BWD90_EPI 1
#endif
/* Shared memory through generic pointers (flash_sm90.cuh): 0, +5-10 % at
 * hd 64 (2026-11-24-flash-s8.md). */
#ifdef FLASH_SMEM_GENERIC
#define BWD90_SMEM_GENERIC FLASH_SMEM_GENERIC
#endif
#ifndef BWD90_SMEM_GENERIC
#define BWD90_SMEM_GENERIC 0
#endif
/* Measured in session 8 and removed (commit 2325b3f holds them): the
 * general per-element mask test (BWD90_MASKLIM 0) and one probabilities'
 * loop testing need_mask at every element (BWD90_MASK1 0), both slower;
 * only the issuing warp waiting at the dQ staging barrier (BWD90_DQARRIVE),
 * mixed; the second warpgroup started late (BWD90_DIAG_NOSYNC 2). */
/* Timing experiments only (wrong results): BWD90_DIAG_NOEXP 1 takes the
 * probabilities' exp2 out; NORED 1 the dQ reduce-adds (dQ is still computed
 * and staged); NODQMMA 1 the dQ products (zeros are staged and added);
 * NOSYNC 1 the named barrier a step before dQ (dQ then reads a dS^T the
 * other warpgroup may not have written yet). */
#ifndef BWD90_DIAG_NOEXP
#define BWD90_DIAG_NOEXP 0
#endif
#ifndef BWD90_DIAG_NORED
#define BWD90_DIAG_NORED 0
#endif
#ifndef BWD90_DIAG_NODQMMA
#define BWD90_DIAG_NODQMMA 0
#endif
#ifndef BWD90_DIAG_NOSYNC
#define BWD90_DIAG_NOSYNC 0
#endif
/* Timing experiment: BWD90_DIAG_TIMES 1 records per CTA (PERSIST 0) the SM
 * clock at points of its life (entry; K / V arrived, first step done, all
 * steps done and dK / dV stored, as seen by consumer warpgroup 0; the dQ
 * writer's last reduce-add complete), its SM and step count, read back with
 * flash_bwd90_diag_times (bench/flash/diag_cta.py). */
#ifndef BWD90_DIAG_TIMES
#define BWD90_DIAG_TIMES 0
#endif
#define BWD90_DT_N 8
#define BWD90_DT_CTAS 32768
#if BWD90_DIAG_TIMES
static __device__ unsigned long long bwd90_dt[BWD90_DT_CTAS * BWD90_DT_N];
#define BWD90_DT(slot, v)                                                                         \
  do {                                                                                            \
    const unsigned cta_ = blockIdx.y * gridDim.x + blockIdx.x;                                    \
    if (cta_ < BWD90_DT_CTAS)                                                                     \
      bwd90_dt[cta_ * BWD90_DT_N + (slot)] = (v);                                                 \
  } while (0)
#else
#define BWD90_DT(slot, v) ((void)0)
#endif

template <int HD> struct bwd90_cfg {
  static constexpr int BN = BWD90_BN, ST = HD == 64 ? BWD90_64_ST : BWD90_128_ST;
  static constexpr int BM = HD == 64 ? 128 : 64;
  static constexpr int THREADS = 384;
  static constexpr int KV_BYTES = BN * HD * 2, Q_BYTES = BM * HD * 2, DS_BYTES = BN * BM * 2;
  static constexpr int OVL = HD == 64 ? BWD90_64_OVL : BWD90_128_OVL;
  static constexpr bool TMADQ = HD == 64 ? BWD90_64_TMADQ : BWD90_128_TMADQ;
  static constexpr int DSB = BWD90_DSB;
  static constexpr bool DQWARP = TMADQ && (HD == 64 ? BWD90_64_DQWARP : BWD90_128_DQWARP);
  static constexpr bool LDCP = HD == 64 ? BWD90_64_LDCP : BWD90_128_LDCP;
  static constexpr int DQ_BYTES = TMADQ ? BM * HD * 4 : 0;
  static constexpr int SMEM = 1024 + 2 * KV_BYTES + 2 * ST * Q_BYTES + DSB * DS_BYTES + DQ_BYTES +
                              2 * ST * BM * 4 + 8 * (3 + 3 * ST);
  static_assert(SMEM <= 227 * 1024, "shared memory");
};

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)

/* Zeroes accumulators that the next wgmma overwrites (scale_d 0): the new
 * definition ends the previous values' life, which the asm's "+f" would
 * otherwise extend. */
template <int N> static __device__ __forceinline__ void acc_start(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; i++)
    r[i] = 0.0f;
}

static __device__ __forceinline__ void red_add_v2(float *p, float a, float b) {
  atomicAdd(reinterpret_cast<float2 *>(p), make_float2(a, b));
}

#endif

template <int HD>
static __global__ void __launch_bounds__(384, 1)
    flash_bwd90_kernel(const __grid_constant__ CUtensorMap tmQ,
                       const __grid_constant__ CUtensorMap tmK,
                       const __grid_constant__ CUtensorMap tmV,
                       const __grid_constant__ CUtensorMap tmdO,
                       const __grid_constant__ CUtensorMap tmdQ,
                       const __grid_constant__ CUtensorMap tmdK,
                       const __grid_constant__ CUtensorMap tmdV, const flash_params p,
                       const float *__restrict__ lse, const float *__restrict__ Dg,
                       float *__restrict__ dq_acc, bf16 *__restrict__ dk, bf16 *__restrict__ dv,
                       int *__restrict__ tile_ctr, int grid_ch) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using C = bwd90_cfg<HD>;
  constexpr int BN = C::BN, BM = C::BM, ST = C::ST, NCH = HD / 64;
  constexpr int SWEXP = HD == 64 ? BWD90_64_SWEXP : BWD90_128_SWEXP;
  extern __shared__ unsigned char smem_raw[];
  unsigned char *base = smem_align1024<BWD90_SMEM_GENERIC>(smem_raw);
  bf16 *sK = reinterpret_cast<bf16 *>(base); // NCH x (BN x 64)
  bf16 *sV = sK + BN * HD;                   // NCH x (BN x 64)
  bf16 *sQ = sV + BN * HD;                   // ST x NCH x (BM x 64)
  bf16 *sdO = sQ + ST * BM * HD;             // ST x NCH x (BM x 64)
  bf16 *sdS = sdO + ST * BM * HD;            // DSB x BM / 64 x (BN x 64): dS^T, queries contiguous
  float *sdQ = reinterpret_cast<float *>(sdS + C::DSB * BN * BM); // TMADQ: 2 x 64 x 64 fp32
  float *sL = sdQ + C::DQ_BYTES / 4;                              // ST x BM: lse * log2(e)
  float *sDD = sL + ST * BM;                                      // ST x BM: D
  uint64_t *barKV = reinterpret_cast<uint64_t *>(sDD + ST * BM);
  uint64_t *fullQ = barKV + 1, *fulldO = fullQ + ST, *empty = fulldO + ST;
  uint64_t *kvempty = empty + ST;                    /* K / V read for the last time (PERSIST) */
  int *sTile = reinterpret_cast<int *>(kvempty + 1); /* PERSIST 2: the tile K / V hold, or -1 */

  const int T = p.T, NH = p.NH, KVH = p.KVH, rep = NH / KVH;
  const int hd = HD == 64 ? 64 : p.HD; /* the real head dim, <= HD */
  /* The tiles (batch, kv head, key block) this CTA owns, numbered in the
   * order of the grid: one without PERSIST, every gridDim.x-th with it. */
  const int NB = (T + BN - 1) / BN, BG = KVH * p.B;
  const int lin0 = BWD90_PERSIST ? blockIdx.x : blockIdx.y * BG + blockIdx.x;
  const int lin_end = BWD90_PERSIST ? NB * BG : lin0 + 1;
  const int lin_step = BWD90_PERSIST ? gridDim.x : 1;
  auto tile_at = [&](int lin, int &g, int &b, int &n0, int &m_first, int &n_mb, int &n_steps) {
    int n_block = lin / BG, bg = lin % BG;
    if (grid_ch > 0) {
      const int chunk = lin / (grid_ch * NB), r = lin % (grid_ch * NB);
      const int w = min(grid_ch, BG - chunk * grid_ch);
      n_block = r / w;
      bg = chunk * grid_ch + r % w;
    }
    g = bg % KVH;
    b = bg / KVH;
    n0 = n_block * BN;
    /* Causal: queries before the first key see none of them. */
    m_first = p.causal ? n0 / BM : 0;
    n_mb = (T + BM - 1) / BM - m_first;
    n_steps = rep * n_mb;
  };
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;

  if (threadIdx.x == 0) {
    BWD90_DT(0, clock64());
    BWD90_DT(2, 0); /* written later only with a second step */
    BWD90_DT(5, 0); /* only with dQ writer warps */
    if (BWD90_DIAG_TIMES) {
      unsigned long long gt;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(gt));
      BWD90_DT(7, gt);
    }
    mbar_init(barKV, 1);
    for (int s = 0; s < ST; s++) {
      /* The producer warp: TMA bytes + lse, D (LDCP: lane 0's expect_tx and
       * every lane's cp.async arrival on fullQ, lane 0 alone on fulldO). */
      mbar_init(&fullQ[s], C::LDCP ? 33 : 32);
      mbar_init(&fulldO[s], C::LDCP ? 1 : 32);
      mbar_init(&empty[s], 8); /* lane 0 of every consumer warp */
    }
    mbar_init(kvempty, 8);
    mbar_fence_init();
  }
  __syncthreads();

  if (wg == 0) {
    reg_dealloc<24>();
    if (tid < 32) { /* warp 0: lane 0 issues the TMA copies, every lane copies lse and D */
      int gs = 0;   /* steps over this CTA's tiles: the stage ring runs on across tiles */
      int j = 0;
      for (int lin = lin0; lin < lin_end; j++) {
        int g, b, n0, m_first, n_mb, n_steps;
        tile_at(lin, g, b, n0, m_first, n_mb, n_steps);
        if (tid == 0) {
          if (j > 0)
            mbar_wait(kvempty, (j - 1) & 1);
          if (BWD90_PERSIST == 2)
            *sTile = lin;
          mbar_expect_tx(barKV, 2 * C::KV_BYTES);
#pragma unroll
          for (int c = 0; c < NCH; c++) {
            tma_load_4d(sK + c * BN * 64, &tmK, barKV, c * 64, g, n0, b);
            tma_load_4d(sV + c * BN * 64, &tmV, barKV, c * 64, g, n0, b);
          }
        }
        for (int it = 0; it < n_steps; it++, gs++) {
          const int s = gs % ST, h = g * rep + it / n_mb, m0 = (m_first + it % n_mb) * BM;
          const float *lh = lse + ((int64_t)b * NH + h) * T, *dh = Dg + ((int64_t)b * NH + h) * T;
          mbar_wait(&empty[s], ((gs / ST) & 1) ^ 1);
          if (tid == 0) {
            mbar_expect_tx(&fullQ[s], C::Q_BYTES);
#pragma unroll
            for (int c = 0; c < NCH; c++)
              tma_load_4d(sQ + s * BM * HD + c * BM * 64, &tmQ, &fullQ[s], c * 64, h, m0, b);
            mbar_expect_tx(&fulldO[s], C::Q_BYTES);
#pragma unroll
            for (int c = 0; c < NCH; c++)
              tma_load_4d(sdO + s * BM * HD + c * BM * 64, &tmdO, &fulldO[s], c * 64, h, m0, b);
          }
          if constexpr (C::LDCP) {
            /* lse (natural units) and D by cp.async, zero-filled past T
             * (those queries are masked); fullQ completes when they land. */
#pragma unroll
            for (int i = tid; i < BM; i += 32) {
              const bool ok = m0 + i < T;
              cp_async4(sL + s * BM + i, lh + (ok ? m0 + i : 0), ok ? 4 : 0);
              cp_async4(sDD + s * BM + i, dh + (ok ? m0 + i : 0), ok ? 4 : 0);
            }
            mbar_arrive_cp_async(&fullQ[s]);
          } else {
            /* lse in log2 units; 0 past T (those queries are masked). */
#pragma unroll
            for (int i = tid; i < BM; i += 32) {
              const bool ok = m0 + i < T;
              sL[s * BM + i] = ok ? __ldg(lh + m0 + i) * FLASH_LOG2E : 0.0f;
              sDD[s * BM + i] = ok ? __ldg(dh + m0 + i) : 0.0f;
            }
            if (tid != 0) {
              mbar_arrive(&fullQ[s]);
              mbar_arrive(&fulldO[s]);
            }
          }
        }
        if constexpr (BWD90_PERSIST == 2) {
          /* The next tile, taken once this one's steps are all queued. */
          int next = 0;
          if (tid == 0)
            next = (int)gridDim.x + atomicAdd(tile_ctr, 1);
          lin = __shfl_sync(0xffffffffu, next, 0);
        } else {
          lin += lin_step;
        }
      }
      if (BWD90_PERSIST == 2 && tid == 0) { /* no tile left: tell the consumers */
        if (j > 0)
          mbar_wait(kvempty, (j - 1) & 1);
        *sTile = -1;
        mbar_arrive(barKV);
      }
    } else if (C::DQWARP && tid < 96) {
      /* Warps 1 and 2: the dQ writers of consumer warpgroups 0 and 1. Per
       * step: wait until the warpgroup has staged its piece (barrier 3 + cw),
       * add it to dq_acc, and once the copy has read the staging buffer let
       * the warpgroup write it again (barrier 5 + cw; not after the last
       * step, so that arrivals and waits pair up). */
      const int cw = tid / 32 - 1;
      const int wq0 = HD == 64 ? 64 * cw : 0, wc0 = HD == 64 ? 0 : 64 * cw;
      const float *dqs = sdQ + cw * 64 * 64;
      int g, b, n0, m_first, n_mb, n_steps;
      tile_at(lin0, g, b, n0, m_first, n_mb, n_steps);
      for (int it = 0; it < n_steps; it++) {
        const int h = g * rep + it / n_mb, m0 = (m_first + it % n_mb) * BM;
        named_sync(3 + cw, 160);
        if (tid % 32 == 0 && m0 + wq0 < T) {
#pragma unroll
          for (int jb = 0; jb < 2; jb++)
            if (wc0 + 32 * jb < hd)
              tma_reduce_add_4d(&tmdQ, dqs + jb * 2048, wc0 + 32 * jb, h, m0 + wq0, b);
          bulk_commit();
          bulk_wait_read<0>();
        }
        __syncwarp();
        if (it + 1 < n_steps)
          named_arrive(5 + cw, 160);
      }
      if (tid % 32 == 0)
        bulk_wait<0>();
      if (BWD90_DIAG_TIMES && tid == 32)
        BWD90_DT(5, clock64());
    }
    return;
  }

  reg_alloc<240>();
  const int c = wg - 1, warp = tid / 32, lane = tid % 32;
  const float sl2 = p.scale * FLASH_LOG2E;
  float dva[HD / 2], dka[HD / 2];
  float sacc[BM / 2], dpacc[BM / 2], dqa[32];
  uint32_t pP[BM / 16][4], pS[BM / 16][4];
  /* dQ piece of this warpgroup: hd 128, all BM = 64 queries x head-dim
   * columns 64c..; hd 64, queries 64c.. of BM = 128 x all 64 columns. */
  const int dq_q0 = HD == 64 ? 64 * c : 0, dq_c0 = HD == 64 ? 0 : 64 * c;
  const int sdS_a = (dq_q0 / 64) * BN * 64; /* offset in a dS^T buffer */
  const bf16 *sK_b = sK + (dq_c0 / 64) * BN * 64;

  int gs = 0; /* steps over this CTA's tiles (stage and dS^T buffer ring) */
#if BWD90_PERSIST == 2
  for (int j = 0;; j++) {
    mbar_wait(barKV, j & 1);
    const int lin = *reinterpret_cast<volatile int *>(sTile);
    if (lin < 0)
      break;
#else
  for (int lin = lin0, j = 0; lin < lin_end; lin += lin_step, j++) {
#endif
    int g, b, n0, m_first, n_mb, n_steps;
    tile_at(lin, g, b, n0, m_first, n_mb, n_steps);
    const int key0 = n0 + 64 * c;                   /* this warpgroup's first key */
    const int key_lo = key0 + 16 * warp + lane / 4; /* this thread's keys: key_lo, key_lo + 8 */
    const int32_t *doc = p.doc ? p.doc + (int64_t)b * T : nullptr;
    int doc_k[2];
#pragma unroll
    for (int r = 0; r < 2; r++)
      doc_k[r] = doc && key_lo + 8 * r < T ? doc[key_lo + 8 * r] : INT32_MIN;
#pragma unroll
    for (int i = 0; i < HD / 2; i++)
      dva[i] = dka[i] = 0.0f;

    if constexpr (BWD90_PERSIST != 2)
      mbar_wait(barKV, j & 1);
    if (BWD90_DIAG_TIMES && threadIdx.x == 128) {
      BWD90_DT(1, clock64());
      unsigned smid;
      asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
      BWD90_DT(6, ((unsigned long long)n_steps << 32) | smid);
    }
    for (int it = 0; it < n_steps; it++, gs++) {
      if (BWD90_DIAG_TIMES && threadIdx.x == 128 && it == 1)
        BWD90_DT(2, clock64());
      const int s = gs % ST, h = g * rep + it / n_mb, m0 = (m_first + it % n_mb) * BM;
      const uint32_t ph = (gs / ST) & 1;
      const bf16 *cQ = sQ + s * BM * HD, *cdO = sdO + s * BM * HD;
      const float *cL = sL + s * BM, *cD = sDD + s * BM;

      /* S^T = K Q^T and dP^T = V dO^T, both in flight. */
      mbar_wait(&fullQ[s], ph);
      /* Zeroed, not only overwritten (scale_d 0): a definition here ends the
       * previous step's values, which the asm's "+f" would keep alive. */
      acc_start(sacc);
      acc_start(dpacc);
      /* acc = X Q'^T over the head dim: X this warpgroup's 64 keys of K or
       * V, Q' the stage's Q or dO (both K-major, 64-column chunks). */
      auto product_kmaj = [&](float(&acc)[BM / 2], const bf16 *x, const bf16 *q) {
        reg_fence(acc);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) {
          const int cc = kk / 4, ko = (kk % 4) * 16;
          wgmma_ss<BM, 0, 0>(acc, desc_k(x + cc * BN * 64 + 64 * c * 64 + ko),
                             desc_k(q + cc * BM * 64 + ko), kk > 0);
        }
        wgmma_commit();
      };
      product_kmaj(sacc, sK, cQ);
      mbar_wait(&fulldO[s], ph);
      product_kmaj(dpacc, sV, cdO);

      /* P^T (masked: causal, same document, queries past T). */
      const bool need_mask = (p.causal && m0 < key0 + 63) || doc != nullptr || m0 + BM > T;
      wgmma_wait<1>();
      reg_fence(sacc);
      if constexpr (C::DQWARP) {
        /* The previous step's dQ piece, staged a phase ago: its stores are
         * done by now, so the fence is short. */
        if (it > 0) {
          fence_proxy_async();
          named_arrive(3 + c, 160);
        }
      }
      if constexpr (C::OVL == 2) {
        /* The previous step's dK (queued before this step's S^T) is done: its
         * Q / dO stage can be refilled. */
        if (it > 0) {
#pragma unroll
          for (int kk = 0; kk < BM / 16; kk++)
            reg_fence_u(pS[kk]);
          reg_fence(dka);
          __syncwarp();
          if (lane == 0)
            mbar_arrive(&empty[(gs - 1) % ST]);
        }
      }
      /* The loop exists twice, masked and not, and a step runs one (a test
       * of need_mask at every element stays a branch per element in ptxas).
       * The mask is a range of query offsets (from this thread's first
       * query, m0 + 2 (lane % 4)) per key row, [qlo, qhi]; with documents a
       * second pass drops the other documents' queries. */
      const int q0 = m0 + (lane % 4) * 2, qhi = T - 1 - q0;
      int qlo[2];
#pragma unroll
      for (int r = 0; r < 2; r++)
        qlo[r] = p.causal ? key_lo + 8 * r - q0 : INT32_MIN;
      auto probs = [&](auto masked) {
#pragma unroll
        for (int i = 0; i < BM / 8; i++) {
          const int qc = i * 8 + (lane % 4) * 2;
          const float lsc = C::LDCP ? FLASH_LOG2E : 1.0f; /* LDCP: natural units */
          const float l0 = cL[qc] * lsc, l1 = cL[qc + 1] * lsc;
#pragma unroll
          for (int e = 0; e < 4; e++) {
            const float x = fmaf(sacc[4 * i + e], sl2, -((e & 1) ? l1 : l0));
            float pv = BWD90_DIAG_NOEXP                                ? x
                       : SWEXP > 0 && i % (SWEXP > 0 ? SWEXP : 1) == 0 ? exp2_fma(x)
                                                                       : exp2f(x);
            if (decltype(masked)::value) {
              const int j = i * 8 + (e & 1);
              pv = j >= qlo[e >> 1] && j <= qhi ? pv : 0.0f;
            }
            sacc[4 * i + e] = pv;
          }
        }
        if (decltype(masked)::value && doc) {
#pragma unroll
          for (int i = 0; i < BM / 8; i++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
              const int q = min(q0 + i * 8 + (e & 1), T - 1); /* past T: dropped above */
              sacc[4 * i + e] = __ldg(doc + q) == doc_k[e >> 1] ? sacc[4 * i + e] : 0.0f;
            }
        }
      };
      if (need_mask)
        probs(std::true_type{});
      else
        probs(std::false_type{});
      /* dS^T = P^T (dP^T - D). */
      wgmma_wait<0>();
      reg_fence(dpacc);
#pragma unroll
      for (int i = 0; i < BM / 8; i++) {
        const int qc = i * 8 + (lane % 4) * 2;
        const float d0 = cD[qc], d1 = cD[qc + 1];
#pragma unroll
        for (int e = 0; e < 4; e++)
          dpacc[4 * i + e] = sacc[4 * i + e] * (dpacc[4 * i + e] - ((e & 1) ? d1 : d0));
      }
#pragma unroll
      for (int kk = 0; kk < BM / 16; kk++) {
        pP[kk][0] = pack_bf16(sacc[8 * kk + 0], sacc[8 * kk + 1]);
        pP[kk][1] = pack_bf16(sacc[8 * kk + 2], sacc[8 * kk + 3]);
        pP[kk][2] = pack_bf16(sacc[8 * kk + 4], sacc[8 * kk + 5]);
        pP[kk][3] = pack_bf16(sacc[8 * kk + 6], sacc[8 * kk + 7]);
        pS[kk][0] = pack_bf16(dpacc[8 * kk + 0], dpacc[8 * kk + 1]);
        pS[kk][1] = pack_bf16(dpacc[8 * kk + 2], dpacc[8 * kk + 3]);
        pS[kk][2] = pack_bf16(dpacc[8 * kk + 4], dpacc[8 * kk + 5]);
        pS[kk][3] = pack_bf16(dpacc[8 * kk + 6], dpacc[8 * kk + 7]);
      }

      /* dS^T to shared memory for dQ (with one buffer, once the other
       * warpgroup is done reading the previous step's: barrier 2). Rows = keys, 128 bytes of
       * 64 queries each, swizzled like a TMA tile (MN-major A of dS K). */
      bf16 *cdS = sdS + (gs % C::DSB) * BN * BM;
      if (C::DSB == 1)
        named_sync(2, 256);
      if constexpr (HD == 64 ? BWD90_64_STSM : BWD90_128_STSM) {
        /* Lane L gives row L % 8 of matrix e = L / 8 (pS[kk][e]): key row
         * kr (kr % 8 == L % 8), 8 queries from 16 kk + (e >> 1) * 8. */
        const int me = lane / 8, kr = 64 * c + 16 * warp + (lane % 8) + (me & 1) * 8;
        const uint32_t ds = s_addr(cdS) + kr * 128;
#pragma unroll
        for (int kk = 0; kk < BM / 16; kk++) {
          const int qs = 16 * kk + (me >> 1) * 8;
          stmatrix_x4(ds + (qs / 64) * BN * 128 + ((((qs % 64) / 8) ^ (lane % 8)) * 16), pS[kk][0],
                      pS[kk][1], pS[kk][2], pS[kk][3]);
        }
      } else {
        unsigned char *ds = reinterpret_cast<unsigned char *>(cdS);
#pragma unroll
        for (int kk = 0; kk < BM / 16; kk++)
#pragma unroll
          for (int e = 0; e < 4; e++) {
            /* pS[kk][e]: key row (e & 1) * 8, queries 16 kk + (e >> 1) * 8 + 2 t */
            const int kr = 64 * c + 16 * warp + lane / 4 + (e & 1) * 8;
            const int q = 16 * kk + (e >> 1) * 8 + (lane % 4) * 2;
            const int off =
                (q / 64) * BN * 128 + kr * 128 + ((((q % 64) / 8) ^ (kr % 8)) * 16) + (q % 8) * 2;
            *reinterpret_cast<uint32_t *>(ds + off) = pS[kk][e];
          }
      }
      fence_proxy_async();

      /* dV += P^T dO, dK += dS^T Q (A from registers, B transposed). */
#pragma unroll
      for (int kk = 0; kk < BM / 16; kk++) {
        reg_fence_u(pP[kk]);
        reg_fence_u(pS[kk]);
      }
      reg_fence(dva);
      reg_fence(dka);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BM / 16; kk++)
        wgmma_rs<HD, 1>(dva, pP[kk], desc_mn(cdO + kk * 16 * 64, BM), 1);
      if constexpr (!C::OVL) {
#pragma unroll
        for (int kk = 0; kk < BM / 16; kk++)
          wgmma_rs<HD, 1>(dka, pS[kk], desc_mn(cQ + kk * 16 * 64, BM), 1);
      }
      wgmma_commit();

      if constexpr (C::TMADQ && !C::DQWARP) {
        /* The previous step's reduce-add has read this warpgroup's dQ buffer
         * before anyone passes the barrier below and writes it again. */
        if (tid == 0)
          bulk_wait_read<0>();
      }
      /* dQ piece = dS K over all BN keys, once both halves of dS^T are in. */
      acc_start(dqa);
      if (!BWD90_DIAG_NOSYNC)
        named_sync(1, 256);
      reg_fence(dqa);
      wgmma_fence();
      if (!BWD90_DIAG_NODQMMA) {
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++)
          wgmma_ss_n64<1, 1>(dqa, desc_mn(cdS + sdS_a + kk * 16 * 64, BN),
                             desc_mn(sK_b + kk * 16 * 64, BN), kk > 0);
      }
      wgmma_commit();
      if constexpr (C::OVL) {
#pragma unroll
        for (int kk = 0; kk < BM / 16; kk++)
          wgmma_rs<HD, 1>(dka, pS[kk], desc_mn(cQ + kk * 16 * 64, BM), 1);
        wgmma_commit();
        wgmma_wait<1>(); /* dV and dQ done, dK in flight */
        reg_fence(dqa);
      } else {
        wgmma_wait<0>();
#pragma unroll
        for (int kk = 0; kk < BM / 16; kk++) {
          reg_fence_u(pP[kk]);
          reg_fence_u(pS[kk]);
        }
        reg_fence(dva);
        reg_fence(dka);
        reg_fence(dqa);
        __syncwarp();
        if (lane == 0)
          mbar_arrive(&empty[s]);
      }

      if constexpr (C::TMADQ) {
        {
          /* This warpgroup's 64 x 64 piece as two boxes of 64 rows x 32 fp32
           * columns, 128-byte swizzled like the map's box. */
          unsigned char *dqs = reinterpret_cast<unsigned char *>(sdQ + c * 64 * 64);
          if (C::DQWARP && gs > 0)
            named_sync(5 + c, 160); /* the writer warp's last reduce-add has read it */
#pragma unroll
          for (int r = 0; r < 2; r++) {
            const int R = 16 * warp + lane / 4 + 8 * r;
#pragma unroll
            for (int i = 0; i < 8; i++) {
              const int chunk = 2 * (i % 4) + (lane % 4) / 2;
              const int off = (i / 4) * 8192 + R * 128 + ((chunk ^ (R % 8)) * 16) + (lane % 2) * 8;
              *reinterpret_cast<float2 *>(dqs + off) =
                  make_float2(dqa[4 * i + 2 * r], dqa[4 * i + 2 * r + 1]);
            }
          }
          if constexpr (!C::DQWARP) { /* DQWARP: fenced and handed over next step */
            fence_proxy_async();
            named_sync(3 + c, 128);
          }
          if (!C::DQWARP && tid == 0 && m0 + dq_q0 < T) {
#pragma unroll
            for (int j = 0; j < 2; j++)
              if (dq_c0 + 32 * j < hd)
                if (!BWD90_DIAG_NORED)
                  tma_reduce_add_4d(&tmdQ, dqs + j * 8192, dq_c0 + 32 * j, h, m0 + dq_q0, b);
            bulk_commit();
          }
        }
      } else {
        float *dqb = dq_acc + ((int64_t)b * T * NH + h) * hd + dq_c0 + (lane % 4) * 2;
#pragma unroll
        for (int r = 0; r < 2; r++) {
          const int q = m0 + dq_q0 + 16 * warp + lane / 4 + 8 * r;
          if (q < T) {
            float *row = dqb + (int64_t)q * NH * hd;
#pragma unroll
            for (int i = 0; i < 8; i++)
              if (dq_c0 + 8 * i < hd)
                red_add_v2(row + 8 * i, dqa[4 * i + 2 * r], dqa[4 * i + 2 * r + 1]);
          }
        }
      }
      if constexpr (C::OVL == 1) {
        wgmma_wait<0>();
#pragma unroll
        for (int kk = 0; kk < BM / 16; kk++) {
          reg_fence_u(pP[kk]);
          reg_fence_u(pS[kk]);
        }
        reg_fence(dva);
        reg_fence(dka);
        __syncwarp();
        if (lane == 0)
          mbar_arrive(&empty[s]);
      }
    }
    if (BWD90_DIAG_TIMES && threadIdx.x == 128)
      BWD90_DT(3, clock64());
    if constexpr (C::DQWARP) {
      if (n_steps > 0) { /* the last step's piece */
        fence_proxy_async();
        named_arrive(3 + c, 160);
      }
    }
    if constexpr (C::OVL == 2) {
      wgmma_wait<0>();
#pragma unroll
      for (int kk = 0; kk < BM / 16; kk++)
        reg_fence_u(pS[kk]);
      reg_fence(dva);
      reg_fence(dka);
      __syncwarp();
      if (BWD90_PERSIST && lane == 0) /* the last step's stage */
        mbar_arrive(&empty[(gs - 1) % ST]);
    }
    /* K and V are read for the last time:
     * the producer may load the next tile's. */
    if constexpr (C::TMADQ && BWD90_PERSIST) {
      if (tid == 0)
        bulk_wait_read<0>();
    }
    __syncwarp();
    if (lane == 0)
      mbar_arrive(kvempty);

    if constexpr (BWD90_EPI == 1 && !BWD90_PERSIST) {
      /* dK and dV through shared memory and TMA stores: the stages other
       * than the last step's are free once this warpgroup is past the last
       * step (the other one has passed the step's dQ barrier, so it is done
       * with every earlier stage). Warpgroup c takes stage last + 1 + c
       * (ST >= 3), or half of stage last + 1 (ST 2): dK in its Q buffer,
       * dV in its dO buffer, 64 key rows x 128 bytes a 64-column chunk,
       * 128-byte swizzled like the map's box. */
      const int st_e = (gs + (ST >= 3 ? c : 0)) % ST; /* the last step's: (gs - 1) % ST */
      const int half = ST >= 3 ? 0 : c * 64 * HD * 2;
      unsigned char *ek = reinterpret_cast<unsigned char *>(sQ + st_e * BM * HD) + half;
      unsigned char *ev = reinterpret_cast<unsigned char *>(sdO + st_e * BM * HD) + half;
#pragma unroll
      for (int r = 0; r < 2; r++) {
        const int R = 16 * warp + lane / 4 + 8 * r;
#pragma unroll
        for (int i = 0; i < HD / 8; i++) {
          const int off = (i / 8) * 8192 + R * 128 + (((i % 8) ^ (R % 8)) * 16) + (lane % 4) * 4;
          *reinterpret_cast<uint32_t *>(ev + off) =
              pack_bf16(dva[4 * i + 2 * r], dva[4 * i + 2 * r + 1]);
          *reinterpret_cast<uint32_t *>(ek + off) =
              pack_bf16(dka[4 * i + 2 * r] * p.scale, dka[4 * i + 2 * r + 1] * p.scale);
        }
      }
      fence_proxy_async();
      named_sync(7 + c, 128);
      if (tid == 0) {
#pragma unroll
        for (int ch = 0; ch < NCH; ch++)
          if (64 * ch < hd) {
            tma_store_4d(&tmdK, ek + ch * 8192, 64 * ch, g, key0, b);
            tma_store_4d(&tmdV, ev + ch * 8192, 64 * ch, g, key0, b);
          }
        bulk_commit();
      }
    } else {
#pragma unroll
      for (int r = 0; r < 2; r++) {
        const int key = key_lo + 8 * r;
        if (key < T) {
          const int64_t o = ((int64_t)(b * T + key) * KVH + g) * hd + (lane % 4) * 2;
#pragma unroll
          for (int i = 0; i < HD / 8; i++) {
            if (i * 8 >= hd) /* hd 80 / 96: the zero-filled columns */
              break;
            *reinterpret_cast<uint32_t *>(dv + o + 8 * i) =
                pack_bf16(dva[4 * i + 2 * r], dva[4 * i + 2 * r + 1]);
            *reinterpret_cast<uint32_t *>(dk + o + 8 * i) =
                pack_bf16(dka[4 * i + 2 * r] * p.scale, dka[4 * i + 2 * r + 1] * p.scale);
          }
        }
      }
    }
  }
  if (BWD90_DIAG_TIMES && threadIdx.x == 128)
    BWD90_DT(4, clock64());
  if constexpr (BWD90_EPI == 1 && !BWD90_PERSIST) {
    /* Shared memory must outlive the bulk copies' reads of it (their
     * writes complete on their own). */
    if (tid == 0)
      bulk_wait_read<0>();
  } else if constexpr (C::TMADQ && !C::DQWARP) {
    if (tid == 0)
      bulk_wait<0>();
  }
#endif
}

#define BWD90_CTR_SLOTS 64
static __device__ int bwd90_tile_ctr[BWD90_CTR_SLOTS]; /* PERSIST 2 */

template <int HD>
static int launch_bwd90(const flash_params *p, const void *q, const void *k, const void *v,
                        const void *dout, const float *lse, const float *D, float *dq_acc, void *dk,
                        void *dv, cudaStream_t stream) {
  using C = bwd90_cfg<HD>;
  CUtensorMap mq, mk, mv, mdo, mdq, mdk, mdv;
  int rc = flash_make_map(&mq, q, p->B, p->T, p->NH, p->HD, C::BM);
  if (rc == 0)
    rc = flash_make_map(&mdo, dout, p->B, p->T, p->NH, p->HD, C::BM);
  if (rc == 0)
    rc = flash_make_map(&mk, k, p->B, p->T, p->KVH, p->HD, C::BN);
  if (rc == 0)
    rc = flash_make_map(&mv, v, p->B, p->T, p->KVH, p->HD, C::BN);
  mdq = mdk = mdv = mq; /* unused without TMADQ / EPI 1 */
  if (rc == 0 && C::TMADQ)
    rc = flash_make_map_f32(&mdq, dq_acc, p->B, p->T, p->NH, p->HD, 64);
  if (rc == 0 && BWD90_EPI == 1)
    rc = flash_make_map(&mdk, dk, p->B, p->T, p->KVH, p->HD, 64);
  if (rc == 0 && BWD90_EPI == 1)
    rc = flash_make_map(&mdv, dv, p->B, p->T, p->KVH, p->HD, 64);
  if (rc != 0)
    return rc;
  auto kern = flash_bwd90_kernel<HD>;
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM);
  if (e != cudaSuccess)
    return (int)e;
  dim3 grid(p->KVH * p->B, (p->T + C::BN - 1) / C::BN);
  int *ctr = nullptr;
  if (BWD90_PERSIST == 2) {
    /* A zeroed tile counter a launch, from a ring of slots, so that launches
     * on other streams do not share one. */
    static unsigned next_slot;
    if ((e = cudaGetSymbolAddress((void **)&ctr, bwd90_tile_ctr)) != cudaSuccess)
      return (int)e;
    ctr += __atomic_fetch_add(&next_slot, 1u, __ATOMIC_RELAXED) % BWD90_CTR_SLOTS;
    if ((e = cudaMemsetAsync(ctr, 0, sizeof(int), stream)) != cudaSuccess)
      return (int)e;
  }
  if (BWD90_PERSIST) {
    int dev = 0, sms = 0;
    if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess)
      return (int)e;
    const unsigned tiles = grid.x * grid.y;
    grid = dim3(tiles < (unsigned)sms ? tiles : (unsigned)sms);
  }
  int grid_ch = BWD90_GRID_CH;
  if (grid_ch < 0) {
    /* Pairs a chunk: as many as keep their fp32 dQ rows (rep heads x T x
     * hd) within BWD90_L2_DQ MiB, so that the reduce-adds of the CTAs
     * running together stay in L2. */
    const int64_t pair = (int64_t)(p->NH / p->KVH) * p->T * p->HD * 4;
    const int64_t n = ((int64_t)BWD90_L2_DQ << 20) / (pair > 0 ? pair : 1);
    const int64_t hi = BWD90_GRID_CH_MAX < p->B * p->KVH ? BWD90_GRID_CH_MAX : p->B * p->KVH;
    grid_ch = (int)(n < 1 ? 1 : n > hi ? hi : n);
  }
  kern<<<grid, C::THREADS, C::SMEM, stream>>>(mq, mk, mv, mdo, mdq, mdk, mdv, *p, lse, D, dq_acc, (bf16 *)dk,
                                              (bf16 *)dv, ctr, grid_ch);
  return (int)cudaGetLastError();
}

#if BWD90_DIAG_TIMES
extern "C" __attribute__((visibility("default"))) int flash_bwd90_diag_times(void *host,
                                                                             size_t bytes) {
  return (int)cudaMemcpyFromSymbol(host, bwd90_dt, bytes);
}
#endif

extern "C" int flash_bwd_sm90(const flash_params *p, const void *q, const void *k, const void *v,
                              const void *dout, const float *lse, const float *D, float *dq_acc,
                              void *dk, void *dv, void *stream) {
  cudaStream_t st = (cudaStream_t)stream;
  if (p->HD == 64)
    return launch_bwd90<64>(p, q, k, v, dout, lse, D, dq_acc, dk, dv, st);
  if (p->HD == 80 || p->HD == 96 || p->HD == 128) /* 80, 96: zero-filled to 128 */
    return launch_bwd90<128>(p, q, k, v, dout, lse, D, dq_acc, dk, dv, st);
  return (int)cudaErrorInvalidValue;
}
