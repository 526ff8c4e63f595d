/* adamw8bit plugin, CUDA path: the per-element definition of
 * adamw8bit_math.h (the same functions the CPU loop calls; this file is built
 * with -fmad=false, IEEE division and sqrt, so codes, scales and parameters
 * are bit-identical to the CPU path's). One thread block of Q8_BLOCK threads
 * per quantization block: each thread updates one element's moments in fp32,
 * the block reduces their absmax in shared memory, then each thread updates
 * its parameter and writes its two codes. Tensors with fp32 state (below
 * min_8bit_size) go through the same launch in 256-element pieces. */
#include <cuda_runtime.h>

#include "../common/optim_multitensor.cuh"
#include "adamw8bit_math.h"

#define Q8_MAX 32 /* tensors per launch */

struct q8_list {
  float *p[Q8_MAX];       /* (numel) master values */
  const float *g[Q8_MAX]; /* (numel) gradient */
  uint8_t *q[Q8_MAX];     /* (2, stride) codes, or NULL: fp32 state in f */
  float *f[Q8_MAX];       /* (2, stride) fp32 m, v when q is NULL */
  float *s[Q8_MAX];       /* (2, sstride) block scales */
  uint64_t stride[Q8_MAX], sstride[Q8_MAX], phase[Q8_MAX], numel[Q8_MAX];
  int32_t decay[Q8_MAX];
  uint32_t start[Q8_MAX + 1]; /* prefix sums of items (blocks or pieces) per tensor */
  int32_t n;
};

static __global__ void __launch_bounds__(Q8_BLOCK)
    q8_kernel(const __grid_constant__ q8_list a, const q8_scalars sc, const float *maps) {
  __shared__ float smap[2][Q8_CODES];
  __shared__ float red[2][Q8_BLOCK / 32];
  const int tid = threadIdx.x;
  smap[0][tid] = maps[tid];
  smap[1][tid] = maps[Q8_CODES + tid];
  __syncthreads();
  int k = 0;
  while (k + 1 < a.n && blockIdx.x >= a.start[k + 1])
    k++;
  const uint64_t b = blockIdx.x - a.start[k], n = a.numel[k], stride = a.stride[k];
  float *p = a.p[k];
  const float *g = a.g[k];
  if (a.q[k] == NULL) { /* fp32 state: a piece of 256 elements */
    const uint64_t j = b * Q8_BLOCK + (uint64_t)tid;
    if (j < n) {
      float *m = a.f[k], *v = a.f[k] + stride, mi, vi;
      q8_moments(g[j], m[j], v[j], &sc, &mi, &vi);
      m[j] = mi;
      v[j] = vi;
      p[j] = q8_param(p[j], mi, vi, &sc, a.decay[k]);
    }
    return;
  }
  const uint64_t ph = a.phase[k], j0 = q8_block_lo(b, ph), j1 = q8_block_hi(b, ph, n);
  const uint64_t j = j0 + (uint64_t)tid;
  const bool valid = j < j1;
  uint8_t *c1 = a.q[k], *c2 = a.q[k] + stride;
  float *a1 = a.s[k] + b, *a2 = a.s[k] + a.sstride[k] + b;
  float m = 0.0f, v = 0.0f;
  if (valid)
    q8_moments(g[j], q8_dequant(smap[0], c1[j], *a1), q8_dequant(smap[1], c2[j], *a2), &sc, &m, &v);
  /* the block's absmax of each moment (max is exact: any order agrees) */
  float am = valid ? fabsf(m) : 0.0f, av = valid ? v : 0.0f;
  for (int o = 16; o > 0; o >>= 1) {
    am = fmaxf(am, __shfl_xor_sync(0xffffffffu, am, o));
    av = fmaxf(av, __shfl_xor_sync(0xffffffffu, av, o));
  }
  if ((tid & 31) == 0) {
    red[0][tid >> 5] = am;
    red[1][tid >> 5] = av;
  }
  __syncthreads(); /* every thread has read the old scales by now */
  am = 0.0f;
  av = 0.0f;
  for (int w = 0; w < Q8_BLOCK / 32; w++) {
    am = fmaxf(am, red[0][w]);
    av = fmaxf(av, red[1][w]);
  }
  if (tid == 0) {
    *a1 = am;
    *a2 = av;
  }
  if (valid) {
    p[j] = q8_param(p[j], m, v, &sc, a.decay[k]);
    c1[j] = q8_quant_signed(smap[0], m, am);
    c2[j] = q8_quant_unsigned(smap[1], v, av);
  }
}

