/* 01, tile sweep: the hd-64 forward with two consumer warpgroups (BM 128,
 * 224 registers each) taking turns (ping-pong), the layout before session 8;
 * three without ping-pong measured +5-13 % (bench/results/2026-11-24-flash-s8.md,
 * variants nc3 / pp64). */
#include "flash_fwd_sm90.cuh"

struct fwd64_two_wg : fwd90_tiles<64> {
  static constexpr int NC = 2;
  static constexpr bool PP = true;
  static constexpr int REG_CONSUMER = 224;
};

extern "C" int flash_fwd_sm90(const flash_params *p, const void *q, const void *k, const void *v,
                              void *out, float *lse, void *stream) {
  return fwd90_run<fwd64_two_wg, fwd90_tiles<128>>(p, q, k, v, out, lse, stream);
}
