/* The ops table: the model's compute for one device.
 *
 * The model calls every op through this table, so the same layer code runs
 * on the CPU reference (fp32 activations and weights) and on CUDA (bf16
 * activations and weights). Conventions are those of ops/cpu/ops_cpu.h:
 * activations and weights are `void *` of act_dtype; parameter gradients are
 * always fp32 and accumulated (+=); activation gradients are written (=);
 * saved statistics (rstd) are fp32. Every op takes the device context first
 * and returns a status. Pointers are in the device's memory.
 *
 * ops/cpu/table.c fills the CPU table; the CUDA table wraps ops/cuda. */
#ifndef FSDPC_OPS_OPS_H
#define FSDPC_OPS_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"
#include "util/mem.h"

/* RoPE variants, as transformers' modeling_rope_utils.py computes them
 * (rope_type; the numbers are those of model.rope_scaling.type). */
enum {
  FSDPC_ROPE_DEFAULT = 0,
  FSDPC_ROPE_LLAMA3 = 1,
  FSDPC_ROPE_LINEAR = 2,
  FSDPC_ROPE_DYNAMIC = 3,
  FSDPC_ROPE_YARN = 4,
  FSDPC_ROPE_LONGROPE = 5
};
enum { FSDPC_ROPE_MAX_FACTORS = 256 }; /* longrope factors: dim / 2 <= this */

/* What the cos/sin tables are made from (ops/cpu/rope_table.c). */
typedef struct fsdpc_rope {
  int type;      /* FSDPC_ROPE_* */
  int dim;       /* dims of a head that turn (head_dim * partial_rotary_factor), even */
  int max_pos;   /* max_position_embeddings */
  double theta;  /* rope_theta */
  double factor; /* linear, dynamic, llama3, yarn, longrope; 0 = derived (yarn, longrope) */
  double low_freq_factor, high_freq_factor; /* llama3 */
  int original_max_pos;                     /* llama3, yarn, longrope; 0 = max_pos */
  double attention_factor;                  /* yarn, longrope; 0 = derived */
  double beta_fast, beta_slow;              /* yarn; 0 = 32 and 1 */
  double mscale, mscale_all_dim;            /* yarn; 0 = unset */
  int truncate;                             /* yarn: round the correction range (default 1) */
  int n_factors;                            /* longrope: dim / 2 */
  double short_factor[FSDPC_ROPE_MAX_FACTORS], long_factor[FSDPC_ROPE_MAX_FACTORS];
} fsdpc_rope;

