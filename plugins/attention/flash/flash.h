/* Launchers of the flash attention kernels (flash_fwd.cu, flash_bwd.cu),
 * called by the plugin's C face (attn_flash.c). All pointers are device
 * memory; shapes are already checked (HD 64, 80, 96, 128 or 256 (80 and 96
 * on sm_90 only), NH % KVH == 0). Head dim 256 and soft-capping (HD 64, 128,
 * 256) run the mma.sync kernels (flash_fwd.cu, flash_bwd.cu) on every
 * device, a Hopper included, with the cap compiled into their SOFTCAP twins
 * only; everything else on a Hopper runs the sm_90a kernels. Each
 * returns a cudaError_t as int (0 = success) after enqueueing on stream.
 *
 * Layouts: q, out, dout, dq (B, T, NH, HD) bf16; k, v, dk, dv (B, T, KVH, HD)
 * bf16; lse (B, NH, T) fp32 natural-log sum of exp of the scaled scores; doc
 * (B, T) int32 document ids or NULL. A sliding window is one more mask on
 * the blocks it cuts (blocks wholly outside it are computed and masked, not
 * skipped); the sm_90a kernels have it compiled in only in the windowed
 * twins that a shape with a window runs, so that those without one are
 * unchanged. */
#ifndef FSDPC_FLASH_H
#define FSDPC_FLASH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct flash_params {
  int B, T, NH, KVH, HD;
  int causal;
  float scale;
  const int32_t *doc; /* (B, T) or NULL */
  int window;         /* sliding window: key j visible to query i iff i - j < window; 0 = none */
  float softcap;      /* logit soft-cap c: s -> c tanh(s / c) before the mask; 0 = none */
} flash_params;

/* Bytes of the backward workspace: dq in fp32 (B, T, NH, HD), then the row
 * dots D = rowsum(dO * O) (B, NH, T); each 256-byte aligned. */
uint64_t flash_bwd_workspace_bytes(const flash_params *p);

/* The formula behind it; plain C, so that a build without CUDA still sizes a
 * CUDA run (the planner on a machine without nvcc). */
static inline uint64_t flash_align256(uint64_t x) {
  return (x + 255) / 256 * 256;
}
static inline uint64_t flash_bwd_workspace_for(const flash_params *p) {
  uint64_t rows = (uint64_t)p->B * p->T * p->NH;
  return flash_align256(rows * p->HD * sizeof(float)) + flash_align256(rows * sizeof(float));
}

int flash_fwd(const flash_params *p, const void *q, const void *k, const void *v, void *out,
              float *lse, void *stream);

/* The two forward implementations flash_fwd dispatches to: wgmma + TMA
 * (sm_90a, flash_fwd_sm90.cuh) and mma.sync (flash_fwd.cu). */
int flash_fwd_sm90(const flash_params *p, const void *q, const void *k, const void *v, void *out,
                   float *lse, void *stream);
int flash_fwd_mma(const flash_params *p, const void *q, const void *k, const void *v, void *out,
                  float *lse, void *stream);

/* 1 when the current device is a Hopper (compute capability 9.0), which runs
 * the sm_90a kernels; 0 otherwise (the mma.sync ones). */
int flash_is_sm90(void);

/* 1 when the shape runs the sm_90a kernels: a Hopper, head dim <= 128 and
 * no soft-cap (those have no cap, nor tiles for 256). */
int flash_uses_sm90(const flash_params *p);

/* The main backward kernel for sm_90a (flash_bwd_sm90.cuh): dk, dv and the
 * fp32 dq accumulator (zeroed before) from the row dots D (B, NH, T). */
int flash_bwd_sm90(const flash_params *p, const void *q, const void *k, const void *v,
                   const void *dout, const float *lse, const float *D, float *dq_acc, void *dk,
                   void *dv, void *stream);

int flash_bwd(const flash_params *p, const void *q, const void *k, const void *v, const void *out,
              const void *dout, const float *lse, void *dq, void *dk, void *dv, void *workspace,
              void *stream);

/* 0 when the current device can run the kernels (compute capability 9.0);
 * otherwise a cudaError_t, or -1 with *cc_major/minor set to the device's. */
int flash_device_check(int *cc_major, int *cc_minor);

const char *flash_error_string(int err);

#ifdef __cplusplus
}
#endif
#endif
