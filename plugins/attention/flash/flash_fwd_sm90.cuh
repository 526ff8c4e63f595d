/* Flash attention forward for Hopper (sm_90a): wgmma, TMA and warp
 * specialisation, after the FlashAttention-3 design. The kernel and its
 * launcher are templates over a tile-table entry (fwd90_tiles<HD>), so that
 * flash_fwd_sm90.cu instantiates the production tiles and the sandbox's
 * variants (bench/flash/) others.
 *
 * A tile is BM = 64 * NC query rows of one (batch, head). The grid is
 * persistent (one CTA per SM) and each CTA loops over tiles; it has NC + 1
 * warpgroups:
 *  - warpgroup 0, the producer, gives most of its registers away
 *    (setmaxnreg) and one thread of it picks the tiles (the first by block
 *    index, the next from a global counter once it has issued the current
 *    tile's last load) and streams them with TMA: the tile's Q once the
 *    consumers' last S product of the previous tile is done (an "empty Q"
 *    mbarrier), so that it loads under the previous tile's last P V and
 *    epilogue, then the K and V tiles (BN keys) of the kv head the query
 *    head reads (GQA) through a ring of ST shared-memory stages that runs on
 *    across tiles. Each stage has a "full" mbarrier per tensor (the copy
 *    engine completes it with the byte count) and an "empty" mbarrier that
 *    the consumer warps arrive at when they are done reading it. The tile's
 *    number goes to the consumers in shared memory beside the Q barrier.
 *  - warpgroups 1..NC, the consumers, own 64 query rows each. Per key block:
 *    S = Q K^T with wgmma from shared memory (fp32 accumulators in
 *    registers), the mask on the blocks that need it (causal diagonal, end
 *    of sequence, documents), the online softmax in registers, and
 *    O += P V with wgmma taking P (bf16) straight from registers and V from
 *    shared memory (transposed operand). The loop is software-pipelined
 *    inside the warpgroup: the S product of block j and the P V product of
 *    block j - 1 are in flight together, and the softmax of block j runs
 *    while P V of block j - 1 still computes. Between warpgroups at hd
 *    80-128, a ping-pong (PP): they take turns issuing their products
 *    (named barriers), so that one's softmax runs under the other's GEMMs; at
 *    hd 64 three warpgroups (160 registers each) interleave on their own. O
 *    and lse are stored from registers (at hd 80-128 neighbouring lanes swap
 *    their bf16 pairs into 8-byte stores: OSTORE).
 * Tiles are ordered for L2: chunks of about one grid's worth of tiles over
 * few (batch, head) pairs, heaviest causal query block first.
 *
 * Tiles are 128-byte swizzled (flash_sm90.cuh); rows past T come from TMA as
 * zeros and are masked (keys) or not stored (queries). Saved for the
 * backward: lse (B, NH, T) fp32, as the mma.sync kernel writes it. */
#ifndef FSDPC_FLASH_FWD_SM90_CUH
#define FSDPC_FLASH_FWD_SM90_CUH

#include <cuda.h>
#include <cuda_runtime.h>
#include <math.h>

#include "flash.h"
#include "flash_common.cuh"
#include "flash_sm90.cuh"
#include "flash_tma.cuh"
#include "flash_wgmma.cuh"

/* Seams: what a sandbox variant (bench/flash/) may replace by hiding these
 * members in a type derived from a tile-table entry. Production runs these. */
struct fwd90_seams {
  /* Whether the kernel masks a sliding window: fwd90_run launches the
   * fwd90_windowed twin of an entry for a shape with one, so that the kernel
   * without a window is compiled as if windows did not exist. */
  static constexpr bool WINDOW = false;
  /* The probability of score element (column pair i, element e of 2): 2^x. */
  static __device__ __forceinline__ float prob_exp2(float x, int i, int e) {
    return exp2f(x);
  }
  /* O (normalised, bf16) and lse of a tile's finished rows, from registers;
   * at hd 80 / 96 (the 128 kernel on zero-filled columns) groups of 8
   * columns past hd are not stored. */
  template <class C>
  static __device__ __forceinline__ void
  epilogue(const float (&o)[C::HD / 2], const float (&m)[2], const float (&l)[2], int row_lo, int b,
           int h, int hd, int lane, const flash_params &p, bf16 *out, float *lse);
};

