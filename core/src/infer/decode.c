/* The KV-cache decoder (see infer.h): prefill through the training model's
 * forward, then one token per row per step through the ops table.
 *
 *   step, per layer l (rows b = 0..B-1, each at its own position pos[b]),
 *   the training layer's op sequence (model/layer_fwd.c) around:
 *     q, k, v of x (norms, biases, q/k norms, RoPE at pos)
 *     kc[l][b, pos[b]], vc[l][b, pos[b]] = k[b], v[b]
 *     att = attention of q[b] over kc[l][b, 0..pos[b]] (its last window
 *           positions in a sliding-window layer)
 *     h = x + ...(att), x = h + MLP(h)
 *   logits = rmsnorm(x) * w_norm @ Whead^T (/ logits_div) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer/infer.h"
#include "model/ctx.h"
#include "model/family.h"
#include "model/lora.h"
#include "ops/cpu/ops_cpu.h"
#ifdef FSDPC_WITH_CUDA
#include "ops/cuda/graph.h"
#endif

#define OP(name, ...) FSDPC_TRY(d->ops->name(d->dev, __VA_ARGS__))

struct fsdpc_decoder {
  fsdpc_model_shape s;
  const fsdpc_ops *ops;
  void *dev;
  const fsdpc_component *attn;
  const fsdpc_opts *attn_opts;
  int B, maxT;
  int *len;                                         /* (B) host: tokens in each row's cache */
  int32_t *h_pos;                                   /* (B) host staging */
  void **kc, **vc;                                  /* (L) of (B, maxT, KD) */
  float *rope_cos, *rope_sin;                       /* (max_pos, rope.dim/2) */
  float *rope_lcos, *rope_lsin; /* gemma3's local layers: (max_pos, rope_local.dim/2) */
  int rope_long;                                    /* longrope's long factors in the tables */
  int32_t *pos, *tokens;                            /* (B) device */
  void *x, *h, *ln, *q, *k, *v, *att, *gate, *up, *act; /* (B, C|QD|KD|F) */
  void *qr, *kr, *o, *dn;                               /* the switches' (B, QD|KD|C) */
  float *rstd;                                          /* (B * NH) */
  float *logits;                                    /* (B, V) device */
  fsdpc_lora lora;                                  /* LoRA (model/lora.h), r = 0 when none */
  void *lora_u;                                     /* (B, r) */
  int32_t *ids;                                     /* (B) device: greedy picks */
  /* The step as a CUDA graph (resident weights): recorded at the second
   * step (the first builds the GEMM plans), replayed after. */
  int no_graph, eager_steps;
  void *graph;         /* cudaGraphExec_t */
  const void *graph_w; /* the weights it was recorded with */
};

typedef struct dbuf {
  void **slot;
  size_t bytes;
} dbuf;

static size_t one_at_least(size_t n) {
  return n ? n : 1;
}

static int list_bufs(fsdpc_decoder *d, dbuf *b) {
  const fsdpc_model_shape *s = &d->s;
  size_t a = d->ops->act_size, B = (size_t)d->B, C = (size_t)s->C, F = (size_t)s->F;
  size_t QD = (size_t)s->NH * s->HD, KD = (size_t)s->KVH * s->HD;
  size_t rope = (size_t)s->max_pos * (size_t)(s->rope.dim / 2) * sizeof(float);
  size_t lrope = (size_t)s->max_pos * (size_t)(s->rope_local.dim / 2) * sizeof(float);
  size_t qk = s->qk_norm ? 1 : 0, tmp = s->norm_post || s->resid_mult != 1.0f ? 1 : 0;
  int n = 0;
#define B_(f, sz) b[n++] = (dbuf){(void **)&d->f, one_at_least(sz)}
  B_(rope_cos, rope);
  B_(rope_sin, rope);
  B_(rope_lcos, lrope);
  B_(rope_lsin, lrope);
  B_(pos, B * sizeof(int32_t));
  B_(tokens, B * sizeof(int32_t));
  B_(x, B * C * a);
  B_(h, B * C * a);
  B_(qr, qk * B * QD * a);
  B_(kr, qk * B * KD * a);
  B_(o, tmp * B * C * a);
  B_(dn, tmp * B * C * a);
  B_(ln, B * C * a);
  B_(q, B * QD * a);
  B_(k, B * KD * a);
  B_(v, B * KD * a);
  B_(att, B * QD * a);
  B_(gate, B * F * a);
  B_(up, B * F * a);
  B_(act, B * F * a);
  B_(rstd, B * (size_t)s->NH * sizeof(float));
  B_(logits, B * (size_t)s->V * sizeof(float));
  if (d->lora.r)
    B_(lora_u, B * (size_t)d->lora.r * a);
  B_(ids, B * sizeof(int32_t));
#undef B_
  return n;
}

