/* Flash attention backward for Hopper (sm_90a): the main dK / dV / dQ
 * kernel with wgmma, TMA and warp specialisation. flash_bwd (flash_bwd.cu)
 * runs the row dots D and the dQ conversion around it. The kernel and its
 * launcher are templates over a tile-table entry (bwd90_tiles<HD>), so that
 * flash_bwd_sm90.cu instantiates the production tiles and the sandbox's
 * variants (bench/flash/) others.
 *
 * One CTA owns BN = 128 keys of one (batch, kv head) and has 3 warpgroups:
 *  - warpgroup 0: its warp 0 is the producer (bwd90_produce): one thread
 *    loads K and V once, then streams the query steps (every query head of
 *    the GQA group, every block of BM queries that can see the keys) through
 *    ST stages of Q and dO tiles, each behind a "full" mbarrier and both
 *    behind an "empty" one; the warp's lanes copy the step's lse and D values
 *    beside them (not by TMA: a 1-d box running past a short tensor faulted,
 *    call 3 of bench/results/2026-11-23-flash-hopper.md) and arrive on the
 *    same "full" barriers. With DQWARP its warps 1 and 2 are the dQ writers
 *    (bwd90_write_dq), one per consumer warpgroup.
 *  - warpgroups 1 and 2, the consumers (bwd90_consume), own 64 keys each and,
 *    per query step (bwd90_step), compute the transposed products (queries
 *    along N), so that they are directly the register A operands of the next
 *    ones:
 *      S^T = K Q^T, dP^T = V dO^T            (wgmma, both from shared memory)
 *      P^T = exp(scale S^T - lse), dS^T = P^T (dP^T - D)    (registers)
 *      dV += P^T dO, dK += dS^T Q            (wgmma, A from registers)
 *    dS^T also goes to shared memory (bf16), where the two warpgroups
 *    together compute dQ_step = dS K (each a 64 x 64 piece: hd 128 splits
 *    the head dim, hd 64 the queries); each warpgroup stages its piece in
 *    shared memory (fp32), which is added to the fp32 dq accumulator with
 *    TMA reduce-adds: by the warpgroup's writer warp (DQWARP), which the
 *    consumers arrive for a step later, or by one of its own threads.
 *    dK and dV stay in registers to the end, then go through the free Q / dO
 *    stages to TMA stores (bwd90_store_dkdv).
 *  - the products of a step are issued dV, (barrier), dQ, dK, so that the
 *    dQ epilogue runs under dK, and the grid is dispatched in chunks of
 *    (batch, kv head) pairs for L2 reuse.
 *
 * hd 64 takes BM = 128 queries a step, hd 128 BM = 64 (the accumulators of
 * the widest phase then fit the 240 registers a consumer thread gets). */
#ifndef FSDPC_FLASH_BWD_SM90_CUH
#define FSDPC_FLASH_BWD_SM90_CUH

#include <cuda.h>
#include <cuda_runtime.h>
#include <math.h>

#include <type_traits>

#include "flash.h"
#include "flash_common.cuh"
#include "flash_sm90.cuh"
#include "flash_tma.cuh"
#include "flash_wgmma.cuh"

/* Points in a CTA's life where bwd90_seams::mark is called (a timing
 * variant of the sandbox records clocks there). */
enum {
  BWD90_AT_ENTRY,      /* thread 0, before the barriers are set up */
  BWD90_AT_KV,         /* a consumer thread, K / V arrived; arg: the step count */
  BWD90_AT_STEP,       /* a consumer thread, a step begins; arg: its number */
  BWD90_AT_STEPS_DONE, /* a consumer thread, after the last step */
  BWD90_AT_END,        /* a consumer thread, dK / dV stores issued */
  BWD90_AT_DQ_DONE,    /* a dQ writer thread, its last reduce-add complete */
};

/* Seams: what a sandbox variant (bench/flash/) may replace by hiding these
 * members in a type derived from a tile-table entry. Production runs these. */
struct bwd90_seams {
  /* Whether the kernel masks a sliding window (bwd90_run launches the
   * bwd90_windowed twin of an entry for a shape with one). */
  static constexpr bool WINDOW = false;
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  /* The probability of score element (query group i of 8, any element): 2^x. */
  static __device__ __forceinline__ float prob_exp2(float x, int i) {
    return exp2f(x);
  }
  /* Until both consumer warpgroups' dS^T of the step are in shared memory. */
  static __device__ __forceinline__ void ds_barrier() {
    named_sync(1, 256);
  }
  /* dqa (+)= dS K over the BN keys (ds, kb: this warpgroup's columns of the
   * dS^T buffer and of K), between the caller's fence and commit. */
  template <class C>
  static __device__ __forceinline__ void dq_product(float (&dqa)[32], const bf16 *ds,
                                                    const bf16 *kb) {
#pragma unroll
    for (int kk = 0; kk < C::BN / 16; kk++)
      wgmma_ss_n64<1, 1>(dqa, desc_mn(ds + kk * 16 * 64, C::BN), desc_mn(kb + kk * 16 * 64, C::BN),
                         kk > 0);
  }
  /* Adds a staged box of dQ (fp32) to the accumulator at (c0, h, q0, b). */
  static __device__ __forceinline__ void dq_reduce(const CUtensorMap *map, const void *src, int c0,
                                                   int h, int q0, int b) {
    tma_reduce_add_4d(map, src, c0, h, q0, b);
  }
  static __device__ __forceinline__ void mark(int at, int arg) {}
#endif
};

