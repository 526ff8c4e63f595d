/* CPU reference ops: fp32, forward and backward side by side.
 *
 * This is the numerical oracle of fsdpc: every CUDA op is tested against its
 * twin here, and every op here against finite differences.
 *
 * Dimensions: N = B*T tokens (rows), C = hidden size, V = vocab size,
 * F = MLP intermediate size, H = heads of a tensor, HD = head dim, OC = out
 * features. All tensors are row-major and contiguous.
 *
 * Accumulation rule: parameter gradients (dweight, dwte) are ACCUMULATED (+=)
 * so micro-batches and tied weights add up; activation gradients (dinp, dx,
 * dgate, ...) are WRITTEN (=). Unless a function says "in place", outputs do
 * not alias inputs. Threads: OpenMP for element-wise ops and GEMM tiles
 * (OpenBLAS runs single-threaded inside each), fsdpc__cpu_nt() threads.
 */
#ifndef FSDPC_OPS_CPU_H
#define FSDPC_OPS_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "ops/ops.h"

/* ---- team.c ---- */
/* The team size of every OpenMP region of these ops, per call and never
 * through OpenMP's own state (omp_set_num_threads would change the caller's
 * setting): the CPU ops table sets it for the duration of each call from
 * its context (train.threads) on the calling thread and puts the previous
 * value back. threads <= 0: OpenMP's default. Returns the previous value.
 * The results do not depend on it (fixed tiles and blocks). */
int fsdpc__cpu_team_set(int threads);
/* The team size to use now: the one set, else omp_get_max_threads(). */
int fsdpc__cpu_nt(void);

/* ---- embedding.c ---- */
/* out[n] = wte[tokens[n]]. tokens must lie in [0, V): the data pipeline
 * checks token ids once, so the ops do not. */
void fsdpc__cpu_embedding_fwd(float *out,            // (N, C)
                              const int32_t *tokens, // (N)
                              const float *wte,      // (V, C)
                              int N, int C);
/* dwte[tokens[n]] += dout[n] */
void fsdpc__cpu_embedding_bwd(float *dwte,           // (V, C) +=
                              const float *dout,     // (N, C)
                              const int32_t *tokens, // (N)
                              int N, int C);

/* ---- rmsnorm.c ---- */
/* out = inp / sqrt(mean(inp^2) + eps) * weight; rstd saved for backward. */
void fsdpc__cpu_rmsnorm_fwd(float *out,          // (N, C)
                            float *rstd,         // (N)
                            const float *inp,    // (N, C)
                            const float *weight, // (C)
                            int N, int C, float eps);
void fsdpc__cpu_rmsnorm_bwd(float *dinp,         // (N, C) =
                            float *dweight,      // (C) +=
                            const float *dout,   // (N, C)
                            const float *inp,    // (N, C)
                            const float *weight, // (C)
                            const float *rstd,   // (N)
                            int N, int C);
/* The same with (offset + weight) for weight (Gemma: offset 1, in fp32). */
void fsdpc__cpu_rmsnorm_off_fwd(float *out, float *rstd, const float *inp, const float *weight,
                                int N, int C, float eps, float offset);
void fsdpc__cpu_rmsnorm_off_bwd(float *dinp, float *dweight, const float *dout, const float *inp,
                                const float *weight, const float *rstd, int N, int C, float offset);

/* ---- matmul.c ---- nn.Linear without bias: out = inp @ weight^T */
/* Row-major C (M, N) = op(A) (M, K) @ op(B) (K, N) + beta * C, op = transpose
 * when trans_*; the same bits at any OpenMP/OpenBLAS thread count (fixed
 * output tiles, single-threaded BLAS per tile). Every CPU GEMM goes here. */
void fsdpc__cpu_sgemm(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc);
void fsdpc__cpu_matmul_fwd(float *out,          // (N, OC)
                           const float *inp,    // (N, C)
                           const float *weight, // (OC, C)
                           int N, int C, int OC);
/* dinp = dout @ weight (skipped when dinp is NULL); dweight += dout^T @ inp */
void fsdpc__cpu_matmul_bwd(float *dinp,         // (N, C) =, or NULL
                           float *dweight,      // (OC, C) +=
                           const float *dout,   // (N, OC)
                           const float *inp,    // (N, C)
                           const float *weight, // (OC, C)
                           int N, int C, int OC);

