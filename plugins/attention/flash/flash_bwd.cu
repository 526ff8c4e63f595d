/* Flash attention backward: dQ, dK, dV from Q, K, V, O, dO and the saved
 * log-sum-exp, recomputing the probabilities tile by tile.
 *
 * With s_ij = scale * q_i . k_j, P_ij = exp(s_ij - lse_i):
 *   dV_j = sum_i P_ij dO_i             dP_ij = dO_i . V_j
 *   dS_ij = P_ij (dP_ij - D_i), D_i = dO_i . O_i
 *   dQ_i = scale * sum_j dS_ij K_j     dK_j = scale * sum_i dS_ij Q_i
 *
 * Three launches: (1) D = rowsum(dO * O) into the workspace, and dq_acc
 * zeroed, in one pass (flash_bwd_pre_kernel); (2) the main kernel: on a
 * Hopper (compute capability 9.0) the wgmma kernel of flash_bwd_sm90.cuh,
 * elsewhere the mma.sync kernel of this file (which the sm_90a-only build
 * runs for head dim 256 and soft-capping only; see flash_fwd.cu);
 * (3) dq = bf16(scale * dq_acc).
 * The mma.sync kernel's CTA (NW warps) owns one (batch, kv head, block of BN
 * = 16 NW MT keys); each warp owns 16 MT keys. It loops over the query heads
 * of its GQA
 * group and over the query blocks (BM = 64) that can see its keys, keeping
 * dK and dV of its keys in registers, so they need no atomics and K/V are
 * never repeated. It computes the transposed products S^T = K Q^T and
 * dP^T = V dO^T, whose accumulators are directly the A operands of
 * dV += P^T dO and dK += dS^T Q. dQ gets contributions from every key
 * block, so dS goes through shared memory and dQ is accumulated in an fp32
 * workspace with vector atomics (red.global.add.v2.f32). Causal CTAs start
 * heaviest-first over the whole grid (grid y walks the key blocks, x the
 * (kv head, batch) pairs; causal key block n sees T - n * BN queries).
 *
 * With a soft-cap c (the SOFTCAP twins) the scores are capped as in the
 * forward, s' = c tanh(s / c), P_ij = exp(s'_ij - lse_i), and dS_ij is
 * multiplied by ds'/ds = 1 - tanh^2(s_ij / c).
 * A CTA computes the columns [col0, col0 + DH) of dK, dV and dQ (DH = HD but for
 * head dim 256: two CTAs of DH 128 (grid z), which both recompute S and dP
 * over the whole head dim, so that dK and dV of 256 columns do not need 256
 * accumulator registers a thread).
 *
 * Workspace: dq_acc (B, T, NH, HD) fp32, then D (B, NH, T) fp32: O(T). */
#include <cuda_runtime.h>
#include <math.h>

#include "flash.h"
#include "flash_common.cuh"

/* The tile table of the mma.sync kernel: per head dim, BM query rows a
 * step, NW warps of 16 MT keys each (BN = 16 NW MT keys a CTA), MINB CTAs
 * per SM the registers are budgeted for; the fastest measured on an H200
 * (bench/results/2026-11-21-flash-attention-s2b.md). */
template <int HD> struct bwd_mma_tiles;
template <> struct bwd_mma_tiles<64> { static constexpr int NW = 4, MT = 1, BM = 64, MINB = 2; };
template <> struct bwd_mma_tiles<128> { static constexpr int NW = 8, MT = 1, BM = 64, MINB = 1; };
/* Not measured: 64 keys a CTA, so that K, V (64 KB) and Q, dO double
 * buffered (128 KB) fit in 227 KB of shared memory. */
template <> struct bwd_mma_tiles<256> { static constexpr int NW = 4, MT = 1, BM = 64, MINB = 1; };
/* Output columns a CTA computes (see the header). */
template <int HD> static constexpr int bwd_cols() {
  return HD > 128 ? 128 : HD;
}

extern "C" uint64_t flash_bwd_workspace_bytes(const flash_params *p) {
  return flash_bwd_workspace_for(p);
}

