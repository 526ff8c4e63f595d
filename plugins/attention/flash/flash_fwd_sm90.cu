/* The production forward for Hopper: the kernel of flash_fwd_sm90.cuh with
 * the tile table's entries (fwd90_tiles). */
#include "flash_fwd_sm90.cuh"

extern "C" int flash_fwd_sm90(const flash_params *p, const void *q, const void *k, const void *v,
                              void *out, float *lse, void *stream) {
  return fwd90_run<fwd90_tiles<64>, fwd90_tiles<128>>(p, q, k, v, out, lse, stream);
}
