/* SGD plugin, CUDA path: the same per-element update as sgd.c (same fp32
 * operations in the same order, built with -fmad=false so nothing is
 * contracted into multiply-adds), over many tensors per launch: up to MT_MAX
 * tensors in the parameter block, one thread block per MT_CHUNK elements. */
#include <cuda_runtime.h>
#include <stdio.h>

#include "sgd_cuda.h"

#define MT_MAX 48
#define MT_CHUNK 8192
#define MT_THREADS 256

struct mt_args {
  float *p[MT_MAX];       // (numel) fp32 master values
  const float *g[MT_MAX]; // (numel) fp32 gradient
  float *buf[MT_MAX];     // (numel) momentum_buffer, or NULL without momentum
  uint64_t numel[MT_MAX];
  uint32_t chunk_start[MT_MAX + 1];
  int32_t decay[MT_MAX];
  int32_t n;
};

static __global__ void sgd_mt_kernel(const __grid_constant__ mt_args a, const sgd_scalars sc) {
  int k = 0;
  while (k + 1 < a.n && blockIdx.x >= a.chunk_start[k + 1])
    k++;
  const uint64_t lo = (uint64_t)(blockIdx.x - a.chunk_start[k]) * MT_CHUNK;
  const uint64_t hi = lo + MT_CHUNK < a.numel[k] ? lo + MT_CHUNK : a.numel[k];
  float *p = a.p[k], *buf = a.buf[k];
  const float *g = a.g[k];
  const bool decay = a.decay[k];
  for (uint64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    float d = g[i] * sc.grad_scale;
    if (decay)
      d = d + sc.weight_decay * p[i];
    if (sc.momentum_on) {
      const float b = sc.first ? d : buf[i] * sc.momentum + sc.w * d;
      buf[i] = b;
      d = sc.nesterov ? d + sc.momentum * b : b;
    }
    p[i] = p[i] + sc.neg_lr * d;
  }
}

static int32_t cuda_fail(cudaError_t e, const char *what, char *msg, size_t cap) {
  snprintf(msg, cap, "sgd: %s failed on the GPU: %s", what, cudaGetErrorString(e));
  return FSDPC_SYSTEM_ERROR;
}

static int32_t launch(const mt_args &a, const sgd_scalars &sc, cudaStream_t s, char *msg,
                      size_t cap) {
  const uint32_t blocks = a.chunk_start[a.n];
  if (blocks == 0)
    return FSDPC_OK;
  sgd_mt_kernel<<<blocks, MT_THREADS, 0, s>>>(a, sc);
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? FSDPC_OK : cuda_fail(e, "launching the update", msg, cap);
}

extern "C" int32_t sgd_cuda_step(const fsdpc_optim_tensor *t, uint32_t n_tensors,
                                 const sgd_scalars *sc, void *stream, char *msg, size_t cap) {
  cudaStream_t s = (cudaStream_t)stream;
  mt_args a;
  a.n = 0;
  a.chunk_start[0] = 0;
  for (uint32_t k = 0; k < n_tensors; k++) {
    if (t[k].numel == 0)
      continue;
    const uint64_t chunks = (t[k].numel + MT_CHUNK - 1) / MT_CHUNK;
    if (chunks > 0x7fffffffu - a.chunk_start[a.n]) {
      snprintf(msg, cap, "sgd: tensor %u has %llu elements, too many for one launch", k,
               (unsigned long long)t[k].numel);
      return FSDPC_UNSUPPORTED;
    }
    const int j = a.n;
    a.p[j] = t[k].param;
    a.g[j] = t[k].grad;
    a.buf[j] = sc->momentum_on ? t[k].state : NULL;
    a.numel[j] = t[k].numel;
    a.decay[j] = t[k].decay && sc->weight_decay != 0.0f;
    a.chunk_start[j + 1] = a.chunk_start[j] + (uint32_t)chunks;
    a.n = j + 1;
    if (a.n == MT_MAX) {
      int32_t st = launch(a, *sc, s, msg, cap);
      if (st != FSDPC_OK)
        return st;
      a.n = 0;
    }
  }
  return a.n ? launch(a, *sc, s, msg, cap) : FSDPC_OK;
}

extern "C" int32_t sgd_cuda_zero(float *state, uint64_t n_floats, void *stream, char *msg,
                                 size_t cap) {
  if (n_floats == 0)
    return FSDPC_OK;
  cudaPointerAttributes at;
  cudaError_t e = cudaPointerGetAttributes(&at, state);
  if (e != cudaSuccess)
    return cuda_fail(e, "checking the state pointer", msg, cap);
  if (at.type != cudaMemoryTypeDevice && at.type != cudaMemoryTypeManaged) {
    snprintf(msg, cap, "sgd: init_state on CUDA got a state pointer that is not device memory");
    return FSDPC_INVALID_USAGE;
  }
  e = cudaMemsetAsync(state, 0, n_floats * sizeof(float), (cudaStream_t)stream);
  return e == cudaSuccess ? FSDPC_OK : cuda_fail(e, "zeroing the state", msg, cap);
}
