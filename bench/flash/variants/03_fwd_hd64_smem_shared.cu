/* 03, tile sweep: the hd-64 forward with shared-typed shared-memory pointers
 * (32-bit st.shared / ld.shared), as the hd-128 forward and the backward
 * have; generic pointers measured faster once and the same once
 * (bench/results/2026-11-24-flash-s8.md). */
#include "flash_fwd_sm90.cuh"

struct fwd64_smem_shared : fwd90_tiles<64> {
  static constexpr bool SMEM_GENERIC = false;
};

extern "C" int flash_fwd_sm90(const flash_params *p, const void *q, const void *k, const void *v,
                              void *out, float *lse, void *stream) {
  return fwd90_run<fwd64_smem_shared, fwd90_tiles<128>>(p, q, k, v, out, lse, stream);
}