/* The tile table: per head dim, the shapes and schedules the default build
 * runs, the fastest measured on an H200 (2026-11-24-flash-bwd.md, -s8.md,
 * -s9.md):
 *   BN keys a CTA; BM queries a step; ST Q / dO stages
 *   OVL     issue order of a step's products: 1, dV, (barrier), dQ, dK, and
 *           the step ends once dK is done; 2, as 1 but the next step's S^T
 *           and dP^T queue behind dK (at hd 64 too many live registers: the
 *           compiler serialises the wgmmas)
 *   DQWARP  writer warps of the producer warpgroup issue the dQ reduce-adds
 *           (+3-7 % at hd 128, -1 to -6 % at hd 64)
 *   LDCP    the producer warp copies lse and D by cp.async arriving on the
 *           stage's barrier (+2-7 % at hd 64, -0.5 to -3 % at hd 128)
 *   L2_DQ_MIB, CHUNK_MAX  CTAs are dispatched in chunks of (batch, kv head)
 *           pairs whose fp32 dq rows fit L2_DQ_MIB MiB, 1 to CHUNK_MAX pairs
 *           (2 pairs at T 8192, GQA 4, hd 128: +3-4 % against 16)
 * Head dims 80 and 96 run the 128 entry. */
template <int HD_> struct bwd90_tiles;
template <> struct bwd90_tiles<64> : bwd90_seams {
  static constexpr int HD = 64, BN = 128, BM = 128, ST = 2, OVL = 1;
  static constexpr bool DQWARP = false, LDCP = true;
  static constexpr int L2_DQ_MIB = 32, CHUNK_MAX = 16;
};
template <> struct bwd90_tiles<128> : bwd90_seams {
  static constexpr int HD = 128, BN = 128, BM = 64, ST = 3, OVL = 2;
  static constexpr bool DQWARP = true, LDCP = false;
  static constexpr int L2_DQ_MIB = 32, CHUNK_MAX = 16;
};
/* The same entry with the sliding-window mask compiled in. */
template <class C> struct bwd90_windowed : C {
  static constexpr bool WINDOW = true;
};

/* What follows from a tile-table entry C. dS^T has two buffers, so that a
 * warpgroup writes step i's while the other may still read step i - 1's
 * for dQ (one barrier a step, not two). */
template <class C> struct bwd90_layout {
  static constexpr int THREADS = 384, DSB = 2;
  static constexpr int KV_BYTES = C::BN * C::HD * 2, Q_BYTES = C::BM * C::HD * 2;
  static constexpr int DS_BYTES = C::BN * C::BM * 2, DQ_BYTES = C::BM * C::HD * 4;
  /* 1024 of slack to align the tiles for the 128-byte swizzle. */
  static constexpr int SMEM = 1024 + 2 * KV_BYTES + 2 * C::ST * Q_BYTES + DSB * DS_BYTES +
                              DQ_BYTES + 2 * C::ST * C::BM * 4 + 8 * (1 + 3 * C::ST);
  static_assert(SMEM <= 227 * 1024, "bwd90: shared memory");
};

/* Shared memory of a CTA. */
template <class C> struct bwd90_smem {
  bf16 *sK;   // NCH x (BN x 64)
  bf16 *sV;   // NCH x (BN x 64)
  bf16 *sQ;   // ST x NCH x (BM x 64)
  bf16 *sdO;  // ST x NCH x (BM x 64)
  bf16 *sdS;  // DSB x BM / 64 x (BN x 64): dS^T, queries contiguous
  float *sdQ; // 2 x 64 x 64 fp32: the warpgroups' staged dQ pieces
  float *sL;  // ST x BM: lse (LDCP: natural units, else * log2(e))
  float *sDD; // ST x BM: D
  uint64_t *barKV, *fullQ, *fulldO, *empty;
};

/* What every role of a CTA derives from the launch: the GQA ratio rep,
 * the real head dim hd (<= HD), the key blocks NB of a sequence, the
 * (batch, kv head) pairs BG, and the CTA's number lin in the grid's order. */
struct bwd90_ctx {
  int T, NH, KVH, rep, hd, NB, BG, lin, grid_ch;
};

/* The tile (batch, kv head, key block) of CTA number x.lin: key block
 * slowest, or with grid_ch > 0 the key blocks of grid_ch (batch, kv head)
 * pairs at a time, heaviest causal key block first within them, so that the
 * CTAs running together share their Q, dO and dq rows in L2. Its steps: the
 * query heads of the GQA group x the query blocks that see the keys. */
