/* 12, diagnostic (correct results, slower): per backward CTA the SM clock at
 * points of its life, read back with flash_bwd90_diag_times by
 * bench/flash/diag_cta.py: [0] entry, [1] K / V arrived, [2] first step
 * done (0 with one step), [3] all steps done, [4] dK / dV stores issued (as
 * seen by consumer thread 128), [5] the dQ writer's last reduce-add complete
 * (0 without writer warps), [6] step count << 32 | SM id, [7] global timer
 * at entry. Found the dK / dV stores from registers holding the hd-128 CTA
 * for 10,900 cycles (bench/results/2026-11-24-flash-s10.md). */
#include "flash_bwd_sm90.cuh"

#define TIMES_N 8
#define TIMES_CTAS 32768
static __device__ unsigned long long bwd90_dt[TIMES_CTAS * TIMES_N];

template <int HD> struct bwd_times : bwd90_tiles<HD> {
  static __device__ __forceinline__ void mark(int at, int arg) {
    const unsigned cta = blockIdx.y * gridDim.x + blockIdx.x;
    if (cta >= TIMES_CTAS)
      return;
    unsigned long long *t = bwd90_dt + cta * TIMES_N;
    const bool consumer = threadIdx.x == 128;
    if (at == BWD90_AT_ENTRY) {
      unsigned long long gt;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(gt));
      t[0] = clock64();
      t[2] = t[5] = 0; /* written later only with a second step / writer warps */
      t[7] = gt;
    } else if (at == BWD90_AT_KV && consumer) {
      unsigned smid;
      asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
      t[1] = clock64();
      t[6] = ((unsigned long long)arg << 32) | smid;
    } else if (at == BWD90_AT_STEP && consumer && arg == 1) {
      t[2] = clock64();
    } else if (at == BWD90_AT_STEPS_DONE && consumer) {
      t[3] = clock64();
    } else if (at == BWD90_AT_END && consumer) {
      t[4] = clock64();
    } else if (at == BWD90_AT_DQ_DONE && threadIdx.x == 32) {
      t[5] = clock64();
    }
  }
};

extern "C" int flash_bwd_sm90(const flash_params *p, const void *q, const void *k, const void *v,
                              const void *dout, const float *lse, const float *D, float *dq_acc,
                              void *dk, void *dv, void *stream) {
  return bwd90_run<bwd_times<64>, bwd_times<128>>(p, q, k, v, dout, lse, D, dq_acc, dk, dv, stream);
}

extern "C" __attribute__((visibility("default"))) int flash_bwd90_diag_times(void *host,
                                                                             size_t bytes) {
  return (int)cudaMemcpyFromSymbol(host, bwd90_dt, bytes);
}
