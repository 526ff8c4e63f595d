/* CUDA ops: bf16 storage, fp32 accumulation, forward and backward side by
 * side. Each op is the twin of a CPU op in ops/cpu/ops_cpu.h (same name with
 * cuda instead of cpu, same argument order, same accumulation rule) and is
 * tested against it in tests/cuda/.
 *
 * Dimensions: N = B*T tokens (rows), C = hidden size, V = vocab size,
 * F = MLP intermediate size, H = heads of a tensor, HD = head dim, OC = out
 * features. All tensors are row-major, contiguous, in device memory.
 *
 * Types: activations and weights are bf16 (fsdpc_bf16, the raw 16 bits);
 * parameter gradients (dwte, dweight) are fp32 and ACCUMULATED (+=), so
 * micro-batches and tied weights add up in fp32; activation gradients (dinp,
 * dx, dgate, ...) are bf16 and WRITTEN (=). Saved statistics (rstd) are fp32.
 * Every reduction (norms, softmax, dot products) accumulates in fp32.
 *
 * Every op runs on the context's compute stream, never synchronises with the
 * host and never allocates (scratch is passed in). Each returns a status
 * after checking shapes; a kernel fault surfaces at the next sync.
 *
 * Plain C: includable from GCC-compiled code without any CUDA header. */
#ifndef FSDPC_OPS_CUDA_H
#define FSDPC_OPS_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "ops/cuda/cuda_ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

#include "ops/ops.h" /* C declarations: inside extern "C" for the .cu files */

typedef uint16_t fsdpc_bf16; /* bfloat16 bits in device memory */

/* ---- embedding.cu ---- tokens must lie in [0, V) (checked by the data
 * pipeline); a token outside gives a zero row and no gradient, never an
 * out-of-bounds access. */
fsdpc_status fsdpc__cuda_embedding_fwd(fsdpc_cuda_ctx *ctx,
                                       fsdpc_bf16 *out,       // (N, C)
                                       const int32_t *tokens, // (N)
                                       const fsdpc_bf16 *wte, // (V, C)
                                       int N, int C, int V, fsdpc_err *err);
/* dwte[tokens[n]] += dout[n] (fp32 atomics: the order of additions into a
 * repeated token's row is not fixed). */
fsdpc_status fsdpc__cuda_embedding_bwd(fsdpc_cuda_ctx *ctx,
                                       float *dwte,            // (V, C) +=
                                       const fsdpc_bf16 *dout, // (N, C)
                                       const int32_t *tokens,  // (N)
                                       int N, int C, int V, fsdpc_err *err);

/* ---- rmsnorm.cu ---- out = weight * (inp * rstd), rstd = 1/sqrt(mean(inp^2) + eps) */
fsdpc_status fsdpc__cuda_rmsnorm_fwd(fsdpc_cuda_ctx *ctx,
                                     fsdpc_bf16 *out,          // (N, C)
                                     float *rstd,              // (N)
                                     const fsdpc_bf16 *inp,    // (N, C)
                                     const fsdpc_bf16 *weight, // (C)
                                     int N, int C, float eps, fsdpc_err *err);
fsdpc_status fsdpc__cuda_rmsnorm_bwd(fsdpc_cuda_ctx *ctx,
                                     fsdpc_bf16 *dinp,         // (N, C) =
                                     float *dweight,           // (C) +=
                                     const fsdpc_bf16 *dout,   // (N, C)
                                     const fsdpc_bf16 *inp,    // (N, C)
                                     const fsdpc_bf16 *weight, // (C)
                                     const float *rstd,        // (N)
                                     int N, int C, fsdpc_err *err);

/* The same with (offset + weight) for weight, added in fp32 (Gemma2RMSNorm:
 * offset 1). */
fsdpc_status fsdpc__cuda_rmsnorm_off_fwd(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *out, float *rstd,
                                         const fsdpc_bf16 *inp, const fsdpc_bf16 *weight, int N,
                                         int C, float eps, float offset, fsdpc_err *err);
