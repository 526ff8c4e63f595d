/* AdamW plugin, CUDA path: the same per-element update as adamw.c (same
 * fp32 operations in the same order; this file is built with -fmad=false so
 * that no multiply-add is contracted, and division and sqrt are IEEE), over
 * many tensors per launch (multi-tensor apply).
 *
 * A launch takes up to MT_MAX tensors in its parameter block; each tensor is
 * cut into chunks of MT_CHUNK elements, one thread block per chunk, and a
 * block finds its tensor from the prefix sums of chunk counts. Tensors of
 * one call must not overlap (as on the CPU). */
#include <cuda_runtime.h>
#include <stdio.h>

#include "adamw_cuda.h"

#define MT_MAX 40
#define MT_CHUNK 8192
#define MT_THREADS 256

struct mt_args {
  float *p[MT_MAX];       // (numel) fp32 master values
  const float *g[MT_MAX]; // (numel) fp32 gradient
  float *m[MT_MAX];       // (numel) exp_avg
  float *v[MT_MAX];       // (numel) exp_avg_sq
  uint64_t numel[MT_MAX];
  uint32_t chunk_start[MT_MAX + 1]; /* prefix sums of chunks per tensor */
  int32_t decay[MT_MAX];
  int32_t n;
};

static __global__ void adamw_mt_kernel(const __grid_constant__ mt_args a, const adamw_scalars sc) {
  int k = 0;
  while (k + 1 < a.n && blockIdx.x >= a.chunk_start[k + 1])
    k++;
  const uint64_t lo = (uint64_t)(blockIdx.x - a.chunk_start[k]) * MT_CHUNK;
  const uint64_t hi = lo + MT_CHUNK < a.numel[k] ? lo + MT_CHUNK : a.numel[k];
  float *p = a.p[k], *m = a.m[k], *v = a.v[k];
  const float *g = a.g[k];
  const float df = a.decay[k] ? sc.decay_factor : 1.0f;
  const bool small_w1 = sc.w1 < 0.5f; /* torch.lerp picks its formula by the weight */
  const float w1c = 1.0f - sc.w1;
  for (uint64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    const float gi = g[i] * sc.grad_scale;
    const float mi = small_w1 ? m[i] + sc.w1 * (gi - m[i]) : gi - (gi - m[i]) * w1c;
    const float vi = v[i] * sc.beta2 + (sc.w2 * gi) * gi;
    const float denom = sqrtf(vi) / sc.bc2_sqrt + sc.eps;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * df + (sc.neg_step_size * mi) / denom;
  }
}

static int32_t cuda_fail(cudaError_t e, const char *what, char *msg, size_t cap) {
  snprintf(msg, cap, "adamw: %s failed on the GPU: %s", what, cudaGetErrorString(e));
  return FSDPC_SYSTEM_ERROR;
}

static int32_t launch(const mt_args &a, const adamw_scalars &sc, cudaStream_t s, char *msg,
                      size_t cap) {
  const uint32_t blocks = a.chunk_start[a.n];
  if (blocks == 0)
    return FSDPC_OK;
  adamw_mt_kernel<<<blocks, MT_THREADS, 0, s>>>(a, sc);
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? FSDPC_OK : cuda_fail(e, "launching the update", msg, cap);
}

extern "C" int32_t adamw_cuda_step(const fsdpc_optim_tensor *t, uint32_t n_tensors,
                                   const adamw_scalars *sc, void *stream, char *msg, size_t cap) {
  cudaStream_t s = (cudaStream_t)stream;
  mt_args a;
  a.n = 0;
  a.chunk_start[0] = 0;
  for (uint32_t k = 0; k < n_tensors; k++) {
    if (t[k].numel == 0)
      continue;
    const uint64_t chunks = (t[k].numel + MT_CHUNK - 1) / MT_CHUNK;
    if (chunks > 0x7fffffffu - a.chunk_start[a.n]) {
      snprintf(msg, cap, "adamw: tensor %u has %llu elements, too many for one launch", k,
               (unsigned long long)t[k].numel);
      return FSDPC_UNSUPPORTED;
    }
    const int j = a.n;
    a.p[j] = t[k].param;
    a.g[j] = t[k].grad;
    a.m[j] = t[k].state;
    a.v[j] = t[k].state + t[k].stride;
    a.numel[j] = t[k].numel;
    a.decay[j] = t[k].decay;
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

extern "C" int32_t adamw_cuda_zero(float *state, uint64_t n_floats, void *stream, char *msg,
                                   size_t cap) {
  if (n_floats == 0)
    return FSDPC_OK;
  cudaPointerAttributes at;
  cudaError_t e = cudaPointerGetAttributes(&at, state);
  if (e != cudaSuccess)
    return cuda_fail(e, "checking the state pointer", msg, cap);
  if (at.type != cudaMemoryTypeDevice && at.type != cudaMemoryTypeManaged) {
    snprintf(msg, cap, "adamw: init_state on CUDA got a state pointer that is not device memory");
    return FSDPC_INVALID_USAGE;
  }
  e = cudaMemsetAsync(state, 0, n_floats * sizeof(float), (cudaStream_t)stream);
  return e == cudaSuccess ? FSDPC_OK : cuda_fail(e, "zeroing the state", msg, cap);
}