static int32_t q8_launch(const q8_list &a, const q8_scalars &sc, const float *maps, cudaStream_t s,
                         char *msg, size_t cap) {
  const uint32_t blocks = a.start[a.n];
  if (blocks == 0)
    return FSDPC_OK;
  q8_kernel<<<blocks, Q8_BLOCK, 0, s>>>(a, sc, maps);
  return fsdpc_mt_launched("adamw8bit", msg, cap);
}

extern "C" int32_t adamw8bit_cuda_step(const fsdpc_optim_tensor *t, uint32_t n_tensors,
                                       const q8_scalars *sc, const float *maps, void *stream,
                                       char *msg, size_t cap) {
  cudaStream_t s = (cudaStream_t)stream;
  q8_list a;
  a.n = 0;
  a.start[0] = 0;
  for (uint32_t k = 0; k < n_tensors; k++) {
    if (t[k].numel == 0)
      continue;
    const bool quant = FSDPC_HAS_FIELD(&t[k], fsdpc_optim_tensor, block_phase) && t[k].qstate;
    const uint64_t items = q8_n_blocks(t[k].numel, quant ? t[k].block_phase : 0);
    if (items > 0x7fffffffu - a.start[a.n]) {
      snprintf(msg, cap, "adamw8bit: tensor %u has %llu elements, too many for one launch", k,
               (unsigned long long)t[k].numel);
      return FSDPC_UNSUPPORTED;
    }
    const int i = a.n;
    a.p[i] = t[k].param;
    a.g[i] = t[k].grad;
    a.q[i] = quant ? t[k].qstate : NULL;
    a.f[i] = quant ? NULL : t[k].state;
    a.s[i] = quant ? t[k].qscale : NULL;
    a.stride[i] = t[k].stride;
    a.sstride[i] = quant ? t[k].scale_stride : 0;
    a.phase[i] = quant ? t[k].block_phase : 0;
    a.numel[i] = t[k].numel;
    a.decay[i] = t[k].decay;
    a.start[i + 1] = a.start[i] + (uint32_t)items;
    a.n = i + 1;
    if (a.n == Q8_MAX) {
      int32_t st = q8_launch(a, *sc, maps, s, msg, cap);
      if (st != FSDPC_OK)
        return st;
      a.n = 0;
    }
  }
  return a.n ? q8_launch(a, *sc, maps, s, msg, cap) : FSDPC_OK;
}

extern "C" int32_t adamw8bit_cuda_maps(const float *host_maps, float **out, char *msg, size_t cap) {
  *out = NULL;
  float *d = NULL;
  cudaError_t e = cudaMalloc((void **)&d, 2 * Q8_CODES * sizeof(float));
  if (e == cudaSuccess)
    e = cudaMemcpy(d, host_maps, 2 * Q8_CODES * sizeof(float), cudaMemcpyHostToDevice);
  if (e == cudaSuccess) {
    *out = d;
    return FSDPC_OK;
  }
  cudaFree(d);
  snprintf(msg, cap, "adamw8bit: copying the quantization maps to the GPU failed: %s",
           cudaGetErrorString(e));
  return FSDPC_SYSTEM_ERROR;
}

extern "C" void adamw8bit_cuda_free(float *p) {
  if (p)
    cudaFree(p);
}

extern "C" int32_t adamw8bit_cuda_zero(float *state, uint64_t n_floats, void *stream, char *msg,
                                       size_t cap) {
  return fsdpc_mt_zero(state, n_floats, stream, "adamw8bit", msg, cap);
}
