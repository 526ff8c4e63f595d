/* Token embedding lookup and its backward (twin of ops/cpu/embedding.c).
 * N = tokens, C = hidden size, V = vocab size.
 * Accumulation rule: dwte (fp32) +=; out (bf16) =. */
#include "ops/cuda/cuda_internal.cuh"

/* One block per token row; 16-byte copies when the row allows them. */
static __global__ void embedding_fwd_kernel(bf16 *out,             // (N, C)
                                            const int32_t *tokens, // (N)
                                            const bf16 *wte,       // (V, C)
                                            int C, int V, int vec) {
  const int n = blockIdx.x, t = tokens[n];
  bf16 *dst = out + (size_t)n * C;
  if (t < 0 || t >= V) {
    for (int c = threadIdx.x; c < C; c += blockDim.x)
      dst[c] = __float2bfloat16(0.0f);
    return;
  }
  const bf16 *src = wte + (size_t)t * C;
  if (vec) {
    const uint4 *s4 = (const uint4 *)src;
    uint4 *d4 = (uint4 *)dst;
    for (int c = threadIdx.x; c < C / 8; c += blockDim.x)
      d4[c] = s4[c];
  } else {
    for (int c = threadIdx.x; c < C; c += blockDim.x)
      dst[c] = src[c];
  }
}

static __global__ void embedding_bwd_kernel(float *dwte,           // (V, C)
                                            const bf16 *dout,      // (N, C)
                                            const int32_t *tokens, // (N)
                                            int C, int V) {
  const int n = blockIdx.x, t = tokens[n];
  if (t < 0 || t >= V)
    return;
  const bf16 *src = dout + (size_t)n * C;
  float *dst = dwte + (size_t)t * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x)
    atomicAdd(dst + c, __bfloat162float(src[c]));
}

static fsdpc_status launch_embedding_fwd(fsdpc_cuda_ctx *ctx, bf16 *out, const int32_t *tokens,
                                         const bf16 *wte, int N, int C, int V, fsdpc_err *err) {
  const int vec = C % 8 == 0 && ((uintptr_t)out | (uintptr_t)wte) % 16 == 0;
  embedding_fwd_kernel<<<N, 128, 0, ctx->compute>>>(out, tokens, wte, C, V, vec);
  FSDPC_CUDA_LAUNCHED(err, "embedding_fwd");
  return FSDPC_OK;
}

static fsdpc_status launch_embedding_bwd(fsdpc_cuda_ctx *ctx, float *dwte, const bf16 *dout,
                                         const int32_t *tokens, int N, int C, int V,
                                         fsdpc_err *err) {
  embedding_bwd_kernel<<<N, 256, 0, ctx->compute>>>(dwte, dout, tokens, C, V);
  FSDPC_CUDA_LAUNCHED(err, "embedding_bwd");
  return FSDPC_OK;
}

static fsdpc_status check(const char *op, const void *a, const void *b, const void *c, int N, int C,
                          int V, fsdpc_err *err) {
  if (!a || !b || !c)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda %s: a tensor pointer is NULL", op);
  if (N < 0 || C < 1 || V < 1)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "cuda %s: bad shape N=%d C=%d V=%d", op, N, C, V);
  return FSDPC_OK;
}

extern "C" fsdpc_status fsdpc__cuda_embedding_fwd(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *out,
                                                  const int32_t *tokens, const fsdpc_bf16 *wte,
                                                  int N, int C, int V, fsdpc_err *err) {
  FSDPC_TRY(check("embedding_fwd", out, tokens, wte, N, C, V, err));
  if (N == 0)
    return FSDPC_OK;
  return launch_embedding_fwd(ctx, (bf16 *)out, tokens, (const bf16 *)wte, N, C, V, err);
}

extern "C" fsdpc_status fsdpc__cuda_embedding_bwd(fsdpc_cuda_ctx *ctx, float *dwte,
                                                  const fsdpc_bf16 *dout, const int32_t *tokens,
                                                  int N, int C, int V, fsdpc_err *err) {
  FSDPC_TRY(check("embedding_bwd", dwte, dout, tokens, N, C, V, err));
  if (N == 0)
    return FSDPC_OK;
  return launch_embedding_bwd(ctx, dwte, (const bf16 *)dout, tokens, N, C, V, err);
}