/* D (B, NH, T) = rowsum(dout * out); one warp per (b, t, h) row: the
 * pre-pass where flash_bwd_pre_kernel's conditions do not hold. */
static __global__ void flash_bwd_dot_kernel(const bf16 *__restrict__ out,
                                            const bf16 *__restrict__ dout, float *__restrict__ D,
                                            int64_t n_rows, int T, int NH, int HD) {
  const int64_t row = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= n_rows)
    return;
  const __nv_bfloat162 *o = reinterpret_cast<const __nv_bfloat162 *>(out + row * HD);
  const __nv_bfloat162 *d = reinterpret_cast<const __nv_bfloat162 *>(dout + row * HD);
  float acc = 0.0f;
  for (int i = lane; i < HD / 2; i += 32) {
    float2 a = __bfloat1622float2(o[i]), c = __bfloat1622float2(d[i]);
    acc += a.x * c.x + a.y * c.y;
  }
  for (int off = 16; off > 0; off /= 2)
    acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) {
    const int h = (int)(row % NH);
    const int64_t bt = row / NH;
    const int t = (int)(bt % T);
    const int64_t b = bt / T;
    D[(b * NH + h) * T + t] = acc;
  }
}

/* D (B, NH, T) = rowsum(dout * out), and dq_acc's rows zeroed when it is not
 * null. Block (x, y): positions 32x.. of (batch, head) y; 8 threads a row,
 * each a 16-byte chunk of 8 bf16 columns at a time (HD a multiple of 8). */
static __global__ void __launch_bounds__(256)
    flash_bwd_pre_kernel(const bf16 *__restrict__ out, const bf16 *__restrict__ dout,
                         float *__restrict__ D, float *__restrict__ dq_acc, int T, int NH, int HD) {
  const int t = blockIdx.x * 32 + threadIdx.x / 8, l = threadIdx.x % 8;
  const int bh = blockIdx.y, h = bh % NH, b = bh / NH;
  float acc = 0.0f;
  if (t < T) {
    const int64_t row = ((int64_t)b * T + t) * NH + h;
    const uint4 *o = reinterpret_cast<const uint4 *>(out + row * HD);
    const uint4 *d = reinterpret_cast<const uint4 *>(dout + row * HD);
    for (int i = l; i < HD / 8; i += 8) {
      const uint4 a = __ldg(o + i), c = __ldg(d + i);
      const uint32_t av[4] = {a.x, a.y, a.z, a.w}, cv[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
      for (int j = 0; j < 4; j++) {
        const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&av[j]));
        const float2 y = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&cv[j]));
        acc = fmaf(x.x, y.x, fmaf(x.y, y.y, acc));
      }
    }
    if (dq_acc) {
      float4 *z = reinterpret_cast<float4 *>(dq_acc + row * HD);
      for (int i = l; i < HD / 4; i += 8)
        z[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  }
  acc += __shfl_xor_sync(0xffffffffu, acc, 4);
  acc += __shfl_xor_sync(0xffffffffu, acc, 2);
  acc += __shfl_xor_sync(0xffffffffu, acc, 1);
  if (t < T && l == 0)
    D[(int64_t)bh * T + t] = acc;
}

/* dq = bf16(scale * dq_acc), four elements a thread. */
static __global__ void flash_bwd_dq_kernel(const float4 *__restrict__ acc, bf16 *__restrict__ dq,
                                           int64_t n4, float scale) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n4)
    return;
  float4 a = acc[i];
  uint2 packed = {pack_bf16(a.x * scale, a.y * scale), pack_bf16(a.z * scale, a.w * scale)};
  reinterpret_cast<uint2 *>(dq)[i] = packed;
}

template <int HD, int NW, int MT, int BM> static constexpr int bwd_smem_bytes() {
  return (2 * NW * 16 * MT * HD + 4 * BM * HD + NW * 16 * MT * BM) * (int)sizeof(bf16) +
         6 * BM * (int)sizeof(float);
}

/* Stages the query step `it` (head h, block mb of the flattened loop) into
 * buffer `buf`: Q, dO, lse, D, doc ids, all by cp.async (zero-filled past T;
 * rows past T are masked explicitly, so their lse / D values do not matter). */
