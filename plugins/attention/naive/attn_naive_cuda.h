/* Internal to the naive attention plugin: the CUDA entry points
 * (attn_naive.cu), called by attn_naive.c after its shape checks. */
#ifndef FSDPC_PLUGIN_ATTN_NAIVE_CUDA_H
#define FSDPC_PLUGIN_ATTN_NAIVE_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "fsdpc/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest head dim the CUDA kernels keep a query row of in shared memory. */
#define ATTN_NAIVE_CUDA_MAX_HD 512

#ifdef FSDPC_WITH_CUDA
/* bf16 q, k, v, out; fp32 saved P (B, NH, T, T). stream is a cudaStream_t. */
int32_t attn_naive_cuda_forward(const fsdpc_attn_shape *s, const void *q, const void *k,
                                const void *v, void *out, void *saved, void *stream, char *msg,
                                size_t cap);
/* bf16 dq, dk, dv (=); workspace holds dS, fp32 (B, NH, T, T). */
int32_t attn_naive_cuda_backward(const fsdpc_attn_shape *s, const void *q, const void *k,
                                 const void *v, const void *dout, const void *saved, void *dq,
                                 void *dk, void *dv, void *workspace, void *stream, char *msg,
                                 size_t cap);
#endif

#ifdef __cplusplus
}
#endif
#endif
