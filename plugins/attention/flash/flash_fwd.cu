/* Flash attention forward: out = softmax(Q K^T * scale + mask) V, tiled, with
 * an online softmax, so that no (T, T) matrix ever reaches global memory.
 * flash_fwd dispatches: a Hopper (compute capability 9.0) runs the wgmma
 * kernel of flash_fwd_sm90.cuh, any other device the mma.sync kernel of this
 * file. The build targets sm_90a only (and the plugin refuses other
 * devices), so today the mma.sync kernel runs only what the sm_90a ones do
 * not (head dim 256, soft-capping; see below): it is the plain reading of
 * the algorithm and the start for another architecture.
 *
 * One CTA of NW warps owns BM = NW * 16 * MT query rows of one (batch,
 * head); each warp owns 16 * MT of them (MT = 2: two 16-row MMA tiles, so
 * that every K/V fragment read from shared memory feeds two MMAs;
 * shared-memory bandwidth, not the tensor cores, limits mma.sync attention
 * at 16 rows a warp). It streams blocks of BN keys and values (double
 * buffered through cp.async) of the kv head that the query head reads (GQA:
 * h / (NH / KVH); K and V are never repeated in memory). S = Q K^T and
 * O += P V run on the tensor cores (mma.sync m16n8k16 bf16, fp32
 * accumulators); P stays in registers between the two products. Causal
 * CTAs start heaviest-first over the whole grid (grid y counts down the
 * query blocks, x walks (head, batch)): a shorter tail.
 *
 * Saved for the backward: lse (B, NH, T) fp32, the natural log of
 * sum_j exp(scale * q_i . k_j) over the keys query i may see (of the capped
 * scores with a soft-cap).
 *
 * Head dim 256 and soft-capping run here on a Hopper too (flash_uses_sm90):
 * the sm_90a kernels have neither. */
#include <cuda_runtime.h>
#include <math.h>

#include "flash.h"
#include "flash_common.cuh"

/* The tile table: per head dim, MT (16-row m-tiles per warp), NW (warps per
 * CTA), BN (keys per block), MINB (CTAs per SM the registers are budgeted
 * for); the fastest measured on an H200
 * (bench/results/2026-11-21-flash-attention-s2.md). */
template <int HD> struct fwd_mma_tiles;
template <> struct fwd_mma_tiles<64> { static constexpr int MT = 2, NW = 4, BN = 128, MINB = 2; };
template <> struct fwd_mma_tiles<128> { static constexpr int MT = 2, NW = 4, BN = 64, MINB = 2; };
/* Not measured: one m-tile a warp keeps O at 128 registers a thread; 160 KB
 * of shared memory (Q 32 KB, K and V double buffered 128 KB). */
template <> struct fwd_mma_tiles<256> { static constexpr int MT = 1, NW = 4, BN = 64, MINB = 1; };

template <int HD, int MT, int NW, int BN> static constexpr int fwd_smem_bytes() {
  return (NW * 16 * MT * HD + 4 * BN * HD) * (int)sizeof(bf16);
}

/* SOFTCAP: each score s becomes softcap * tanh(scale * s / softcap) before
 * the mask (Gemma 2); a twin of its own, so the kernels without it are
 * unchanged. */