/* ---- fp8_linear.c ---- the FP8 linear emulated (ops/fp8.h), recipe
 * FSDPC_FP8_TENSORWISE or _ROWWISE; the same shapes and accumulation as
 * matmul.c (residual added when non-NULL and may alias out; dinp written,
 * or added when acc_dinp; dweight +=; either skipped when NULL). These
 * allocate their quantized copies, so they return a status. */
fsdpc_status fsdpc__cpu_fp8_linear_fwd(int recipe, float *out, const float *inp,
                                       const float *weight, const float *residual, int N, int C,
                                       int OC, fsdpc_err *err);
fsdpc_status fsdpc__cpu_fp8_linear_bwd(int recipe, float *dinp, int acc_dinp, float *dweight,
                                       const float *dout, const float *inp, const float *weight,
                                       int N, int C, int OC, fsdpc_err *err);

/* ---- rope.c ---- Hugging Face rotate_half convention (halves, not pairs)
 * over the first RD (rotary) dims of each head of HD dims; the others pass
 * through (partial rotary). For i < RD/2, c = cos[pos][i], s = sin[pos][i]:
 *   y[i]        = x[i] * c - x[i + RD/2] * s
 *   y[i + RD/2] = x[i + RD/2] * c + x[i] * s
 * cos/sin tables come from fsdpc__rope_tables (rope_table.c, below). */
void fsdpc__cpu_rope_fwd(float *x,           // (N, H, HD) in place
                         const float *cos,   // (maxT, RD/2)
                         const float *sin,   // (maxT, RD/2)
                         const int32_t *pos, // (N) position of each row
                         int N, int H, int HD, int RD);
/* The transpose (inverse rotation) applied to the gradient, in place. */
void fsdpc__cpu_rope_bwd(float *dx, // (N, H, HD) in place
                         const float *cos, const float *sin, const int32_t *pos, int N, int H,
                         int HD, int RD);

/* ---- rope_table.c ----
 * cos/sin tables for positions 0..maxT-1 of RoPE r (ops.h): angle[t][i] =
 * t * inv_freq[i], i < r->dim/2, inv_freq as transformers' rope_type computes
 * it (default, linear, dynamic, llama3, yarn, longrope with its short or,
 * when use_long, long factors), both tables times the attention factor
 * (yarn, longrope; else 1). Angles in double, stored as float. */
void fsdpc__rope_tables(float *cos, // (maxT, dim/2)
                        float *sin, // (maxT, dim/2)
                        const fsdpc_rope *r, int maxT, int use_long);
/* inv (dim/2) = the inverse frequencies of r, and the attention factor. */
void fsdpc__rope_inv_freq(const fsdpc_rope *r, int use_long, double *inv);
double fsdpc__rope_attention_factor(const fsdpc_rope *r);
/* Whether a sequence of seq_len positions uses longrope's long factors
 * (transformers: the largest position + 1 > original_max_position_embeddings). */
int fsdpc__rope_uses_long(const fsdpc_rope *r, int seq_len);

/* ---- geglu.c ---- out = gelu_tanh(gate) * up (Gemma's gelu_pytorch_tanh) */
void fsdpc__cpu_geglu_fwd(float *out, const float *gate, const float *up, int N, int F);
void fsdpc__cpu_geglu_bwd(float *dgate, float *dup, const float *dout, const float *gate,
                          const float *up, int N, int F);

/* ---- swiglu.c ---- out = silu(gate) * up */
void fsdpc__cpu_swiglu_fwd(float *out,        // (N, F)
                           const float *gate, // (N, F)
                           const float *up,   // (N, F)
                           int N, int F);
void fsdpc__cpu_swiglu_bwd(float *dgate,      // (N, F) =
                           float *dup,        // (N, F) =
                           const float *dout, // (N, F)
                           const float *gate, const float *up, int N, int F);

/* ---- residual.c ---- */
/* out = a + b (out may alias a or b) */
void fsdpc__cpu_add(float *out, const float *a, const float *b, size_t n);
/* y += x */
void fsdpc__cpu_add_inplace(float *y, const float *x, size_t n);