fsdpc_status fsdpc__cuda_rmsnorm_off_bwd(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *dinp, float *dweight,
                                         const fsdpc_bf16 *dout, const fsdpc_bf16 *inp,
                                         const fsdpc_bf16 *weight, const float *rstd, int N, int C,
                                         float offset, fsdpc_err *err);

/* The same, plus the residual stream's gradient: dinp = dx + dresid, summed
 * in fp32 and rounded to bf16 once (one pass instead of rmsnorm_bwd and an
 * add). dinp may alias dresid. */
fsdpc_status fsdpc__cuda_rmsnorm_bwd_add(fsdpc_cuda_ctx *ctx,
                                         fsdpc_bf16 *dinp,         // (N, C) =
                                         float *dweight,           // (C) +=
                                         const fsdpc_bf16 *dout,   // (N, C)
                                         const fsdpc_bf16 *dresid, // (N, C)
                                         const fsdpc_bf16 *inp,    // (N, C)
                                         const fsdpc_bf16 *weight, // (C)
                                         const float *rstd,        // (N)
                                         int N, int C, fsdpc_err *err);

/* ---- rope.cu ---- Hugging Face rotate_half convention (see ops_cpu.h) on
 * the first RD of each head's HD dims (partial rotary: the rest pass
 * through); cos/sin are the fp32 tables of fsdpc__rope_tables, in device
 * memory. */
fsdpc_status fsdpc__cuda_rope_fwd(fsdpc_cuda_ctx *ctx,
                                  fsdpc_bf16 *x,      // (N, H, HD) in place
                                  const float *cos,   // (maxT, RD/2)
                                  const float *sin,   // (maxT, RD/2)
                                  const int32_t *pos, // (N), each in [0, maxT)
                                  int N, int H, int HD, int RD, int maxT, fsdpc_err *err);
fsdpc_status fsdpc__cuda_rope_bwd(fsdpc_cuda_ctx *ctx,
                                  fsdpc_bf16 *dx, // (N, H, HD) in place
                                  const float *cos, const float *sin, const int32_t *pos, int N,
                                  int H, int HD, int RD, int maxT, fsdpc_err *err);
/* Computes the tables of r on the host with fsdpc__rope_tables and uploads
 * them into cos/sin (device, (maxT, r->dim/2) each). Synchronises. */
fsdpc_status fsdpc__cuda_rope_tables(fsdpc_cuda_ctx *ctx, float *cos, float *sin,
                                     const fsdpc_rope *r, int maxT, int use_long, fsdpc_err *err);

/* ---- family.cu ---- the decoder families' ops (see ops.h) */
fsdpc_status fsdpc__cuda_bias_add(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *y, // (N, OC) +=
                                  const fsdpc_bf16 *bias,             // (OC)
                                  int N, int OC, fsdpc_err *err);
/* dbias (fp32, OC) += the column sums of dy (N, OC); written (=) while
 * grad_overwrite is on. Deterministic (fixed summation order). */
fsdpc_status fsdpc__cuda_bias_bwd(fsdpc_cuda_ctx *ctx, float *dbias, const fsdpc_bf16 *dy, int N,
                                  int OC, fsdpc_err *err);
/* out = x + a * y, or a * y when x is NULL (bf16, fp32 arithmetic; out may
 * alias x or y). */
fsdpc_status fsdpc__cuda_axpy(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *out, const fsdpc_bf16 *x,
                              const fsdpc_bf16 *y, float a, size_t n, fsdpc_err *err);

/* ---- swiglu.cu ---- GeGLU: out = gelu_tanh(gate) * up (Gemma's gelu_pytorch_tanh) */
fsdpc_status fsdpc__cuda_geglu_fwd(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *out, const fsdpc_bf16 *gate,
                                   const fsdpc_bf16 *up, int N, int F, fsdpc_err *err);