static size_t cache_bytes(const fsdpc_decoder *d) {
  return (size_t)d->B * (size_t)d->maxT * (size_t)d->s.KVH * d->s.HD * d->ops->act_size;
}

void fsdpc__decoder_destroy(fsdpc_decoder *d) {
  if (!d)
    return;
  dbuf b[32];
  int n = list_bufs(d, b);
  for (int i = 0; i < n; i++)
    if (*b[i].slot)
      d->ops->free(d->dev, FSDPC_MEM_ACTIVATIONS, *b[i].slot, b[i].bytes);
  for (int l = 0; l < d->s.L; l++) {
    if (d->kc && d->kc[l])
      d->ops->free(d->dev, FSDPC_MEM_ACTIVATIONS, d->kc[l], cache_bytes(d));
    if (d->vc && d->vc[l])
      d->ops->free(d->dev, FSDPC_MEM_ACTIVATIONS, d->vc[l], cache_bytes(d));
  }
#ifdef FSDPC_WITH_CUDA
  fsdpc__cuda_graph_free(d->graph);
#endif
  free(d->kc);
  free(d->vc);
  free(d->len);
  free(d->h_pos);
  free(d);
}

fsdpc_status fsdpc__decoder_create(const fsdpc_decoder_opts *o, fsdpc_decoder **out,
                                   fsdpc_err *err) {
  const fsdpc_model_shape *s = o->shape;
  FSDPC_TRY(fsdpc__model_shape_check(s, err));
  if (o->B < 1 || o->max_len < 1 || o->max_len > s->max_pos)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "generation needs %d tokens per row; the model allows at most %d "
                       "(max_position_embeddings): shorten the prompt or --max-new-tokens",
                       o->max_len, s->max_pos);
  const fsdpc_ops *ops = o->ops ? o->ops : fsdpc__ops_cpu();
  if (!ops->kv_store || !ops->attn_cached)
    return fsdpc__fail(err, FSDPC_UNSUPPORTED, "this device has no KV-cache attention");
  fsdpc_decoder *d = calloc(1, sizeof *d);
  if (!d)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  d->s = *s;
  fsdpc__model_shape_for_dtype(&d->s, ops->act_dtype);
  d->ops = ops;
  d->dev = ops->ctx;
  d->attn = o->attention;
  d->attn_opts = o->attention_opts;
  d->B = o->B;
  d->maxT = o->max_len;
  if (o->lora)
    d->lora = *o->lora;
  d->no_graph = o->no_graph;
  d->len = calloc((size_t)d->B, sizeof *d->len);
  d->h_pos = calloc((size_t)d->B, sizeof *d->h_pos);
  d->kc = calloc((size_t)s->L, sizeof *d->kc);
  d->vc = calloc((size_t)s->L, sizeof *d->vc);
  fsdpc_status st = FSDPC_OK;
  if (!d->len || !d->h_pos || !d->kc || !d->vc)
    goto oom;
  dbuf b[32];
  int n = list_bufs(d, b);
  for (int i = 0; i < n; i++)
    if (!(*b[i].slot = ops->alloc(d->dev, FSDPC_MEM_ACTIVATIONS, b[i].bytes)))
      goto oom;
  for (int l = 0; l < s->L; l++)
    if (!(d->kc[l] = ops->alloc(d->dev, FSDPC_MEM_ACTIVATIONS, cache_bytes(d))) ||
        !(d->vc[l] = ops->alloc(d->dev, FSDPC_MEM_ACTIVATIONS, cache_bytes(d))))
      goto oom;
  st = ops->rope_tables(d->dev, d->rope_cos, d->rope_sin, &s->rope, s->max_pos, 0, err);
  if (st == FSDPC_OK && s->rope_local.dim > 0) /* plain RoPE, made once */
    st = ops->rope_tables(d->dev, d->rope_lcos, d->rope_lsin, &s->rope_local, s->max_pos, 0, err);
  if (st != FSDPC_OK) {
    fsdpc__decoder_destroy(d);
    return st;
  }
  *out = d;
  return FSDPC_OK;
oom:
  st = fsdpc__ops_oom(ops, err,
                      "for the KV cache (%d rows x %d tokens); use fewer prompts per batch or "
                      "fewer new tokens",
                      o->B, o->max_len);
  fsdpc__decoder_destroy(d);
  return st;
}