/* The tile table: per head dim, the shapes and schedules the default build
 * runs, the fastest measured on an H200 (2026-11-24-flash-s8.md, -s10.md):
 *   NC       consumer warpgroups, 64 query rows each (BM = 64 NC)
 *   ST       K / V stages;  BN  keys a block
 *   PP       the consumers take turns issuing their products (ping-pong):
 *            three warpgroups without it beat two with it by 5-13 % at hd 64
 *   SMEM_GENERIC  shared memory through generic pointers (flash_sm90.cuh):
 *            faster at hd 64, slower at hd 128
 *   OSTORE   bytes a thread stores of O at once: 8 (lane pairs swapped, a
 *            full sector a row) +1-11 % at hd 128, -1 to +1.5 % at hd 64
 *   REG_*    registers after setmaxnreg (a producer with 24 spills)
 * Head dims 80 and 96 run the 128 entry. */
template <int HD_> struct fwd90_tiles;
template <> struct fwd90_tiles<64> : fwd90_seams {
  static constexpr int HD = 64, NC = 3, ST = 4, BN = 128, OSTORE = 4;
  static constexpr bool PP = false, SMEM_GENERIC = true;
  static constexpr int REG_PRODUCER = 32, REG_CONSUMER = 160;
};
template <> struct fwd90_tiles<128> : fwd90_seams {
  static constexpr int HD = 128, NC = 2, ST = 3, BN = 128, OSTORE = 8;
  static constexpr bool PP = true, SMEM_GENERIC = false;
  static constexpr int REG_PRODUCER = 32, REG_CONSUMER = 224;
};

/* The same entry with the sliding-window mask compiled in. */
template <class C> struct fwd90_windowed : C {
  static constexpr bool WINDOW = true;
};

/* What follows from a tile-table entry C. */
template <class C> struct fwd90_layout {
  static constexpr int BM = 64 * C::NC;
  static constexpr int THREADS = 128 * (C::NC + 1);
  static constexpr int Q_BYTES = BM * C::HD * 2, KV_BYTES = C::BN * C::HD * 2;
  /* 1024 of slack to align the tiles for the 128-byte swizzle. */
  static constexpr int SMEM = 1024 + Q_BYTES + 2 * C::ST * KV_BYTES + 8 * (3 + 3 * C::ST);
  /* setmaxnreg.inc waits for free registers: more than the CTA was
   * launched with (65536 / THREADS a thread, in multiples of 8) hangs. */
  static_assert(128 * (C::REG_PRODUCER + C::NC * C::REG_CONSUMER) <=
                    (65536 / THREADS / 8 * 8) * THREADS,
                "fwd90: more registers after setmaxnreg than the CTA has");
  static_assert(C::OSTORE == 4 || C::OSTORE == 8, "fwd90: OSTORE is 4 or 8 bytes");
};

/* Shared memory of a CTA: Q, the K / V ring, the barriers and the tile
 * numbers handed to the consumers. */
template <class C> struct fwd90_smem {
  bf16 *sQ; // NCH x (BM x 64)
  bf16 *sK; // ST x NCH x (BN x 64)
  bf16 *sV; // ST x NCH x (BN x 64)
  uint64_t *barQ, *emptyQ, *fullK, *fullV, *empty;
  int *sTile; /* [2]: the tile of the CTA's it-th */
};

/* Tile t: the tiles come in chunks of ch (batch, head) pairs (the last chunk
 * may be smaller); inside a chunk, query block n_mb - 1 first (causal rows
 * near the end see the most keys), (batch, head) fastest. The CTAs running
 * at once then work on few heads and share their K / V tiles in L2. */
template <class C> struct fwd90_order {
  const flash_params &p;
  int T, NH, BH, n_mb, n_tiles, ch;
  __device__ __forceinline__ void at(int t, int &m0, int &b, int &h, int &n_blocks) const {
    constexpr int BM = fwd90_layout<C>::BM;
    const int chunk = t / (ch * n_mb), first = chunk * ch;
    const int size = min(ch, BH - first), local = t - first * n_mb;
    const int bh = first + local % size;
    m0 = (n_mb - 1 - local / size) * BM;
    h = bh % NH;
    b = bh / NH;
    const int kv_end = p.causal ? min(T, m0 + BM) : T;
    n_blocks = (kv_end + C::BN - 1) / C::BN;
  }
};

