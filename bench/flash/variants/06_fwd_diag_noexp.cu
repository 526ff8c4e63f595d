/* 06, diagnostic (wrong results): the forward without the probabilities'
 * exp2 (the FFMA before it stays): what the exp unit costs. */
#include "flash_fwd_sm90.cuh"

template <int HD> struct fwd_noexp : fwd90_tiles<HD> {
  static __device__ __forceinline__ float prob_exp2(float x, int, int) {
    return x;
  }
};

extern "C" int flash_fwd_sm90(const flash_params *p, const void *q, const void *k, const void *v,
                              void *out, float *lse, void *stream) {
  return fwd90_run<fwd_noexp<64>, fwd_noexp<128>>(p, q, k, v, out, lse, stream);
}
