/* Flash attention forward for Hopper (sm_90a): wgmma, TMA and warp
 * specialisation, after the FlashAttention-3 design.
 *
 * A tile is BM = 64 * NC query rows of one (batch, head) (NC = 3 at hd 64,
 * 2 above). The grid is
 * persistent (FWD90_PERSIST: one CTA per SM) and each CTA loops over tiles;
 * it has NC + 1 warpgroups:
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
 *    of sequence, documents), the
 *    online softmax in registers, and O += P V with wgmma taking P (bf16)
 *    straight from registers and V from shared memory (transposed operand).
 *    The loop is software-pipelined inside the warpgroup: the S product of
 *    block j and the P V product of block j - 1 are in flight together, and
 *    the softmax of block j runs while P V of block j - 1 still computes.
 *    Between warpgroups at hd 80-128, a ping-pong (FWD90_128_PP): they take
 *    turns issuing their products (named barriers), so that one's softmax
 *    runs under the other's GEMMs; at hd 64 three warpgroups (160 registers
 *    each) interleave on their own. O and lse are stored from registers
 *    (at hd 80-128 neighbouring lanes swap their bf16 pairs into 8-byte
 *    stores: FWD90_128_OSTORE).
 * Tiles are ordered for L2 (FWD90_CH): chunks of about one grid's worth of
 * tiles over few (batch, head) pairs, heaviest causal query block first.
 *
 * Tiles are 128-byte swizzled (flash_sm90.cuh); rows past T come from TMA as
 * zeros and are masked (keys) or not stored (queries). Saved for the
 * backward: lse (B, NH, T) fp32, as the mma.sync kernel writes it. */
#include <cuda.h>
#include <cuda_runtime.h>
#include <math.h>

#include "flash.h"
#include "flash_common.cuh"
#include "flash_sm90.cuh"
#include "flash_tma.cuh"
#include "flash_wgmma.cuh"

/* Tile shape per head dim: NC consumer warpgroups (BM = 64 NC query rows),
 * BN keys per block, ST stages. */
#ifndef FWD90_64_NC
#define FWD90_64_NC 3
#endif
#ifndef FWD90_64_ST
#define FWD90_64_ST 4
#endif
#ifndef FWD90_128_NC
#define FWD90_128_NC 2
#endif
#ifndef FWD90_128_ST
#define FWD90_128_ST 3
#endif
/* Keys per block: 128, or at hd 64 also 192 (FWD90_64_BN). */
#ifndef FWD90_64_BN
#define FWD90_64_BN 128
#endif
#define FWD90_128_BN 128
/* 1: the consumer warpgroups take turns issuing their products (ping-pong);
 * per head dim FWD90_64_PP / FWD90_128_PP. Fastest measured: three
 * warpgroups without ping-pong at hd 64 (+5-13 % over two with it), two
 * with it at hd 128 (2026-11-24-flash-s8.md). */
#ifdef FWD90_PP
#define FWD90_64_PP FWD90_PP
#define FWD90_128_PP FWD90_PP
#endif
#ifndef FWD90_64_PP
#define FWD90_64_PP 0
#endif
#ifndef FWD90_128_PP
#define FWD90_128_PP 1
#endif
/* Registers after setmaxnreg of a consumer warpgroup (with 2 of them) and
 * of the producer: with 24 the producer's scheduling loop spills. */
#ifndef FWD90_REGC
#define FWD90_REGC 224
#endif
#ifndef FWD90_REGP
#define FWD90_REGP 32
#endif
/* N > 0: a persistent grid of N CTAs per SM looping over the tiles; 0: one
 * CTA per tile. */
#ifndef FWD90_PERSIST
#define FWD90_PERSIST 1
#endif
/* Persistent grid: tiles by a global counter (1) or a fixed stride (0). */
#ifndef FWD90_SCHED
#define FWD90_SCHED 1
#endif
/* Tile order: chunks of N (batch, head) pairs, each walked heaviest query
 * block first; -1: N from the grid size and T; 0: one chunk. */
#ifndef FWD90_CH
#define FWD90_CH -1
#endif

