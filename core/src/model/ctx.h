/* The model context's internals, shared by model.c (embedding, head,
 * context) and layer.c (decoder layer). Not part of the model's API.
 * Activation buffers are `void *` of the ops table's act_dtype (fp32 on the
 * CPU, bf16 on CUDA) and live in the device's memory; statistics (rstd) and
 * parameter gradients are fp32. */
#ifndef FSDPC_MODEL_CTX_H
#define FSDPC_MODEL_CTX_H

#include "model/llama.h"
#include "model/lora.h"
#include "ops/ops.h"

/* Saved activations of one decoder layer. The last eight are the switches'
 * (1 byte when the model has no such switch). */
typedef struct fsdpc_layer_acts {
  void *ln1;        /* (N, C) norm_pre */
  float *rstd1;     /* (N) */
  void *q;          /* (N, NH*HD) after q norm and RoPE */
  void *k;          /* (N, KVH*HD) after k norm and RoPE */
  void *v;          /* (N, KVH*HD) */
  void *attn_saved; /* plugin-defined bytes (naive: probabilities; flash: LSE) */
  void *attn;       /* (N, NH*HD) attention output */
  void *h;          /* (N, C) residual after attention */
  void *ln2;        /* (N, C) norm_pre */
  float *rstd2;     /* (N) */
  void *gate;       /* (N, F) */
  void *up;         /* (N, F) */
  void *act;        /* (N, F) silu(gate) * up */
  void *qr, *kr;    /* (N, NH*HD), (N, KVH*HD): q, k before their norms (qk_norm) */
  float *rstdq;     /* (N*NH) per head, or (N) per projection */
  float *rstdk;     /* (N*KVH) or (N) */
  void *o;          /* (N, C) attention projection before the post norm / multiplier */
  float *rstdo;     /* (N) norm_post */
  void *dn;         /* (N, C) MLP down projection before the post norm / multiplier */
  float *rstdd;     /* (N) norm_post */
} fsdpc_layer_acts;

enum { FSDPC_LAYER_NACTS = 21 };

/* One layer's forward over N rows (layer_fwd.c), shared by training and the
 * KV-cache decoder: the buffers it reads and writes, each as in
 * fsdpc_layer_acts (x is the input, out the output; h and out must differ
 * from x and h). The attention between fsdpc__layer_qkv and
 * fsdpc__layer_out is the caller's. */
typedef struct fsdpc_layer_io {
  int N;
  const void *x;
  void *out;
  fsdpc_layer_acts a;     /* the activation slots used */
  const int32_t *pos;     /* (N) */
  const float *cos, *sin; /* RoPE tables (max_pos, rope.dim / 2) */
  int keep_gate_up;       /* gate and up hold this layer's saved projections: skip them */
  int skip_down;          /* stop before the down projection (a recompute) */
  int fp8;                /* the projections' FP8 recipe (ops->fp8_matmul_fwd), 0 = none */
  void *fp8_scratch;      /* its device scratch (NULL: the ops' own) */
  size_t fp8_scratch_bytes;
  /* LoRA on projection j (0..6), outputs ys (3 parts for a fused qkv_proj,
   * 2 for gate_up_proj, else 1) from input x; NULL = no adapters. */
  fsdpc_status (*lora)(void *ctx, int j, void *const *ys, const void *x, fsdpc_err *err);
  void *lora_ctx;
} fsdpc_layer_io;

/* The layer's weights with a fused tensor's parts found inside it (wk, wv in
 * wq; wup in wgate; the same for biases and gradients). act = bytes per
 * weight element. */
void fsdpc__layer_split(const fsdpc_model_shape *s, size_t act, const fsdpc_layer_w *in,
                        fsdpc_layer_w *out);
void fsdpc__layer_split_grads(const fsdpc_model_shape *s, const fsdpc_layer_g *in,
                              fsdpc_layer_g *out);
/* Norm, projections (+ biases, LoRA), q/k norms and RoPE: a.q, a.k, a.v. */
fsdpc_status fsdpc__layer_qkv(const fsdpc_ops *ops, const fsdpc_model_shape *s,
                              const fsdpc_layer_w *w, const fsdpc_layer_io *io, fsdpc_err *err);
/* From a.attn: the output projection, post norm and residual (a.h), then the
 * MLP and its residual (out). */
fsdpc_status fsdpc__layer_out(const fsdpc_ops *ops, const fsdpc_model_shape *s,
                              const fsdpc_layer_w *w, const fsdpc_layer_io *io, fsdpc_err *err);