int fsdpc__decoder_len(const fsdpc_decoder *d, int b) {
  return d->len[b];
}

static fsdpc_status wblock(const fsdpc_infer_weights *w, int b, void *base[FSDPC_P_NKIND],
                           fsdpc_err *err) {
  return w->block(w->ctx, b, base, err);
}

static fsdpc_status wdone(const fsdpc_infer_weights *w, int b, fsdpc_err *err) {
  return w->done ? w->done(w->ctx, b, err) : FSDPC_OK;
}

/* The logits of the B rows, downloaded to out: soft-capped there (Gemma
 * 2's final_logit_softcapping), as fsdpc__model_logits_at caps them. The
 * device copy stays uncapped: its greedy argmax is the same (tanh is
 * increasing). */
static fsdpc_status download_logits(fsdpc_decoder *d, float *out, fsdpc_err *err) {
  size_t n = (size_t)d->B * d->s.V;
  OP(download, out, d->logits, n * sizeof(float), err);
  const float c = d->s.logit_softcap;
  for (size_t i = 0; c > 0.0f && i < n; i++)
    out[i] = tanhf(out[i] / c) * c;
  return FSDPC_OK;
}

/* logits (device (B, V)) from d->ln rows, downloaded to out (unless NULL). */
static fsdpc_status head_logits(fsdpc_decoder *d, const void *head_w, float *out, fsdpc_err *err) {
  if (d->s.logits_div != 1.0f)
    OP(scale, d->ln, (size_t)d->B * d->s.C, 1.0f / d->s.logits_div, err);
  OP(logits, d->logits, d->ln, head_w, d->B, d->s.C, d->s.V, err);
  return out ? download_logits(d, out, err) : FSDPC_OK;
}

fsdpc_status fsdpc__decoder_greedy(fsdpc_decoder *d, int32_t *ids, fsdpc_err *err) {
  size_t V = (size_t)d->s.V;
  if (d->ops->argmax_rows) { /* on the device: only B ids cross */
    OP(argmax_rows, d->ids, d->logits, d->B, d->s.V, err);
    OP(download, ids, d->ids, (size_t)d->B * sizeof(int32_t), err);
    return FSDPC_OK;
  }
  float *row = malloc(V * sizeof(float));
  if (!row)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  fsdpc_status st = FSDPC_OK;
  for (int b = 0; st == FSDPC_OK && b < d->B; b++) {
    st = d->ops->download(d->dev, row, d->logits + (size_t)b * V, V * sizeof(float), err);
    if (st == FSDPC_OK)
      ids[b] = fsdpc__sample(row, (int)V, NULL, NULL, NULL, NULL);
  }
  free(row);
  return st;
}

static fsdpc_status prefill_run(fsdpc_decoder *d, const fsdpc_infer_weights *w, fsdpc_model_ctx *m,
                                const int *lens, float *logits, fsdpc_err *err) {
  const fsdpc_model_shape *s = &d->s;
  void *base[FSDPC_P_NKIND];
  FSDPC_TRY(wblock(w, 0, base, err));
  FSDPC_TRY(fsdpc__model_embed_fwd(m, base[FSDPC_P_EMBED], err));
  FSDPC_TRY(wdone(w, 0, err));
  for (int l = 0; l < s->L; l++) {
    fsdpc_layer_w lw;
    FSDPC_TRY(wblock(w, l + 1, base, err));
    fsdpc__layer_views(base, &lw);
    FSDPC_TRY(fsdpc__model_layer_fwd(m, l, &lw, err));
    fsdpc_layer_acts *a = fsdpc__model_acts(m, l);
    OP(kv_store, d->kc[l], d->vc[l], a->k, a->v, m->pos, d->B, m->T, d->maxT, s->KVH * s->HD, err);
    FSDPC_TRY(wdone(w, l + 1, err));
  }
  FSDPC_TRY(wblock(w, s->L + 1, base, err));
  size_t C = (size_t)s->C, act = d->ops->act_size;
  for (int b = 0; b < d->B; b++) {
    const char *x = (const char *)m->resid[s->L] + ((size_t)b * m->T + lens[b] - 1) * C * act;
    FSDPC_TRY(fsdpc__model_norm_fwd(d->ops, s, (char *)d->ln + (size_t)b * C * act, d->rstd + b, x,
                                    base[FSDPC_P_NORM], 1, s->C, err));
  }
  FSDPC_TRY(head_logits(d, base[FSDPC_P_HEAD], logits, err));
  return wdone(w, s->L + 1, err);
}

