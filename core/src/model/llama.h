/* The Llama decoder (Hugging Face LlamaForCausalLM semantics), fp32 on CPU.
 *
 * The model does not own its weights: the FSDP engine owns flat unit buffers
 * and hands the model pointers (views) for the blocks it runs. A "block" is
 * the unit of compute the engine schedules:
 *   block 0          token embedding
 *   block 1 .. L     decoder layer l = block - 1
 *   block L + 1      final RMSNorm + lm_head + cross-entropy ("head")
 *
 * Dimensions: B batch, T sequence, N = B*T tokens, C hidden, F intermediate,
 * NH query heads, KVH key/value heads, HD head dim, V vocab, L layers.
 * Gradient rule: parameter grads +=, activation grads =.
 */
#ifndef FSDPC_MODEL_LLAMA_H
#define FSDPC_MODEL_LLAMA_H

#include <stdint.h>

#include "ops/ops.h"
#include "plugin/registry.h"
#include "util/err.h"

typedef struct fsdpc_model_shape {
  int V, C, F, L, NH, KVH, HD;
  int max_pos;
  float eps;
  double rope_theta;
  int rope_llama3;          /* 1 = llama3 rope_scaling */
  double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
  int rope_original_max_pos;
  int tied;                 /* lm_head shares embed_tokens */
  int bos_id, eos_id;
} fsdpc_model_shape;

/* Parameter kinds, in Hugging Face named_parameters() order per module. */
typedef enum fsdpc_param_kind {
  FSDPC_P_EMBED,
  FSDPC_P_Q,
  FSDPC_P_K,
  FSDPC_P_V,
  FSDPC_P_O,
  FSDPC_P_GATE,
  FSDPC_P_UP,
  FSDPC_P_DOWN,
  FSDPC_P_LN1,
  FSDPC_P_LN2,
  FSDPC_P_NORM,
  FSDPC_P_HEAD,
  /* LoRA adapters (model/lora.h): projection j = kind - FSDPC_P_Q (0..6) has
   * A at FSDPC_P_LORA0 + 2 j and B at FSDPC_P_LORA0 + 2 j + 1. */
  FSDPC_P_LORA0,
  FSDPC_P_NKIND = FSDPC_P_LORA0 + 14
} fsdpc_param_kind;

enum { FSDPC_LAYER_NPARAM = 9 }; /* Q K V O GATE UP DOWN LN1 LN2 */

typedef struct fsdpc_param_info {
  char name[96];          /* HF name */
  char module[48];        /* "model.embed_tokens", "model.layers.3", ... */
  const char *module_type;/* "embedding", "decoder_layer", "norm", "lm_head" */
  int kind;               /* fsdpc_param_kind */
  int layer;              /* decoder layer or -1 */
  int block;              /* compute block that uses it first (see above) */
  int ndim;
  int64_t shape[2];
  uint64_t numel;
  int decay;              /* 1 for matrices; 0 for norms (optional no-decay) */
  int tie_group;          /* 0 for a tied embedding, else -1 */
  int frozen;             /* 1 = no gradient, no optimizer state (the base under LoRA) */
} fsdpc_param_info;

/* Parameters in module order; *n is their count. Caller frees *out. */
fsdpc_status fsdpc__model_params(const fsdpc_model_shape *s, fsdpc_param_info **out, int *n,
                                 fsdpc_err *err);
uint64_t fsdpc__model_numel(const fsdpc_model_shape *s);
fsdpc_status fsdpc__model_shape_check(const fsdpc_model_shape *s, fsdpc_err *err);

/* Weights of one decoder layer: views into a gathered unit buffer, of the
 * ops table's act_dtype (fp32 on the CPU, bf16 on CUDA). */
typedef struct fsdpc_layer_w {
  const void *wq;    /* (NH*HD, C) */
  const void *wk;    /* (KVH*HD, C) */
  const void *wv;    /* (KVH*HD, C) */
  const void *wo;    /* (C, NH*HD) */
  const void *wgate; /* (F, C) */
  const void *wup;   /* (F, C) */
  const void *wdown; /* (C, F) */
  const void *ln1;   /* (C) */
  const void *ln2;   /* (C) */
  /* LoRA adapters of projection j (Q K V O GATE UP DOWN), NULL when it has
   * none: A (r, in), B (out, r). */
  const void *lora_a[7], *lora_b[7];
} fsdpc_layer_w;

