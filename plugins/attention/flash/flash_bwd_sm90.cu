/* The production backward for Hopper: the kernel of flash_bwd_sm90.cuh with
 * the tile table's entries (bwd90_tiles). */
#include "flash_bwd_sm90.cuh"

extern "C" int flash_bwd_sm90(const flash_params *p, const void *q, const void *k, const void *v,
                              const void *dout, const float *lse, const float *D, float *dq_acc,
                              void *dk, void *dv, void *stream) {
  return bwd90_run<bwd90_tiles<64>, bwd90_tiles<128>>(p, q, k, v, dout, lse, D, dq_acc, dk, dv,
                                                      stream);
}