/* ---- cross_entropy.c ----
 * Fused lm_head + softmax cross-entropy, chunked over rows so that at most
 * chunk_rows * V fp32 logits exist at once (never the whole (N, V)).
 * Rows whose label is ignore_index (-100) contribute nothing; so does any
 * label outside [0, V), which is never read out of bounds.
 * Returns the SUM of per-token losses in *loss_sum (double) and the number
 * of counted tokens in *count. Gradients are of (grad_scale * loss_sum):
 * pass grad_scale = 1 / (counted tokens in the global batch) for HF mean.
 * dx and dweight may be NULL to skip the backward (evaluation). With
 * logits_bf16 each logit is rounded to a bf16 value (nearest even) before
 * the softmax, as the CUDA path's bf16 logits are. */
void fsdpc__cpu_lmhead_xent(double *loss_sum, int64_t *count,
                            float *dx,             // (N, C) =, or NULL
                            float *dweight,        // (V, C) +=, or NULL
                            const float *x,        // (N, C) final-norm output
                            const float *weight,   // (V, C) lm_head
                            const int32_t *labels, // (N)
                            int N, int C, int V, float grad_scale, int chunk_rows, int logits_bf16,
                            float *scratch /* (chunk_rows, V) */);
/* The same with a seed per row (sequence objectives): row r's gradient is
 * row_seed[r] * (softmax - onehot); row_seed NULL runs the forward only
 * (dx, dweight untouched). row_loss (N) gets each row's -log p(label), 0
 * for an ignored row. */
void fsdpc__cpu_lmhead_xent_rows(double *loss_sum, int64_t *count, double *row_loss,
                                 const float *row_seed, float *dx, float *dweight, const float *x,
                                 const float *weight, const int32_t *labels, int N, int C, int V,
                                 int chunk_rows, int logits_bf16, float *scratch);
/* The same on the soft-capped logits softcap * tanh(logits / softcap)
 * (Gemma 2's final_logit_softcapping; 0 = none, the plain op bit for bit). */
void fsdpc__cpu_lmhead_xent_capped(double *loss_sum, int64_t *count, float *dx, float *dweight,
                                   const float *x, const float *weight, const int32_t *labels,
                                   int N, int C, int V, float grad_scale, int chunk_rows,
                                   int logits_bf16, float softcap, float *scratch);
/* Logits for evaluation/generation: out = x @ weight^T. */
void fsdpc__cpu_logits(float *out,          // (N, V)
                       const float *x,      // (N, C)
                       const float *weight, // (V, C)
                       int N, int C, int V);

/* ---- reduce.c ---- */
/* Sum of squares in double (for the global grad norm). */
double fsdpc__cpu_sumsq(const float *x, size_t n);
/* x *= s */
void fsdpc__cpu_scale(float *x, float s, size_t n);
/* out = x + a * y, or a * y when x is NULL (out may alias x or y) */
void fsdpc__cpu_axpy(float *out, const float *x, const float *y, float a, size_t n);
/* y[n] += bias for each of N rows of OC */
void fsdpc__cpu_bias_add(float *y, const float *bias, int N, int OC);
/* dbias += the sum over the N rows of dy (OC columns), in double */
void fsdpc__cpu_bias_bwd(float *dbias, const float *dy, int N, int OC);

/* ---- attn_cache.c ---- inference over a KV cache; rows r = b * n + i.
 * kv_store: kc[b, pos[r]] = k[r], vc[b, pos[r]] = v[r]. */
void fsdpc__cpu_kv_store(float *kc,           // (B, maxT, KD)
                         float *vc,           // (B, maxT, KD)
                         const float *k,      // (B*n, KD)
                         const float *v,      // (B*n, KD)
                         const int32_t *pos,  // (B*n)
                         int B, int n, int maxT, int KD);
/* out[r] = softmax(scale * q[r] . kc[b, lo..pos[r]]) @ vc[b, lo..pos[r]] per
 * head; query head h reads kv head h / (NH / KVH); lo = 0, or with a
 * sliding window (window > 0) max(0, pos[r] - window + 1); softcap > 0: each
 * scaled score s becomes softcap * tanh(s / softcap). */
void fsdpc__cpu_attn_cached(float *out,         // (B*n, NH*HD)
                            const float *q,     // (B*n, NH*HD)
                            const float *kc,    // (B, maxT, KVH*HD)
                            const float *vc,    // (B, maxT, KVH*HD)
                            const int32_t *pos, // (B*n)
                            int B, int n, int NH, int KVH, int HD, int maxT, float scale,
                            int window, float softcap);

/* ---- dropout.c ---- LoRA: inverted dropout with a counter-hash mask (ops.h) */
void fsdpc__cpu_dropout(float *out, const float *inp, size_t n, float p, uint64_t key);

#endif