/* Tile counters of the dynamic schedule: per slot, the tiles taken past the
 * first gridDim.x and the CTAs done; each launch takes the next of
 * FWD90_SLOTS slots (kernels of one stream run in order; two launches on
 * different streams share a slot only when FWD90_SLOTS launches are in
 * flight at once; a captured graph keeps its launch's slot), and its last
 * CTA zeroes it again. A CTA that starts late (its SM busy with another
 * kernel, e.g. a collective) then does its first tile and finds the rest
 * taken by the others, instead of holding up the grid with a fixed share
 * (reasoning, not measured). */
#define FWD90_SLOTS 64
static __device__ int fwd90_sched[FWD90_SLOTS][2];

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)

/* Mask, then the online softmax of one S block of this thread's two rows:
 * updates the running max m (log2 units, scaled) and partial sum l, turns
 * s into the probabilities (fp32) and returns the factors alpha by which the
 * O accumulated so far must be scaled. */
template <class C>
static __device__ __forceinline__ void
softmax_block(float (&s)[C::BN / 2], float (&m)[2], float (&l)[2], float (&alpha)[2],
              bool need_mask, int n0, int row_lo, int T, bool causal, int window,
              const int32_t *doc, const int (&doc_r)[2], int lane, float sl2) {
  constexpr int BN = C::BN;
  if (need_mask) {
    /* Element (i, e) is kept iff its column offset in the block, i * 8 +
     * (e & 1) from this thread's first column c0, is at most lim of its row
     * (the end of the sequence, and the row itself when causal): one
     * compare with an immediate an element; then, with a sliding window,
     * a pass drops the columns before the row's window, and with documents,
     * one drops the other documents' columns. */
    const int c0 = n0 + (lane % 4) * 2;
    int lim[2];
#pragma unroll
    for (int r = 0; r < 2; r++)
      lim[r] = causal ? min(T - 1, row_lo + 8 * r) - c0 : T - 1 - c0;
#pragma unroll
    for (int i = 0; i < BN / 8; i++)
#pragma unroll
      for (int e = 0; e < 4; e++)
        s[i * 4 + e] = i * 8 + (e & 1) <= lim[e >> 1] ? s[i * 4 + e] : -INFINITY;
    if (C::WINDOW && window > 0) {
      int lo[2]; /* the first column offset inside row r's window */
#pragma unroll
      for (int r = 0; r < 2; r++)
        lo[r] = row_lo + 8 * r - window + 1 - c0;
#pragma unroll
      for (int i = 0; i < BN / 8; i++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          s[i * 4 + e] = i * 8 + (e & 1) >= lo[e >> 1] ? s[i * 4 + e] : -INFINITY;
    }
    if (doc) {
#pragma unroll
      for (int i = 0; i < BN / 8; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int col = min(c0 + i * 8 + (e & 1), T - 1); /* past T: dropped above */
          s[i * 4 + e] = __ldg(doc + col) == doc_r[e >> 1] ? s[i * 4 + e] : -INFINITY;
        }
    }
  }
#pragma unroll
  for (int r = 0; r < 2; r++) {
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < BN / 8; i++)
      mx = fmaxf(mx, fmaxf(s[i * 4 + 2 * r], s[i * 4 + 2 * r + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    mx = fmaxf(m[r], mx * sl2);
    /* A row with no visible key yet keeps max -inf; 0 in its place makes
     * exp2 give 0, not NaN. */
    const float m_use = mx == -INFINITY ? 0.0f : mx;
    alpha[r] = exp2f(m[r] - m_use);
    m[r] = mx;
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < BN / 8; i++) {
#pragma unroll
      for (int e = 0; e < 2; e++)
        s[i * 4 + 2 * r + e] = C::prob_exp2(fmaf(s[i * 4 + 2 * r + e], sl2, -m_use), i, e);
      sum += s[i * 4 + 2 * r] + s[i * 4 + 2 * r + 1];
    }
    l[r] = l[r] * alpha[r] + sum;
  }
}

/* The probabilities s as the bf16 A fragments of P V (m16n8k16 layout). */
template <int BN>
static __device__ __forceinline__ void pack_p(const float (&s)[BN / 2],
                                              uint32_t (&pa)[BN / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; kk++) {
    pa[kk][0] = pack_bf16(s[8 * kk + 0], s[8 * kk + 1]);
    pa[kk][1] = pack_bf16(s[8 * kk + 2], s[8 * kk + 3]);
    pa[kk][2] = pack_bf16(s[8 * kk + 4], s[8 * kk + 5]);
    pa[kk][3] = pack_bf16(s[8 * kk + 6], s[8 * kk + 7]);
  }
}

/* The producer's one thread: picks the tiles and loads them (see the
 * header). */
template <class C>
static __device__ __forceinline__ void
fwd90_produce(const fwd90_smem<C> &sm, const fwd90_order<C> &ord, const CUtensorMap *tmQ,
              const CUtensorMap *tmK, const CUtensorMap *tmV, int KVH, int slot) {
  using L = fwd90_layout<C>;
  constexpr int BM = L::BM, BN = C::BN, HD = C::HD, ST = C::ST, NCH = HD / 64;
  tma_prefetch_desc(tmQ);
  tma_prefetch_desc(tmK);
  tma_prefetch_desc(tmV);
  int kv = 0; /* ring position */
  for (int t = blockIdx.x, it = 0;; it++) {
    int m0 = 0, b = 0, h = 0, n_blocks = 0, g = 0;
    auto load_kv = [&](int j) {
      const int s = kv % ST;
      mbar_wait(&sm.empty[s], ((kv / ST) & 1) ^ 1);
      mbar_expect_tx(&sm.fullK[s], L::KV_BYTES);
#pragma unroll
      for (int c = 0; c < NCH; c++)
        tma_load_4d(sm.sK + s * BN * HD + c * BN * 64, tmK, &sm.fullK[s], c * 64, g, j * BN, b);
      mbar_expect_tx(&sm.fullV[s], L::KV_BYTES);
#pragma unroll
      for (int c = 0; c < NCH; c++)
        tma_load_4d(sm.sV + s * BN * HD + c * BN * 64, tmV, &sm.fullV[s], c * 64, g, j * BN, b);
      kv++;
    };
    if (t < ord.n_tiles) {
      ord.at(t, m0, b, h, n_blocks);
      g = h / (ord.NH / KVH);
    }
    /* Q once the consumers' last S product of the previous tile is in; the
     * tile's number goes beside it (past the last: the end). */
    mbar_wait(sm.emptyQ, (it & 1) ^ 1);
    sm.sTile[it & 1] = t;
    if (t >= ord.n_tiles) {
      mbar_arrive(sm.barQ);
      break;
    }
    mbar_expect_tx(sm.barQ, L::Q_BYTES);
#pragma unroll
    for (int c = 0; c < NCH; c++)
      tma_load_4d(sm.sQ + c * BM * 64, tmQ, sm.barQ, c * 64, h, m0, b);
    for (int j = 0; j < n_blocks; j++)
      load_kv(j);
    /* The next tile nobody has taken yet: the CTA whose loads run out first
     * takes it, which balances the causal tiles' unequal work. */
    t = gridDim.x + atomicAdd(&fwd90_sched[slot][0], 1);
  }
  /* The last CTA out resets the slot for the next launch that uses it. */
  if (atomicAdd(&fwd90_sched[slot][1], 1) == (int)gridDim.x - 1) {
    atomicExch(&fwd90_sched[slot][0], 0);
    atomicExch(&fwd90_sched[slot][1], 0);
  }
}

/* Ping-pong (PP): the consumer warpgroups take turns issuing their products
 * (named barrier 1 + c is warpgroup c's turn), so that one's softmax runs
 * under the others' GEMMs. Every warpgroup takes n_blocks + 1 turns a tile
 * (the first S, n_mine - 1 of S + P V, the last P V, one empty turn per key
 * block it skips); the last warpgroup starts the round, and the first one
 * takes the last warpgroup's final pass at the end. */
template <class C> struct fwd90_turns {
  int c;
  __device__ __forceinline__ void wait() const {
    if (C::PP)
      named_sync(1 + c, 256);
  }
  __device__ __forceinline__ void pass() const {
    if (C::PP)
      named_arrive(1 + (c + 1) % C::NC, 256);
  }
};

/* What a consumer thread holds through one tile: O, the running max (log2
 * units, scaled), sum and rescale factors of its two rows, one S block and
 * its P as bf16 A fragments. */
template <class C> struct fwd90_acc {
  float o[C::HD / 2];
  float m[2], l[2], alpha[2];
  float s[C::BN / 2];
  uint32_t pa[C::BN / 16][4];
};

/* One consumer warpgroup's share of a tile: its K / V stages from ring
 * position kv0, the key blocks it sees (n_mine of the tile's n_blocks), its
 * first row and this thread's (row_lo and row_lo + 8), the batch's document
 * ids (or null). The rows' documents doc_r travel beside it: as a member
 * the array compiled to other registers (and the K / V loads stay a lambda
 * in fwd90_produce for the same reason;
 * bench/results/2026-11-28-flash-sandbox.md). */
struct fwd90_rows {
  int kv0, n_blocks, n_mine, wg_first, row_lo;
  const int32_t *doc;
};

/* The key blocks of one tile into acc (sQc: this warpgroup's rows of Q;
 * doc_r: the document of each of this thread's rows), and the empty turns
 * of those it skips. */
template <class C>
static __device__ __forceinline__ void
fwd90_attend(const fwd90_smem<C> &sm, const fwd90_turns<C> &turn, const flash_params &p,
             const bf16 *sQc, const fwd90_rows &w, const int (&doc_r)[2], int lane, float sl2,
             fwd90_acc<C> &acc) {
  constexpr int BM = fwd90_layout<C>::BM, BN = C::BN, HD = C::HD, ST = C::ST;
  const int T = p.T, kv0 = w.kv0, n_mine = w.n_mine;
  auto issue_s = [&](int j) {
    const bf16 *cK = sm.sK + ((kv0 + j) % ST) * BN * HD;
    reg_fence(acc.s);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
      const int cc = kk / 4, ko = (kk % 4) * 16;
      wgmma_ss<BN, 0, 0>(acc.s, desc_k(sQc + cc * BM * 64 + ko), desc_k(cK + cc * BN * 64 + ko),
                         kk > 0);
    }
    wgmma_commit();
  };
  auto issue_pv = [&](int j) {
    const bf16 *cV = sm.sV + ((kv0 + j) % ST) * BN * HD;
    /* Every input register is defined before the fence: a non-wgmma
     * definition inside the batch would serialise the wgmmas. */
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++)
      reg_fence_u(acc.pa[kk]);
    reg_fence(acc.o);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++)
      wgmma_rs<HD, 1>(acc.o, acc.pa[kk], desc_mn(cV + kk * 16 * 64, BN), 1);
    wgmma_commit();
  };
  /* P V of the last block is done: its P and O may change again. */
  auto pv_done = [&]() {
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++)
      reg_fence_u(acc.pa[kk]);
    reg_fence(acc.o);
  };
  auto softmax = [&](int j) {
    const int n0 = j * BN;
    const bool need_mask = n0 + BN > T || w.doc != nullptr ||
                           (p.causal && n0 + BN - 1 > w.wg_first) ||
                           (C::WINDOW && p.window > 0 && w.wg_first + 63 - n0 >= p.window);
    softmax_block<C>(acc.s, acc.m, acc.l, acc.alpha, need_mask, n0, w.row_lo, T, p.causal, p.window,
                     w.doc, doc_r, lane, sl2);
  };
  auto full_k = [&](int j) { return &sm.fullK[(kv0 + j) % ST]; };
  auto full_v = [&](int j) { return &sm.fullV[(kv0 + j) % ST]; };
  auto release = [&](int j) {
    __syncwarp();
    if (lane == 0)
      mbar_arrive(&sm.empty[(kv0 + j) % ST]);
  };
  auto ph = [&](int j) { return (uint32_t)(((kv0 + j) / ST) & 1); };
  auto last_q_read = [&]() { /* Q may be refilled for the next tile */
                             __syncwarp();
                             if (lane == 0)
                               mbar_arrive(sm.emptyQ);
  };

  /* Block 0: S, then its softmax (O is still zero). */
  mbar_wait(full_k(0), ph(0));
  turn.wait();
  issue_s(0);
  turn.pass();
  wgmma_wait<0>();
  reg_fence(acc.s);
  if (n_mine == 1)
    last_q_read();
  softmax(0);
  pack_p<BN>(acc.s, acc.pa);
  /* Block j: S of block j and P V of block j - 1 in flight together; the
   * softmax of block j runs while P V still computes, and its P replaces
   * that of block j - 1 in pa once the product is done. */
  for (int j = 1; j < n_mine; j++) {
    mbar_wait(full_k(j), ph(j));
    mbar_wait(full_v(j - 1), ph(j - 1));
    turn.wait();
    issue_s(j);
    issue_pv(j - 1);
    turn.pass();
    wgmma_wait<1>(); /* S of block j is in; P V of block j - 1 still runs */
    reg_fence(acc.s);
    if (j == n_mine - 1)
      last_q_read();
    softmax(j);
    wgmma_wait<0>();
    pv_done();
    release(j - 1);
#pragma unroll
    for (int i = 0; i < HD / 8; i++) {
      acc.o[4 * i + 0] *= acc.alpha[0];
      acc.o[4 * i + 1] *= acc.alpha[0];
      acc.o[4 * i + 2] *= acc.alpha[1];
      acc.o[4 * i + 3] *= acc.alpha[1];
    }
    pack_p<BN>(acc.s, acc.pa);
  }
  const int jl = n_mine - 1;
  mbar_wait(full_v(jl), ph(jl));
  turn.wait();
  issue_pv(jl);
  turn.pass();
  wgmma_wait<0>();
  pv_done();
  release(jl);
  /* Blocks this warpgroup skips (causal): release them once loaded, so
   * that each arrival lands in the phase of its own block; one empty turn
   * each. */
  for (int j = n_mine; j < w.n_blocks; j++) {
    turn.wait();
    turn.pass();
    mbar_wait(full_k(j), ph(j));
    release(j);
  }
}

