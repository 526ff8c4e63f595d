/* Flash attention backward, dQ alone (BWD_SPLIT_DQ, included by
 * flash_bwd.cu): dQ_i = scale * sum_j P_ij (dP_ij - D_i) K_j with
 * P_ij = exp(s_ij - lse_i), dP_ij = dO_i . V_j.
 *
 * Shaped like the forward: a CTA of NW warps owns BM = NW * 16 * MT query
 * rows of one (batch, head) and streams the BN-key blocks of K and V of its
 * kv head (double buffered, cp.async), keeping dQ in registers. Each dQ
 * element is one ordered sum, written once in bf16: no atomics, no fp32
 * workspace, the same bits every run. It recomputes S and dP, which costs
 * three products a tile where the fused kernel's dQ took one, but frees the
 * dK/dV kernel of its dS tile, its second barrier and its atomics. */
#ifndef FSDPC_FLASH_BWD_DQ_CUH
#define FSDPC_FLASH_BWD_DQ_CUH

#include "flash_common.cuh"

/* Tile shape per head dim, as in flash_fwd.cu; overridable at build time. */
#ifndef DQ64_MT
#define DQ64_MT 2
#endif
#ifndef DQ64_NW
#define DQ64_NW 4
#endif
#ifndef DQ64_BN
#define DQ64_BN 64
#endif
#ifndef DQ64_MINB
#define DQ64_MINB 2
#endif
#ifndef DQ128_MT
#define DQ128_MT 1
#endif
#ifndef DQ128_NW
#define DQ128_NW 4
#endif
#ifndef DQ128_BN
#define DQ128_BN 64
#endif
#ifndef DQ128_MINB
#define DQ128_MINB 2
#endif

template <int HD, int MT, int NW, int BN> static constexpr int dq_smem_bytes() {
  return (2 * NW * 16 * MT * HD + 4 * BN * HD) * (int)sizeof(bf16);
}

