/* Internal to the adamw plugin: the per-step scalars shared by the CPU loop
 * (adamw.c) and the CUDA kernel (adamw.cu), and the CUDA entry points. */
#ifndef FSDPC_PLUGIN_ADAMW_CUDA_H
#define FSDPC_PLUGIN_ADAMW_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "fsdpc/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Per-step scalars, already rounded to fp32 the way PyTorch rounds them. */
typedef struct adamw_scalars {
  float grad_scale;
  float decay_factor; /* 1 - lr*wd */
  float w1;           /* lerp weight 1 - b1 */
  float beta2, w2;    /* b2 and 1 - b2 */
  float bc2_sqrt;     /* sqrt(1 - b2^t) */
  float eps;
  float neg_step_size; /* -lr / (1 - b1^t) */
} adamw_scalars;

#ifdef FSDPC_WITH_CUDA
/* Enqueues the update of every tensor on stream (a cudaStream_t; NULL = the
 * legacy default stream); pointers are device memory. On failure writes one
 * line into msg and returns a status. */
int32_t adamw_cuda_step(const fsdpc_optim_tensor *t, uint32_t n_tensors, const adamw_scalars *sc,
                        void *stream, char *msg, size_t cap);
/* Zero-fills n_floats of device state on stream; INVALID_USAGE if state is
 * not device memory. */
int32_t adamw_cuda_zero(float *state, uint64_t n_floats, void *stream, char *msg, size_t cap);
#endif

#ifdef __cplusplus
}
#endif
#endif
