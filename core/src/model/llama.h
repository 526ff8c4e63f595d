/* The decoder (Hugging Face LlamaForCausalLM semantics and the families
 * model/family.h describes as switches of it), fp32 on CPU.
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

#include "config/family.h"
#include "ops/ops.h"
#include "plugin/registry.h"
#include "util/err.h"

/* The MLP's gate activation: silu (SwiGLU) or gelu with the tanh
 * approximation (GeGLU, Gemma's gelu_pytorch_tanh). */
enum { FSDPC_ACT_SILU = 0, FSDPC_ACT_GELU_TANH = 1 };

/* The model description: shape and switches. One decoder computes every
 * family; each switch is a branch of the layer's op sequence (layer.c) or a
 * parameter of an op. */
typedef struct fsdpc_model_shape {
  int V, C, F, L, NH, KVH, HD;
  int max_pos;
  float eps;
  fsdpc_rope rope; /* RoPE variant; rope.dim = rotary dims of a head (ops.h) */
  /* The RoPE of the sliding_attention layers when it differs from rope's
   * (Gemma 3's rope_local_base_freq); dim 0 = every layer uses rope. */
  fsdpc_rope rope_local;
  int tied;        /* lm_head shares embed_tokens */
  int bos_id, eos_id;
  int family;           /* FSDPC_FAMILY_*: tensor names, fused layouts */
  int bias_qkv, bias_o; /* q/k/v and o projection biases */
  int bias_mlp;         /* gate/up/down projection biases */
  int qk_norm;          /* FSDPC_QK_NORM_* */
  int norm_pre;         /* RMSNorm on each sublayer's input (Llama) */
  int norm_post;        /* RMSNorm on each sublayer's output before the residual (OLMo 2) */
  int fused_qkv;        /* one qkv_proj tensor: q, k, v rows stacked (Phi-3) */
  int fused_gate_up;    /* one gate_up_proj tensor: gate then up rows (Phi-3) */
  float embed_mult;     /* embeddings times this (Granite embedding_multiplier; 1) */
  float resid_mult;     /* sublayer outputs times this (Granite residual_multiplier; 1) */
  float logits_div;     /* logits divided by this (Granite logits_scaling; 1) */
  float attn_scale;     /* softmax scale; 0 = 1/sqrt(HD) (Granite attention_multiplier) */
  float norm_offset;    /* every RMSNorm scales by (norm_offset + weight) in fp32 (Gemma: 1; 0) */
  int act;              /* FSDPC_ACT_*: the MLP's gate activation */
  float attn_softcap;   /* attention scores become c tanh(s / c); 0 = none (Gemma 2) */
  float logit_softcap;  /* logits become c tanh(z / c); 0 = none (Gemma 2) */
  int window;           /* sliding window in tokens, 0 = none ... */
  uint64_t window_layers[FSDPC_WINDOW_MAX_LAYERS / 64]; /* ... on the layers whose bit is set
                                                         * (the sliding_attention layers) */
} fsdpc_model_shape;

/* Parameter kinds. A layer's kinds run from FSDPC_P_Q to FSDPC_P_LN2; a
 * fused tensor is listed under its first kind (qkv_proj as FSDPC_P_Q,
 * gate_up_proj as FSDPC_P_GATE) and the layer finds the others inside it.
 * The list's order is the family's named_parameters() order (params.c). */
typedef enum fsdpc_param_kind {
  FSDPC_P_EMBED,
  FSDPC_P_Q,
  FSDPC_P_K,
  FSDPC_P_V,
  FSDPC_P_O,
  FSDPC_P_GATE,
  FSDPC_P_UP,
  FSDPC_P_DOWN,
  FSDPC_P_BQ, /* biases of Q K V O GATE UP DOWN, in that order */
  FSDPC_P_BK,
  FSDPC_P_BV,
  FSDPC_P_BO,
  FSDPC_P_BGATE,
  FSDPC_P_BUP,
  FSDPC_P_BDOWN,
  FSDPC_P_QNORM,     /* q_norm: (HD) per head, or (NH*HD) per projection */
  FSDPC_P_KNORM,     /* k_norm */
  FSDPC_P_POST_ATTN, /* RMSNorm on the attention output (norm_post) */
  FSDPC_P_POST_MLP,  /* RMSNorm on the MLP output (norm_post) */
  FSDPC_P_LN1,       /* RMSNorm on the attention input (norm_pre) */
  FSDPC_P_LN2,       /* RMSNorm on the MLP input (norm_pre) */
  FSDPC_P_NORM,
  FSDPC_P_HEAD,
  /* LoRA adapters (model/lora.h): projection j = kind - FSDPC_P_Q (0..6) has
   * A at FSDPC_P_LORA0 + 2 j and B at FSDPC_P_LORA0 + 2 j + 1. */
  FSDPC_P_LORA0,
  FSDPC_P_NKIND = FSDPC_P_LORA0 + 14
} fsdpc_param_kind;