fsdpc_status fsdpc__decoder_prefill(fsdpc_decoder *d, const fsdpc_infer_weights *w,
                                    const int32_t *tokens, int T, const int *lens, float *logits,
                                    fsdpc_err *err) {
  for (int b = 0; b < d->B; b++)
    if (lens[b] < 1 || lens[b] > T || lens[b] > d->maxT)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "prompt %d: length %d outside 1..%d", b, lens[b],
                         T < d->maxT ? T : d->maxT);
  int32_t *labels = malloc((size_t)d->B * T * sizeof *labels);
  if (!labels)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  for (size_t i = 0; i < (size_t)d->B * T; i++)
    labels[i] = -100;
  fsdpc_model_ctx *m = NULL;
  fsdpc_model_ctx_opts mo = {.shape = &d->s,
                             .B = d->B,
                             .T = T,
                             .activation_checkpointing = FSDPC_AC_FULL,
                             .forward_only = 1,
                             .xent_chunk_rows = 1, /* no loss here: the smallest scratch */
                             .attention = d->attn,
                             .attention_opts = d->attn_opts,
                             .ops = d->ops,
                             .lora = d->lora.r ? &d->lora : NULL};
  fsdpc_status st = fsdpc__model_ctx_create(&mo, &m, err);
  if (st == FSDPC_OK)
    fsdpc__model_set_lora_round(m, 0, 0); /* no dropout */
  if (st == FSDPC_OK)
    st = fsdpc__model_set_batch(m, tokens, labels, NULL, err);
  if (st == FSDPC_OK)
    st = prefill_run(d, w, m, lens, logits, err);
  if (st == FSDPC_OK)
    st = d->ops->sync(d->dev, err); /* m's buffers go next */
  fsdpc__model_ctx_destroy(m);
  free(labels);
  if (st == FSDPC_OK)
    for (int b = 0; b < d->B; b++)
      d->len[b] = lens[b];
  return st;
}

typedef struct lora_arg {
  fsdpc_decoder *d;
  const fsdpc_layer_w *w;
} lora_arg;

/* LoRA on projection j of a one-token step. */
static fsdpc_status lora_hook(void *ctx, int j, void *const *ys, const void *x, fsdpc_err *err) {
  lora_arg *a = ctx;
  fsdpc_decoder *d = a->d;
  return fsdpc__lora_apply(d->ops, &d->lora, j, &d->s, a->w, ys, x, d->B, d->lora_u, err);
}

static fsdpc_status step_layer(fsdpc_decoder *d, int l, const fsdpc_layer_w *w0, fsdpc_err *err) {
  const fsdpc_model_shape *s = &d->s;
  int B = d->B, KD = s->KVH * s->HD;
  fsdpc_layer_w w;
  fsdpc__layer_split(s, d->ops->act_size, w0, &w);
  lora_arg la = {d, &w};
  int local = fsdpc__layer_rope(s, l) == &s->rope_local; /* gemma3's sliding_attention layers */
  fsdpc_layer_io io = {.N = B,
                       .x = d->x,
                       .out = d->x,
                       .a = {.ln1 = d->ln,
                             .rstd1 = d->rstd,
                             .q = d->q,
                             .k = d->k,
                             .v = d->v,
                             .attn = d->att,
                             .h = d->h,
                             .ln2 = d->ln,
                             .rstd2 = d->rstd,
                             .gate = d->gate,
                             .up = d->up,
                             .act = d->act,
                             .qr = d->qr,
                             .kr = d->kr,
                             .rstdq = d->rstd,
                             .rstdk = d->rstd,
                             .o = d->o,
                             .rstdo = d->rstd,
                             .dn = d->dn,
                             .rstdd = d->rstd},
                       .pos = d->pos,
                       .cos = local ? d->rope_lcos : d->rope_cos,
                       .sin = local ? d->rope_lsin : d->rope_sin,
                       .lora = d->lora.r ? lora_hook : NULL,
                       .lora_ctx = &la};
  FSDPC_TRY(fsdpc__layer_qkv(d->ops, s, &w, &io, err));
  OP(kv_store, d->kc[l], d->vc[l], d->k, d->v, d->pos, B, 1, d->maxT, KD, err);
  OP(attn_cached, d->att, d->q, d->kc[l], d->vc[l], d->pos, B, 1, s->NH, s->KVH, s->HD, d->maxT,
     fsdpc__model_attn_scale(s), fsdpc__layer_window(s, l), s->attn_softcap, err);
  return fsdpc__layer_out(d->ops, s, &w, &io, err);
}