/* Timing experiments only (wrong results): FWD90_DIAG_NOEXP 1 takes the
 * probabilities' exp2 out (the FFMA stays), FWD90_DIAG_NOSTORE 1 the O / lse
 * stores (then O is dead and ptxas deletes the P V products too: not a
 * measure of the stores), 2 skips the epilogue at run time with its code
 * compiled as in the default (what running the epilogue costs). */
#if defined(FWD90_DIAG_NOEXP) && FWD90_DIAG_NOEXP
#define FWD90_EXP2(x) (x)
#else
#define FWD90_EXP2(x) exp2f(x)
#endif
/* Of each thread's probability exp2s, one in k = FWD90_64_SWEXP (head dim
 * 64) / FWD90_128_SWEXP (80 to 128) goes to the FMA pipe (exp2_fma in
 * flash_sm90.cuh) instead of the exp unit (MUFU), chosen at compile time:
 * with FWD90_SWSEL 0 the column pairs i with i % k == k - 1, with 1 the
 * columns c with c % k == k - 1; k = 0: all on MUFU (the default). Slower
 * or no faster at every k tried (2026-11-24-flash-swexp.md). */
#ifndef FWD90_SWEXP
#define FWD90_SWEXP 0
#endif
#ifndef FWD90_64_SWEXP
#define FWD90_64_SWEXP FWD90_SWEXP
#endif
#ifndef FWD90_SWSEL
#define FWD90_SWSEL 0
#endif
#ifndef FWD90_128_SWEXP
#define FWD90_128_SWEXP 0
#endif
#ifndef FWD90_DIAG_NOSTORE
#define FWD90_DIAG_NOSTORE 0
#endif
/* (FWD90_MASKLIM 0, the general per-element mask test, measured slower in
 * session 8, was removed; commit 2325b3f holds it.) */
/* Shared memory through generic pointers (flash_sm90.cuh), per head dim:
 * measured faster at hd 64 (1), slower at hd 128 (0) (2026-11-24-flash-s8.md). */
#ifdef FLASH_SMEM_GENERIC
#define FWD90_64_SMEM_GENERIC FLASH_SMEM_GENERIC
#define FWD90_128_SMEM_GENERIC FLASH_SMEM_GENERIC
#endif
#ifndef FWD90_64_SMEM_GENERIC
#define FWD90_64_SMEM_GENERIC 1
#endif
#ifndef FWD90_128_SMEM_GENERIC
#define FWD90_128_SMEM_GENERIC 0
#endif
/* Epilogue (O and lse of a tile): 0 stores O from registers (4 bytes a
 * thread a row); 1 writes the normalised O in bf16 into the warpgroup's own
 * rows of the Q buffer (128-byte swizzled, as TMA loaded Q) and one thread
 * stores it with TMA (the "empty Q" arrival moves after the store has read
 * the buffer, and the producer issues the next tile's first K / V block
 * before it waits for it). (A variant 2, the stores of 0 in a __noinline__
 * function, measured 0.84-0.97x and was removed; commit 9b71441 holds it.)
 * FWD90_DIAG_NOSTORE 2 (timing experiment) keeps the epilogue's code of 0
 * but skips it at run time. */
#ifndef FWD90_EPI
#define FWD90_EPI 0
#endif
/* Epilogue 0's O stores, per head dim (FWD90_64_OSTORE, FWD90_128_OSTORE):
 * 4, each thread's bf16 pairs as they sit in the accumulator (a warp
 * instruction: 8 rows x 16 bytes, half a sector a row); 8, the pairs of
 * neighbouring lanes swapped (one shuffle a group pair) into 8-byte
 * stores, a full 32-byte sector a row. Measured (2026-11-24-flash-s10.md,
 * call 14), forward: 8 +1-11 % at hd 128 (most at T 2048), -1 to +1.5 %
 * at hd 64. (16-byte stores after a 4 x 4 transpose across each lane quad
 * gained a little less and were removed; commit a605fc8 holds them.) */