fsdpc_status fsdpc__cuda_geglu_bwd(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *dgate, fsdpc_bf16 *dup,
                                   const fsdpc_bf16 *dout, const fsdpc_bf16 *gate,
                                   const fsdpc_bf16 *up, int N, int F, fsdpc_err *err);

/* ---- swiglu.cu ---- out = silu(gate) * up */
fsdpc_status fsdpc__cuda_swiglu_fwd(fsdpc_cuda_ctx *ctx,
                                    fsdpc_bf16 *out,        // (N, F)
                                    const fsdpc_bf16 *gate, // (N, F)
                                    const fsdpc_bf16 *up,   // (N, F)
                                    int N, int F, fsdpc_err *err);
fsdpc_status fsdpc__cuda_swiglu_bwd(fsdpc_cuda_ctx *ctx,
                                    fsdpc_bf16 *dgate,      // (N, F) =
                                    fsdpc_bf16 *dup,        // (N, F) =
                                    const fsdpc_bf16 *dout, // (N, F)
                                    const fsdpc_bf16 *gate, // (N, F)
                                    const fsdpc_bf16 *up,   // (N, F)
                                    int N, int F, fsdpc_err *err);

/* ---- elementwise.cu ---- residual adds and casts. Casts take a stream
 * (NULL = compute stream) because parameter casts run on the comm stream. */
/* out = a + b (out may alias a or b) */
fsdpc_status fsdpc__cuda_add(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *out, const fsdpc_bf16 *a,
                             const fsdpc_bf16 *b, size_t n, fsdpc_err *err);
/* y += x */
fsdpc_status fsdpc__cuda_add_inplace(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *y, const fsdpc_bf16 *x,
                                     size_t n, fsdpc_err *err);
/* Round to nearest even; NaN stays NaN, overflow gives inf. */
fsdpc_status fsdpc__cuda_cast_f32_bf16(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *out, const float *in,
                                       size_t n, void *stream, fsdpc_err *err);
fsdpc_status fsdpc__cuda_cast_bf16_f32(fsdpc_cuda_ctx *ctx, float *out, const fsdpc_bf16 *in,
                                       size_t n, void *stream, fsdpc_err *err);
/* y += x in fp32 */
fsdpc_status fsdpc__cuda_add_f32_inplace(fsdpc_cuda_ctx *ctx, float *y, const float *x, size_t n,
                                         fsdpc_err *err);
/* the same on stream (NULL = the compute stream) */
fsdpc_status fsdpc__cuda_add_f32_inplace_on(fsdpc_cuda_ctx *ctx, float *y, const float *x,
                                            size_t n, void *stream, fsdpc_err *err);
/* x *= s (fp32, e.g. gradient clipping or averaging) */
fsdpc_status fsdpc__cuda_scale(fsdpc_cuda_ctx *ctx, float *x, float s, size_t n, fsdpc_err *err);

/* ---- reduce.cu ---- Sum of squares of fp32 x, in fp64, deterministic (a
 * fixed grid and a fixed combine order). Writes (=) or adds (+=, when
 * accumulate) into *out, a double in DEVICE memory, so that the global grad
 * norm over many buffers needs no host sync until it is read. */
fsdpc_status fsdpc__cuda_sumsq(fsdpc_cuda_ctx *ctx, double *out, const float *x, size_t n,
                               int accumulate, fsdpc_err *err);

/* ---- init.cu ---- the random init on the device: dst[i] =
 * fsdpc__init_normal(key, elem_offset + i, std) (util/init_rng.h, the CPU's
 * function bit for bit), or 1 when ones is set; on the compute stream. */
fsdpc_status fsdpc__cuda_init_f32(fsdpc_cuda_ctx *ctx, float *dst, size_t n, uint64_t key,
                                  uint64_t elem_offset, double std, int ones, fsdpc_err *err);

/* ---- matmul.cu ---- nn.Linear without bias through cuBLASLt: bf16 inputs,
 * fp32 accumulation. out = inp @ weight^T (+ residual when non-NULL: the
 * residual add rides in the GEMM's C operand instead of a separate pass;
 * residual may alias out). */