template <int HD, int MT, int NW, int BN, int MINB, bool SOFTCAP>
static __global__ void __launch_bounds__(NW * 32, MINB)
    flash_fwd_kernel(const flash_params p, const bf16 *__restrict__ q, const bf16 *__restrict__ k,
                     const bf16 *__restrict__ v, bf16 *__restrict__ out, float *__restrict__ lse) {
  constexpr int BM = NW * 16 * MT, NT = NW * 32;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16 *sQ = reinterpret_cast<bf16 *>(smem_raw); // (BM, HD)
  bf16 *sK = sQ + BM * HD;                       // (2, BN, HD)
  bf16 *sV = sK + 2 * BN * HD;                   // (2, BN, HD)

  const int T = p.T, NH = p.NH, KVH = p.KVH;
  /* Causal rows near the end see the most keys: start them first. */
  const int m_block = gridDim.y - 1 - blockIdx.y;
  const int h = blockIdx.x % NH, b = blockIdx.x / NH, g = h / (NH / KVH);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int m0 = m_block * BM, wrow = warp * 16 * MT; // this warp's first row in the tile
  const int64_t qstride = (int64_t)NH * HD, kstride = (int64_t)KVH * HD;
  const bf16 *qb = q + (int64_t)b * T * qstride + h * HD; // rows t: (T, NH*HD)
  const bf16 *kb = k + (int64_t)b * T * kstride + g * HD; // rows t: (T, KVH*HD)
  const bf16 *vb = v + (int64_t)b * T * kstride + g * HD;
  const int32_t *doc = p.doc ? p.doc + (int64_t)b * T : nullptr; // (T)
  /* Scores stay unscaled; the scale and log2(e) go into one FFMA with the
   * running max before exp2: p = exp2(s * sl2 - m), m in log2 units. A
   * capped score already carries the scale: sl2 is log2(e) alone. */
  const float sl2 = SOFTCAP ? FLASH_LOG2E : p.scale * FLASH_LOG2E;
  const float cap_in = SOFTCAP ? p.scale / p.softcap : 0.0f;

  const int kv_end = p.causal ? min(T, m0 + BM) : T;
  const int n_blocks = (kv_end + BN - 1) / BN;
  /* Causal: this warp's last row; key blocks past it are skipped. */
  const int warp_last = m0 + wrow + 16 * MT - 1;
  /* ldmatrix lane patterns: A operands and transposed loads (rA, xA), B
   * operands (rB, xB); see swz_ld. */
  const int rA = (lane & 7) + ((lane >> 3) & 1) * 8, xA = (lane >> 4) ^ (lane & 7);
  const int rB = (lane & 7) + (lane >> 4) * 8, xB = ((lane >> 3) & 1) ^ (lane & 7);

  load_tile<BM, HD, NT>(sQ, qb, m0, T, qstride);
  load_tile<BN, HD, NT>(sK, kb, 0, T, kstride);
  load_tile<BN, HD, NT>(sV, vb, 0, T, kstride);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  float o[MT][HD / 8][4];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int i = 0; i < HD / 8; i++)
      o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.0f;
  float mrow[MT][2], lrow[MT][2]; // running max (log2 units, scaled) and partial row sum
  int doc_r[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const int row = m0 + wrow + mt * 16 + lane / 4 + r * 8;
      mrow[mt][r] = -INFINITY;
      lrow[mt][r] = 0.0f;
      doc_r[mt][r] = doc && row < T ? doc[row] : INT32_MIN;
    }

  for (int nb = 0; nb < n_blocks; nb++) {
    const int buf = nb & 1;
    const bf16 *cK = sK + buf * BN * HD, *cV = sV + buf * BN * HD;
    if (nb + 1 < n_blocks) {
      load_tile<BN, HD, NT>(sK + (buf ^ 1) * BN * HD, kb, (nb + 1) * BN, T, kstride);
      load_tile<BN, HD, NT>(sV + (buf ^ 1) * BN * HD, vb, (nb + 1) * BN, T, kstride);
    }
    cp_async_commit();
    const int n0 = nb * BN;

    /* Warp-uniform: a causal block wholly above this warp's rows adds
     * nothing (every p would be 0), so the warp only keeps the barrier. */
    if (!p.causal || n0 <= warp_last) {
      float s[MT][BN / 8][4];
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int i = 0; i < BN / 8; i++)
          s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < HD / 16; kk++) {
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
          ldsm_x4(a[mt], sQ + swz_ld<HD>(wrow + mt * 16 + rA, kk * 2, xA));
#pragma unroll
        for (int np = 0; np < BN / 16; np++) {
          uint32_t r[4];
          ldsm_x4(r, cK + swz_ld<HD>(np * 16 + rB, kk * 2, xB));
          uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
#pragma unroll
          for (int mt = 0; mt < MT; mt++) {
            mma_bf16(s[mt][2 * np], a[mt], b0);
            mma_bf16(s[mt][2 * np + 1], a[mt], b1);
          }
        }
      }

      if (SOFTCAP) {
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
          for (int nt = 0; nt < BN / 8; nt++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
              float dt; /* the backward's */
              s[mt][nt][c] = p.softcap * softcap_tanh(s[mt][nt][c] * cap_in, dt);
            }
      }

      const bool need_mask = n0 + BN > T || doc != nullptr ||
                             (p.causal && n0 + BN - 1 > m0 + wrow) ||
                             (p.window > 0 && warp_last - n0 >= p.window);