#ifdef FWD90_OSTORE
#define FWD90_64_OSTORE FWD90_OSTORE
#define FWD90_128_OSTORE FWD90_OSTORE
#endif
#ifndef FWD90_64_OSTORE
#define FWD90_64_OSTORE 4
#endif
#ifndef FWD90_128_OSTORE
#define FWD90_128_OSTORE 8
#endif
static_assert((FWD90_64_OSTORE == 4 || FWD90_64_OSTORE == 8) &&
                  (FWD90_128_OSTORE == 4 || FWD90_128_OSTORE == 8),
              "FWD90_*_OSTORE: 4 or 8 bytes");

template <int HD, int BN, int NC, int ST> struct fwd90_cfg {
  static constexpr int BM = 64 * NC;
  static constexpr int THREADS = 128 * (NC + 1);
  static constexpr int Q_BYTES = BM * HD * 2, KV_BYTES = BN * HD * 2;
  /* 1024 of slack to align the tiles for the 128-byte swizzle. */
  static constexpr int SMEM = 1024 + Q_BYTES + 2 * ST * KV_BYTES + 8 * (3 + 3 * ST);
  /* Registers after setmaxnreg: the producer keeps few, the consumers take
   * the rest (65536 a CTA; multiples of 8). */
  static constexpr int REG_PRODUCER = FWD90_REGP;
  static constexpr int REG_CONSUMER = NC == 2 ? FWD90_REGC : 160;
  /* setmaxnreg.inc waits for free registers: more than the CTA was
   * launched with (65536 / THREADS a thread, in multiples of 8) hangs. */
  static_assert(128 * (REG_PRODUCER + NC * REG_CONSUMER) <= (65536 / THREADS / 8 * 8) * THREADS,
                "fwd90: more registers after setmaxnreg than the CTA has");
};

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)

/* Mask, then the online softmax of one S block of this thread's two rows:
 * updates the running max m (log2 units, scaled) and partial sum l, turns
 * s into the probabilities (fp32) and returns the factors alpha by which the O accumulated so far
 * must be scaled. */