template <class C> struct bwd90_tile {
  int g, b, n0, m_first, n_mb, n_steps;
  __device__ __forceinline__ bwd90_tile(const bwd90_ctx &x, const flash_params &p) {
    const int lin = x.lin, grid_ch = x.grid_ch;
    int n_block = lin / x.BG, bg = lin % x.BG;
    if (grid_ch > 0) {
      const int chunk = lin / (grid_ch * x.NB), r = lin % (grid_ch * x.NB);
      const int w = min(grid_ch, x.BG - chunk * grid_ch);
      n_block = r / w;
      bg = chunk * grid_ch + r % w;
    }
    g = bg % x.KVH;
    b = bg / x.KVH;
    n0 = n_block * C::BN;
    /* Causal: queries before the first key see none of them. */
    m_first = p.causal ? n0 / C::BM : 0;
    n_mb = (x.T + C::BM - 1) / C::BM - m_first;
    n_steps = x.rep * n_mb;
  }
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

/* The producer warp: K and V, then every step's Q, dO, lse and D (lane 0
 * issues the TMA copies, every lane copies lse and D). */
template <class C>
static __device__ __forceinline__ void
bwd90_produce(const bwd90_smem<C> &sm, const bwd90_ctx &x, const flash_params &p,
              const CUtensorMap *tmQ, const CUtensorMap *tmK, const CUtensorMap *tmV,
              const CUtensorMap *tmdO, const float *lse, const float *Dg, int tid) {
  using L = bwd90_layout<C>;
  constexpr int BN = C::BN, BM = C::BM, HD = C::HD, ST = C::ST, NCH = HD / 64;
  const int T = x.T, NH = x.NH;
  const bwd90_tile<C> tl(x, p);
  if (tid == 0) {
    mbar_expect_tx(sm.barKV, 2 * L::KV_BYTES);
#pragma unroll
    for (int c = 0; c < NCH; c++) {
      tma_load_4d(sm.sK + c * BN * 64, tmK, sm.barKV, c * 64, tl.g, tl.n0, tl.b);
      tma_load_4d(sm.sV + c * BN * 64, tmV, sm.barKV, c * 64, tl.g, tl.n0, tl.b);
    }
  }
  for (int it = 0; it < tl.n_steps; it++) {
    const int s = it % ST, h = tl.g * x.rep + it / tl.n_mb;
    const int m0 = (tl.m_first + it % tl.n_mb) * BM;
    const float *lh = lse + ((int64_t)tl.b * NH + h) * T, *dh = Dg + ((int64_t)tl.b * NH + h) * T;
    mbar_wait(&sm.empty[s], ((it / ST) & 1) ^ 1);
    if (tid == 0) {
      mbar_expect_tx(&sm.fullQ[s], L::Q_BYTES);
#pragma unroll
      for (int c = 0; c < NCH; c++)
        tma_load_4d(sm.sQ + s * BM * HD + c * BM * 64, tmQ, &sm.fullQ[s], c * 64, h, m0, tl.b);
      mbar_expect_tx(&sm.fulldO[s], L::Q_BYTES);
#pragma unroll
      for (int c = 0; c < NCH; c++)
        tma_load_4d(sm.sdO + s * BM * HD + c * BM * 64, tmdO, &sm.fulldO[s], c * 64, h, m0, tl.b);
    }
    if constexpr (C::LDCP) {
      /* lse (natural units) and D by cp.async, zero-filled past T (those
       * queries are masked); fullQ completes when they land. */
#pragma unroll
      for (int i = tid; i < BM; i += 32) {
        const bool ok = m0 + i < T;
        cp_async4(sm.sL + s * BM + i, lh + (ok ? m0 + i : 0), ok ? 4 : 0);
        cp_async4(sm.sDD + s * BM + i, dh + (ok ? m0 + i : 0), ok ? 4 : 0);
      }
      mbar_arrive_cp_async(&sm.fullQ[s]);
    } else {
      /* lse in log2 units; 0 past T (those queries are masked). */
#pragma unroll
      for (int i = tid; i < BM; i += 32) {
        const bool ok = m0 + i < T;
        sm.sL[s * BM + i] = ok ? __ldg(lh + m0 + i) * FLASH_LOG2E : 0.0f;
        sm.sDD[s * BM + i] = ok ? __ldg(dh + m0 + i) : 0.0f;
      }
      if (tid != 0) {
        mbar_arrive(&sm.fullQ[s]);
        mbar_arrive(&sm.fulldO[s]);
      }
    }
  }
}

/* DQWARP: warps 1 and 2 of the producer warpgroup, the dQ writers of
 * consumer warpgroups cw = 0 and 1 (FlashAttention-3's arrangement). Per
 * step: wait until the warpgroup has staged its piece (barrier 3 + cw), add
 * it to dq_acc, and once the copy has read the staging buffer let the
 * warpgroup write it again (barrier 5 + cw; not after the last step, so that
 * arrivals and waits pair up). */
template <class C>
static __device__ __forceinline__ void bwd90_write_dq(const bwd90_smem<C> &sm, const bwd90_ctx &x,
                                                      const flash_params &p,
                                                      const CUtensorMap *tmdQ, int tid) {
  constexpr int HD = C::HD;
  const int cw = tid / 32 - 1;
  const int wq0 = HD == 64 ? 64 * cw : 0, wc0 = HD == 64 ? 0 : 64 * cw;
  const float *dqs = sm.sdQ + cw * 64 * 64;
  const bwd90_tile<C> tl(x, p);
  for (int it = 0; it < tl.n_steps; it++) {
    const int h = tl.g * x.rep + it / tl.n_mb, m0 = (tl.m_first + it % tl.n_mb) * C::BM;
    named_sync(3 + cw, 160);
    if (tid % 32 == 0 && m0 + wq0 < x.T) {
#pragma unroll
      for (int jb = 0; jb < 2; jb++)
        if (wc0 + 32 * jb < x.hd)
          C::dq_reduce(tmdQ, dqs + jb * 2048, wc0 + 32 * jb, h, m0 + wq0, tl.b);
      bulk_commit();
      bulk_wait_read<0>();
    }
    __syncwarp();
    if (it + 1 < tl.n_steps)
      named_arrive(5 + cw, 160);
  }
  if (tid % 32 == 0)
    bulk_wait<0>();
  C::mark(BWD90_AT_DQ_DONE, 0);
}

/* What a consumer thread holds: dV and dK of its keys through the whole
 * tile, and a step's S^T (then P^T), dP^T (then dS^T), dQ piece and the bf16
 * A fragments of P^T and dS^T. References to arrays bwd90_consume declares:
 * the same arrays as members of this struct compiled to other registers
 * (bench/results/2026-11-28-flash-sandbox.md). */
template <class C> struct bwd90_acc {
  float (&dva)[C::HD / 2], (&dka)[C::HD / 2];
  float (&sacc)[C::BM / 2], (&dpacc)[C::BM / 2], (&dqa)[32];
  uint32_t (&pP)[C::BM / 16][4], (&pS)[C::BM / 16][4];
};

/* Consumer warpgroup c's place in the tile: its dQ piece (hd 128: all
 * BM = 64 queries x head-dim columns 64c..; hd 64: queries 64c.. of
 * BM = 128 x all 64 columns) at queries dq_q0, columns dq_c0, from the
 * dS^T buffer at ds_off and K at kb; its first key key0, this thread's keys
 * key_lo and key_lo + 8. (The document ids travel beside it: as a member
 * their pointer changed the compiled branches of the doc_k loads.) */
struct bwd90_keys {
  int c, warp, lane, tid, dq_q0, dq_c0, ds_off;
  const bf16 *kb;
  int key0, key_lo;
};

/* P^T = exp2(scale S^T - lse) in place in acc.sacc; masked (causal, sliding
 * window, same document, queries past T) when MASKED: element (i, e) is kept
 * iff its query offset from this thread's first query q0 is in [qlo, qhi] of
 * its key row (and, with C::WINDOW, at most qwin of its key row), then, with
 * documents, if its query's document is its key's. */
template <class C, bool MASKED>
static __device__ __forceinline__ void
bwd90_probs(const bwd90_acc<C> &acc, const float *cL, const bwd90_keys &k, const int32_t *doc,
            const int (&doc_k)[2], int q0, int qhi, const int (&qlo)[2], const int (&qwin)[2],
            int T, float sl2) {
  const int lane = k.lane;
#pragma unroll
  for (int i = 0; i < C::BM / 8; i++) {
    const int qc = i * 8 + (lane % 4) * 2;
    const float lsc = C::LDCP ? FLASH_LOG2E : 1.0f; /* LDCP: natural units */
    const float l0 = cL[qc] * lsc, l1 = cL[qc + 1] * lsc;
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const float x = fmaf(acc.sacc[4 * i + e], sl2, -((e & 1) ? l1 : l0));
      float pv = C::prob_exp2(x, i);
      if (MASKED) {
        const int j = i * 8 + (e & 1);
        pv = j >= qlo[e >> 1] && j <= qhi && (!C::WINDOW || j <= qwin[e >> 1]) ? pv : 0.0f;
      }
      acc.sacc[4 * i + e] = pv;
    }
  }
  if (MASKED && doc) {
#pragma unroll
    for (int i = 0; i < C::BM / 8; i++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int q = min(q0 + i * 8 + (e & 1), T - 1); /* past T: dropped above */
        acc.sacc[4 * i + e] = __ldg(doc + q) == doc_k[e >> 1] ? acc.sacc[4 * i + e] : 0.0f;
      }
  }
}