/* Consumer warpgroup c: the tiles the producer hands over, until the end
 * mark. */
template <class C>
static __device__ __forceinline__ void
fwd90_consume(const fwd90_smem<C> &sm, const fwd90_order<C> &ord, const flash_params &p, bf16 *out,
              float *lse, int c, int tid) {
  const int warp = tid / 32, lane = tid % 32, T = p.T;
  const int hd = C::HD == 64 ? 64 : p.HD; /* the real head dim, <= HD */
  const float sl2 = p.scale * FLASH_LOG2E;
  const bf16 *sQc = sm.sQ + 64 * c * 64; /* this warpgroup's rows of chunk 0 */
  const fwd90_turns<C> turn{c};
  if (C::PP && c == C::NC - 1)
    named_arrive(1, 256);

  int kv0 = 0;
  for (int it = 0;; it++) {
    mbar_wait(sm.barQ, it & 1);
    const int t = sm.sTile[it & 1];
    if (t >= ord.n_tiles)
      break;
    int m0, b, h, n_blocks;
    ord.at(t, m0, b, h, n_blocks);
    const int wg_first = m0 + 64 * c;
    const int row_lo = wg_first + 16 * warp + lane / 4; /* and row_lo + 8 */
    const int32_t *doc = p.doc ? p.doc + (int64_t)b * T : nullptr;
    int doc_r[2];
#pragma unroll
    for (int r = 0; r < 2; r++)
      doc_r[r] = doc && row_lo + 8 * r < T ? doc[row_lo + 8 * r] : INT32_MIN;
    /* Causal: the key blocks past this warpgroup's last row add nothing. */
    const int n_mine = p.causal ? min(n_blocks, (wg_first + 63) / C::BN + 1) : n_blocks;
    const fwd90_rows w{kv0, n_blocks, n_mine, wg_first, row_lo, doc};

    fwd90_acc<C> acc;
#pragma unroll
    for (int i = 0; i < C::HD / 2; i++)
      acc.o[i] = 0.0f;
    acc.m[0] = acc.m[1] = -INFINITY;
    acc.l[0] = acc.l[1] = 0.0f;
    fwd90_attend<C>(sm, turn, p, sQc, w, doc_r, lane, sl2, acc);
    kv0 += n_blocks;
    C::template epilogue<C>(acc.o, acc.m, acc.l, row_lo, b, h, hd, lane, p, out, lse);
  }
  if (C::PP && c == 0)
    turn.wait();
}