template <int HD, int MT, int NW, int BN, int MINB>
static __global__ void __launch_bounds__(NW * 32, MINB)
    flash_bwd_dq_only_kernel(const flash_params p, const bf16 *__restrict__ q,
                             const bf16 *__restrict__ k, const bf16 *__restrict__ v,
                             const bf16 *__restrict__ dout, const float *__restrict__ lse,
                             const float *__restrict__ Dg, bf16 *__restrict__ dq) {
  constexpr int BM = NW * 16 * MT, NT = NW * 32;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16 *sQ = reinterpret_cast<bf16 *>(smem_raw); // (BM, HD)
  bf16 *sdO = sQ + BM * HD;                      // (BM, HD)
  bf16 *sK = sdO + BM * HD;                      // (2, BN, HD)
  bf16 *sV = sK + 2 * BN * HD;                   // (2, BN, HD)

  const int T = p.T, NH = p.NH, KVH = p.KVH;
  /* Heaviest-first over the whole grid: y counts down the query blocks. */
  const int m_block = gridDim.y - 1 - blockIdx.y;
  const int h = blockIdx.x % NH, b = blockIdx.x / NH, g = h / (NH / KVH);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int m0 = m_block * BM, wrow = warp * 16 * MT;
  const int64_t qstride = (int64_t)NH * HD, kstride = (int64_t)KVH * HD;
  const bf16 *qb = q + (int64_t)b * T * qstride + h * HD; // rows t: (T, NH*HD)
  const bf16 *dob = dout + (int64_t)b * T * qstride + h * HD;
  const bf16 *kb = k + (int64_t)b * T * kstride + g * HD; // rows t: (T, KVH*HD)
  const bf16 *vb = v + (int64_t)b * T * kstride + g * HD;
  const int32_t *doc = p.doc ? p.doc + (int64_t)b * T : nullptr; // (T)
  const float sl2 = p.scale * FLASH_LOG2E;
  const int kv_end = p.causal ? min(T, m0 + BM) : T;
  const int n_blocks = (kv_end + BN - 1) / BN;
  const int warp_last = m0 + wrow + 16 * MT - 1;
  const int rA = (lane & 7) + ((lane >> 3) & 1) * 8, xA = (lane >> 4) ^ (lane & 7);
  const int rB = (lane & 7) + (lane >> 4) * 8, xB = ((lane >> 3) & 1) ^ (lane & 7);

  load_tile<BM, HD, NT>(sQ, qb, m0, T, qstride);
  load_tile<BM, HD, NT>(sdO, dob, m0, T, qstride);
  load_tile<BN, HD, NT>(sK, kb, 0, T, kstride);
  load_tile<BN, HD, NT>(sV, vb, 0, T, kstride);
  cp_async_commit();

  /* Per row this thread holds: lse in log2 units, D, doc id. Rows past T
   * get lse +inf so that every p is 0 (no mask test needed for them). */
  float lrow[MT][2], drow[MT][2];
  int doc_r[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const int row = m0 + wrow + mt * 16 + lane / 4 + r * 8;
      const bool ok = row < T;
      lrow[mt][r] = ok ? lse[((int64_t)b * NH + h) * T + row] * FLASH_LOG2E : INFINITY;
      drow[mt][r] = ok ? Dg[((int64_t)b * NH + h) * T + row] : 0.0f;
      doc_r[mt][r] = doc && ok ? doc[row] : INT32_MIN;
    }
  float dqa[MT][HD / 8][4];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int i = 0; i < HD / 8; i++)
      dqa[mt][i][0] = dqa[mt][i][1] = dqa[mt][i][2] = dqa[mt][i][3] = 0.0f;

  for (int nb = 0; nb < n_blocks; nb++) {
    const int buf = nb & 1;
    const bf16 *cK = sK + buf * BN * HD, *cV = sV + buf * BN * HD;
    /* One barrier a block: past it, block nb's tiles are in and every warp
     * is done with block nb - 1, the last reader of buffer buf ^ 1. */
    cp_async_wait<0>();
    __syncthreads();
    if (nb + 1 < n_blocks) {
      load_tile<BN, HD, NT>(sK + (buf ^ 1) * BN * HD, kb, (nb + 1) * BN, T, kstride);
      load_tile<BN, HD, NT>(sV + (buf ^ 1) * BN * HD, vb, (nb + 1) * BN, T, kstride);
    }
    cp_async_commit();
    const int n0 = nb * BN;
    if (p.causal && n0 > warp_last)
      continue; /* every p of this block is 0 for this warp's rows */

    /* S = Q K^T and dP = dO V^T, both (16 MT rows x BN keys). */
    float s[MT][BN / 8][4], dp[MT][BN / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
      for (int i = 0; i < BN / 8; i++)
#pragma unroll
        for (int c = 0; c < 4; c++)
          s[mt][i][c] = dp[mt][i][c] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
      uint32_t a[MT][4], ad[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; mt++) {
        ldsm_x4(a[mt], sQ + swz_ld<HD>(wrow + mt * 16 + rA, kk * 2, xA));
        ldsm_x4(ad[mt], sdO + swz_ld<HD>(wrow + mt * 16 + rA, kk * 2, xA));
      }
#pragma unroll
      for (int np = 0; np < BN / 16; np++) {
        uint32_t r[4], rv[4];
        ldsm_x4(r, cK + swz_ld<HD>(np * 16 + rB, kk * 2, xB));
        ldsm_x4(rv, cV + swz_ld<HD>(np * 16 + rB, kk * 2, xB));
        uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
        uint32_t v0[2] = {rv[0], rv[1]}, v1[2] = {rv[2], rv[3]};
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
          mma_bf16(s[mt][2 * np], a[mt], b0);
          mma_bf16(s[mt][2 * np + 1], a[mt], b1);
          mma_bf16(dp[mt][2 * np], ad[mt], v0);
          mma_bf16(dp[mt][2 * np + 1], ad[mt], v1);
        }
      }
    }

    /* dS = P (dP - D), P = exp2(s * sl2 - lse2), masked; then dQ += dS K. */
    const bool need_mask =
        n0 + BN > T || doc != nullptr || (p.causal && n0 + BN - 1 > m0 + wrow);
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
      for (int nt = 0; nt < BN / 8; nt++) {
#pragma unroll
        for (int c = 0; c < 4; c++) {
          const int r = c >> 1;
          float pv = exp2f(fmaf(s[mt][nt][c], sl2, -lrow[mt][r]));
          if (need_mask) {
            const int row = m0 + wrow + mt * 16 + lane / 4 + r * 8;
            const int col = n0 + nt * 8 + (lane % 4) * 2 + (c & 1);
            bool ok = col < T && (!p.causal || col <= row);
            if (ok && doc)
              ok = __ldg(doc + col) == doc_r[mt][r];
            pv = ok ? pv : 0.0f;
          }
          s[mt][nt][c] = pv * (dp[mt][nt][c] - drow[mt][r]);
        }
      }
    }
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++) {
      uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; mt++) {
        a[mt][0] = pack_bf16(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        a[mt][1] = pack_bf16(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        a[mt][2] = pack_bf16(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        a[mt][3] = pack_bf16(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int np = 0; np < HD / 16; np++) {
        uint32_t r[4];
        ldsm_x4_t(r, cK + swz_ld<HD>(kk * 16 + rA, np * 2, xA));
        uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
          mma_bf16(dqa[mt][2 * np], a[mt], b0);
          mma_bf16(dqa[mt][2 * np + 1], a[mt], b1);
        }
      }
    }
  }
  cp_async_wait<0>();

#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const int row = m0 + wrow + mt * 16 + lane / 4 + r * 8;
      if (row < T) {
        bf16 *d = dq + ((int64_t)(b * T + row) * NH + h) * HD + (lane % 4) * 2;
#pragma unroll
        for (int dt = 0; dt < HD / 8; dt++)
          *reinterpret_cast<uint32_t *>(d + dt * 8) =
              pack_bf16(dqa[mt][dt][2 * r] * p.scale, dqa[mt][dt][2 * r + 1] * p.scale);
      }
    }
}

template <int HD, int MT, int NW, int BN, int MINB>
static int launch_bwd_dq(const flash_params *p, const void *q, const void *k, const void *v,
                         const void *dout, const float *lse, const float *D, void *dq,
                         cudaStream_t stream) {
  constexpr int BM = NW * 16 * MT;
  const int smem = dq_smem_bytes<HD, MT, NW, BN>();
  auto kern = flash_bwd_dq_only_kernel<HD, MT, NW, BN, MINB>;
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e != cudaSuccess)
    return (int)e;
  dim3 grid(p->NH * p->B, (p->T + BM - 1) / BM);
  kern<<<grid, NW * 32, smem, stream>>>(*p, (const bf16 *)q, (const bf16 *)k, (const bf16 *)v,
                                        (const bf16 *)dout, lse, D, (bf16 *)dq);
  return (int)cudaGetLastError();
}

#endif