fsdpc_status fsdpc__cuda_matmul_fwd(fsdpc_cuda_ctx *ctx,
                                    fsdpc_bf16 *out,            // (N, OC)
                                    const fsdpc_bf16 *inp,      // (N, C)
                                    const fsdpc_bf16 *weight,   // (OC, C)
                                    const fsdpc_bf16 *residual, // (N, OC) or NULL
                                    int N, int C, int OC, fsdpc_err *err);
/* matmul_fwd + bias: out = inp @ weight^T (+ residual) + bias, the bias
 * added in the GEMM's epilogue (CUBLASLT_EPILOGUE_BIAS) before the one
 * rounding to bf16; a bias not 16-byte aligned takes matmul_fwd and
 * bias_add. */
fsdpc_status fsdpc__cuda_matmul_bias_fwd(fsdpc_cuda_ctx *ctx,
                                         fsdpc_bf16 *out,            // (N, OC)
                                         const fsdpc_bf16 *inp,      // (N, C)
                                         const fsdpc_bf16 *weight,   // (OC, C)
                                         const fsdpc_bf16 *bias,     // (OC)
                                         const fsdpc_bf16 *residual, // (N, OC) or NULL
                                         int N, int C, int OC, fsdpc_err *err);
/* dinp = dout @ weight (bf16, skipped when NULL); dweight += dout^T @ inp
 * (fp32, accumulated inside the GEMM with beta = 1; skipped when NULL). */
fsdpc_status fsdpc__cuda_matmul_bwd(fsdpc_cuda_ctx *ctx,
                                    fsdpc_bf16 *dinp,         // (N, C) =, or NULL
                                    float *dweight,           // (OC, C) +=, or NULL
                                    const fsdpc_bf16 *dout,   // (N, OC)
                                    const fsdpc_bf16 *inp,    // (N, C)
                                    const fsdpc_bf16 *weight, // (OC, C)
                                    int N, int C, int OC, fsdpc_err *err);
/* The same with dinp ACCUMULATED (+=): the GEMM's C operand is dinp (beta 1,
 * fp32 sum, one bf16 rounding), so the gradients of several projections of
 * one input add up without a separate add pass. */
fsdpc_status fsdpc__cuda_matmul_bwd_acc(fsdpc_cuda_ctx *ctx,
                                        fsdpc_bf16 *dinp,         // (N, C) +=, or NULL
                                        float *dweight,           // (OC, C) +=, or NULL
                                        const fsdpc_bf16 *dout,   // (N, OC)
                                        const fsdpc_bf16 *inp,    // (N, C)
                                        const fsdpc_bf16 *weight, // (OC, C)
                                        int N, int C, int OC, fsdpc_err *err);
/* ---- fp8.cu ---- the same GEMMs with FP8 operands (ops/fp8.h recipe
 * FSDPC_FP8_TENSORWISE or _ROWWISE): both operands of each GEMM cast to
 * E4M3 / E5M2 with dynamic scales, fp32 accumulation, bf16 out (dweight
 * fp32, += or = under grad_overwrite). dinp_acc: dinp +=. Dimensions must be
 * multiples of 16 (cuBLASLt's FP8 GEMMs). scratch: the FP8 copies' block
 * (fsdpc__fp8_linear_scratch_bytes of ops/fp8.h), or NULL: the pool's.
 * inp_again (ops.h): under tensorwise with a scratch, inp's FP8 copy left
 * there by the previous call of the same direction, input pointer and shape
 * is used instead of a new cast. */
fsdpc_status fsdpc__cuda_fp8_matmul_fwd(fsdpc_cuda_ctx *ctx, int recipe, fsdpc_bf16 *out,
                                        const fsdpc_bf16 *inp, int inp_again,
                                        const fsdpc_bf16 *weight, const fsdpc_bf16 *residual, int N,
                                        int C, int OC, void *scratch, size_t scratch_bytes,
                                        fsdpc_err *err);