/* dS^T = P^T (dP^T - D) in acc.dpacc, and both as bf16 A fragments. */
template <class C>
static __device__ __forceinline__ void bwd90_ds(const bwd90_acc<C> &acc, const float *cD,
                                                int lane) {
#pragma unroll
  for (int i = 0; i < C::BM / 8; i++) {
    const int qc = i * 8 + (lane % 4) * 2;
    const float d0 = cD[qc], d1 = cD[qc + 1];
#pragma unroll
    for (int e = 0; e < 4; e++)
      acc.dpacc[4 * i + e] = acc.sacc[4 * i + e] * (acc.dpacc[4 * i + e] - ((e & 1) ? d1 : d0));
  }
#pragma unroll
  for (int kk = 0; kk < C::BM / 16; kk++) {
    acc.pP[kk][0] = pack_bf16(acc.sacc[8 * kk + 0], acc.sacc[8 * kk + 1]);
    acc.pP[kk][1] = pack_bf16(acc.sacc[8 * kk + 2], acc.sacc[8 * kk + 3]);
    acc.pP[kk][2] = pack_bf16(acc.sacc[8 * kk + 4], acc.sacc[8 * kk + 5]);
    acc.pP[kk][3] = pack_bf16(acc.sacc[8 * kk + 6], acc.sacc[8 * kk + 7]);
    acc.pS[kk][0] = pack_bf16(acc.dpacc[8 * kk + 0], acc.dpacc[8 * kk + 1]);
    acc.pS[kk][1] = pack_bf16(acc.dpacc[8 * kk + 2], acc.dpacc[8 * kk + 3]);
    acc.pS[kk][2] = pack_bf16(acc.dpacc[8 * kk + 4], acc.dpacc[8 * kk + 5]);
    acc.pS[kk][3] = pack_bf16(acc.dpacc[8 * kk + 6], acc.dpacc[8 * kk + 7]);
  }
}

/* dS^T (acc.pS) to the step's shared buffer cdS for dQ: rows = keys, 128
 * bytes of 64 queries each, swizzled like a TMA tile (the MN-major A of
 * dS K), one stmatrix.x4 per 16 queries: lane L gives row L % 8 of matrix
 * e = L / 8 (pS[kk][e]): key row kr (kr % 8 == L % 8), 8 queries from
 * 16 kk + (e >> 1) * 8. */