template <int HD, int BM, int NT>
static __device__ __forceinline__ void bwd_stage(bf16 *sQ, bf16 *sdO, float *sL, float *sD,
                                                 int32_t *sDoc, const bf16 *qb, const bf16 *dob,
                                                 const float *lse_h, const float *D_h,
                                                 const int32_t *doc, int m0, int T,
                                                 int64_t qstride) {
  load_tile<BM, HD, NT>(sQ, qb, m0, T, qstride);
  load_tile<BM, HD, NT>(sdO, dob, m0, T, qstride);
  if (threadIdx.x < BM) {
    const int row = m0 + threadIdx.x;
    const bool ok = row < T;
    cp_async4(sL + threadIdx.x, ok ? lse_h + row : lse_h, ok ? 4 : 0);
    cp_async4(sD + threadIdx.x, ok ? D_h + row : D_h, ok ? 4 : 0);
    if (doc)
      cp_async4(sDoc + threadIdx.x, ok ? doc + row : doc, ok ? 4 : 0);
  }
}

template <int HD, int NW, int MT, int BM, int MINB, int DH, bool SOFTCAP>
static __global__ void __launch_bounds__(NW * 32, MINB)
    flash_bwd_kernel(const flash_params p, const bf16 *__restrict__ q, const bf16 *__restrict__ k,
                     const bf16 *__restrict__ v, const bf16 *__restrict__ dout,
                     const float *__restrict__ lse, const float *__restrict__ Dg,
                     float *__restrict__ dq_acc, bf16 *__restrict__ dk, bf16 *__restrict__ dv) {
  constexpr int BN = NW * 16 * MT, NT = NW * 32;
  static_assert(BM == 64 && NW % 4 == 0, "the fused dQ needs BM 64, NW 4k");
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16 *sK = reinterpret_cast<bf16 *>(smem_raw); // (BN, HD)
  bf16 *sV = sK + BN * HD;                       // (BN, HD)
  bf16 *sQb = sV + BN * HD;                      // (2, BM, HD): double buffered
  bf16 *sdOb = sQb + 2 * BM * HD;                // (2, BM, HD)
  bf16 *sdS = sdOb + 2 * BM * HD;                // (BN, BM): dS^T, keys by queries
  float *sLb = reinterpret_cast<float *>(sdS + BN * BM); // (2, BM) lse (ln)
  float *sDb = sLb + 2 * BM;                             // (2, BM)
  int32_t *sDocb = reinterpret_cast<int32_t *>(sDb + 2 * BM); // (2, BM)

  const int T = p.T, NH = p.NH, KVH = p.KVH, rep = NH / KVH;
  const int n_block = blockIdx.y, g = blockIdx.x % KVH, b = blockIdx.x / KVH;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n0 = n_block * BN;
  const int64_t qstride = (int64_t)NH * HD, kstride = (int64_t)KVH * HD;
  const bf16 *kb = k + (int64_t)b * T * kstride + g * HD; // rows t: (T, KVH*HD)
  const bf16 *vb = v + (int64_t)b * T * kstride + g * HD;
  const int32_t *doc = p.doc ? p.doc + (int64_t)b * T : nullptr; // (T)
  /* A capped score already carries the scale (see flash_fwd.cu). */
  const float sl2 = SOFTCAP ? FLASH_LOG2E : p.scale * FLASH_LOG2E;
  const float cap_in = SOFTCAP ? p.scale / p.softcap : 0.0f;
  const int col0 = DH < HD ? (int)blockIdx.z * DH : 0; /* this CTA's output columns */
  /* ldmatrix lane patterns (see swz_ld): A operands and transposed loads
   * (rA, xA), B operands (rB, xB). */
  const int rA = (lane & 7) + ((lane >> 3) & 1) * 8, xA = (lane >> 4) ^ (lane & 7);
  const int rB = (lane & 7) + (lane >> 4) * 8, xB = ((lane >> 3) & 1) ^ (lane & 7);

  load_tile<BN, HD, NT>(sK, kb, n0, T, kstride);
  load_tile<BN, HD, NT>(sV, vb, n0, T, kstride);

  const int wkey = warp * 16 * MT;             // this warp's first key in the block
  const int kr_lo = n0 + wkey + lane / 4;      // key row of c0, c1 of m-tile 0; c2, c3: + 8
  int doc_k[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const int key = kr_lo + mt * 16 + r * 8;
      doc_k[mt][r] = doc && key < T ? doc[key] : INT32_MIN;
    }

  float dka[MT][DH / 8][4], dva[MT][DH / 8][4];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int i = 0; i < DH / 8; i++)
