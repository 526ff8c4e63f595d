/* The model context's internals, shared by model.c (embedding, head,
 * context) and layer.c (decoder layer). Not part of the model's API. */
#ifndef FSDPC_MODEL_CTX_H
#define FSDPC_MODEL_CTX_H

#include "model/llama.h"

/* Saved activations of one decoder layer. */
typedef struct fsdpc_layer_acts {
  float *ln1;      /* (N, C) */
  float *rstd1;    /* (N) */
  float *q;        /* (N, NH*HD) after RoPE */
  float *k;        /* (N, KVH*HD) after RoPE */
  float *v;        /* (N, KVH*HD) */
  float *attn_saved;/* plugin-defined bytes (naive: probabilities) */
  float *attn;     /* (N, NH*HD) attention output */
  float *h;        /* (N, C) residual after attention */
  float *ln2;      /* (N, C) */
  float *rstd2;    /* (N) */
  float *gate;     /* (N, F) */
  float *up;       /* (N, F) */
  float *act;      /* (N, F) silu(gate) * up */
} fsdpc_layer_acts;

struct fsdpc_model_ctx {
  fsdpc_model_shape s;
  int B, T, N;
  int ckpt;                     /* activation checkpointing */
  const fsdpc_component *attn;  /* attention plugin */
  const fsdpc_attention_v1 *av;
  fsdpc_attn_ctx *actx;
  fsdpc_attn_shape ashape;
  fsdpc_attn_sizes asizes;
  int chunk_rows;

  const int32_t *tokens, *labels, *doc_ids; /* (B, T) borrowed */
  int32_t *pos;                  /* (N) position of each row */
  float *rope_cos, *rope_sin;    /* (max_pos, HD/2) */

  float **resid;                 /* L+1 of (N, C): resid[0] = embedding out */
  fsdpc_layer_acts *acts;        /* L (no ckpt) or 1 (ckpt: recompute) */
  int n_acts;
  float *xn, *rstdf;             /* final norm out (N, C), (N) */
  float *xent_scratch;           /* (chunk_rows, V) */

  /* backward scratch */
  float *dres;                   /* (N, C) d(residual stream) */
  float *dh, *dtmp, *dtmp2;      /* (N, C) */
  float *dact, *dgate, *dup;     /* (N, F) */
  float *dattn, *dq;             /* (N, NH*HD) */
  float *dk, *dv;                /* (N, KVH*HD) */
  void *attn_ws;                 /* max(fwd, bwd) workspace */

  uint64_t bytes;                /* everything above */
};

/* The layer's activation slot: its own, or the shared one when recomputing. */
fsdpc_layer_acts *fsdpc__model_acts(fsdpc_model_ctx *m, int l);

#endif