template <class C>
static __device__ __forceinline__ void bwd90_store_ds(const bwd90_acc<C> &acc, bf16 *cdS,
                                                      const bwd90_keys &k) {
  const int lane = k.lane, me = lane / 8;
  const int kr = 64 * k.c + 16 * k.warp + (lane % 8) + (me & 1) * 8;
  const uint32_t ds = s_addr(cdS) + kr * 128;
#pragma unroll
  for (int kk = 0; kk < C::BM / 16; kk++) {
    const int qs = 16 * kk + (me >> 1) * 8;
    stmatrix_x4(ds + (qs / 64) * C::BN * 128 + ((((qs % 64) / 8) ^ (lane % 8)) * 16), acc.pS[kk][0],
                acc.pS[kk][1], acc.pS[kk][2], acc.pS[kk][3]);
  }
}

/* This warpgroup's fp32 dQ piece into its staging buffer dqs as two boxes
 * of 64 rows x 32 columns, 128-byte swizzled like the map's box. */
static __device__ __forceinline__ void bwd90_stage_dq(const float (&dqa)[32], unsigned char *dqs,
                                                      int warp, int lane) {
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
}

/* The registers of the step's products may be read and written again (the
 * asm of the wgmma wait names none); with_p: the P^T fragments too. */
template <class C>
static __device__ __forceinline__ void bwd90_fence_products(const bwd90_acc<C> &acc, bool with_p) {
#pragma unroll
  for (int kk = 0; kk < C::BM / 16; kk++) {
    if (with_p)
      reg_fence_u(acc.pP[kk]);
    reg_fence_u(acc.pS[kk]);
  }
  reg_fence(acc.dva);
  reg_fence(acc.dka);
}

/* Query step it of the tile tl (query head h, block m0) of consumer
 * warpgroup k.c. */
template <class C>
static __device__ __forceinline__ void
bwd90_step(const bwd90_smem<C> &sm, const bwd90_ctx &x, const bwd90_tile<C> &tl,
           const bwd90_keys &k, const int32_t *doc, const int (&doc_k)[2], const flash_params &p,
           const CUtensorMap *tmdQ, int it, float sl2, const bwd90_acc<C> &acc) {
  constexpr int BN = C::BN, BM = C::BM, HD = C::HD, ST = C::ST;
  const int T = x.T, lane = k.lane;
  C::mark(BWD90_AT_STEP, it);
  const int s = it % ST, h = tl.g * x.rep + it / tl.n_mb, m0 = (tl.m_first + it % tl.n_mb) * BM;
  const uint32_t ph = (it / ST) & 1;
  const bf16 *cQ = sm.sQ + s * BM * HD, *cdO = sm.sdO + s * BM * HD;
  const float *cL = sm.sL + s * BM, *cD = sm.sDD + s * BM;

  /* S^T = K Q^T and dP^T = V dO^T, both in flight. */
  mbar_wait(&sm.fullQ[s], ph);
  /* Zeroed, not only overwritten (scale_d 0): a definition here ends the
   * previous step's values, which the asm's "+f" would keep alive. */
  acc_start(acc.sacc);
  acc_start(acc.dpacc);
  /* r = X Q'^T over the head dim: X this warpgroup's 64 keys of K or V, Q'
   * the stage's Q or dO (both K-major, 64-column chunks). */
  auto product_kmaj = [&](float(&r)[BM / 2], const bf16 *xs, const bf16 *q) {
    reg_fence(r);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
      const int cc = kk / 4, ko = (kk % 4) * 16;
      wgmma_ss<BM, 0, 0>(r, desc_k(xs + cc * BN * 64 + 64 * k.c * 64 + ko),
                         desc_k(q + cc * BM * 64 + ko), kk > 0);
    }
    wgmma_commit();
  };
  product_kmaj(acc.sacc, sm.sK, cQ);
  mbar_wait(&sm.fulldO[s], ph);
  product_kmaj(acc.dpacc, sm.sV, cdO);

  /* P^T (masked: causal, same document, queries past T). */
  const bool need_mask = (p.causal && m0 < k.key0 + 63) || doc != nullptr || m0 + BM > T ||
                         (C::WINDOW && m0 + BM - 1 - k.key0 >= p.window);
  wgmma_wait<1>();
  reg_fence(acc.sacc);
  if (C::DQWARP && it > 0) {
    /* The previous step's dQ piece, staged a phase ago: its stores are done
     * by now, so the fence is short. */
    fence_proxy_async();
    named_arrive(3 + k.c, 160);
  }
  if (C::OVL == 2 && it > 0) {
    /* The previous step's dK (queued before this step's S^T) is done: its
     * Q / dO stage can be refilled. */
#pragma unroll
    for (int kk = 0; kk < BM / 16; kk++)
      reg_fence_u(acc.pS[kk]);
    reg_fence(acc.dka);
    __syncwarp();
    if (lane == 0)
      mbar_arrive(&sm.empty[(it - 1) % ST]);
  }
  /* The probabilities' loop exists twice, masked and not, and a step runs
   * one (a test of need_mask at every element stays a branch per element in
   * ptxas). The mask is a range of query offsets per key row. */
  const int q0 = m0 + (lane % 4) * 2, qhi = T - 1 - q0;
  int qlo[2], qwin[2]; /* a window (C::WINDOW: p.window > 0) ends at key + window - 1 */