template <int BN, int SW>
static __device__ __forceinline__ void
softmax_block(float (&s)[BN / 2], float (&m)[2], float (&l)[2], float (&alpha)[2], bool need_mask,
              int n0, int row_lo, int T, bool causal, const int32_t *doc, const int (&doc_r)[2],
              int lane, float sl2) {
  if (need_mask) {
    /* Element (i, e) is kept iff its column offset in the block, i * 8 +
     * (e & 1) from this thread's first column c0, is at most lim of its row
     * (the end of the sequence, and the row itself when causal): one
     * compare with an immediate an element; then, with documents, a second
     * pass drops the other documents' columns. */
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
      for (int e = 0; e < 2; e++) {
        const float x = fmaf(s[i * 4 + 2 * r + e], sl2, -m_use);
        const int q = FWD90_SWSEL == 0 ? i : 2 * i + e;
        s[i * 4 + 2 * r + e] =
            SW > 0 && q % (SW > 0 ? SW : 1) == SW - 1 ? exp2_fma(x) : FWD90_EXP2(x);
      }
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

#endif

/* Tile counters of the dynamic schedule (FWD90_SCHED 1): per slot, the
 * tiles taken past the first gridDim.x and the CTAs done; each launch takes
 * the next of FWD90_SLOTS slots (kernels of one stream run in order; two
 * launches on different streams share a slot only when FWD90_SLOTS launches
 * are in flight at once; a captured graph keeps its launch's slot), and
 * its last CTA zeroes it again. A CTA that starts late (its SM busy with
 * another kernel, e.g. a collective) then does its first tile and finds
 * the rest taken by the others, instead of holding up the grid with a
 * fixed share (reasoning, not measured). */
#define FWD90_SLOTS 64
static __device__ int fwd90_sched[FWD90_SLOTS][2];

template <int HD, int BN, int NC, int ST>
static __global__ void __launch_bounds__(128 * (NC + 1), 1)
    flash_fwd90_kernel(const __grid_constant__ CUtensorMap tmQ,
                       const __grid_constant__ CUtensorMap tmK,
                       const __grid_constant__ CUtensorMap tmV,
                       const __grid_constant__ CUtensorMap tmO, const flash_params p,
                       bf16 *__restrict__ out, float *__restrict__ lse, int ch, int slot) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using C = fwd90_cfg<HD, BN, NC, ST>;
  constexpr int BM = C::BM, NCH = HD / 64;
  constexpr int SWEXP = HD == 64 ? FWD90_64_SWEXP : FWD90_128_SWEXP;
  constexpr bool PP = HD == 64 ? FWD90_64_PP : FWD90_128_PP;
  constexpr bool GEN = HD == 64 ? FWD90_64_SMEM_GENERIC : FWD90_128_SMEM_GENERIC;
  extern __shared__ unsigned char smem_raw[];
  unsigned char *base = smem_align1024<GEN>(smem_raw);
  bf16 *sQ = reinterpret_cast<bf16 *>(base); // NCH x (BM x 64)
  bf16 *sK = sQ + BM * HD;                   // ST x NCH x (BN x 64)
  bf16 *sV = sK + ST * BN * HD;              // ST x NCH x (BN x 64)
  uint64_t *barQ = reinterpret_cast<uint64_t *>(sV + ST * BN * HD);
  uint64_t *emptyQ = barQ + 1;
  uint64_t *fullK = emptyQ + 1, *fullV = fullK + ST, *empty = fullV + ST;
  int *sTile = reinterpret_cast<int *>(empty + ST); /* [2]: the tile of the CTA's it-th */

  const int T = p.T, NH = p.NH, BH = p.B * p.NH;
  const int hd = HD == 64 ? 64 : p.HD; /* the real head dim, <= HD */
  const int n_mb = (T + BM - 1) / BM, n_tiles = n_mb * BH;
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  /* Tile t: the tiles come in chunks of ch (batch, head) pairs (the last
   * chunk may be smaller); inside a chunk, query block n_mb - 1 first (causal
   * rows near the end see the most keys), (batch, head) fastest. The CTAs
   * running at once then work on few heads and share their K / V tiles in
   * L2. A CTA takes tiles blockIdx.x, + gridDim.x, ... (one of them unless
   * the grid is persistent). */
  auto tile_of = [&](int t, int &m0, int &b, int &h, int &n_blocks) {
    const int chunk = t / (ch * n_mb), first = chunk * ch;
    const int size = min(ch, BH - first), local = t - first * n_mb;
    const int bh = first + local % size;
    m0 = (n_mb - 1 - local / size) * BM;
    h = bh % NH;
    b = bh / NH;
    const int kv_end = p.causal ? min(T, m0 + BM) : T;
    n_blocks = (kv_end + BN - 1) / BN;
  };

  if (threadIdx.x == 0) {
    mbar_init(barQ, 1);
    /* lane 0 of every consumer warp; with FWD90_EPI 1 one thread of each
     * consumer warpgroup */
    mbar_init(emptyQ, FWD90_EPI == 1 ? NC : NC * 4);
    for (int s = 0; s < ST; s++) {
      mbar_init(&fullK[s], 1);
      mbar_init(&fullV[s], 1);
      mbar_init(&empty[s], NC * 4);
    }
    mbar_fence_init();
  }
  __syncthreads();

  if (wg == 0) {
    reg_dealloc<C::REG_PRODUCER>();
    if (tid == 0) {
      tma_prefetch_desc(&tmQ);
      tma_prefetch_desc(&tmK);
      tma_prefetch_desc(&tmV);
      int kv = 0; /* ring position */
      for (int t = blockIdx.x, it = 0;; it++) {
        int m0 = 0, b = 0, h = 0, n_blocks = 0, g = 0, j0 = 0;
        auto load_kv = [&](int j) {
          const int s = kv % ST;
          mbar_wait(&empty[s], ((kv / ST) & 1) ^ 1);
          mbar_expect_tx(&fullK[s], C::KV_BYTES);
#pragma unroll
          for (int c = 0; c < NCH; c++)
            tma_load_4d(sK + s * BN * HD + c * BN * 64, &tmK, &fullK[s], c * 64, g, j * BN, b);
          mbar_expect_tx(&fullV[s], C::KV_BYTES);
#pragma unroll
          for (int c = 0; c < NCH; c++)
            tma_load_4d(sV + s * BN * HD + c * BN * 64, &tmV, &fullV[s], c * 64, g, j * BN, b);
          kv++;
        };
        if (t < n_tiles) {
          tile_of(t, m0, b, h, n_blocks);
          g = h / (NH / p.KVH);
          /* FWD90_EPI 1: Q is free only once the previous tile's O has left
           * it, so the first K / V block goes first. */
          if (FWD90_EPI == 1) {
            load_kv(0);
            j0 = 1;
          }
        }
        /* Q once the consumers' last S product of the previous tile is in
         * (FWD90_EPI 1: its O stored); the tile's number goes beside it
         * (past the last: the end). */
        mbar_wait(emptyQ, (it & 1) ^ 1);
        sTile[it & 1] = t;
        if (t >= n_tiles) {
          mbar_arrive(barQ);
          break;
        }
        mbar_expect_tx(barQ, C::Q_BYTES);
#pragma unroll
        for (int c = 0; c < NCH; c++)
          tma_load_4d(sQ + c * BM * 64, &tmQ, barQ, c * 64, h, m0, b);
        for (int j = j0; j < n_blocks; j++)
          load_kv(j);
        /* The next tile: a grid of one CTA per tile stops; a persistent one
         * takes every gridDim.x-th tile (FWD90_SCHED 0) or the next tile
         * nobody has taken yet (1: the CTA whose loads run out first takes
         * it, which balances the causal tiles' unequal work). */
        if (FWD90_PERSIST == 0)
          t = n_tiles;
        else if (FWD90_SCHED == 0)
          t += gridDim.x;
        else
          t = gridDim.x + atomicAdd(&fwd90_sched[slot][0], 1);
      }
      /* The last CTA out resets the slot for the next launch that uses it. */
      if (FWD90_PERSIST != 0 && FWD90_SCHED == 1 &&
          atomicAdd(&fwd90_sched[slot][1], 1) == (int)gridDim.x - 1) {
        atomicExch(&fwd90_sched[slot][0], 0);
        atomicExch(&fwd90_sched[slot][1], 0);
      }
    }
    return;
  }

  reg_alloc<C::REG_CONSUMER>();
  const int c = wg - 1, warp = tid / 32, lane = tid % 32;
  const float sl2 = p.scale * FLASH_LOG2E;
  const bf16 *sQc = sQ + 64 * c * 64; /* this warpgroup's rows of chunk 0 */
  /* Ping-pong (PP): the consumer warpgroups take turns issuing their
   * products (named barrier 1 + c is warpgroup c's turn), so that one's
   * softmax runs under the others' GEMMs. Every warpgroup takes n_blocks + 1
   * turns a tile (the first S, n_mine - 1 of S + P V, the last P V, one
   * empty turn per key block it skips); the last warpgroup starts the round,
   * and the first one takes the last warpgroup's final pass at the end. */
  auto turn_wait = [&]() {
    if (PP)
      named_sync(1 + c, 256);
  };
  auto turn_pass = [&]() {
    if (PP)
      named_arrive(1 + (c + 1) % NC, 256);
  };
  if (PP && c == NC - 1)
    named_arrive(1, 256);

  int kv0 = 0;
  for (int it = 0;; it++) {
    mbar_wait(barQ, it & 1);
    const int t = sTile[it & 1];
    if (t >= n_tiles)
      break;
    int m0, b, h, n_blocks;
    tile_of(t, m0, b, h, n_blocks);
    const int wg_first = m0 + 64 * c, wg_last = wg_first + 63;
    const int row_lo = wg_first + 16 * warp + lane / 4; /* and row_lo + 8 */
    const int32_t *doc = p.doc ? p.doc + (int64_t)b * T : nullptr;
    int doc_r[2];
#pragma unroll
    for (int r = 0; r < 2; r++)
      doc_r[r] = doc && row_lo + 8 * r < T ? doc[row_lo + 8 * r] : INT32_MIN;
    /* Causal: the key blocks past this warpgroup's last row add nothing. */
    const int n_mine = p.causal ? min(n_blocks, wg_last / BN + 1) : n_blocks;

    float o[HD / 2];
#pragma unroll
    for (int i = 0; i < HD / 2; i++)
      o[i] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, alpha[2];
    float s[BN / 2];
    uint32_t pa[BN / 16][4];

    auto issue_s = [&](int j) {
      const bf16 *cK = sK + ((kv0 + j) % ST) * BN * HD;
      reg_fence(s);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < HD / 16; kk++) {
        const int cc = kk / 4, ko = (kk % 4) * 16;
        wgmma_ss<BN, 0, 0>(s, desc_k(sQc + cc * BM * 64 + ko), desc_k(cK + cc * BN * 64 + ko),
                           kk > 0);
      }
      wgmma_commit();
    };
    auto issue_pv = [&](int j) {
      const bf16 *cV = sV + ((kv0 + j) % ST) * BN * HD;
      /* Every input register is defined before the fence: a non-wgmma
       * definition inside the batch would serialise the wgmmas. */
#pragma unroll
      for (int kk = 0; kk < BN / 16; kk++)
        reg_fence_u(pa[kk]);
      reg_fence(o);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BN / 16; kk++)
        wgmma_rs<HD, 1>(o, pa[kk], desc_mn(cV + kk * 16 * 64, BN), 1);
      wgmma_commit();
    };
    auto need_mask = [&](int n0) {
      return n0 + BN > T || doc != nullptr || (p.causal && n0 + BN - 1 > wg_first);
    };
    auto full_k = [&](int j) { return &fullK[(kv0 + j) % ST]; };
    auto full_v = [&](int j) { return &fullV[(kv0 + j) % ST]; };
    auto release = [&](int j) {
      __syncwarp();
      if (lane == 0)
        mbar_arrive(&empty[(kv0 + j) % ST]);
    };
    auto ph = [&](int j) { return (uint32_t)(((kv0 + j) / ST) & 1); };

    /* Block 0: S, then its softmax (O is still zero). */
    mbar_wait(full_k(0), ph(0));
    turn_wait();
    issue_s(0);
    turn_pass();
    wgmma_wait<0>();
    reg_fence(s);
    if (n_mine == 1 && FWD90_EPI != 1) {
      __syncwarp();
      if (lane == 0)
        mbar_arrive(emptyQ);
    }
    softmax_block<BN, SWEXP>(s, m, l, alpha, need_mask(0), 0, row_lo, T, p.causal, doc, doc_r, lane,
                             sl2);
    pack_p<BN>(s, pa);
    /* Block j: S of block j and P V of block j - 1 in flight together; the
     * softmax of block j runs while P V still computes, and its P replaces
     * that of block j - 1 in pa once the product is done. */
    for (int j = 1; j < n_mine; j++) {
      mbar_wait(full_k(j), ph(j));
      mbar_wait(full_v(j - 1), ph(j - 1));
      turn_wait();
      issue_s(j);
      issue_pv(j - 1);
      turn_pass();
      wgmma_wait<1>(); /* S of block j is in; P V of block j - 1 still runs */
      reg_fence(s);
      if (j == n_mine - 1 && FWD90_EPI != 1) { /* the last read of Q */
        __syncwarp();
        if (lane == 0)
          mbar_arrive(emptyQ);
      }
      softmax_block<BN, SWEXP>(s, m, l, alpha, need_mask(j * BN), j * BN, row_lo, T, p.causal, doc,
                               doc_r, lane, sl2);
      wgmma_wait<0>();
#pragma unroll
      for (int kk = 0; kk < BN / 16; kk++)
        reg_fence_u(pa[kk]); /* read by the P V product until here */
      reg_fence(o);
      release(j - 1);
#pragma unroll
      for (int i = 0; i < HD / 8; i++) {
        o[4 * i + 0] *= alpha[0];
        o[4 * i + 1] *= alpha[0];
        o[4 * i + 2] *= alpha[1];
        o[4 * i + 3] *= alpha[1];
      }
      pack_p<BN>(s, pa);
    }
    {
      const int jl = n_mine - 1;
      mbar_wait(full_v(jl), ph(jl));
      turn_wait();
      issue_pv(jl);
      turn_pass();
      wgmma_wait<0>();
#pragma unroll
      for (int kk = 0; kk < BN / 16; kk++)
        reg_fence_u(pa[kk]);
      reg_fence(o);
      release(jl);
    }
    /* Blocks this warpgroup skips (causal): release them once loaded, so
     * that each arrival lands in the phase of its own block; one empty
     * turn each. */
    for (int j = n_mine; j < n_blocks; j++) {
      turn_wait();
      turn_pass();
      mbar_wait(full_k(j), ph(j));
      release(j);
    }
    kv0 += n_blocks;

#if FWD90_EPI == 1
    {
      float inv[2];
#pragma unroll
      for (int r = 0; r < 2; r++) {
        float lr = l[r];
        lr += __shfl_xor_sync(0xffffffffu, lr, 1);
        lr += __shfl_xor_sync(0xffffffffu, lr, 2);
        inv[r] = lr > 0.0f ? 1.0f / lr : 0.0f;
        const int row = row_lo + 8 * r;
        if (row < T && lane % 4 == 0)
          lse[((int64_t)b * NH + h) * T + row] = (m[r] + log2f(lr)) * FLASH_LN2;
      }
      /* O into this warpgroup's rows of the Q buffer (its last S product
       * is done; the other warpgroup reads only its own rows), in the
       * 128-byte swizzle: 16-byte chunk k of row r at k ^ (r % 8). */
      unsigned char *sOc = reinterpret_cast<unsigned char *>(sQ + 64 * c * 64);
      (void)hd; /* TMA drops the columns past the real head dim */
#pragma unroll
      for (int r = 0; r < 2; r++) {
        const int rl = 16 * warp + lane / 4 + 8 * r;
#pragma unroll
        for (int i = 0; i < HD / 8; i++) {
          const int cc = i / 8, k = i % 8;
          *reinterpret_cast<uint32_t *>(sOc + cc * BM * 128 + rl * 128 + ((k ^ (rl % 8)) * 16) +
                                        (lane % 4) * 4) =
              pack_bf16(o[4 * i + 2 * r] * inv[r], o[4 * i + 2 * r + 1] * inv[r]);
        }
      }
      fence_proxy_async();
      named_sync(3 + c, 128);
      if (tid == 0) {
#pragma unroll
        for (int cc = 0; cc < NCH; cc++)
          tma_store_4d(&tmO, sOc + cc * BM * 128, cc * 64, h, wg_first, b);
        bulk_commit();
        bulk_wait_read<0>(); /* the buffer is read: Q may come */
        mbar_arrive(emptyQ);
      }
    }
#else
    /* FWD90_DIAG_NOSTORE 2: true at run time, unknown to the compiler. */
    const bool epi_skip = FWD90_DIAG_NOSTORE == 2 && p.B >= 0;
    if (!epi_skip)
#pragma unroll
      for (int r = 0; r < 2; r++) {
        float lr = l[r];
        lr += __shfl_xor_sync(0xffffffffu, lr, 1);
        lr += __shfl_xor_sync(0xffffffffu, lr, 2);
        const float inv = lr > 0.0f ? 1.0f / lr : 0.0f;
        const int row = row_lo + 8 * r;
        const bool do_st = row < T && FWD90_DIAG_NOSTORE != 1;
        /* hd 80 / 96 run the 128 kernel on zero-filled columns: groups of 8
         * columns past hd are not stored. */
        bf16 *orow = out + ((int64_t)(b * T + row) * NH + h) * hd;
        const int q = lane % 4;
        constexpr int OSTORE = HD == 64 ? FWD90_64_OSTORE : FWD90_128_OSTORE;
        if constexpr (OSTORE == 8) {
          /* Group pair (i, i + 1): even lanes keep group i's word and take
           * their odd neighbour's, odd lanes group i + 1's. */
#pragma unroll
          for (int i = 0; i < HD / 8; i += 2) {
            const uint32_t a0 = pack_bf16(o[4 * i + 2 * r] * inv, o[4 * i + 2 * r + 1] * inv);
            const uint32_t a1 =
                pack_bf16(o[4 * i + 4 + 2 * r] * inv, o[4 * i + 4 + 2 * r + 1] * inv);
            const uint32_t got = __shfl_xor_sync(0xffffffffu, (q & 1) ? a0 : a1, 1);
            const uint32_t keep = (q & 1) ? a1 : a0;
            const int g = i + (q & 1);
            if (do_st && g * 8 < hd)
              *reinterpret_cast<uint2 *>(orow + g * 8 + (q & 2) * 2) =
                  (q & 1) ? make_uint2(got, keep) : make_uint2(keep, got);
          }
        } else if (do_st) {
#pragma unroll
          for (int i = 0; i < HD / 8; i++)
            if (i * 8 < hd)
              *reinterpret_cast<uint32_t *>(orow + i * 8 + q * 2) =
                  pack_bf16(o[4 * i + 2 * r] * inv, o[4 * i + 2 * r + 1] * inv);
        }
        if (do_st && q == 0)
          lse[((int64_t)b * NH + h) * T + row] = (m[r] + log2f(lr)) * FLASH_LN2;
      }
#endif
  }