/* The step after the uploads: embedding, layers, head logits (device). */
static fsdpc_status step_body(fsdpc_decoder *d, const fsdpc_infer_weights *w, fsdpc_err *err) {
  const fsdpc_model_shape *s = &d->s;
  void *base[FSDPC_P_NKIND];
  FSDPC_TRY(wblock(w, 0, base, err));
  OP(embedding_fwd, d->x, d->tokens, base[FSDPC_P_EMBED], d->B, s->C, s->V, err);
  if (s->embed_mult != 1.0f)
    OP(scale, d->x, (size_t)d->B * s->C, s->embed_mult, err);
  FSDPC_TRY(wdone(w, 0, err));
  for (int l = 0; l < s->L; l++) {
    fsdpc_layer_w lw;
    FSDPC_TRY(wblock(w, l + 1, base, err));
    fsdpc__layer_views(base, &lw);
    FSDPC_TRY(step_layer(d, l, &lw, err));
    FSDPC_TRY(wdone(w, l + 1, err));
  }
  FSDPC_TRY(wblock(w, s->L + 1, base, err));
  FSDPC_TRY(
      fsdpc__model_norm_fwd(d->ops, s, d->ln, d->rstd, d->x, base[FSDPC_P_NORM], d->B, s->C, err));
  FSDPC_TRY(head_logits(d, base[FSDPC_P_HEAD], NULL, err));
  return wdone(w, s->L + 1, err);
}

/* The step body, replayed from a CUDA graph where it can: about 15 kernels
 * per layer launch as one. A capture that fails (an op that cannot be
 * recorded) leaves the decoder running step by step. */
static fsdpc_status run_step(fsdpc_decoder *d, const fsdpc_infer_weights *w, fsdpc_err *err) {
#ifdef FSDPC_WITH_CUDA
  if (d->ops->device == FSDPC_DEVICE_CUDA && w->fixed && !d->no_graph) {
    if (d->graph && d->graph_w == w->ctx)
      return fsdpc__cuda_graph_launch(d->dev, d->graph, err);
    if (!d->graph && d->eager_steps >= 1) {
      FSDPC_TRY(fsdpc__cuda_graph_begin(d->dev, err));
      fsdpc_err e2 = {0};
      fsdpc_status st = step_body(d, w, &e2);
      void *x = NULL;
      FSDPC_TRY(fsdpc__cuda_graph_end(d->dev, st == FSDPC_OK, &x, err));
      if (x) {
        d->graph = x;
        d->graph_w = w->ctx;
        return fsdpc__cuda_graph_launch(d->dev, d->graph, err);
      }
      d->no_graph = 1; /* not recordable: step by step from now on */
    }
  }
#endif
  d->eager_steps++;
  return step_body(d, w, err);
}

/* longrope: transformers picks the long factors for a forward whose
 * largest position + 1 passes original_max_position_embeddings (the cache
 * keeps the keys rotated before); the tables are made again, outside any
 * recorded graph, when that changes. */
static fsdpc_status rope_for_step(fsdpc_decoder *d, fsdpc_err *err) {
  int last = 0;
  for (int b = 0; b < d->B; b++)
    last = d->h_pos[b] > last ? d->h_pos[b] : last;
  int want = fsdpc__rope_uses_long(&d->s.rope, last + 1);
  if (want == d->rope_long)
    return FSDPC_OK;
  d->rope_long = want;
  return d->ops->rope_tables(d->dev, d->rope_cos, d->rope_sin, &d->s.rope, d->s.max_pos, want, err);
}

fsdpc_status fsdpc__decoder_step(fsdpc_decoder *d, const fsdpc_infer_weights *w,
                                 const int32_t *tokens, float *logits, fsdpc_err *err) {
  const fsdpc_model_shape *s = &d->s;
  for (int b = 0; b < d->B; b++) {
    if (d->len[b] >= d->maxT)
      return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "row %d: the KV cache is full (%d)", b,
                         d->maxT);
    if (tokens[b] < 0 || tokens[b] >= s->V)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "token id %d outside the vocabulary (%d)",
                         tokens[b], s->V);
    d->h_pos[b] = d->len[b];
  }
  FSDPC_TRY(rope_for_step(d, err));
  OP(upload, d->pos, d->h_pos, (size_t)d->B * sizeof(int32_t), err);
  OP(upload, d->tokens, tokens, (size_t)d->B * sizeof(int32_t), err);
  FSDPC_TRY(run_step(d, w, err));
  if (logits)
    FSDPC_TRY(download_logits(d, logits, err));
  for (int b = 0; b < d->B; b++)
    d->len[b]++;
  return FSDPC_OK;
}