fsdpc_status fsdpc__cuda_fp8_matmul_bwd(fsdpc_cuda_ctx *ctx, int recipe, fsdpc_bf16 *dinp,
                                        int dinp_acc, float *dweight, const fsdpc_bf16 *dout,
                                        const fsdpc_bf16 *inp, int inp_again,
                                        const fsdpc_bf16 *weight, int N, int C, int OC,
                                        void *scratch, size_t scratch_bytes, fsdpc_err *err);
/* Kernels and GEMMs the FP8 calls above have launched on ctx (a counter
 * for tests and launch budgets). */
uint64_t fsdpc__cuda_fp8_launches(const fsdpc_cuda_ctx *ctx);
/* on = 1: until called with 0, matmul_bwd(_acc), rmsnorm_bwd(_add) and
 * lmhead_xent WRITE dweight (=, the GEMM with beta 0) instead of adding
 * into it, so that the first micro-batch after an optimizer step needs no
 * zeroed gradients. */
void fsdpc__cuda_grad_overwrite(fsdpc_cuda_ctx *ctx, int on);
/* fp32 logits for evaluation: out = x @ weight^T */
fsdpc_status fsdpc__cuda_logits(fsdpc_cuda_ctx *ctx,
                                float *out,               // (N, V)
                                const fsdpc_bf16 *x,      // (N, C)
                                const fsdpc_bf16 *weight, // (V, C)
                                int N, int C, int V, fsdpc_err *err);

/* ---- cross_entropy.cu ----
 * Fused lm_head + softmax cross-entropy, chunked over rows: per chunk of R =
 * chunk_rows rows, logits = x @ weight^T into an fp32 (R, V) scratch (bf16
 * with logits_bf16, then overwritten by the gradient), an fp32 softmax per
 * row, the gradient grad_scale * (softmax - onehot) as bf16 (R, V), then dx
 * (=) and dweight (+=) by two GEMMs. Never more than R * V
 * logits exist. Labels: ignore_index (-100) or anything outside [0, V)
 * contributes no loss and no gradient.
 * out2[0] = sum of per-token losses, out2[1] = number of counted tokens, both
 * double in DEVICE memory, written (=). dx and dweight may be NULL
 * (evaluation). scratch must hold fsdpc__cuda_lmhead_xent_scratch_bytes. */
size_t fsdpc__cuda_lmhead_xent_scratch_bytes(int N, int V, int chunk_rows, int logits_bf16);
fsdpc_status fsdpc__cuda_lmhead_xent(fsdpc_cuda_ctx *ctx,
                                     double *out2,             // (2) device
                                     fsdpc_bf16 *dx,           // (N, C) =, or NULL
                                     float *dweight,           // (V, C) +=, or NULL
                                     const fsdpc_bf16 *x,      // (N, C) final-norm output
                                     const fsdpc_bf16 *weight, // (V, C) lm_head
                                     const int32_t *labels,    // (N)
                                     int N, int C, int V, float grad_scale, int chunk_rows,
                                     int logits_bf16, void *scratch, size_t scratch_bytes,
                                     fsdpc_err *err);
/* lmhead_xent on Gemma 2's soft-capped logits softcap * tanh(logits /
 * softcap) (softcap > 0), the twin of fsdpc__cpu_lmhead_xent_capped. */
fsdpc_status fsdpc__cuda_lmhead_xent_capped(fsdpc_cuda_ctx *ctx, double *out2, fsdpc_bf16 *dx,
                                            float *dweight, const fsdpc_bf16 *x,
                                            const fsdpc_bf16 *weight, const int32_t *labels, int N,
                                            int C, int V, float grad_scale, int chunk_rows,
                                            int logits_bf16, float softcap, void *scratch,
                                            size_t scratch_bytes, fsdpc_err *err);