#pragma unroll
  for (int r = 0; r < 2; r++) {
    qlo[r] = p.causal ? k.key_lo + 8 * r - q0 : INT32_MIN;
    qwin[r] = C::WINDOW ? k.key_lo + 8 * r + p.window - 1 - q0 : 0;
  }
  if (need_mask)
    bwd90_probs<C, true>(acc, cL, k, doc, doc_k, q0, qhi, qlo, qwin, T, sl2);
  else
    bwd90_probs<C, false>(acc, cL, k, doc, doc_k, q0, qhi, qlo, qwin, T, sl2);
  /* dS^T = P^T (dP^T - D), to shared memory for dQ. */
  wgmma_wait<0>();
  reg_fence(acc.dpacc);
  bwd90_ds<C>(acc, cD, lane);
  bf16 *cdS = sm.sdS + (it % bwd90_layout<C>::DSB) * BN * BM;
  bwd90_store_ds<C>(acc, cdS, k);
  fence_proxy_async();

  /* dV += P^T dO (A from registers, B transposed). */
  bwd90_fence_products(acc, true);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < BM / 16; kk++)
    wgmma_rs<HD, 1>(acc.dva, acc.pP[kk], desc_mn(cdO + kk * 16 * 64, BM), 1);
  wgmma_commit();

  if (!C::DQWARP && k.tid == 0) /* the previous step's reduce-add has read dqs */
    bulk_wait_read<0>();
  /* dQ piece = dS K over all BN keys, once both halves of dS^T are in; then
   * dK += dS^T Q, in flight while the dQ piece is staged. */
  acc_start(acc.dqa);
  C::ds_barrier();
  reg_fence(acc.dqa);
  wgmma_fence();
  C::template dq_product<C>(acc.dqa, cdS + k.ds_off, k.kb);
  wgmma_commit();
#pragma unroll
  for (int kk = 0; kk < BM / 16; kk++)
    wgmma_rs<HD, 1>(acc.dka, acc.pS[kk], desc_mn(cQ + kk * 16 * 64, BM), 1);
  wgmma_commit();
  wgmma_wait<1>(); /* dV and dQ done, dK in flight */
  reg_fence(acc.dqa);

  unsigned char *dqs = reinterpret_cast<unsigned char *>(sm.sdQ + k.c * 64 * 64);
  if (C::DQWARP && it > 0)
    named_sync(5 + k.c, 160); /* the writer warp's last reduce-add has read it */
  bwd90_stage_dq(acc.dqa, dqs, k.warp, lane);
  if (!C::DQWARP) { /* DQWARP: fenced and handed over next step */
    fence_proxy_async();
    named_sync(3 + k.c, 128);
    if (k.tid == 0 && m0 + k.dq_q0 < T) {
#pragma unroll
      for (int j = 0; j < 2; j++)
        if (k.dq_c0 + 32 * j < x.hd)
          C::dq_reduce(tmdQ, dqs + j * 8192, k.dq_c0 + 32 * j, h, m0 + k.dq_q0, tl.b);
      bulk_commit();
    }
  }
  if (C::OVL == 1) {
    wgmma_wait<0>();
    bwd90_fence_products(acc, true);
    __syncwarp();
    if (lane == 0)
      mbar_arrive(&sm.empty[s]);
  }
}

/* dK (times the scale) and dV of this warpgroup's 64 keys through shared
 * memory and TMA stores. The stages other than the last step's are free
 * once this warpgroup is past the last step (the other one has passed the
 * step's dQ barrier, so it is done with every earlier stage): warpgroup c
 * takes stage last + 1 + c (ST >= 3), or half of stage last + 1 (ST 2); dK
 * in its Q buffer, dV in its dO buffer, 64 key rows x 128 bytes a 64-column
 * chunk, 128-byte swizzled like the map's box. (From registers, 4-byte
 * stores held the hd-128 CTA for about 10,000 cycles at its end.) */
template <class C>
static __device__ __forceinline__ void
bwd90_store_dkdv(const bwd90_smem<C> &sm, const bwd90_ctx &x, const bwd90_tile<C> &tl,
                 const bwd90_keys &k, const flash_params &p, const CUtensorMap *tmdK,
                 const CUtensorMap *tmdV, const bwd90_acc<C> &acc) {
  constexpr int BM = C::BM, HD = C::HD, ST = C::ST, NCH = HD / 64;
  const int lane = k.lane;
  const int st_e = (tl.n_steps + (ST >= 3 ? k.c : 0)) % ST; /* the last step's: n_steps - 1 */
  const int half = ST >= 3 ? 0 : k.c * 64 * HD * 2;
  unsigned char *ek = reinterpret_cast<unsigned char *>(sm.sQ + st_e * BM * HD) + half;
  unsigned char *ev = reinterpret_cast<unsigned char *>(sm.sdO + st_e * BM * HD) + half;
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const int R = 16 * k.warp + lane / 4 + 8 * r;
#pragma unroll
    for (int i = 0; i < HD / 8; i++) {
      const int off = (i / 8) * 8192 + R * 128 + (((i % 8) ^ (R % 8)) * 16) + (lane % 4) * 4;
      *reinterpret_cast<uint32_t *>(ev + off) =
          pack_bf16(acc.dva[4 * i + 2 * r], acc.dva[4 * i + 2 * r + 1]);
      *reinterpret_cast<uint32_t *>(ek + off) =
          pack_bf16(acc.dka[4 * i + 2 * r] * p.scale, acc.dka[4 * i + 2 * r + 1] * p.scale);
    }
  }
  fence_proxy_async();
  named_sync(7 + k.c, 128);
  if (k.tid == 0) {
#pragma unroll
    for (int ch = 0; ch < NCH; ch++)
      if (64 * ch < x.hd) {
        tma_store_4d(tmdK, ek + ch * 8192, 64 * ch, tl.g, k.key0, tl.b);
        tma_store_4d(tmdV, ev + ch * 8192, 64 * ch, tl.g, k.key0, tl.b);
      }
    bulk_commit();
  }
}