#pragma unroll
      for (int c = 0; c < 4; c++)
        dka[mt][i][c] = dva[mt][i][c] = 0.0f;

  /* One flattened loop over (query head of the group, query block), so
   * that step it + 1 (possibly the next head's first block) is loaded while
   * step it computes. */
  const int m_first = p.causal ? n0 / BM : 0;
  const int m_blocks = (T + BM - 1) / BM;
  const int n_mb = m_blocks - m_first, n_it = rep * n_mb;
  auto stage = [&](int it, int buf) {
    const int h = g * rep + it / n_mb, m0 = (m_first + it % n_mb) * BM;
    bwd_stage<HD, BM, NT>(sQb + buf * BM * HD, sdOb + buf * BM * HD, sLb + buf * BM, sDb + buf * BM,
                      sDocb + buf * BM, q + (int64_t)b * T * qstride + h * HD,
                      dout + (int64_t)b * T * qstride + h * HD,
                      lse + ((int64_t)b * NH + h) * T, Dg + ((int64_t)b * NH + h) * T, doc, m0, T,
                      qstride);
  };
  stage(0, 0);
  cp_async_commit(); /* K, V and step 0 */
  for (int it = 0; it < n_it; it++) {
    const int buf = it & 1;
    const int h = g * rep + it / n_mb, m0 = (m_first + it % n_mb) * BM;
    /* Buffer buf ^ 1 was last read before the middle barrier of step
     * it - 1, which every warp has passed by now. */
    if (it + 1 < n_it)
      stage(it + 1, buf ^ 1);
    cp_async_commit();
    cp_async_wait<1>(); /* all but the group just issued */
    __syncthreads();
    {
      const bf16 *sQ = sQb + buf * BM * HD, *sdO = sdOb + buf * BM * HD;
      const float *sL = sLb + buf * BM, *sD = sDb + buf * BM;
      const int32_t *sDoc = sDocb + buf * BM;

      /* S^T (16 MT keys of this warp x BM queries) = K_w Q^T. */
      float st[MT][BM / 8][4];
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int i = 0; i < BM / 8; i++)
          st[mt][i][0] = st[mt][i][1] = st[mt][i][2] = st[mt][i][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < HD / 16; kk++) {
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
          ldsm_x4(a[mt], sK + swz_ld<HD>(wkey + mt * 16 + rA, kk * 2, xA));
#pragma unroll
        for (int np = 0; np < BM / 16; np++) {
          uint32_t r[4];
          ldsm_x4(r, sQ + swz_ld<HD>(np * 16 + rB, kk * 2, xB));
          uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
#pragma unroll
          for (int mt = 0; mt < MT; mt++) {
            mma_bf16(st[mt][2 * np], a[mt], b0);
            mma_bf16(st[mt][2 * np + 1], a[mt], b1);
          }
        }
      }

      /* P^T = exp(S^T - lse), masked. Keys past T are zero rows of K,
       * which would otherwise get a nonzero probability; query rows past T
       * have zero-filled lse and D, so they are masked too. SOFTCAP: S^T
       * capped first, its derivative kept in dcap for dS. */
      float dcap[MT][SOFTCAP ? BM / 8 : 1][4];
      const bool need_mask = doc != nullptr || n0 + BN > T || m0 + BM > T ||
                             (p.causal && n0 + wkey + 16 * MT - 1 > m0) ||
                             (p.window > 0 && m0 + BM - 1 - (n0 + wkey) >= p.window);
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < BM / 8; nt++) {
#pragma unroll
          for (int c = 0; c < 4; c++) {
            const int qi = nt * 8 + (lane % 4) * 2 + (c & 1);
            float sv = st[mt][nt][c];
            if (SOFTCAP)
              sv = p.softcap * softcap_tanh(sv * cap_in, dcap[mt][SOFTCAP ? nt : 0][c]);
            float pv = exp2f(fmaf(sv, sl2, -sL[qi] * FLASH_LOG2E));
            if (need_mask) {
              const int key = kr_lo + mt * 16 + (c >> 1) * 8;
              bool ok = key < T && m0 + qi < T && (!p.causal || key <= m0 + qi) &&
                        (p.window == 0 || m0 + qi - key < p.window);
              if (doc)
                ok = ok && sDoc[qi] == doc_k[mt][c >> 1];
              pv = ok ? pv : 0.0f;
            }
            st[mt][nt][c] = pv;
          }
        }

      /* dV += P^T dO. */