#endif

template <class C>
__device__ __forceinline__ void
fwd90_seams::epilogue(const float (&o)[C::HD / 2], const float (&m)[2], const float (&l)[2],
                      int row_lo, int b, int h, int hd, int lane, const flash_params &p, bf16 *out,
                      float *lse) {
  const int T = p.T, NH = p.NH;
#pragma unroll
  for (int r = 0; r < 2; r++) {
    float lr = l[r];
    lr += __shfl_xor_sync(0xffffffffu, lr, 1);
    lr += __shfl_xor_sync(0xffffffffu, lr, 2);
    const float inv = lr > 0.0f ? 1.0f / lr : 0.0f;
    const int row = row_lo + 8 * r;
    const bool do_st = row < T;
    bf16 *orow = out + ((int64_t)(b * T + row) * NH + h) * hd;
    const int q = lane % 4;
    if constexpr (C::OSTORE == 8) {
      /* Group pair (i, i + 1): even lanes keep group i's word and take
       * their odd neighbour's, odd lanes group i + 1's. */
#pragma unroll
      for (int i = 0; i < C::HD / 8; i += 2) {
        const uint32_t a0 = pack_bf16(o[4 * i + 2 * r] * inv, o[4 * i + 2 * r + 1] * inv);
        const uint32_t a1 = pack_bf16(o[4 * i + 4 + 2 * r] * inv, o[4 * i + 4 + 2 * r + 1] * inv);
        const uint32_t got = __shfl_xor_sync(0xffffffffu, (q & 1) ? a0 : a1, 1);
        const uint32_t keep = (q & 1) ? a1 : a0;
        const int g = i + (q & 1);
        if (do_st && g * 8 < hd)
          *reinterpret_cast<uint2 *>(orow + g * 8 + (q & 2) * 2) =
              (q & 1) ? make_uint2(got, keep) : make_uint2(keep, got);
      }
    } else if (do_st) {
#pragma unroll
      for (int i = 0; i < C::HD / 8; i++)
        if (i * 8 < hd)
          *reinterpret_cast<uint32_t *>(orow + i * 8 + q * 2) =
              pack_bf16(o[4 * i + 2 * r] * inv, o[4 * i + 2 * r + 1] * inv);
    }
    if (do_st && q == 0)
      lse[((int64_t)b * NH + h) * T + row] = (m[r] + log2f(lr)) * FLASH_LN2;
  }
}