enum { FSDPC_LAYER_NPARAM = FSDPC_P_LN2 - FSDPC_P_Q + 1 }; /* at most, per layer */

typedef struct fsdpc_param_info {
  char name[96];           /* HF name */
  char module[48];         /* "model.embed_tokens", "model.layers.3", ... */
  const char *module_type; /* "embedding", "decoder_layer", "norm", "lm_head" */
  int kind;                /* fsdpc_param_kind */
  int layer;               /* decoder layer or -1 */
  int block;               /* compute block that uses it first (see above) */
  int ndim;
  int64_t shape[2];
  uint64_t numel;
  int decay;     /* 1 for matrices; 0 for norms (optional no-decay) */
  int tie_group; /* 0 for a tied embedding, else -1 */
  int frozen;    /* 1 = no gradient, no optimizer state (the base under LoRA) */
  int init_zero; /* the init sets it to 0 (a norm scaling by 1 + weight) */
} fsdpc_param_info;

/* Parameters in module order; *n is their count. Caller frees *out. */
fsdpc_status fsdpc__model_params(const fsdpc_model_shape *s, fsdpc_param_info **out, int *n,
                                 fsdpc_err *err);
uint64_t fsdpc__model_numel(const fsdpc_model_shape *s);
fsdpc_status fsdpc__model_shape_check(const fsdpc_model_shape *s, fsdpc_err *err);
/* The switches of a plain Llama on a shape whose sizes are set (rope.dim =
 * HD, norms before each sublayer, multipliers 1; rope.theta 10000 unless
 * set): for shapes made without a config (tests, tools). */
void fsdpc__model_shape_llama(fsdpc_model_shape *s);
/* The module under "model.layers.N." of a layer's parameter kind in s's
 * family ("self_attn.qkv_proj", "post_feedforward_layernorm", ...); *is_bias
 * = 1 for a projection's bias. */
const char *fsdpc__layer_module(const fsdpc_model_shape *s, int kind, int *is_bias);

/* Weights of one decoder layer: views into a gathered unit buffer, of the
 * ops table's act_dtype (fp32 on the CPU, bf16 on CUDA). */
typedef struct fsdpc_layer_w {
  const void *wq;    /* (NH*HD, C) */
  const void *wk;    /* (KVH*HD, C); NULL when fused into wq */
  const void *wv;    /* (KVH*HD, C); NULL when fused into wq */
  const void *wo;    /* (C, NH*HD) */
  const void *wgate; /* (F, C) */
  const void *wup;   /* (F, C); NULL when fused into wgate */
  const void *wdown; /* (C, F) */
  const void *ln1;   /* (C), or NULL without norm_pre */
  const void *ln2;   /* (C), or NULL without norm_pre */
  /* The switches' weights, NULL when the model has none: biases of
   * Q K V O GATE UP DOWN (out features), q/k norms, post norms (C). */
  const void *bias[7];
  const void *qnorm, *knorm, *post_attn, *post_mlp;
  /* LoRA adapters of projection j (Q K V O GATE UP DOWN), NULL when it has
   * none: A (r, in), B (out, r). */
  const void *lora_a[7], *lora_b[7];
} fsdpc_layer_w;