#pragma unroll
      for (int kk = 0; kk < BM / 16; kk++) {
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
          a[mt][0] = pack_bf16(st[mt][2 * kk][0], st[mt][2 * kk][1]);
          a[mt][1] = pack_bf16(st[mt][2 * kk][2], st[mt][2 * kk][3]);
          a[mt][2] = pack_bf16(st[mt][2 * kk + 1][0], st[mt][2 * kk + 1][1]);
          a[mt][3] = pack_bf16(st[mt][2 * kk + 1][2], st[mt][2 * kk + 1][3]);
        }
#pragma unroll
        for (int np = 0; np < DH / 16; np++) {
          uint32_t r[4];
          ldsm_x4_t(r, sdO + swz_ld<HD>(kk * 16 + rA, col0 / 8 + np * 2, xA));
          uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
#pragma unroll
          for (int mt = 0; mt < MT; mt++) {
            mma_bf16(dva[mt][2 * np], a[mt], b0);
            mma_bf16(dva[mt][2 * np + 1], a[mt], b1);
          }
        }
      }

      /* dP^T = V_w dO^T, then dS^T = P^T (dP^T - D). */
      float ds[MT][BM / 8][4];
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int i = 0; i < BM / 8; i++)
          ds[mt][i][0] = ds[mt][i][1] = ds[mt][i][2] = ds[mt][i][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < HD / 16; kk++) {
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
          ldsm_x4(a[mt], sV + swz_ld<HD>(wkey + mt * 16 + rA, kk * 2, xA));
#pragma unroll
        for (int np = 0; np < BM / 16; np++) {
          uint32_t r[4];
          ldsm_x4(r, sdO + swz_ld<HD>(np * 16 + rB, kk * 2, xB));
          uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
#pragma unroll
          for (int mt = 0; mt < MT; mt++) {
            mma_bf16(ds[mt][2 * np], a[mt], b0);
            mma_bf16(ds[mt][2 * np + 1], a[mt], b1);
          }
        }
      }
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < BM / 8; nt++)
#pragma unroll
          for (int c = 0; c < 4; c++) {
            ds[mt][nt][c] = st[mt][nt][c] * (ds[mt][nt][c] - sD[nt * 8 + (lane % 4) * 2 + (c & 1)]);
            if (SOFTCAP)
              ds[mt][nt][c] *= dcap[mt][SOFTCAP ? nt : 0][c];
          }

      /* dK += dS^T Q; dS^T also goes to shared memory for dQ. */
#pragma unroll
      for (int kk = 0; kk < BM / 16; kk++) {
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
          a[mt][0] = pack_bf16(ds[mt][2 * kk][0], ds[mt][2 * kk][1]);
          a[mt][1] = pack_bf16(ds[mt][2 * kk][2], ds[mt][2 * kk][3]);
          a[mt][2] = pack_bf16(ds[mt][2 * kk + 1][0], ds[mt][2 * kk + 1][1]);
          a[mt][3] = pack_bf16(ds[mt][2 * kk + 1][2], ds[mt][2 * kk + 1][3]);
          const int key = wkey + mt * 16 + lane / 4, qc = kk * 16 + (lane % 4) * 2;
          *reinterpret_cast<uint32_t *>(sdS + swz<BM>(key, qc)) = a[mt][0];
          *reinterpret_cast<uint32_t *>(sdS + swz<BM>(key + 8, qc)) = a[mt][1];
          *reinterpret_cast<uint32_t *>(sdS + swz<BM>(key, qc + 8)) = a[mt][2];
          *reinterpret_cast<uint32_t *>(sdS + swz<BM>(key + 8, qc + 8)) = a[mt][3];
        }