template <class C>
static __global__ void __launch_bounds__(128 * (C::NC + 1), 1)
    flash_fwd90_kernel(const __grid_constant__ CUtensorMap tmQ,
                       const __grid_constant__ CUtensorMap tmK,
                       const __grid_constant__ CUtensorMap tmV, const flash_params p,
                       bf16 *__restrict__ out, float *__restrict__ lse, int ch, int slot) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = fwd90_layout<C>;
  constexpr int BM = L::BM, HD = C::HD, BN = C::BN, ST = C::ST, NC = C::NC;
  extern __shared__ unsigned char smem_raw[];
  unsigned char *base = smem_align1024<C::SMEM_GENERIC>(smem_raw);
  fwd90_smem<C> sm;
  sm.sQ = reinterpret_cast<bf16 *>(base);
  sm.sK = sm.sQ + BM * HD;
  sm.sV = sm.sK + ST * BN * HD;
  sm.barQ = reinterpret_cast<uint64_t *>(sm.sV + ST * BN * HD);
  sm.emptyQ = sm.barQ + 1;
  sm.fullK = sm.emptyQ + 1;
  sm.fullV = sm.fullK + ST;
  sm.empty = sm.fullV + ST;
  sm.sTile = reinterpret_cast<int *>(sm.empty + ST);
  const int BH = p.B * p.NH, n_mb = (p.T + BM - 1) / BM;
  const fwd90_order<C> ord{p, p.T, p.NH, BH, n_mb, n_mb * BH, ch};
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;

  if (threadIdx.x == 0) {
    mbar_init(sm.barQ, 1);
    mbar_init(sm.emptyQ, NC * 4); /* lane 0 of every consumer warp */
    for (int s = 0; s < ST; s++) {
      mbar_init(&sm.fullK[s], 1);
      mbar_init(&sm.fullV[s], 1);
      mbar_init(&sm.empty[s], NC * 4);
    }
    mbar_fence_init();
  }
  __syncthreads();

  if (wg == 0) {
    reg_dealloc<C::REG_PRODUCER>();
    if (tid == 0)
      fwd90_produce<C>(sm, ord, &tmQ, &tmK, &tmV, p.KVH, slot);
    return;
  }
  reg_alloc<C::REG_CONSUMER>();
  fwd90_consume<C>(sm, ord, p, out, lse, wg - 1, tid);