/* Consumer warpgroup c (wg - 1): every step of the tile, then dK and dV. */
template <class C>
static __device__ __forceinline__ void bwd90_consume(const bwd90_smem<C> &sm, const bwd90_ctx &x,
                                                     const flash_params &p, const CUtensorMap *tmdQ,
                                                     const CUtensorMap *tmdK,
                                                     const CUtensorMap *tmdV, int wg, int tid) {
  constexpr int BN = C::BN, HD = C::HD;
  const int c = wg - 1, warp = tid / 32, lane = tid % 32;
  const float sl2 = p.scale * FLASH_LOG2E;
  float dva[HD / 2], dka[HD / 2];
  float sacc[C::BM / 2], dpacc[C::BM / 2], dqa[32];
  uint32_t pP[C::BM / 16][4], pS[C::BM / 16][4];
  const bwd90_acc<C> acc{dva, dka, sacc, dpacc, dqa, pP, pS};
  const int dq_q0 = HD == 64 ? 64 * c : 0, dq_c0 = HD == 64 ? 0 : 64 * c;
  const int ds_off = (dq_q0 / 64) * BN * 64; /* in a dS^T buffer */
  const bf16 *kb = sm.sK + (dq_c0 / 64) * BN * 64;

  const bwd90_tile<C> tl(x, p);
  const int key0 = tl.n0 + 64 * c;                /* this warpgroup's first key */
  const int key_lo = key0 + 16 * warp + lane / 4; /* this thread's keys: key_lo, key_lo + 8 */
  const int32_t *doc = p.doc ? p.doc + (int64_t)tl.b * x.T : nullptr;
  int doc_k[2];
#pragma unroll
  for (int r = 0; r < 2; r++)
    doc_k[r] = doc && key_lo + 8 * r < x.T ? doc[key_lo + 8 * r] : INT32_MIN;
#pragma unroll
  for (int i = 0; i < HD / 2; i++)
    acc.dva[i] = acc.dka[i] = 0.0f;
  const bwd90_keys k{c, warp, lane, tid, dq_q0, dq_c0, ds_off, kb, key0, key_lo};

  mbar_wait(sm.barKV, 0);
  C::mark(BWD90_AT_KV, tl.n_steps);
  for (int it = 0; it < tl.n_steps; it++)
    bwd90_step<C>(sm, x, tl, k, doc, doc_k, p, tmdQ, it, sl2, acc);
  C::mark(BWD90_AT_STEPS_DONE, 0);
  if (C::DQWARP && tl.n_steps > 0) { /* the last step's piece */
    fence_proxy_async();
    named_arrive(3 + c, 160);
  }
  if (C::OVL == 2) {
    wgmma_wait<0>();
    bwd90_fence_products(acc, false);
    __syncwarp();
  }
  bwd90_store_dkdv<C>(sm, x, tl, k, p, tmdK, tmdV, acc);
  C::mark(BWD90_AT_END, 0);
  /* Shared memory must outlive the bulk copies' reads of it (their writes
   * complete on their own). */
  if (tid == 0)
    bulk_wait_read<0>();
}

#endif

template <class C>
static __global__ void __launch_bounds__(384, 1)
    flash_bwd90_kernel(const __grid_constant__ CUtensorMap tmQ,
                       const __grid_constant__ CUtensorMap tmK,
                       const __grid_constant__ CUtensorMap tmV,
                       const __grid_constant__ CUtensorMap tmdO,
                       const __grid_constant__ CUtensorMap tmdQ,
                       const __grid_constant__ CUtensorMap tmdK,
                       const __grid_constant__ CUtensorMap tmdV, const flash_params p,
                       const float *__restrict__ lse, const float *__restrict__ Dg, int grid_ch) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = bwd90_layout<C>;
  constexpr int BN = C::BN, BM = C::BM, HD = C::HD, ST = C::ST;
  extern __shared__ unsigned char smem_raw[];
  unsigned char *base = smem_align1024<false>(smem_raw);
  bwd90_smem<C> sm;
  sm.sK = reinterpret_cast<bf16 *>(base);
  sm.sV = sm.sK + BN * HD;
  sm.sQ = sm.sV + BN * HD;
  sm.sdO = sm.sQ + ST * BM * HD;
  sm.sdS = sm.sdO + ST * BM * HD;
  sm.sdQ = reinterpret_cast<float *>(sm.sdS + L::DSB * BN * BM);
  sm.sL = sm.sdQ + L::DQ_BYTES / 4;
  sm.sDD = sm.sL + ST * BM;
  sm.barKV = reinterpret_cast<uint64_t *>(sm.sDD + ST * BM);
  sm.fullQ = sm.barKV + 1;
  sm.fulldO = sm.fullQ + ST;
  sm.empty = sm.fulldO + ST;

  const int T = p.T, NH = p.NH, KVH = p.KVH, rep = NH / KVH;
  const int hd = HD == 64 ? 64 : p.HD; /* the real head dim, <= HD */
  const int NB = (T + BN - 1) / BN, BG = KVH * p.B;
  const bwd90_ctx x{T, NH, KVH, rep, hd, NB, BG, (int)(blockIdx.y * BG + blockIdx.x), grid_ch};
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;

  if (threadIdx.x == 0) {
    C::mark(BWD90_AT_ENTRY, 0);
    mbar_init(sm.barKV, 1);
    for (int s = 0; s < ST; s++) {
      /* The producer warp: TMA bytes + lse, D (LDCP: lane 0's expect_tx and
       * every lane's cp.async arrival on fullQ, lane 0 alone on fulldO). */
      mbar_init(&sm.fullQ[s], C::LDCP ? 33 : 32);
      mbar_init(&sm.fulldO[s], C::LDCP ? 1 : 32);
      mbar_init(&sm.empty[s], 8); /* lane 0 of every consumer warp */
    }
    mbar_fence_init();
  }
  __syncthreads();

  if (wg == 0) {
    reg_dealloc<24>();
    if (tid < 32)
      bwd90_produce<C>(sm, x, p, &tmQ, &tmK, &tmV, &tmdO, lse, Dg, tid);
    else if (C::DQWARP && tid < 96)
      bwd90_write_dq<C>(sm, x, p, &tmdQ, tid);
    return;
  }
  reg_alloc<240>();
  bwd90_consume<C>(sm, x, p, &tmdQ, &tmdK, &tmdV, wg, tid);