#pragma unroll
        for (int np = 0; np < DH / 16; np++) {
          uint32_t r[4];
          ldsm_x4_t(r, sQ + swz_ld<HD>(kk * 16 + rA, col0 / 8 + np * 2, xA));
          uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
#pragma unroll
          for (int mt = 0; mt < MT; mt++) {
            mma_bf16(dka[mt][2 * np], a[mt], b0);
            mma_bf16(dka[mt][2 * np + 1], a[mt], b1);
          }
        }
      }
      /* dQ (BM x DH) += dS (BM x BN) K (BN x DH): warp w takes query rows
       * (w % 4) * 16 and a 1 / (NW / 4) share of this CTA's columns. */
      __syncthreads();
      constexpr int DQW = DH / (NW / 4); // head-dim columns per warp
      const int qr = (warp % 4) * 16, hc = col0 + (warp / 4) * DQW;
      float dqa[DQW / 8][4];
#pragma unroll
      for (int i = 0; i < DQW / 8; i++)
        dqa[i][0] = dqa[i][1] = dqa[i][2] = dqa[i][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < BN / 16; kk++) {
        uint32_t a[4];
        ldsm_x4_t(a, sdS + swz_ld<BM>(kk * 16 + rB, qr / 8, xB));
#pragma unroll
        for (int np = 0; np < DQW / 16; np++) {
          uint32_t r[4];
          ldsm_x4_t(r, sK + swz_ld<HD>(kk * 16 + rA, hc / 8 + np * 2, xA));
          uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
          mma_bf16(dqa[2 * np], a, b0);
          mma_bf16(dqa[2 * np + 1], a, b1);
        }
      }
#pragma unroll
      for (int r = 0; r < 2; r++) {
        const int row = m0 + qr + lane / 4 + r * 8;
        if (row < T) {
          float *dst = dq_acc + ((int64_t)(b * T + row) * NH + h) * HD + hc + (lane % 4) * 2;
#pragma unroll
          for (int dt = 0; dt < DQW / 8; dt++)
            atomicAdd(reinterpret_cast<float2 *>(dst + dt * 8),
                      make_float2(dqa[dt][2 * r], dqa[dt][2 * r + 1]));
        }
      }
    }
    /* No barrier here: the next step's stage() writes only the buffer this
     * step did not read, and its sdS writes come after its top barrier. */
  }
  cp_async_wait<0>();

#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const int row = kr_lo + mt * 16 + r * 8;
      if (row < T) {
        const int64_t o = ((int64_t)(b * T + row) * KVH + g) * HD + col0 + (lane % 4) * 2;
#pragma unroll
        for (int dt = 0; dt < DH / 8; dt++) {
          *reinterpret_cast<uint32_t *>(dk + o + dt * 8) =
              pack_bf16(dka[mt][dt][2 * r] * p.scale, dka[mt][dt][2 * r + 1] * p.scale);
          *reinterpret_cast<uint32_t *>(dv + o + dt * 8) =
              pack_bf16(dva[mt][dt][2 * r], dva[mt][dt][2 * r + 1]);
        }
      }
    }
}

template <int HD, bool SOFTCAP, int NW = bwd_mma_tiles<HD>::NW, int MT = bwd_mma_tiles<HD>::MT,
          int BM = bwd_mma_tiles<HD>::BM, int MINB = bwd_mma_tiles<HD>::MINB>