/* Gradients; NULL for a frozen weight (no weight gradient is computed). */
typedef struct fsdpc_layer_g {
  float *wq, *wk, *wv, *wo, *wgate, *wup, *wdown, *ln1, *ln2; /* +=, same shapes */
  float *bias[7], *qnorm, *knorm, *post_attn, *post_mlp;
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
  int xent_chunk_rows;  /* rows per chunk of the fused CE (0 = auto) */
  int logits_bf16;      /* the fused CE rounds its logits to bf16 */
  int linear_fp8;       /* the layers' projections through ops->fp8_matmul_*: 0, or the recipe */
  const fsdpc_ops *ops; /* device ops table; NULL = the CPU reference */
  const struct fsdpc_lora *lora; /* LoRA adapters (model/lora.h); NULL = none */
  int threads;                   /* CPU threads for the attention plugin (0: its choice) */
  int forward_only;              /* inference: no backward buffers (no backward calls) */
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

/* The attention softmax scale of s (attn_scale, else 1/sqrt(HD)). */
float fsdpc__model_attn_scale(const fsdpc_model_shape *s);
/* UNSUPPORTED with a one-line reason when s attends through a sliding
 * window and the attention component does not say it computes one. */
fsdpc_status fsdpc__model_attn_window_check(const fsdpc_component *attn, const fsdpc_model_shape *s,
                                            fsdpc_err *err);

/* fsdpc__model_attn_window_check, and UNSUPPORTED with a one-line reason
 * when s soft-caps attention scores and the component does not say it
 * does, or needs ops (Gemma 2's) the device's table lacks. */
fsdpc_status fsdpc__model_features_check(const fsdpc_component *attn, const fsdpc_ops *ops,
                                         const fsdpc_model_shape *s, fsdpc_err *err);
/* s's numbers as the compute dtype holds them (Gemma 2's sqrt(hidden) is a
 * bf16 number on a bf16 device, as transformers makes it). */
void fsdpc__model_shape_for_dtype(fsdpc_model_shape *s, int32_t act_dtype);
/* RMSNorm forward and backward through ops with s's weight offset
 * (norm_offset: rmsnorm_off_*; else the plain ops). */
fsdpc_status fsdpc__model_norm_fwd(const fsdpc_ops *ops, const fsdpc_model_shape *s, void *out,
                                   float *rstd, const void *inp, const void *weight, int N, int C,
                                   fsdpc_err *err);
fsdpc_status fsdpc__model_norm_bwd(const fsdpc_ops *ops, const fsdpc_model_shape *s, void *dinp,
                                   float *dweight, const void *dout, const void *inp,
                                   const void *weight, const float *rstd, int N, int C,
                                   fsdpc_err *err);

/* Sets the micro-batch about to run: tokens, labels (-100 ignored) and doc
 * ids (may be NULL), each (B, T) in host memory; positions are 0..T-1 per
 * row without doc ids, and restart at 0 with each document when given. On the CPU the arrays are
 * used in place (they must outlive the micro-batch); on a device they are copied. */
fsdpc_status fsdpc__model_set_batch(fsdpc_model_ctx *m, const int32_t *tokens,
                                    const int32_t *labels, const int32_t *doc_ids, fsdpc_err *err);

/* Forward of each block, in order. */
fsdpc_status fsdpc__model_embed_fwd(fsdpc_model_ctx *m, const void *wte, fsdpc_err *err);
fsdpc_status fsdpc__model_layer_fwd(fsdpc_model_ctx *m, int l, const fsdpc_layer_w *w,
                                    fsdpc_err *err);
/* Final norm + lm_head + CE. Returns the loss sum and counted tokens of the
 * micro-batch. With grad_scale != 0 it also runs the head's backward
 * (dnorm +=, dhead +=) and leaves d(residual) for layer L-1. */
fsdpc_status fsdpc__model_head_fwd_bwd(fsdpc_model_ctx *m, const void *norm_w, const void *head_w,
                                       float grad_scale, float *dnorm_w, float *dhead_w,
                                       double *loss_sum, int64_t *count, fsdpc_err *err);
/* Keeps the loss on the device (on = 1, devices with pinned host memory
 * only; a no-op on the CPU): until it is turned off, head_fwd_bwd returns
 * 0 and 0 and copies each micro-batch's loss asynchronously into a pinned
 * host slot, so a step has no host sync for its loss. After the device has
 * passed the step (a sync), fsdpc__model_deferred_losses adds the deferred
 * losses to *loss_sum and *count in micro-batch order and forgets them. */
void fsdpc__model_defer_loss(fsdpc_model_ctx *m, int on);
/* Sequence objectives: while row_loss is set (host, N), head_fwd_bwd
 * writes each token's -log p(label) there (0 where ignored) and seeds its
 * backward with row_seed[i] * (softmax - onehot) (host, N) instead of
 * grad_scale; NULL, NULL returns to the mean-loss seed. Needs the ops
 * table's lmhead_xent_rows. */
void fsdpc__model_set_rows(fsdpc_model_ctx *m, double *row_loss, const float *row_seed);
/* While set (with rows set), a training micro-step's head first computes
 * the rows' losses alone (row_loss), then calls seeder(ctx), which writes
 * row_seed from them (a sequence objective's d loss / d logps), then runs
 * the head's training call with those seeds: the step's one forward gives
 * both the log-probs and the gradient. NULL turns it off. */
void fsdpc__model_set_row_seeder(fsdpc_model_ctx *m, fsdpc_status (*seeder)(void *, fsdpc_err *),
                                 void *ctx);
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
 * depends only on (seed, name, i). Norm weights are 1 (0 where init_zero:
 * a norm scaling by 1 + weight). Fills dst with
 * elements [elem_offset, elem_offset + n). */
void fsdpc__model_init_range(const fsdpc_param_info *p, uint64_t seed, double std,
                             uint64_t elem_offset, uint64_t n, float *dst);
/* 1 for the weights the init sets to 1 (RMSNorm scales but init_zero), 0 for the ones it
 * draws from normal(0, std^2) with stream fsdpc__init_key(seed, name). */
int fsdpc__model_init_is_ones(const fsdpc_param_info *p);
/* Its stream: fsdpc__init_key(seed, p->name) (util/init_rng.h). */
uint64_t fsdpc__model_init_key(const fsdpc_param_info *p, uint64_t seed);

#endif