#pragma unroll
      for (int mt = 0; mt < MT; mt++) {
        if (need_mask) {
#pragma unroll
          for (int nt = 0; nt < BN / 8; nt++) {
#pragma unroll
            for (int c = 0; c < 4; c++) {
              const int row = m0 + wrow + mt * 16 + lane / 4 + (c >> 1) * 8;
              const int col = n0 + nt * 8 + (lane % 4) * 2 + (c & 1);
              bool ok =
                  col < T && (!p.causal || col <= row) && (p.window == 0 || row - col < p.window);
              if (ok && doc)
                ok = __ldg(doc + col) == doc_r[mt][c >> 1];
              s[mt][nt][c] = ok ? s[mt][nt][c] : -INFINITY;
            }
          }
        }

        /* Online softmax over the two rows this thread holds in this m-tile;
         * a quad of lanes shares a row. A row with no visible key yet keeps
         * max -inf and uses 0 in its place so that exp2 gives 0, not NaN. */
#pragma unroll
        for (int r = 0; r < 2; r++) {
          float mx = -INFINITY;
#pragma unroll
          for (int nt = 0; nt < BN / 8; nt++)
            mx = fmaxf(mx, fmaxf(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          mx = fmaxf(mrow[mt][r], mx * sl2); // sl2 > 0: the max commutes with it
          const float m_use = mx == -INFINITY ? 0.0f : mx;
          const float alpha = exp2f(mrow[mt][r] - m_use);
          mrow[mt][r] = mx;
          float sum = 0.0f;
#pragma unroll
          for (int nt = 0; nt < BN / 8; nt++) {
            s[mt][nt][2 * r] = exp2f(fmaf(s[mt][nt][2 * r], sl2, -m_use));
            s[mt][nt][2 * r + 1] = exp2f(fmaf(s[mt][nt][2 * r + 1], sl2, -m_use));
            sum += s[mt][nt][2 * r] + s[mt][nt][2 * r + 1];
          }
          lrow[mt][r] = lrow[mt][r] * alpha + sum;
#pragma unroll
          for (int dt = 0; dt < HD / 8; dt++) {
            o[mt][dt][2 * r] *= alpha;
            o[mt][dt][2 * r + 1] *= alpha;
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
          ldsm_x4_t(r, cV + swz_ld<HD>(kk * 16 + rA, np * 2, xA));
          uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
#pragma unroll
          for (int mt = 0; mt < MT; mt++) {
            mma_bf16(o[mt][2 * np], a[mt], b0);
            mma_bf16(o[mt][2 * np + 1], a[mt], b1);
          }
        }
      }
    }
    cp_async_wait<0>();
    __syncthreads();
  }

#pragma unroll
  for (int mt = 0; mt < MT; mt++) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
      float l = lrow[mt][r];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      const int row = m0 + wrow + mt * 16 + lane / 4 + r * 8;
      if (row < T) {
        bf16 *orow = out + ((int64_t)(b * T + row) * NH + h) * HD + (lane % 4) * 2;
#pragma unroll
        for (int dt = 0; dt < HD / 8; dt++)
          *reinterpret_cast<uint32_t *>(orow + dt * 8) =
              pack_bf16(o[mt][dt][2 * r] * inv, o[mt][dt][2 * r + 1] * inv);
        if (lane % 4 == 0)
          lse[((int64_t)b * NH + h) * T + row] = (mrow[mt][r] + log2f(l)) * FLASH_LN2;
      }
    }
  }
}