static int launch_bwd(const flash_params *p, const void *q, const void *k, const void *v,
                      const void *dout, const float *lse, const float *D, float *dq_acc, void *dk,
                      void *dv, cudaStream_t stream) {
  constexpr int BN = NW * 16 * MT;
  const int smem = bwd_smem_bytes<HD, NW, MT, BM>();
  constexpr int DH = bwd_cols<HD>();
  auto kern = flash_bwd_kernel<HD, NW, MT, BM, MINB, DH, SOFTCAP>;
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e != cudaSuccess)
    return (int)e;
  dim3 grid(p->KVH * p->B, (p->T + BN - 1) / BN, HD / DH);
  kern<<<grid, NW * 32, smem, stream>>>(*p, (const bf16 *)q, (const bf16 *)k, (const bf16 *)v,
                                        (const bf16 *)dout, lse, D, dq_acc, (bf16 *)dk, (bf16 *)dv);
  return (int)cudaGetLastError();
}

template <bool SOFTCAP>
static int bwd_mma_hd(const flash_params *p, const void *q, const void *k, const void *v,
                      const void *dout, const float *lse, const float *D, float *dq_acc, void *dk,
                      void *dv, cudaStream_t st) {
  if (p->HD == 64)
    return launch_bwd<64, SOFTCAP>(p, q, k, v, dout, lse, D, dq_acc, dk, dv, st);
  if (p->HD == 128)
    return launch_bwd<128, SOFTCAP>(p, q, k, v, dout, lse, D, dq_acc, dk, dv, st);
  if (p->HD == 256)
    return launch_bwd<256, SOFTCAP>(p, q, k, v, dout, lse, D, dq_acc, dk, dv, st);
  return (int)cudaErrorInvalidValue;
}

extern "C" int flash_bwd(const flash_params *p, const void *q, const void *k, const void *v,
                         const void *out, const void *dout, const float *lse, void *dq, void *dk,
                         void *dv, void *workspace, void *stream) {
  cudaStream_t st = (cudaStream_t)stream;
  const int64_t rows = (int64_t)p->B * p->T * p->NH;
  /* Workspace: dq_acc (B, T, NH, HD) fp32, then D (B, NH, T). */
  float *dq_acc = (float *)workspace;
  float *D = (float *)((char *)workspace + flash_align256(rows * p->HD * sizeof(float)));
  cudaError_t e;
  if (p->HD % 8 == 0 && (int64_t)p->B * p->NH <= 65535 &&
      ((uintptr_t)out | (uintptr_t)dout) % 16 == 0) {
    const dim3 grid((unsigned)((p->T + 31) / 32), (unsigned)(p->B * p->NH));
    flash_bwd_pre_kernel<<<grid, 256, 0, st>>>((const bf16 *)out, (const bf16 *)dout, D, dq_acc,
                                               p->T, p->NH, p->HD);
  } else {
    e = cudaMemsetAsync(dq_acc, 0, rows * p->HD * sizeof(float), st);
    if (e != cudaSuccess)
      return (int)e;
    const int warps = 8;
    flash_bwd_dot_kernel<<<(unsigned)((rows + warps - 1) / warps), warps * 32, 0, st>>>(
        (const bf16 *)out, (const bf16 *)dout, D, rows, p->T, p->NH, p->HD);
  }
  if ((e = cudaGetLastError()) != cudaSuccess)
    return (int)e;
  int rc;
  if (flash_uses_sm90(p))
    rc = flash_bwd_sm90(p, q, k, v, dout, lse, D, dq_acc, dk, dv, st);
  else if (p->softcap > 0.0f)
    rc = bwd_mma_hd<true>(p, q, k, v, dout, lse, D, dq_acc, dk, dv, st);
  else
    rc = bwd_mma_hd<false>(p, q, k, v, dout, lse, D, dq_acc, dk, dv, st);
  if (rc != 0)
    return rc;
  const int64_t n4 = rows * p->HD / 4;
  flash_bwd_dq_kernel<<<(unsigned)((n4 + 255) / 256), 256, 0, st>>>((const float4 *)dq_acc,
                                                                     (bf16 *)dq, n4, p->scale);
  return (int)cudaGetLastError();
}