/* lmhead_xent for sequence objectives, the twin of fsdpc__cpu_lmhead_xent_rows:
 * row r's gradient is row_seed[r] * (softmax - onehot) (HOST memory, N;
 * NULL: the forward only, dx and dweight untouched); row_loss (HOST
 * memory, N) gets each row's -log p(label), 0 for an ignored row, after a
 * sync of the compute stream; out2 as lmhead_xent's. */
fsdpc_status fsdpc__cuda_lmhead_xent_rows(fsdpc_cuda_ctx *ctx, double *out2, double *row_loss,
                                          const float *row_seed, fsdpc_bf16 *dx, float *dweight,
                                          const fsdpc_bf16 *x, const fsdpc_bf16 *weight,
                                          const int32_t *labels, int N, int C, int V,
                                          int chunk_rows, int logits_bf16, void *scratch,
                                          size_t scratch_bytes, fsdpc_err *err);

/* ---- attn_cache.cu ---- inference over a KV cache (see ops/ops.h). */
fsdpc_status fsdpc__cuda_kv_store(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *kc, fsdpc_bf16 *vc,
                                  const fsdpc_bf16 *k, const fsdpc_bf16 *v, const int32_t *pos,
                                  int B, int n, int maxT, int KD, fsdpc_err *err);
/* out[r] = argmax of x[r, 0..V) (fp32), lowest id on ties (argmax.cu). */
fsdpc_status fsdpc__cuda_argmax_rows(fsdpc_cuda_ctx *ctx, int32_t *out, const float *x, int N,
                                     int V, fsdpc_err *err);
fsdpc_status fsdpc__cuda_attn_cached(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *out, const fsdpc_bf16 *q,
                                     const fsdpc_bf16 *kc, const fsdpc_bf16 *vc, const int32_t *pos,
                                     int B, int n, int NH, int KVH, int HD, int maxT, float scale,
                                     int window, float softcap, fsdpc_err *err);

/* ---- dropout.cu ---- LoRA: x *= s; inverted dropout, mask as ops.h says */
fsdpc_status fsdpc__cuda_scale_bf16(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *x, size_t n, float s,
                                    fsdpc_err *err);
fsdpc_status fsdpc__cuda_dropout(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *out, const fsdpc_bf16 *inp,
                                 size_t n, float p, uint64_t key, fsdpc_err *err);

/* ---- nf4.cu ---- one NF4 tensor (quant/nf4.h) into bf16 on `stream`
 * (NULL: compute): codes ((n + 1) / 2 bytes); with dq, qabsmax (one byte a
 * block), scales = absmax2 (fp32 a 256 blocks) and offset (its fp32, in
 * device memory), map the
 * 256-entry table of fsdpc__dynamic_map (host memory, passed by value);
 * without, scales = absmax (fp32 a block). fp32 scales may sit at any
 * byte offset. Bit for bit fsdpc__nf4_dequantize rounded to bf16 (RNE). */
fsdpc_status fsdpc__cuda_nf4_dequant(fsdpc_cuda_ctx *ctx, fsdpc_bf16 *out, const uint8_t *codes,
                                     const uint8_t *qabsmax, const uint8_t *scales,
                                     const uint8_t *offset, uint64_t n, int block, int dq,
                                     const float *map, void *stream, fsdpc_err *err);
/* The quantization of n finite fp32 values x (device) on `stream`, bit for
 * bit fsdpc__nf4_quantize: codes ((n + 1) / 2 bytes) and absmax (fp32 a
 * block) in device memory; with dq also qabsmax (a byte a block) and
 * absmax2 (fp32 a 256 blocks) in device memory and *offset (host), whose
 * in-order mean reads the scales back to the host (the call then waits for
 * the stream); map: fsdpc__dynamic_map's (host). */
fsdpc_status fsdpc__cuda_nf4_quant(fsdpc_cuda_ctx *ctx, uint8_t *codes, float *absmax,
                                   uint8_t *qabsmax, float *absmax2, float *offset, const float *x,
                                   uint64_t n, int block, int dq, const float *map, void *stream,
                                   fsdpc_err *err);

#ifdef __cplusplus
}
#endif
#endif
