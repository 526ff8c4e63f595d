/* Shared by the in-tree optimizer plugins' CUDA paths (header-only; plugins
 * link nothing from the core): multi-tensor apply. One launch updates up to
 * FSDPC_MT_MAX tensors; each tensor is cut into chunks of FSDPC_MT_CHUNK
 * elements, one thread block per chunk, and a block finds its tensor from
 * the prefix sums of chunk counts. Per element the plugin's functor sees
 * four fp32 values: x0 (param, written), x1 (grad, read), x2 and x3 (state
 * slots, written; absent slots read as 0 and are not written). When all of
 * a tensor's arrays are 16-byte aligned they move as float4; the arithmetic
 * per element is the same either way, so results do not depend on it.
 *
 * When a tensor's param_bf16 is non-NULL (and its struct_size covers the
 * field) the updated param is also stored there as bf16 (round to nearest
 * even), in the same pass: the engine's compute-dtype copy of the shard.
 * Op: struct with
 *   __device__ void operator()(float &p, float g, float &s0, float &s1, int flag) const;
 * Tensors of one call must not overlap (as on the CPU). */
#ifndef FSDPC_PLUGINS_OPTIM_MULTITENSOR_CUH
#define FSDPC_PLUGINS_OPTIM_MULTITENSOR_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fsdpc/plugin.h"

#define FSDPC_MT_MAX 32
#define FSDPC_MT_CHUNK 8192
#define FSDPC_MT_THREADS 256

struct fsdpc_mt_list {
  float *x[4][FSDPC_MT_MAX]; /* (numel) each; x[1] is read only; x[2], x[3] may be NULL */
  __nv_bfloat16 *lp[FSDPC_MT_MAX]; /* (numel) bf16 copy of the updated param, or NULL */
  uint64_t numel[FSDPC_MT_MAX];
  uint32_t chunk_start[FSDPC_MT_MAX + 1]; /* prefix sums of chunks per tensor */
  int32_t flag[FSDPC_MT_MAX];             /* per tensor, passed to the functor */
  int32_t vec[FSDPC_MT_MAX];              /* all arrays 16-byte aligned */
  int32_t n;
};

template <class Op>
static __global__ void fsdpc_mt_kernel(const __grid_constant__ fsdpc_mt_list a, const Op op) {
  int k = 0;
  while (k + 1 < a.n && blockIdx.x >= a.chunk_start[k + 1])
    k++;
  const uint64_t lo = (uint64_t)(blockIdx.x - a.chunk_start[k]) * FSDPC_MT_CHUNK;
  const uint64_t hi = lo + FSDPC_MT_CHUNK < a.numel[k] ? lo + FSDPC_MT_CHUNK : a.numel[k];
  float *x0 = a.x[0][k], *x2 = a.x[2][k], *x3 = a.x[3][k];
  __nv_bfloat16 *lp = a.lp[k];
  const float *x1 = a.x[1][k];
  const int flag = a.flag[k];
  uint64_t done = lo;
  if (a.vec[k]) {
    const uint64_t vend = lo + (hi - lo) / 4 * 4;
    for (uint64_t i = lo + 4 * (uint64_t)threadIdx.x; i < vend; i += 4 * (uint64_t)blockDim.x) {
      float4 p = *(const float4 *)(x0 + i), g = *(const float4 *)(x1 + i);
      float4 s0 = x2 ? *(const float4 *)(x2 + i) : make_float4(0.f, 0.f, 0.f, 0.f);
      float4 s1 = x3 ? *(const float4 *)(x3 + i) : make_float4(0.f, 0.f, 0.f, 0.f);
      op(p.x, g.x, s0.x, s1.x, flag);
      op(p.y, g.y, s0.y, s1.y, flag);
      op(p.z, g.z, s0.z, s1.z, flag);
      op(p.w, g.w, s0.w, s1.w, flag);
      *(float4 *)(x0 + i) = p;
      if (lp) { /* 4 bf16 = 8 bytes */
        __nv_bfloat162 h[2] = {__floats2bfloat162_rn(p.x, p.y), __floats2bfloat162_rn(p.z, p.w)};
        *(uint2 *)(lp + i) = *(const uint2 *)h;
      }
      if (x2)
        *(float4 *)(x2 + i) = s0;
      if (x3)
        *(float4 *)(x3 + i) = s1;
    }
    done = vend;
  }
  for (uint64_t i = done + threadIdx.x; i < hi; i += blockDim.x) {
    float p = x0[i], s0 = x2 ? x2[i] : 0.0f, s1 = x3 ? x3[i] : 0.0f;
    op(p, x1[i], s0, s1, flag);
    x0[i] = p;
    if (lp)
      lp[i] = __float2bfloat16_rn(p);
    if (x2)
      x2[i] = s0;
    if (x3)
      x3[i] = s1;
  }
}

