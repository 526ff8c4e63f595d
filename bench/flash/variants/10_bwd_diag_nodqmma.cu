/* 10, diagnostic (wrong dq): the backward without the dQ products (zeros
 * are staged and added): +4-12 % (bench/results/2026-11-24-flash-s8.md,
 * variant dnodq). */
#include "flash_bwd_sm90.cuh"

template <int HD> struct bwd_nodqmma : bwd90_tiles<HD> {
  template <class C>
  static __device__ __forceinline__ void dq_product(float (&)[32], const bf16 *, const bf16 *) {}
};

extern "C" int flash_bwd_sm90(const flash_params *p, const void *q, const void *k, const void *v,
                              const void *dout, const float *lse, const float *D, float *dq_acc,
                              void *dk, void *dv, void *stream) {
  return bwd90_run<bwd_nodqmma<64>, bwd_nodqmma<128>>(p, q, k, v, dout, lse, D, dq_acc, dk, dv,
                                                      stream);
}