#if FWD90_EPI == 1
  if (tid == 0)
    bulk_wait<0>(); /* the last O stores complete before the CTA exits */
#endif
  if (PP && c == 0)
    turn_wait();
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

template <int HD, int BN, int NC, int ST>
static int launch_fwd90(const flash_params *p, const void *q, const void *k, const void *v,
                        void *out, float *lse, cudaStream_t stream) {
  using C = fwd90_cfg<HD, BN, NC, ST>;
  CUtensorMap mq, mk, mv, mo = {};
  /* Maps of the real head dim: columns past it (hd 80, 96) read as zeros. */
  int rc = flash_make_map(&mq, q, p->B, p->T, p->NH, p->HD, C::BM);
  if (rc == 0)
    rc = flash_make_map(&mk, k, p->B, p->T, p->KVH, p->HD, BN);
  if (rc == 0)
    rc = flash_make_map(&mv, v, p->B, p->T, p->KVH, p->HD, BN);
  /* FWD90_EPI 1: O in boxes of one warpgroup's 64 rows, stored with TMA. */
  if (rc == 0 && FWD90_EPI == 1)
    rc = flash_make_map(&mo, out, p->B, p->T, p->NH, p->HD, 64);
  if (rc != 0)
    return rc;
  auto kern = flash_fwd90_kernel<HD, BN, NC, ST>;
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM);
  if (e != cudaSuccess)
    return (int)e;
  const int64_t n_tiles = (int64_t)p->NH * p->B * ((p->T + C::BM - 1) / C::BM);
  if (n_tiles > INT32_MAX)
    return (int)cudaErrorInvalidValue;
  const int n_mb = (p->T + C::BM - 1) / C::BM, bh = p->B * p->NH, sms = fwd90_sm_count();
  int grid = (int)n_tiles;
  if (FWD90_PERSIST > 0) {
    const int64_t cap = (int64_t)FWD90_PERSIST * sms;
    grid = (int)(n_tiles < cap ? n_tiles : cap);
  }
  /* Chunk of (batch, head) pairs: FWD90_CH, or with -1 about one tile per
   * CTA of the grid in flight, rounded up to whole GQA groups. */
  int ch = FWD90_CH > 0 ? FWD90_CH : bh;
  if (FWD90_CH < 0) {
    const int group = p->NH / p->KVH;
    ch = (sms + n_mb - 1) / n_mb;
    ch = (ch + group - 1) / group * group;
  }
  if (ch > bh)
    ch = bh;
  static unsigned launches; /* the slot of the dynamic schedule */
  const int slot = (int)(__atomic_fetch_add(&launches, 1u, __ATOMIC_RELAXED) % FWD90_SLOTS);
  kern<<<grid, C::THREADS, C::SMEM, stream>>>(mq, mk, mv, mo, *p, (bf16 *)out, lse, ch, slot);
  return (int)cudaGetLastError();
}

extern "C" int flash_fwd_sm90(const flash_params *p, const void *q, const void *k, const void *v,
                              void *out, float *lse, void *stream) {
  cudaStream_t st = (cudaStream_t)stream;
  if (p->HD == 64)
    return launch_fwd90<64, FWD90_64_BN, FWD90_64_NC, FWD90_64_ST>(p, q, k, v, out, lse, st);
  if (p->HD == 80 || p->HD == 96 || p->HD == 128)
    return launch_fwd90<128, FWD90_128_BN, FWD90_128_NC, FWD90_128_ST>(p, q, k, v, out, lse, st);
  return (int)cudaErrorInvalidValue;
}
