/* 11, diagnostic (wrong dq, and a race): the backward without the named
 * barrier a step before dQ, so dQ reads a dS^T the other warpgroup may not
 * have written yet: +1-5 % (bench/results/2026-11-24-flash-s8.md, variant
 * dnosync). */
#include "flash_bwd_sm90.cuh"

template <int HD> struct bwd_nosync : bwd90_tiles<HD> {
  static __device__ __forceinline__ void ds_barrier() {}
};

extern "C" int flash_bwd_sm90(const flash_params *p, const void *q, const void *k, const void *v,
                              const void *dout, const float *lse, const float *D, float *dq_acc,
                              void *dk, void *dv, void *stream) {
  return bwd90_run<bwd_nosync<64>, bwd_nosync<128>>(p, q, k, v, dout, lse, D, dq_acc, dk, dv,
                                                    stream);
}
