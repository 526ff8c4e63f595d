/* 02, tile sweep: the hd-64 forward with key blocks of 192 on variant 01's
 * layout (two consumer warpgroups of 224 registers with ping-pong, as in
 * session 7): fewer, larger S products and softmax passes a tile; against
 * 128-key blocks then -7 % at T 2048, +2 % at T 8192
 * (bench/results/2026-11-24-flash-fwd.md, h64bn192). On the tile table's
 * three warpgroups of 160 registers, 192-key blocks spill and serialise the
 * wgmmas (ptxas C7512). */
#include "flash_fwd_sm90.cuh"

struct fwd64_bn192 : fwd90_tiles<64> {
  static constexpr int NC = 2, BN = 192;
  static constexpr bool PP = true;
  static constexpr int REG_CONSUMER = 224;
};

extern "C" int flash_fwd_sm90(const flash_params *p, const void *q, const void *k, const void *v,
                              void *out, float *lse, void *stream) {
  return fwd90_run<fwd64_bn192, fwd90_tiles<128>>(p, q, k, v, out, lse, stream);
}