typedef struct fsdpc_ops {
  int32_t device;    /* FSDPC_DEVICE_* */
  int32_t act_dtype; /* FSDPC_DTYPE_F32 or FSDPC_DTYPE_BF16 */
  size_t act_size;   /* bytes per activation / weight element */
  void *ctx;         /* device context; NULL on the CPU */

  /* Memory of the device, accounted by category. alloc returns NULL when
   * out of memory; contents are unspecified. */
  void *(*alloc)(void *ctx, fsdpc_mem_cat cat, size_t bytes);
  void (*free)(void *ctx, fsdpc_mem_cat cat, void *p, size_t bytes);
  /* The device's arena (fsdp/memplan.h): one reservation, made once, that
   * the engine and the model context place their buffers in at planned
   * offsets; zero-filled on the CPU, not on a device. NULL when out of
   * memory (take_error says why on a device). account adds bytes (or, < 0,
   * takes them) to a category as a planned buffer begins or ends: the
   * arena is reserved, the categories say what lives in it. */
  void *(*arena_alloc)(void *ctx, size_t bytes);
  void (*arena_free)(void *ctx, void *p, size_t bytes);
  void (*account)(void *ctx, fsdpc_mem_cat cat, int64_t bytes);
  /* The stream device work is ordered on (cudaStream_t), NULL on the CPU. */
  void *(*stream)(void *ctx);
  /* (optional: NULL on the CPU) A second stream for collectives and events
   * to order the two (slot < FSDPC_OPS_UNIT_EVENT0 + FSDPC_OPS_UNIT_EVENTS);
   * the engine's memory is the arena's, ordered by these events. */
  void *(*comm_stream)(void *ctx);
  fsdpc_status (*event_record)(void *ctx, int slot, void *stream, fsdpc_err *err);
  fsdpc_status (*stream_wait)(void *ctx, void *stream, int slot, fsdpc_err *err);
  /* cast_params and add_f32 on a given stream (NULL = the compute stream) */
  fsdpc_status (*cast_params_on)(void *ctx, void *dst, const float *src, size_t n, void *stream,
                                 fsdpc_err *err);
  fsdpc_status (*add_f32_on)(void *ctx, float *y, const float *x, size_t n, void *stream,
                             fsdpc_err *err);
  /* host -> device and device -> host copies (plain memcpy on the CPU). */
  fsdpc_status (*upload)(void *ctx, void *dst, const void *src, size_t bytes, fsdpc_err *err);
  fsdpc_status (*download)(void *ctx, void *dst, const void *src, size_t bytes, fsdpc_err *err);
  /* cos/sin: (maxT, HD/2) fp32 in device memory (see fsdpc__rope_tables). */
  /* fp32 buffers of the engine (shards, full gradients). */
  fsdpc_status (*memset0)(void *ctx, void *p, size_t bytes, fsdpc_err *err);
  fsdpc_status (*add_f32)(void *ctx, float *y, const float *x, size_t n, fsdpc_err *err);
  /* *out (host) = sum of x^2 in double, deterministic. */
  fsdpc_status (*sumsq_f32)(void *ctx, const float *x, size_t n, double *out, fsdpc_err *err);
  /* (optional: NULL on the CPU) The same into a double in DEVICE memory,
   * written (=) or added (+=, accumulate), with no host sync: a global norm
   * over many buffers is summed in a fixed order and downloaded once. */
  fsdpc_status (*sumsq_f32_dev)(void *ctx, double *dout, const float *x, size_t n, int accumulate,
                                fsdpc_err *err);
  /* (optional: NULL on the CPU) The random init in device memory: dst (n,
   * fp32) = elements [elem_offset, elem_offset + n) of the tensor whose
   * stream is key (util/init_rng.h, equal to the CPU's bit for bit), or
   * all 1 when ones is set. */
  fsdpc_status (*init_f32)(void *ctx, float *dst, size_t n, uint64_t key, uint64_t elem_offset,
                           double std, int ones, fsdpc_err *err);
  /* (optional: NULL on the CPU, whose memory is already host memory) Pinned
   * host memory (cudaHostAlloc), for shards kept off the device; NULL when out
   * of memory. Not zeroed. */
  void *(*alloc_host)(void *ctx, size_t bytes);
  void (*free_host)(void *ctx, void *p);
  /* (optional: NULL on the CPU) Asynchronous copy in either direction between
   * pinned host and device memory, ordered on stream (NULL = the compute
   * stream); the host must not touch src/dst until the stream has passed it. */
  fsdpc_status (*copy_on)(void *ctx, void *dst, const void *src, size_t bytes, void *stream,
                          fsdpc_err *err);
  /* (optional: NULL on the CPU) dst (fp32) = src (act_dtype, bf16) on stream:
   * the way back from a bf16 reduction. */
  fsdpc_status (*cast_to_f32_on)(void *ctx, float *dst, const void *src, size_t n, void *stream,
                                 fsdpc_err *err);
  /* Full parameter buffer in act_dtype from an fp32 shard: dst = cast(src)
   * (a plain copy when act_dtype is fp32). */
  fsdpc_status (*cast_params)(void *ctx, void *dst, const float *src, size_t n, fsdpc_err *err);
  /* Waits for all device work (reading results, timing). */
  fsdpc_status (*sync)(void *ctx, fsdpc_err *err);
  /* cos/sin (maxT, r->dim / 2) of fsdpc__rope_tables; use_long: longrope's
   * long factors (a sequence longer than original_max_pos). */
  fsdpc_status (*rope_tables)(void *ctx, float *cos, float *sin, const fsdpc_rope *r, int maxT,
                              int use_long, fsdpc_err *err);

  fsdpc_status (*embedding_fwd)(void *ctx, void *out, const int32_t *tokens, const void *wte,
                                int N, int C, int V, fsdpc_err *err);
  fsdpc_status (*embedding_bwd)(void *ctx, float *dwte, const void *dout, const int32_t *tokens,
                                int N, int C, int V, fsdpc_err *err);
  fsdpc_status (*rmsnorm_fwd)(void *ctx, void *out, float *rstd, const void *inp,
                              const void *weight, int N, int C, float eps, fsdpc_err *err);
  fsdpc_status (*rmsnorm_bwd)(void *ctx, void *dinp, float *dweight, const void *dout,
                              const void *inp, const void *weight, const float *rstd, int N,
                              int C, fsdpc_err *err);
  /* out = inp @ weight^T (+ residual when non-NULL; residual may alias out) */
  fsdpc_status (*matmul_fwd)(void *ctx, void *out, const void *inp, const void *weight,
                             const void *residual, int N, int C, int OC, fsdpc_err *err);
  /* dinp = dout @ weight (skipped when NULL); dweight += dout^T @ inp */
  fsdpc_status (*matmul_bwd)(void *ctx, void *dinp, float *dweight, const void *dout,
                             const void *inp, const void *weight, int N, int C, int OC,
                             fsdpc_err *err);
  /* In place on the first RD of each head's HD dims (partial rotary: the
   * rest pass through); cos/sin (maxT, RD/2). */
  fsdpc_status (*rope_fwd)(void *ctx, void *x, const float *cos, const float *sin,
                           const int32_t *pos, int N, int H, int HD, int RD, int maxT,
                           fsdpc_err *err);
  fsdpc_status (*rope_bwd)(void *ctx, void *dx, const float *cos, const float *sin,
                           const int32_t *pos, int N, int H, int HD, int RD, int maxT,
                           fsdpc_err *err);
  fsdpc_status (*swiglu_fwd)(void *ctx, void *out, const void *gate, const void *up, int N,
                             int F, fsdpc_err *err);
  fsdpc_status (*swiglu_bwd)(void *ctx, void *dgate, void *dup, const void *dout,
                             const void *gate, const void *up, int N, int F, fsdpc_err *err);
  /* out = a + b (may alias); y += x */
  fsdpc_status (*add)(void *ctx, void *out, const void *a, const void *b, size_t n,
                      fsdpc_err *err);
  fsdpc_status (*add_inplace)(void *ctx, void *y, const void *x, size_t n, fsdpc_err *err);
  /* Fused lm_head + cross-entropy, chunked over rows. out2 (device memory):
   * [0] = sum of token losses, [1] = counted tokens, written (=). dx and
   * dweight may be NULL (evaluation). logits_bf16: the logits are rounded
   * to bf16 before the fp32 softmax (fsdp.mixed_precision.logits_dtype). */
  size_t (*xent_scratch_bytes)(int N, int V, int chunk_rows, int logits_bf16);
  fsdpc_status (*lmhead_xent)(void *ctx, double *out2, void *dx, float *dweight, const void *x,
                              const void *weight, const int32_t *labels, int N, int C, int V,
                              float grad_scale, int chunk_rows, int logits_bf16, void *scratch,
                              size_t scratch_bytes, fsdpc_err *err);
  /* fp32 logits: out (N, V) = x @ weight^T */
  fsdpc_status (*logits)(void *ctx, float *out, const void *x, const void *weight, int N, int C,
                         int V, fsdpc_err *err);
  /* Inference over a KV cache (core/src/infer); rows r = b * n + i, pos (B*n)
   * in device memory, kc/vc (B, maxT, KVH*HD) of act_dtype.
   * kv_store: kc[b, pos[r]] = k[r], vc[b, pos[r]] = v[r].
   * attn_cached: out[r] (NH*HD) = softmax(scale * q[r] . kc[b, lo..pos[r]])
   * @ vc[b, lo..pos[r]], query head h on kv head h / (NH / KVH); lo = 0, or
   * pos[r] - window + 1 with a sliding window (window > 0); softcap > 0:
   * each scaled score s becomes softcap * tanh(s / softcap) (Gemma 2). */
  fsdpc_status (*kv_store)(void *ctx, void *kc, void *vc, const void *k, const void *v,
                           const int32_t *pos, int B, int n, int maxT, int KD, fsdpc_err *err);
  fsdpc_status (*attn_cached)(void *ctx, void *out, const void *q, const void *kc, const void *vc,
                              const int32_t *pos, int B, int n, int NH, int KVH, int HD, int maxT,
                              float scale, int window, float softcap, fsdpc_err *err);
  /* LoRA (model/lora.h), act_dtype, n elements. scale: x *= s. dropout:
   * out[i] = inp[i] * keep(key, i) / (1 - p), keep(key, i) = the top 24 bits
   * of splitmix64(key + i) >= p * 2^24 (the same mask on every device); out
   * may alias inp. */
  fsdpc_status (*scale)(void *ctx, void *x, size_t n, float s, fsdpc_err *err);
  fsdpc_status (*dropout)(void *ctx, void *out, const void *inp, size_t n, float p, uint64_t key,
                          fsdpc_err *err);
  /* (optional: NULL on the CPU, whose alloc and free fail only for want of
   * memory) The error behind the last failed alloc, arena_alloc or free,
   * which report by NULL or not at all; taken: OK when none is
   * kept. Read it through fsdpc__ops_oom and fsdpc__ops_freed. */
  fsdpc_status (*take_error)(void *ctx, fsdpc_err *err);
  /* (optional: NULL on the CPU, where the layer keeps the unfused sequence
   * and so its exact rounding) Fusions of the decoder layer's backward:
   * matmul_bwd_acc is matmul_bwd with dinp ACCUMULATED (+=), so the
   * gradients of q/k/v (gate/up) add up inside the GEMMs; rmsnorm_bwd_add is
   * rmsnorm_bwd then dinp += dresid (the residual path) in one pass (dinp may
   * alias dresid). */
  fsdpc_status (*matmul_bwd_acc)(void *ctx, void *dinp, float *dweight, const void *dout,
                                 const void *inp, const void *weight, int N, int C, int OC,
                                 fsdpc_err *err);
  fsdpc_status (*rmsnorm_bwd_add)(void *ctx, void *dinp, float *dweight, const void *dout,
                                  const void *dresid, const void *inp, const void *weight,
                                  const float *rstd, int N, int C, fsdpc_err *err);
  /* out[r] (device int32) = argmax of the fp32 row x[r, 0..V), the lowest id
   * on ties (greedy decoding without sending logits to the host). */
  fsdpc_status (*argmax_rows)(void *ctx, int32_t *out, const float *x, int N, int V,
                              fsdpc_err *err);
  /* (optional: NULL on the CPU) The calling host thread (any thread) waits
   * until event slot has completed: the offloaded optimizer's worker waits
   * for one unit's gradient copy this way. Slots >= 64 are the engine's
   * per-unit slots (FSDPC_OPS_UNIT_EVENTS of them). */
  fsdpc_status (*event_sync)(void *ctx, int slot, fsdpc_err *err);
  /* (optional: NULL on the CPU, which keeps zeroed gradients and its exact
   * sums) on = 1: until called with 0, the weight gradients of matmul_bwd,
   * matmul_bwd_acc, rmsnorm_bwd, rmsnorm_bwd_add and lmhead_xent are
   * WRITTEN (=), not accumulated (+=): the first micro-batch after an
   * optimizer step writes gradients that were never zeroed (fsdp/step.c). */
  void (*grad_overwrite)(void *ctx, int on);
  /* (optional: NULL on the CPU) A third stream for device-to-host copies
   * (cpu_offload's gradients), so that they do not queue behind the comm
   * stream's uploads; ordered with the others through events. */
  void *(*d2h_stream)(void *ctx);
  /* The decoder families' ops (config/family.h). bias_add: y[n] += bias
   * (N rows of OC, act_dtype). bias_bwd: dbias (fp32, OC) += the column sums
   * of dy (written under grad_overwrite). axpy: out = x + a * y, or a * y
   * when x is NULL; out may alias x or y. */
  fsdpc_status (*bias_add)(void *ctx, void *y, const void *bias, int N, int OC, fsdpc_err *err);
  fsdpc_status (*bias_bwd)(void *ctx, float *dbias, const void *dy, int N, int OC, fsdpc_err *err);
  fsdpc_status (*axpy)(void *ctx, void *out, const void *x, const void *y, float a, size_t n,
                       fsdpc_err *err);
  /* (optional: NULL where the device has no FP8 GEMM) The decoder layers'
   * linear projections under fsdp.mixed_precision.linear: fp8 (ops/fp8.h):
   * matmul_fwd and matmul_bwd with both operands of each GEMM quantized by
   * recipe (FSDPC_FP8_TENSORWISE or _ROWWISE), fp32 accumulation, outputs
   * in act_dtype (dweight fp32, +=, or = under grad_overwrite); dinp_acc:
   * dinp is accumulated (+=) as in matmul_bwd_acc. scratch: device memory
   * for the FP8 copies (fsdpc__fp8_linear_scratch_bytes(N, C, OC) bytes of
   * ops/fp8.h), or NULL (a device then takes it from its pool; the CPU
   * emulation, in fp32 (ops/cpu/fp8_linear.c), allocates its own).
   * inp_again: the caller's promise that inp is, unchanged, the input of
   * the previous call in the same direction with the same scratch (q, k, v
   * and gate, up share theirs), so a device may use the FP8 copy it left
   * there instead of casting inp again (the same codes: a hint, never a
   * change of result). */
  fsdpc_status (*fp8_matmul_fwd)(void *ctx, int recipe, void *out, const void *inp, int inp_again,
                                 const void *weight, const void *residual, int N, int C, int OC,
                                 void *scratch, size_t scratch_bytes, fsdpc_err *err);
  fsdpc_status (*fp8_matmul_bwd)(void *ctx, int recipe, void *dinp, int dinp_acc, float *dweight,
                                 const void *dout, const void *inp, int inp_again,
                                 const void *weight, int N, int C, int OC, void *scratch,
                                 size_t scratch_bytes, fsdpc_err *err);
  /* (optional: NULL where a device lacks it, and the head refuses
   * sequence objectives) lmhead_xent for objectives on sequence log-probs:
   * row r's gradient is row_seed[r] * (softmax - onehot) (host memory, N;
   * NULL: the forward only, dx and dweight untouched); row_loss (host
   * memory, N) gets each row's -log p(label), 0 for an ignored row; out2 as
   * lmhead_xent's. On CUDA the seeds go up and the losses come down with a
   * sync of the compute stream. */
  fsdpc_status (*lmhead_xent_rows)(void *ctx, double *out2, double *row_loss, const float *row_seed,
                                   void *dx, float *dweight, const void *x, const void *weight,
                                   const int32_t *labels, int N, int C, int V, int chunk_rows,
                                   int logits_bf16, void *scratch, size_t scratch_bytes,
                                   fsdpc_err *err);
  /* (optional: NULL on the CPU, which dequantizes on the host) One NF4
   * tensor (quant/nf4.h) into act_dtype on stream, from device bytes: codes,
   * qabsmax, scales (absmax2 or absmax) and the fp32 offset at any byte
   * offset; map: fsdpc__dynamic_map's (host). fsdp/nf4_unit.h. */
  fsdpc_status (*nf4_dequant)(void *ctx, void *out, const uint8_t *codes, const uint8_t *qabsmax,
                              const uint8_t *scales, const uint8_t *offset, uint64_t n, int block,
                              int dq, const float *map, void *stream, fsdpc_err *err);
  /* (optional: NULL on the CPU, which quantizes on the host) fsdpc__nf4_quantize
   * of n finite fp32 values x in device memory, on stream: codes and absmax
   * (fp32, aligned) and, with dq, qabsmax and absmax2 (fp32, aligned) in
   * device memory, *offset on the host (the call waits for the stream to
   * read the scales back). Bit for bit the host's. */
  fsdpc_status (*nf4_quant)(void *ctx, uint8_t *codes, float *absmax, uint8_t *qabsmax,
                            float *absmax2, float *offset, const float *x, uint64_t n, int block,
                            int dq, const float *map, void *stream, fsdpc_err *err);
  /* (optional: NULL where the device lacks them; the model context refuses
   * a model that needs one) Gemma 2's ops. rmsnorm_off_*: rmsnorm_* with
   * (offset + weight) for the weight, added in fp32. geglu_*: swiglu_* with
   * gelu's tanh approximation for silu. lmhead_xent_capped: lmhead_xent on
   * the soft-capped logits softcap * tanh(logits / softcap). */
  fsdpc_status (*rmsnorm_off_fwd)(void *ctx, void *out, float *rstd, const void *inp,
                                  const void *weight, int N, int C, float eps, float offset,
                                  fsdpc_err *err);
  fsdpc_status (*rmsnorm_off_bwd)(void *ctx, void *dinp, float *dweight, const void *dout,
                                  const void *inp, const void *weight, const float *rstd, int N,
                                  int C, float offset, fsdpc_err *err);
  fsdpc_status (*geglu_fwd)(void *ctx, void *out, const void *gate, const void *up, int N, int F,
                            fsdpc_err *err);
  fsdpc_status (*geglu_bwd)(void *ctx, void *dgate, void *dup, const void *dout, const void *gate,
                            const void *up, int N, int F, fsdpc_err *err);
  fsdpc_status (*lmhead_xent_capped)(void *ctx, double *out2, void *dx, float *dweight,
                                     const void *x, const void *weight, const int32_t *labels,
                                     int N, int C, int V, float grad_scale, int chunk_rows,
                                     int logits_bf16, float softcap, void *scratch,
                                     size_t scratch_bytes, fsdpc_err *err);
  /* (optional: NULL = matmul_fwd then bias_add, as the CPU does) matmul_fwd
   * with a projection's bias (act_dtype, OC) added before the output is
   * rounded (CUDA: in the cuBLASLt epilogue). */
  fsdpc_status (*matmul_bias_fwd)(void *ctx, void *out, const void *inp, const void *weight,
                                  const void *bias, const void *residual, int N, int C, int OC,
                                  fsdpc_err *err);
} fsdpc_ops;

