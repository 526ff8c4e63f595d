/* Internal to the sgd plugin: the per-step scalars shared by the CPU loop
 * (sgd.c) and the CUDA kernel (sgd.cu), and the CUDA entry points. */
#ifndef FSDPC_PLUGIN_SGD_CUDA_H
#define FSDPC_PLUGIN_SGD_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "fsdpc/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Per-step scalars, already rounded to fp32 the way PyTorch rounds them. */
typedef struct sgd_scalars {
  float grad_scale;
  float weight_decay;
  float momentum;
  float w;      /* 1 - dampening */
  float neg_lr; /* -lr */
  int momentum_on, first, nesterov;
} sgd_scalars;

#ifdef FSDPC_WITH_CUDA
/* Enqueues the update of every tensor on stream (cudaStream_t); device
 * pointers. On failure writes one line into msg and returns a status. */
int32_t sgd_cuda_step(const fsdpc_optim_tensor *t, uint32_t n_tensors, const sgd_scalars *sc,
                      void *stream, char *msg, size_t cap);
/* Zero-fills n_floats of device state; INVALID_USAGE if not device memory. */
int32_t sgd_cuda_zero(float *state, uint64_t n_floats, void *stream, char *msg, size_t cap);
#endif

#ifdef __cplusplus
}
#endif
#endif