static inline int fsdpc_mt_aligned(const void *p) {
  return p == NULL || ((uintptr_t)p & 15u) == 0;
}

/* The status of the kernel launch just made (a launch error is reported by
 * cudaGetLastError; the kernel's own faults surface at the next sync). */
static inline int32_t fsdpc_mt_launched(const char *plugin, char *msg, size_t cap) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess)
    return FSDPC_OK;
  snprintf(msg, cap, "%s: launching the update failed on the GPU: %s", plugin,
           cudaGetErrorString(e));
  return FSDPC_SYSTEM_ERROR;
}

template <class Op>
static int32_t fsdpc_mt_launch(const fsdpc_mt_list &a, const Op &op, cudaStream_t s,
                               const char *plugin, char *msg, size_t cap) {
  const uint32_t blocks = a.chunk_start[a.n];
  if (blocks == 0)
    return FSDPC_OK;
  fsdpc_mt_kernel<Op><<<blocks, FSDPC_MT_THREADS, 0, s>>>(a, op);
  return fsdpc_mt_launched(plugin, msg, cap);
}

/* Enqueues op over every tensor on stream. slots: state arrays per tensor
 * (0, 1 or 2, at state and state + stride); flag_of(t) gives each tensor's
 * flag. On failure writes one line into msg. */
template <class Op, class Flag>
static int32_t fsdpc_mt_apply(const fsdpc_optim_tensor *t, uint32_t n_tensors, int slots,
                              const Op &op, Flag flag_of, void *stream, const char *plugin,
                              char *msg, size_t cap) {
  cudaStream_t s = (cudaStream_t)stream;
  fsdpc_mt_list a;
  a.n = 0;
  a.chunk_start[0] = 0;
  for (uint32_t k = 0; k < n_tensors; k++) {
    if (t[k].numel == 0)
      continue;
    const uint64_t chunks = (t[k].numel + FSDPC_MT_CHUNK - 1) / FSDPC_MT_CHUNK;
    if (chunks > 0x7fffffffu - a.chunk_start[a.n]) {
      snprintf(msg, cap, "%s: tensor %u has %llu elements, too many for one launch", plugin, k,
               (unsigned long long)t[k].numel);
      return FSDPC_UNSUPPORTED;
    }
    const int j = a.n;
    a.x[0][j] = t[k].param;
    a.x[1][j] = (float *)t[k].grad;
    a.x[2][j] = slots > 0 ? t[k].state : NULL;
    a.x[3][j] = slots > 1 ? t[k].state + t[k].stride : NULL;
    a.lp[j] = t[k].struct_size >= offsetof(fsdpc_optim_tensor, param_bf16) + sizeof(uint16_t *)
                  ? (__nv_bfloat16 *)t[k].param_bf16
                  : NULL;
    a.numel[j] = t[k].numel;
    a.flag[j] = flag_of(t[k]);
    a.vec[j] = fsdpc_mt_aligned(a.x[0][j]) && fsdpc_mt_aligned(a.x[1][j]) &&
               fsdpc_mt_aligned(a.x[2][j]) && fsdpc_mt_aligned(a.x[3][j]) &&
               ((uintptr_t)a.lp[j] & 7u) == 0;
    a.chunk_start[j + 1] = a.chunk_start[j] + (uint32_t)chunks;
    a.n = j + 1;
    if (a.n == FSDPC_MT_MAX) {
      int32_t st = fsdpc_mt_launch(a, op, s, plugin, msg, cap);
      if (st != FSDPC_OK)
        return st;
      a.n = 0;
    }
  }
  return a.n ? fsdpc_mt_launch(a, op, s, plugin, msg, cap) : FSDPC_OK;
}

/* Zero-fills n_floats of device state; INVALID_USAGE if not device memory. */
static int32_t fsdpc_mt_zero(float *state, uint64_t n_floats, void *stream, const char *plugin,
                             char *msg, size_t cap) {
  if (n_floats == 0)
    return FSDPC_OK;
  cudaPointerAttributes at;
  cudaError_t e = cudaPointerGetAttributes(&at, state);
  if (e == cudaSuccess && at.type != cudaMemoryTypeDevice && at.type != cudaMemoryTypeManaged) {
    snprintf(msg, cap, "%s: init_state on CUDA got a state pointer that is not device memory",
             plugin);
    return FSDPC_INVALID_USAGE;
  }
  if (e == cudaSuccess)
    e = cudaMemsetAsync(state, 0, n_floats * sizeof(float), (cudaStream_t)stream);
  if (e == cudaSuccess)
    return FSDPC_OK;
  snprintf(msg, cap, "%s: zeroing the state failed on the GPU: %s", plugin, cudaGetErrorString(e));
  return FSDPC_SYSTEM_ERROR;
}

#endif