/* Event slots: 0..95 for the engine's streams, then one per unit. */
enum { FSDPC_OPS_UNIT_EVENT0 = 96, FSDPC_OPS_UNIT_EVENTS = 256 };

/* Alignment of every buffer in an arena (fsdp/memplan.h): a cache line on
 * the CPU, what cudaMalloc gives on a device. */
static inline size_t fsdpc__ops_arena_align(int32_t device) {
  return device == FSDPC_DEVICE_CPU ? 64 : 256;
}

/* Bytes of the fused lm-head + cross-entropy's scratch on a device: the
 * CPU's fp32 logits of one chunk; CUDA's fp32 logits (unless they are bf16),
 * their bf16 gradient and the per-row losses (ops.c; the tables'
 * xent_scratch_bytes answer with it). */
size_t fsdpc__xent_scratch_bytes(int32_t device, int N, int V, int chunk_rows, int logits_bf16);

/* After alloc or arena_alloc gave NULL: the device's own reason when it kept
 * one (a device fault must not read as "out of memory"), as "<what>:
 * <reason>"; else "out of memory <what>". what is a printf format, e.g.
 * "gathering unit %s (%zu bytes)". (ops.c) */
fsdpc_status fsdpc__ops_oom(const fsdpc_ops *ops, fsdpc_err *err, const char *fmt, ...)
    FSDPC_PRINTF(3, 4);
/* After free: the error the free kept, if any (else OK). */
fsdpc_status fsdpc__ops_freed(const fsdpc_ops *ops, fsdpc_err *err);

/* The CPU reference table (ops/cpu/table.c). */
const fsdpc_ops *fsdpc__ops_cpu(void);
/* The CPU table in out, its ops run by teams of *threads OpenMP threads
 * (<= 0: OpenMP's default); threads must outlive out. Returns out. */
const fsdpc_ops *fsdpc__ops_cpu_team(fsdpc_ops *out, const int *threads);

/* The CUDA table over a device context (ops/cuda/table_cuda.c; CUDA builds
 * only). ctx is an fsdpc_cuda_ctx. */
void fsdpc__ops_cuda(void *cuda_ctx, fsdpc_ops *out);

#endif
