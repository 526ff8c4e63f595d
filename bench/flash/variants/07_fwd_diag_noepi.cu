/* 07, diagnostic (wrong results): the forward with its epilogue (O and lse
 * stores) compiled as in production but skipped at run time (p.B is never
 * negative, which the compiler cannot know): what running the epilogue
 * costs, 3-14 % at T 2048 and nothing at T 8192 on an H100
 * (bench/results/2026-11-24-flash-fwd2.md). Leaving the stores out of the
 * code instead lets ptxas delete the P V products, whose result is then
 * never read: no measure of the stores. */
#include "flash_fwd_sm90.cuh"

template <int HD> struct fwd_noepi : fwd90_tiles<HD> {
  template <class C>
  static __device__ __forceinline__ void
  epilogue(const float (&o)[C::HD / 2], const float (&m)[2], const float (&l)[2], int row_lo, int b,
           int h, int hd, int lane, const flash_params &p, bf16 *out, float *lse) {
    if (p.B < 0)
      fwd90_seams::epilogue<C>(o, m, l, row_lo, b, h, hd, lane, p, out, lse);
  }
};

extern "C" int flash_fwd_sm90(const flash_params *p, const void *q, const void *k, const void *v,
                              void *out, float *lse, void *stream) {
  return fwd90_run<fwd_noepi<64>, fwd_noepi<128>>(p, q, k, v, out, lse, stream);
}
