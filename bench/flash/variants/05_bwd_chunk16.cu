/* 05, schedule sweep: the backward's CTAs in fixed chunks of 16 (batch, kv
 * head) pairs, as before session 9; at T 8192 with GQA 4 that keeps 256 MiB
 * of fp32 dq rows in flight and sends the reduce-adds to DRAM (chunks sized
 * to 32 MiB: +3-4 %, bench/results/2026-11-24-flash-s9.md). */
#include "flash_bwd_sm90.cuh"

template <int HD> struct bwd_chunk16 : bwd90_tiles<HD> {
  static constexpr int L2_DQ_MIB = 1 << 20; /* any size: always CHUNK_MAX pairs */
};

extern "C" int flash_bwd_sm90(const flash_params *p, const void *q, const void *k, const void *v,
                              const void *dout, const float *lse, const float *D, float *dq_acc,
                              void *dk, void *dv, void *stream) {
  return bwd90_run<bwd_chunk16<64>, bwd_chunk16<128>>(p, q, k, v, dout, lse, D, dq_acc, dk, dv,
                                                      stream);
}
