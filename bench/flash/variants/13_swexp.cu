/* 13: one in SW_K of the probabilities' exp2s, forward and backward, on the
 * FMA pipe (exp2_fma, flash_exp2.cuh) instead of the exp unit, as
 * FlashAttention-4 does on Blackwell: the forward's column pairs i with
 * i % SW_K == SW_K - 1, the backward's query groups i with i % SW_K == 0.
 * On an H200 it lost or tied at every k tried (1, 2, 4; hd 64 and 128):
 * about nine issued instructions per exp2 against one MUFU.EX2, so the
 * bound is likely instruction issue (bench/results/2026-11-24-flash-swexp.md).
 * Edit SW_K to sweep. */
#include "flash_bwd_sm90.cuh"
#include "flash_exp2.cuh"
#include "flash_fwd_sm90.cuh"

#define SW_K 2

template <int HD> struct fwd_swexp : fwd90_tiles<HD> {
  static __device__ __forceinline__ float prob_exp2(float x, int i, int e) {
    return i % SW_K == SW_K - 1 ? exp2_fma(x) : exp2f(x);
  }
};
template <int HD> struct bwd_swexp : bwd90_tiles<HD> {
  static __device__ __forceinline__ float prob_exp2(float x, int i) {
    return i % SW_K == 0 ? exp2_fma(x) : exp2f(x);
  }
};

extern "C" int flash_fwd_sm90(const flash_params *p, const void *q, const void *k, const void *v,
                              void *out, float *lse, void *stream) {
  return fwd90_run<fwd_swexp<64>, fwd_swexp<128>>(p, q, k, v, out, lse, stream);
}

extern "C" int flash_bwd_sm90(const flash_params *p, const void *q, const void *k, const void *v,
                              const void *dout, const float *lse, const float *D, float *dq_acc,
                              void *dk, void *dv, void *stream) {
  return bwd90_run<bwd_swexp<64>, bwd_swexp<128>>(p, q, k, v, dout, lse, D, dq_acc, dk, dv, stream);
}