#endif
}

template <class C>
static int launch_bwd90(const flash_params *p, const void *q, const void *k, const void *v,
                        const void *dout, const float *lse, const float *D, float *dq_acc, void *dk,
                        void *dv, cudaStream_t stream) {
  using L = bwd90_layout<C>;
  CUtensorMap mq, mk, mv, mdo, mdq, mdk, mdv;
  int rc = flash_make_map(&mq, q, p->B, p->T, p->NH, p->HD, C::BM);
  if (rc == 0)
    rc = flash_make_map(&mdo, dout, p->B, p->T, p->NH, p->HD, C::BM);
  if (rc == 0)
    rc = flash_make_map(&mk, k, p->B, p->T, p->KVH, p->HD, C::BN);
  if (rc == 0)
    rc = flash_make_map(&mv, v, p->B, p->T, p->KVH, p->HD, C::BN);
  if (rc == 0)
    rc = flash_make_map_f32(&mdq, dq_acc, p->B, p->T, p->NH, p->HD, 64);
  if (rc == 0)
    rc = flash_make_map(&mdk, dk, p->B, p->T, p->KVH, p->HD, 64);
  if (rc == 0)
    rc = flash_make_map(&mdv, dv, p->B, p->T, p->KVH, p->HD, 64);
  if (rc != 0)
    return rc;
  auto kern = flash_bwd90_kernel<C>;
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, L::SMEM);
  if (e != cudaSuccess)
    return (int)e;
  const dim3 grid(p->KVH * p->B, (p->T + C::BN - 1) / C::BN);
  /* Pairs a chunk: as many as keep their fp32 dQ rows (rep heads x T x hd)
   * within L2_DQ_MIB, so that the reduce-adds of the CTAs running together
   * stay in L2. */
  const int64_t pair = (int64_t)(p->NH / p->KVH) * p->T * p->HD * 4;
  const int64_t n = ((int64_t)C::L2_DQ_MIB << 20) / (pair > 0 ? pair : 1);
  const int64_t hi = C::CHUNK_MAX < p->B * p->KVH ? C::CHUNK_MAX : p->B * p->KVH;
  const int grid_ch = (int)(n < 1 ? 1 : n > hi ? hi : n);
  kern<<<grid, L::THREADS, L::SMEM, stream>>>(mq, mk, mv, mdo, mdq, mdk, mdv, *p, lse, D, grid_ch);
  return (int)cudaGetLastError();
}

template <class C64, class C128>
static int bwd90_by_hd(const flash_params *p, const void *q, const void *k, const void *v,
                       const void *dout, const float *lse, const float *D, float *dq_acc, void *dk,
                       void *dv, cudaStream_t st) {
  if (p->HD == 64)
    return launch_bwd90<C64>(p, q, k, v, dout, lse, D, dq_acc, dk, dv, st);
  if (p->HD == 80 || p->HD == 96 || p->HD == 128)
    return launch_bwd90<C128>(p, q, k, v, dout, lse, D, dq_acc, dk, dv, st);
  return (int)cudaErrorInvalidValue;
}

/* flash_bwd_sm90 of the tile-table entries C64 (head dim 64) and C128 (80,
 * 96, 128: the columns past the head dim are zero-filled), or of their
 * windowed twins for a sliding window. */
template <class C64, class C128>
static int bwd90_run(const flash_params *p, const void *q, const void *k, const void *v,
                     const void *dout, const float *lse, const float *D, float *dq_acc, void *dk,
                     void *dv, void *stream) {
  cudaStream_t st = (cudaStream_t)stream;
  if (p->window > 0)
    return bwd90_by_hd<bwd90_windowed<C64>, bwd90_windowed<C128>>(p, q, k, v, dout, lse, D,
                                                                  dq_acc, dk, dv, st);
  return bwd90_by_hd<C64, C128>(p, q, k, v, dout, lse, D, dq_acc, dk, dv, st);
}

#endif
