/* 09, diagnostic (wrong dq): the backward without the dQ reduce-adds (dQ is
 * still computed and staged): no faster in session 8, when only hd 64 had
 * them in the consumers (bench/results/2026-11-24-flash-s8.md, variant
 * dnored); here the writer warps of hd 128 skip them too. */
#include "flash_bwd_sm90.cuh"

template <int HD> struct bwd_nored : bwd90_tiles<HD> {
  static __device__ __forceinline__ void dq_reduce(const CUtensorMap *, const void *, int, int, int,
                                                   int) {}
};

extern "C" int flash_bwd_sm90(const flash_params *p, const void *q, const void *k, const void *v,
                              const void *dout, const float *lse, const float *D, float *dq_acc,
                              void *dk, void *dv, void *stream) {
  return bwd90_run<bwd_nored<64>, bwd_nored<128>>(p, q, k, v, dout, lse, D, dq_acc, dk, dv, stream);
}
