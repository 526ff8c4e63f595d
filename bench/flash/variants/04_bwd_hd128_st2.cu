/* 04, tile sweep: the hd-128 backward with 2 Q / dO stages instead of 3 (dK
 * and dV then leave through half a stage each, as at hd 64). */
#include "flash_bwd_sm90.cuh"

struct bwd128_st2 : bwd90_tiles<128> {
  static constexpr int ST = 2;
};

extern "C" int flash_bwd_sm90(const flash_params *p, const void *q, const void *k, const void *v,
                              const void *dout, const float *lse, const float *D, float *dq_acc,
                              void *dk, void *dv, void *stream) {
  return bwd90_run<bwd90_tiles<64>, bwd128_st2>(p, q, k, v, dout, lse, D, dq_acc, dk, dv, stream);
}