template <int HD, bool SOFTCAP, int MT = fwd_mma_tiles<HD>::MT, int NW = fwd_mma_tiles<HD>::NW,
          int BN = fwd_mma_tiles<HD>::BN, int MINB = fwd_mma_tiles<HD>::MINB>
static int launch_fwd(const flash_params *p, const void *q, const void *k, const void *v, void *out,
                      float *lse, cudaStream_t stream) {
  constexpr int BM = NW * 16 * MT;
  const int smem = fwd_smem_bytes<HD, MT, NW, BN>();
  auto kern = flash_fwd_kernel<HD, MT, NW, BN, MINB, SOFTCAP>;
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e != cudaSuccess)
    return (int)e;
  dim3 grid(p->NH * p->B, (p->T + BM - 1) / BM);
  kern<<<grid, NW * 32, smem, stream>>>(*p, (const bf16 *)q, (const bf16 *)k, (const bf16 *)v,
                                        (bf16 *)out, lse);
  return (int)cudaGetLastError();
}

/* Hopper (9.0) runs the wgmma kernels of flash_fwd_sm90.cuh; any other device
 * the mma.sync kernels of this file and flash_bwd.cu. */
extern "C" int flash_is_sm90(void) {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
    return 0;
  return major == 9 && minor == 0;
}

extern "C" int flash_uses_sm90(const flash_params *p) {
  return p->HD <= 128 && !(p->softcap > 0.0f) && flash_is_sm90();
}

extern "C" int flash_fwd(const flash_params *p, const void *q, const void *k, const void *v,
                         void *out, float *lse, void *stream) {
  if (flash_uses_sm90(p))
    return flash_fwd_sm90(p, q, k, v, out, lse, stream);
  return flash_fwd_mma(p, q, k, v, out, lse, stream);
}

template <bool SOFTCAP>
static int fwd_mma_hd(const flash_params *p, const void *q, const void *k, const void *v, void *out,
                      float *lse, cudaStream_t st) {
  if (p->HD == 64)
    return launch_fwd<64, SOFTCAP>(p, q, k, v, out, lse, st);
  if (p->HD == 128)
    return launch_fwd<128, SOFTCAP>(p, q, k, v, out, lse, st);
  if (p->HD == 256)
    return launch_fwd<256, SOFTCAP>(p, q, k, v, out, lse, st);
  return (int)cudaErrorInvalidValue;
}

extern "C" int flash_fwd_mma(const flash_params *p, const void *q, const void *k, const void *v,
                             void *out, float *lse, void *stream) {
  cudaStream_t st = (cudaStream_t)stream;
  if (p->softcap > 0.0f)
    return fwd_mma_hd<true>(p, q, k, v, out, lse, st);
  return fwd_mma_hd<false>(p, q, k, v, out, lse, st);
}

extern "C" int flash_device_check(int *cc_major, int *cc_minor) {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess)
    e = cudaDeviceGetAttribute(cc_major, cudaDevAttrComputeCapabilityMajor, dev);
  if (e == cudaSuccess)
    e = cudaDeviceGetAttribute(cc_minor, cudaDevAttrComputeCapabilityMinor, dev);
  if (e != cudaSuccess)
    return (int)e;
  return *cc_major == 9 && *cc_minor == 0 ? 0 : -1;
}

extern "C" const char *flash_error_string(int err) {
  return cudaGetErrorString((cudaError_t)err);
}