#endif
}

/* The CTAs a persistent grid may have: the device's SM count (one CTA fits
 * an SM), read once per device. */
static int fwd90_sm_count(void) {
  static int counts[64];
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64)
    return 132;
  if (counts[dev] == 0) {
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0)
      n = 132;
    counts[dev] = n; /* a benign race: every caller stores the same */
  }
  return counts[dev];
}

template <class C>
static int launch_fwd90(const flash_params *p, const void *q, const void *k, const void *v,
                        void *out, float *lse, cudaStream_t stream) {
  using L = fwd90_layout<C>;
  CUtensorMap mq, mk, mv;
  /* Maps of the real head dim: columns past it (hd 80, 96) read as zeros. */
  int rc = flash_make_map(&mq, q, p->B, p->T, p->NH, p->HD, L::BM);
  if (rc == 0)
    rc = flash_make_map(&mk, k, p->B, p->T, p->KVH, p->HD, C::BN);
  if (rc == 0)
    rc = flash_make_map(&mv, v, p->B, p->T, p->KVH, p->HD, C::BN);
  if (rc != 0)
    return rc;
  auto kern = flash_fwd90_kernel<C>;
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, L::SMEM);
  if (e != cudaSuccess)
    return (int)e;
  const int64_t n_tiles = (int64_t)p->NH * p->B * ((p->T + L::BM - 1) / L::BM);
  if (n_tiles > INT32_MAX)
    return (int)cudaErrorInvalidValue;
  const int n_mb = (p->T + L::BM - 1) / L::BM, bh = p->B * p->NH, sms = fwd90_sm_count();
  /* Persistent: one CTA an SM at most. */
  const int grid = (int)(n_tiles < sms ? n_tiles : sms);
  /* Chunk of (batch, head) pairs: about one tile per CTA of the grid in
   * flight, rounded up to whole GQA groups. */
  const int group = p->NH / p->KVH;
  int ch = (sms + n_mb - 1) / n_mb;
  ch = (ch + group - 1) / group * group;
  if (ch > bh)
    ch = bh;
  static unsigned launches; /* the slot of the dynamic schedule */
  const int slot = (int)(__atomic_fetch_add(&launches, 1u, __ATOMIC_RELAXED) % FWD90_SLOTS);
  kern<<<grid, L::THREADS, L::SMEM, stream>>>(mq, mk, mv, *p, (bf16 *)out, lse, ch, slot);
  return (int)cudaGetLastError();
}

template <class C64, class C128>
static int fwd90_by_hd(const flash_params *p, const void *q, const void *k, const void *v,
                       void *out, float *lse, cudaStream_t st) {
  if (p->HD == 64)
    return launch_fwd90<C64>(p, q, k, v, out, lse, st);
  if (p->HD == 80 || p->HD == 96 || p->HD == 128)
    return launch_fwd90<C128>(p, q, k, v, out, lse, st);
  return (int)cudaErrorInvalidValue;
}

/* flash_fwd_sm90 of the tile-table entries C64 (head dim 64) and C128 (80,
 * 96, 128), or of their windowed twins for a sliding window. */
template <class C64, class C128>
static int fwd90_run(const flash_params *p, const void *q, const void *k, const void *v, void *out,
                     float *lse, void *stream) {
  cudaStream_t st = (cudaStream_t)stream;
  if (p->window > 0)
    return fwd90_by_hd<fwd90_windowed<C64>, fwd90_windowed<C128>>(p, q, k, v, out, lse, st);
  return fwd90_by_hd<C64, C128>(p, q, k, v, out, lse, st);
}

#endif