/* Gradients; NULL for a frozen weight (no weight gradient is computed). */
typedef struct fsdpc_layer_g {
  float *wq, *wk, *wv, *wo, *wgate, *wup, *wdown, *ln1, *ln2; /* +=, same shapes */
  float *lora_a[7], *lora_b[7];
} fsdpc_layer_g;

/* Per-step compute context: shapes, scratch and the attention component. */
typedef struct fsdpc_model_ctx fsdpc_model_ctx;

typedef struct fsdpc_model_ctx_opts {
  const fsdpc_model_shape *shape;
  int B, T;                         /* micro-batch shape */
  int activation_checkpointing;     /* 0; FSDPC_AC_FULL: keep layer inputs only, recompute;
                                     * FSDPC_AC_SAVE_MLP: also keep each layer's gate, up */
  const fsdpc_component *attention; /* attention plugin component */
  const fsdpc_opts *attention_opts;
  int xent_chunk_rows;              /* rows per chunk of the fused CE (0 = auto) */
  int logits_bf16;                  /* the fused CE rounds its logits to bf16 */
  const fsdpc_ops *ops;             /* device ops table; NULL = the CPU reference */
  const struct fsdpc_lora *lora;    /* LoRA adapters (model/lora.h); NULL = none */
  int threads;                      /* CPU threads for the attention plugin (0: its choice) */
  int forward_only;                 /* inference: no backward buffers (no backward calls) */
  /* A block of device memory the buffers are carved from, in order (the
   * engine's arena, fsdp/memplan.h), of fsdpc__model_ctx_arena_bytes;
   * NULL: each buffer from ops->alloc. */
  void *arena;
  size_t arena_bytes;
} fsdpc_model_ctx_opts;

fsdpc_status fsdpc__model_ctx_create(const fsdpc_model_ctx_opts *o, fsdpc_model_ctx **out,
                                     fsdpc_err *err);
void fsdpc__model_ctx_destroy(fsdpc_model_ctx *m);
/* Bytes of activation memory the context holds (for the planner/logs). */
uint64_t fsdpc__model_ctx_bytes(const fsdpc_model_ctx *m);
/* The same number without allocating, from the shapes and the attention
 * plugin's sizes() answer (the memory planner). Kept equal to
 * fsdpc__model_ctx_bytes by tests/bench/test_plan.c. */
/* Rows per chunk of the fused lm-head + cross-entropy: opt when > 0, else
 * the largest multiple of 64 with at most 2^28 logits in a chunk (2048 rows
 * for a 128k vocabulary: few, large GEMMs; the fp32 weight-gradient
 * accumulation reads and writes the whole (V, C) matrix once per chunk).
 * At most N. */
int fsdpc__model_xent_chunk_rows(int opt, int N, int V);
/* The block the context of o takes on a device (o->ops is not read): each
 * buffer rounded up to align, in the order the context carves them; as is
 * the attention plugin's sizes() answer for o's shape. *tracked: the bytes
 * it accounts as activations (the buffers' own sizes). Counted by the very
 * code that carves them, so the two cannot differ. */
uint64_t fsdpc__model_ctx_arena_bytes(const fsdpc_model_ctx_opts *o, const fsdpc_attn_sizes *as,
                                      int32_t device, size_t act_size, size_t align,
                                      uint64_t *tracked);
uint64_t fsdpc__model_ctx_bytes_for(const fsdpc_model_shape *s, int B, int T,
                                    int activation_checkpointing, const fsdpc_attn_sizes *as,
                                    int xent_chunk_rows);

/* Sets the micro-batch about to run: tokens, labels (-100 ignored) and doc
 * ids (may be NULL), each (B, T) in host memory; positions are 0..T-1 per
 * row without doc ids, and restart at 0 with each document when given. On the CPU the arrays are used in place (they must outlive the
 * micro-batch); on a device they are copied. */