struct fsdpc_model_ctx {
  fsdpc_model_shape s;
  const fsdpc_ops *ops;
  void *dev;                    /* ops->ctx */
  int B, T, N;
  int ckpt;                     /* activation checkpointing: 0 or FSDPC_AC_* */
  int fwd_only;                 /* no backward buffers (inference) */
  const fsdpc_component *attn;  /* attention plugin */
  const fsdpc_attention_v1 *av;
  fsdpc_attn_ctx *actx;
  fsdpc_attn_shape ashape;
  fsdpc_attn_sizes asizes;
  int chunk_rows;
  int logits_bf16; /* the fused CE's logits in bf16 (fsdp.mixed_precision.logits_dtype) */
  int fp8;         /* the projections' FP8 recipe (ops/fp8.h), 0 = act_dtype GEMMs */
  void *fp8_scratch; /* a device's FP8 copies of one GEMM (fsdpc__fp8_linear_scratch_bytes) */
  size_t fp8_scratch_bytes;

  /* the micro-batch, in device memory (on the CPU: the caller's arrays) */
  const int32_t *tokens, *labels, *doc_ids;  /* (B, T) */
  int32_t *d_tokens, *d_labels, *d_doc_ids;  /* device copies (CUDA only) */
  const int32_t *h_tokens, *h_labels;        /* host views, for checks */
  int32_t *pos;                  /* (N) position of each row, device */
  int pos_per_doc;               /* pos restarts at each document (doc ids given) */
  float *rope_cos, *rope_sin;    /* (max_pos, rope.dim/2), device */
  int rope_long;                 /* the tables hold longrope's long factors */
  float *rope_local_cos, *rope_local_sin; /* s.rope_local's (Gemma 3), NULL without one */

  void **resid;                  /* L+1 of (N, C): resid[0] = embedding out */
  fsdpc_layer_acts *acts;        /* L (no ckpt) or 1 (ckpt: recompute) */
  void **mlp_gate, **mlp_up;     /* FSDPC_AC_SAVE_MLP: L of (N, F) each, the layers' own;
                                  * acts[0]'s gate and up are then not allocated */
  int n_acts;
  void *xn;                      /* final norm out (N, C) */
  float *rstdf;                  /* (N) */
  void *xent_scratch;
  size_t xent_scratch_bytes;
  double *loss2;                 /* (2) device: loss sum, counted tokens */
  /* deferred losses (fsdpc__model_defer_loss): each micro-batch's loss2
   * copied asynchronously into pinned host slots, read after a sync */
  double *loss_host;             /* (2 * loss_cap) pinned host memory, or NULL */
  int loss_cap, loss_n, defer_loss;
  int grad_overwrite;            /* fsdpc__model_grad_overwrite */
  /* fsdpc__model_set_rows: per-token losses and seeds (sequence objectives) */
  double *row_loss;
  const float *row_seed;
  /* fsdpc__model_set_row_seeder: called between the head's forward and its
   * backward of a training micro-step to write row_seed from row_loss */
  fsdpc_status (*row_seeder)(void *ctx, fsdpc_err *err);
  void *row_seeder_ctx;
  /* Memory (fsdpc__model_mem): carved from the block blk in order, or
   * counted only (counting: fsdpc__model_ctx_arena_bytes), or from ops. */
  char *blk;
  size_t blk_size, blk_used, blk_align;
  int counting;
  uint64_t counted; /* counting: the buffers' own bytes */

  /* backward scratch */
  void *dres;                    /* (N, C) d(residual stream) */
  void *dh, *dtmp, *dtmp2;       /* (N, C) */
  void *dact, *dgate, *dup;      /* (N, F) */
  void *dattn, *dq;              /* (N, NH*HD) */
  void *dk, *dv;                 /* (N, KVH*HD) */
  void *dqr, *dkr;               /* (N, NH*HD), (N, KVH*HD): qk_norm's input gradients */
  void *attn_ws;                 /* max(fwd, bwd) workspace */
  size_t attn_ws_bytes;

  /* LoRA (model/lora.c) */
  int has_lora;
  fsdpc_lora lora;
  void **lora_u;           /* (n_acts * 7): s * drop(x) @ A^T (N, r), targeted only */
  void *lora_xd, *lora_dx; /* (N, largest in) dropped input, input gradient */
  void *lora_du;           /* (N, r) */
  float *dnorm_sink;       /* (C) weight grads of a frozen norm, discarded */
  uint64_t lora_round;     /* dropout round of this micro-batch */
  int lora_train;          /* dropout on */
  int lora_off;            /* fsdpc__model_set_lora_off: the base model alone */
  uint64_t lora_bytes;

  uint64_t bytes;                /* everything above */
};

/* The layer's activation slot: its own, or the shared one when recomputing. */
fsdpc_layer_acts *fsdpc__model_acts(fsdpc_model_ctx *m, int l);

/* A buffer of the context's (activations category): the next bytes of its
 * block, a count, or ops->alloc (context.c); NULL when out of memory. */
void *fsdpc__model_mem(fsdpc_model_ctx *m, size_t bytes);
void fsdpc__model_mem_free(fsdpc_model_ctx *m, void *p, size_t bytes);

#endif