fsdpc_status fsdpc__model_set_batch(fsdpc_model_ctx *m, const int32_t *tokens,
                                    const int32_t *labels, const int32_t *doc_ids,
                                    fsdpc_err *err);

/* Forward of each block, in order. */
fsdpc_status fsdpc__model_embed_fwd(fsdpc_model_ctx *m, const void *wte, fsdpc_err *err);
fsdpc_status fsdpc__model_layer_fwd(fsdpc_model_ctx *m, int l, const fsdpc_layer_w *w,
                                    fsdpc_err *err);
/* Final norm + lm_head + CE. Returns the loss sum and counted tokens of the
 * micro-batch. With grad_scale != 0 it also runs the head's backward
 * (dnorm +=, dhead +=) and leaves d(residual) for layer L-1. */
fsdpc_status fsdpc__model_head_fwd_bwd(fsdpc_model_ctx *m, const void *norm_w,
                                       const void *head_w, float grad_scale, float *dnorm_w,
                                       float *dhead_w, double *loss_sum, int64_t *count,
                                       fsdpc_err *err);
/* Keeps the loss on the device (on = 1, devices with pinned host memory
 * only; a no-op on the CPU): until it is turned off, head_fwd_bwd returns
 * 0 and 0 and copies each micro-batch's loss asynchronously into a pinned
 * host slot, so a step has no host sync for its loss. After the device has
 * passed the step (a sync), fsdpc__model_deferred_losses adds the deferred
 * losses to *loss_sum and *count in micro-batch order and forgets them. */
void fsdpc__model_defer_loss(fsdpc_model_ctx *m, int on);
void fsdpc__model_deferred_losses(fsdpc_model_ctx *m, double *loss_sum, int64_t *count);
/* on = 1 (where the ops table has grad_overwrite; else a no-op): until it
 * is turned off, layer_bwd and head_fwd_bwd WRITE the decoder layers', the
 * final norm's and the head's weight gradients (each exactly once per
 * micro-batch, the head first) instead of adding into them, so the caller
 * need not zero them before a step's first micro-batch. The embedding
 * still adds (tied, into what the head wrote). Off with LoRA (its own
 * gradients accumulate). Returns whether the gradients are now written. */
int fsdpc__model_grad_overwrite(fsdpc_model_ctx *m, int on);
/* Backward of each block, in reverse. */
fsdpc_status fsdpc__model_layer_bwd(fsdpc_model_ctx *m, int l, const fsdpc_layer_w *w,
                                    const fsdpc_layer_g *g, fsdpc_err *err);
fsdpc_status fsdpc__model_embed_bwd(fsdpc_model_ctx *m, float *dwte, fsdpc_err *err);

/* Logits at position pos of each row after a forward through the layers
 * (generation: with causal attention, positions after pos do not matter):
 * out (B, V). */
fsdpc_status fsdpc__model_logits_at(fsdpc_model_ctx *m, int pos, const void *norm_w,
                                    const void *head_w, float *out, fsdpc_err *err);

/* Layer weight/grad views from a block's base pointers; `base[k]` is the
 * pointer of parameter kind k of that layer. */
void fsdpc__layer_views(void *const base[FSDPC_P_NKIND], fsdpc_layer_w *w);
void fsdpc__layer_grad_views(float *const base[FSDPC_P_NKIND], fsdpc_layer_g *g);

/* World-size-independent init: the value of element i of parameter `name`
 * depends only on (seed, name, i). Norm weights are 1. Fills dst with
 * elements [elem_offset, elem_offset + n). */
void fsdpc__model_init_range(const fsdpc_param_info *p, uint64_t seed, double std,
                             uint64_t elem_offset, uint64_t n, float *dst);
/* 1 for the weights the init sets to 1 (RMSNorm scales), 0 for the ones it
 * draws from normal(0, std^2) with stream fsdpc__init_key(seed, name). */
int fsdpc__model_init_is_ones(const fsdpc_param_info *p);
/* Its stream: fsdpc__init_key(seed, p->name) (util/init_rng.h). */
uint64_t fsdpc__model_init_key(const fsdpc_param_info *p, uint64_t seed);

#endif
