/* One decoder layer in training: the forward (layer_fwd.c's op sequence
 * over this layer's activation slots) and its backward, side by side. See
 * layer_fwd.c for the forward and its switches.
 *
 * Parameter gradients +=, activation gradients =. Backward reads d(resid[l+1])
 * from m->dres and leaves d(resid[l]) there. With activation checkpointing
 * the forward is recomputed from resid[l] first; under FSDPC_AC_SAVE_MLP the
 * layer's gate and up projections are kept from the forward (m->mlp_gate,
 * m->mlp_up) and not recomputed.
 *
 * LoRA (model/lora.h) adds s * B(A(drop(x))) to each targeted projection's
 * output right after its matmul (before the q/k norms and RoPE); a frozen
 * weight has a NULL gradient and gets none. */
#include <string.h>

#include "model/ctx.h"
#include "model/family.h"
#include "model/lora.h"

#define OP(name, ...) FSDPC_TRY(m->ops->name(m->dev, __VA_ARGS__))
/* LoRA on projection j (model/lora.h): no-ops without adapters. */
#define LORA_BWD(j, dys, x, dx) FSDPC_TRY(fsdpc__lora_bwd(m, l, j, w, g, dys, x, dx, err))
#define LORA_BWD1(j, dy, x, dx)                                                                    \
  do {                                                                                             \
    const void *dy1_[1] = {dy};                                                                    \
    LORA_BWD(j, dy1_, x, dx);                                                                      \
  } while (0)

void fsdpc__layer_views(void *const base[FSDPC_P_NKIND], fsdpc_layer_w *w) {
  for (int j = 0; j < 7; j++)
    w->bias[j] = base[FSDPC_P_BQ + j];
  w->qnorm = base[FSDPC_P_QNORM];
  w->knorm = base[FSDPC_P_KNORM];
  w->post_attn = base[FSDPC_P_POST_ATTN];
  w->post_mlp = base[FSDPC_P_POST_MLP];
  w->wq = base[FSDPC_P_Q];
  w->wk = base[FSDPC_P_K];
  w->wv = base[FSDPC_P_V];
  w->wo = base[FSDPC_P_O];
  w->wgate = base[FSDPC_P_GATE];
  w->wup = base[FSDPC_P_UP];
  w->wdown = base[FSDPC_P_DOWN];
  w->ln1 = base[FSDPC_P_LN1];
  w->ln2 = base[FSDPC_P_LN2];
  for (int j = 0; j < FSDPC_LORA_NPROJ; j++) {
    w->lora_a[j] = base[FSDPC_P_LORA0 + 2 * j];
    w->lora_b[j] = base[FSDPC_P_LORA0 + 2 * j + 1];
  }
}

void fsdpc__layer_grad_views(float *const base[FSDPC_P_NKIND], fsdpc_layer_g *g) {
  for (int j = 0; j < 7; j++)
    g->bias[j] = base[FSDPC_P_BQ + j];
  g->qnorm = base[FSDPC_P_QNORM];
  g->knorm = base[FSDPC_P_KNORM];
  g->post_attn = base[FSDPC_P_POST_ATTN];
  g->post_mlp = base[FSDPC_P_POST_MLP];
  g->wq = base[FSDPC_P_Q];
  g->wk = base[FSDPC_P_K];
  g->wv = base[FSDPC_P_V];
  g->wo = base[FSDPC_P_O];
  g->wgate = base[FSDPC_P_GATE];
  g->wup = base[FSDPC_P_UP];
  g->wdown = base[FSDPC_P_DOWN];
  g->ln1 = base[FSDPC_P_LN1];
  g->ln2 = base[FSDPC_P_LN2];
  for (int j = 0; j < FSDPC_LORA_NPROJ; j++) {
    g->lora_a[j] = base[FSDPC_P_LORA0 + 2 * j];
    g->lora_b[j] = base[FSDPC_P_LORA0 + 2 * j + 1];
  }
}

/* A frozen norm's weight gradient goes to a scratch sink, zeroed first. */
static fsdpc_status norm_grad(fsdpc_model_ctx *m, float *g, float **out, fsdpc_err *err) {
  *out = g;
  if (g)
    return FSDPC_OK;
  *out = m->dnorm_sink;
  return m->ops->memset0(m->dev, m->dnorm_sink, (size_t)m->s.C * sizeof(float), err);
}

/* The gate and up projections of layer l: its own saved ones under
 * FSDPC_AC_SAVE_MLP, else the shared activation slots. */
static void mlp_slots(fsdpc_model_ctx *m, int l, void **gate, void **up) {
  fsdpc_layer_acts *a = fsdpc__model_acts(m, l);
  *gate = m->mlp_gate ? m->mlp_gate[l] : a->gate;
  *up = m->mlp_up ? m->mlp_up[l] : a->up;
}

typedef struct lora_arg {
  fsdpc_model_ctx *m;
  int l;
  const fsdpc_layer_w *w;
} lora_arg;

static fsdpc_status lora_hook(void *ctx, int j, void *const *ys, const void *x, fsdpc_err *err) {
  lora_arg *a = ctx;
  return fsdpc__lora_fwd(a->m, a->l, j, a->w, ys, x, err);
}

/* The RoPE tables of layer l (Gemma 3: the local ones on its
 * sliding_attention layers). */
static void rope_of(const fsdpc_model_ctx *m, int l, const float **cos, const float **sin) {
  int local = fsdpc__layer_rope(&m->s, l) == &m->s.rope_local;
  *cos = local ? m->rope_local_cos : m->rope_cos;
  *sin = local ? m->rope_local_sin : m->rope_sin;
}

/* The layer's buffers for layer_fwd.c: its activation slot, its saved gate
 * and up (FSDPC_AC_SAVE_MLP), the micro-batch's positions and tables. */
static void layer_io(fsdpc_model_ctx *m, int l, fsdpc_layer_io *io) {
  memset(io, 0, sizeof *io);
  io->N = m->N;
  io->x = m->resid[l];
  io->out = m->resid[l + 1];
  io->a = *fsdpc__model_acts(m, l);
  mlp_slots(m, l, &io->a.gate, &io->a.up);
  io->pos = m->pos;
  rope_of(m, l, &io->cos, &io->sin);
  io->fp8 = m->fp8;
  io->fp8_scratch = m->fp8_scratch;
  io->fp8_scratch_bytes = m->fp8_scratch_bytes;
}

/* The attention plugin over a->q, a->k, a->v into a->attn, with the
 * layer's sliding window. */
static fsdpc_status attn_fwd(fsdpc_model_ctx *m, int l, fsdpc_layer_acts *a, fsdpc_err *err) {
  m->ashape.doc_ids = m->doc_ids;
  m->ashape.window = fsdpc__layer_window(&m->s, l);
  int32_t st = m->av->forward(m->actx, &m->ashape, a->q, a->k, a->v, a->attn, a->attn_saved,
                              m->attn_ws, m->ops->stream(m->dev));
  return st == FSDPC_OK ? FSDPC_OK : fsdpc__plugin_fail(m->attn, st, err);
}

/* recompute: the forward again inside the backward (activation
 * checkpointing). The backward does not read resid[l + 1] (layer l + 1's
 * backward has), so the down projection that makes it is skipped there, a
 * quarter of the layer's forward GEMM work, unless LoRA targets that
 * projection (its backward reads the adapter's input product, which the
 * recompute makes again) or it feeds a post norm (whose backward reads
 * its input); so are the saved gate and up projections
 * (FSDPC_AC_SAVE_MLP), unless LoRA targets either. w: split views. */
static fsdpc_status layer_forward(fsdpc_model_ctx *m, int l, const fsdpc_layer_w *w, int recompute,
                                  fsdpc_err *err) {
  fsdpc_layer_io io;
  layer_io(m, l, &io);
  lora_arg la = {m, l, w};
  if (m->has_lora) {
    io.lora = lora_hook;
    io.lora_ctx = &la;
  }
  int lora_mlp = m->has_lora && (w->lora_a[4] || w->lora_a[5]);
  io.keep_gate_up = recompute && m->mlp_gate && !lora_mlp;
  io.skip_down = recompute && !(m->has_lora && w->lora_a[6]) && !m->s.norm_post;
  FSDPC_TRY(fsdpc__layer_qkv(m->ops, &m->s, w, &io, err));
  FSDPC_TRY(attn_fwd(m, l, &io.a, err));
  return fsdpc__layer_out(m->ops, &m->s, w, &io, err);
}

fsdpc_status fsdpc__model_layer_fwd(fsdpc_model_ctx *m, int l, const fsdpc_layer_w *w,
                                    fsdpc_err *err) {
  fsdpc_layer_w ws;
  fsdpc__layer_split(&m->s, m->ops->act_size, w, &ws);
  return layer_forward(m, l, &ws, 0, err);
}

/* dinp (+)= dout @ weight, dweight += dout^T @ inp. Accumulating: inside
 * the GEMM where the device has it (ops->matmul_bwd_acc), else through
 * m->dtmp2 and an add (the CPU's sequence, so its rounding is unchanged).
 * acc also says that inp is the previous projection's (q, k, v and gate,
 * up share theirs): FP8's inp_again (ops.h). */
static fsdpc_status proj_bwd(fsdpc_model_ctx *m, int acc, void *dinp, float *dweight,
                             const void *dout, const void *inp, const void *weight, int C, int OC,
                             fsdpc_err *err) {
  int N = m->N;
  if (m->fp8) {
    OP(fp8_matmul_bwd, m->fp8, dinp, acc, dweight, dout, inp, acc, weight, N, C, OC, m->fp8_scratch,
       m->fp8_scratch_bytes, err);
  } else if (!acc) {
    OP(matmul_bwd, dinp, dweight, dout, inp, weight, N, C, OC, err);
  } else if (m->ops->matmul_bwd_acc) {
    OP(matmul_bwd_acc, dinp, dweight, dout, inp, weight, N, C, OC, err);
  } else {
    OP(matmul_bwd, m->dtmp2, dweight, dout, inp, weight, N, C, OC, err);
    OP(add_inplace, dinp, m->dtmp2, (size_t)N * C, err);
  }
  return FSDPC_OK;
}

/* dinp = rmsnorm_bwd(dout) + dresid (the residual path), in one pass where
 * the device has it (ops->rmsnorm_bwd_add). */
static fsdpc_status norm_bwd(fsdpc_model_ctx *m, void *dinp, float *dweight, const void *dout,
                             const void *dresid, const void *inp, const void *weight,
                             const float *rstd, fsdpc_err *err) {
  int N = m->N, C = m->s.C;
  if (m->ops->rmsnorm_bwd_add && m->s.norm_offset == 0.0f) {
    OP(rmsnorm_bwd_add, dinp, dweight, dout, dresid, inp, weight, rstd, N, C, err);
  } else {
    FSDPC_TRY(
        fsdpc__model_norm_bwd(m->ops, &m->s, dinp, dweight, dout, inp, weight, rstd, N, C, err));
    OP(add_inplace, dinp, dresid, (size_t)N * C, err);
  }
  return FSDPC_OK;
}

int fsdpc__model_grad_overwrite(fsdpc_model_ctx *m, int on) {
  m->grad_overwrite = on && m->ops->grad_overwrite && !m->has_lora;
  return m->grad_overwrite;
}

static fsdpc_status layer_bwd(fsdpc_model_ctx *m, int l, const fsdpc_layer_w *w,
                              const fsdpc_layer_g *g, fsdpc_err *err);

/* With grad_overwrite on, the ops write the weight gradients of this call
 * (each one once) instead of adding into them. */
fsdpc_status fsdpc__model_layer_bwd(fsdpc_model_ctx *m, int l, const fsdpc_layer_w *w,
                                    const fsdpc_layer_g *g, fsdpc_err *err) {
  if (!m->grad_overwrite) return layer_bwd(m, l, w, g, err);
  m->ops->grad_overwrite(m->dev, 1);
  fsdpc_status st = layer_bwd(m, l, w, g, err);
  m->ops->grad_overwrite(m->dev, 0);
  return st;
}

/* d(sublayer output y) from d(residual sum) for dst = res + resid_mult *
 * P(y), P the post norm or the identity: written to *dy (m->dtmp when it
 * is not dsum itself, m->dtmp2 a scratch). */
static fsdpc_status sublayer_bwd(fsdpc_model_ctx *m, const void *dsum, const void *y,
                                 const float *rstd, const void *post, float *dpost, const void **dy,
                                 fsdpc_err *err) {
  const fsdpc_model_shape *s = &m->s;
  size_t n = (size_t)m->N * s->C;
  *dy = dsum;
  if (!s->norm_post && s->resid_mult == 1.0f)
    return FSDPC_OK;
  if (!s->norm_post) {
    OP(axpy, m->dtmp, NULL, dsum, s->resid_mult, n, err);
  } else {
    const void *dn = dsum;
    if (s->resid_mult != 1.0f) {
      OP(axpy, m->dtmp2, NULL, dsum, s->resid_mult, n, err);
      dn = m->dtmp2;
    }
    float *dw;
    FSDPC_TRY(norm_grad(m, dpost, &dw, err));
    FSDPC_TRY(fsdpc__model_norm_bwd(m->ops, s, m->dtmp, dw, dn, y, post, rstd, m->N, s->C, err));
  }
  *dy = m->dtmp;
  return FSDPC_OK;
}

/* d(sublayer input) in m->dtmp to d(residual stream): dst = norm_bwd(dtmp)
 * + dres with norm_pre, else dtmp + dres. */
static fsdpc_status input_bwd(fsdpc_model_ctx *m, void *dst, const void *dres, const void *x,
                              const void *ln, const float *rstd, float *dln, fsdpc_err *err) {
  if (!m->s.norm_pre) {
    OP(add, dst, m->dtmp, dres, (size_t)m->N * m->s.C, err);
    return FSDPC_OK;
  }
  float *dw;
  FSDPC_TRY(norm_grad(m, dln, &dw, err));
  return norm_bwd(m, dst, dw, m->dtmp, dres, x, ln, rstd, err);
}

/* qk_norm's backward: d(projection output) into dst from d(normed). */
static fsdpc_status qk_norm_bwd(fsdpc_model_ctx *m, void *dst, float *dw, const void *dout,
                                const void *inp, const void *weight, const float *rstd, int H,
                                fsdpc_err *err) {
  const fsdpc_model_shape *s = &m->s;
  int rows = s->qk_norm == FSDPC_QK_NORM_HEAD ? m->N * H : m->N;
  int cols = s->qk_norm == FSDPC_QK_NORM_HEAD ? s->HD : H * s->HD;
  if (!dw) { /* frozen (LoRA): a scratch of the norm's size, discarded */
    if ((size_t)cols > fsdpc__lora_sink_floats(s))
      return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "qk norm wider than the norm sink");
    OP(memset0, m->dnorm_sink, (size_t)cols * sizeof(float), err);
    dw = m->dnorm_sink;
  }
  FSDPC_TRY(fsdpc__model_norm_bwd(m->ops, s, dst, dw, dout, inp, weight, rstd, rows, cols, err));
  return FSDPC_OK;
}

static fsdpc_status bias_bwd(fsdpc_model_ctx *m, float *db, const void *dy, int OC,
                             fsdpc_err *err) {
  if (db)
    OP(bias_bwd, db, dy, m->N, OC, err);
  return FSDPC_OK;
}

/* The MLP half: from d(resid[l+1]) in m->dres to d(h) in m->dh. */
static fsdpc_status mlp_bwd(fsdpc_model_ctx *m, int l, const fsdpc_layer_w *w,
                            const fsdpc_layer_g *g, fsdpc_err *err) {
  const fsdpc_model_shape *s = &m->s;
  int N = m->N, C = s->C, F = s->F;
  fsdpc_layer_acts *a = fsdpc__model_acts(m, l);
  void *gate, *up;
  mlp_slots(m, l, &gate, &up);
  const void *ddn;
  FSDPC_TRY(sublayer_bwd(m, m->dres, a->dn, a->rstdd, w->post_mlp, g->post_mlp, &ddn, err));
  FSDPC_TRY(proj_bwd(m, 0, m->dact, g->wdown, ddn, a->act, w->wdown, F, C, err));
  FSDPC_TRY(bias_bwd(m, g->bias[6], ddn, C, err));
  LORA_BWD1(6, ddn, a->act, m->dact);
  if (s->act == FSDPC_ACT_GELU_TANH)
    OP(geglu_bwd, m->dgate, m->dup, m->dact, gate, up, N, F, err);
  else
    OP(swiglu_bwd, m->dgate, m->dup, m->dact, gate, up, N, F, err);
  const void *in = s->norm_pre ? a->ln2 : a->h;
  FSDPC_TRY(proj_bwd(m, 0, m->dtmp, g->wgate, m->dgate, in, w->wgate, C, F, err));
  FSDPC_TRY(proj_bwd(m, 1, m->dtmp, g->wup, m->dup, in, w->wup, C, F, err));
  FSDPC_TRY(bias_bwd(m, g->bias[4], m->dgate, F, err));
  FSDPC_TRY(bias_bwd(m, g->bias[5], m->dup, F, err));
  if (s->fused_gate_up) {
    const void *dys[2] = {m->dgate, m->dup};
    LORA_BWD(4, dys, in, m->dtmp);
  } else {
    LORA_BWD1(4, m->dgate, in, m->dtmp);
    LORA_BWD1(5, m->dup, in, m->dtmp);
  }
  return input_bwd(m, m->dh, m->dres, a->h, w->ln2, a->rstd2, g->ln2, err);
}

/* The attention half: from d(h) in m->dh to d(resid[l]) in m->dres. */
static fsdpc_status attn_bwd(fsdpc_model_ctx *m, int l, const fsdpc_layer_w *w,
                             const fsdpc_layer_g *g, fsdpc_err *err) {
  const fsdpc_model_shape *s = &m->s;
  int N = m->N, C = s->C, QD = s->NH * s->HD, KD = s->KVH * s->HD, P = s->max_pos;
  fsdpc_layer_acts *a = fsdpc__model_acts(m, l);
  const void *x = m->resid[l];
  const void *d_o;
  FSDPC_TRY(sublayer_bwd(m, m->dh, a->o, a->rstdo, w->post_attn, g->post_attn, &d_o, err));
  FSDPC_TRY(proj_bwd(m, 0, m->dattn, g->wo, d_o, a->attn, w->wo, QD, C, err));
  FSDPC_TRY(bias_bwd(m, g->bias[3], d_o, C, err));
  LORA_BWD1(3, d_o, a->attn, m->dattn);
  m->ashape.doc_ids = m->doc_ids;
  m->ashape.window = fsdpc__layer_window(s, l);
  int32_t st = m->av->backward(m->actx, &m->ashape, a->q, a->k, a->v, a->attn, m->dattn,
                               a->attn_saved, m->dq, m->dk, m->dv, m->attn_ws,
                               m->ops->stream(m->dev));
  if (st != FSDPC_OK) return fsdpc__plugin_fail(m->attn, st, err);
  const float *cos, *sin;
  rope_of(m, l, &cos, &sin);
  OP(rope_bwd, m->dq, cos, sin, m->pos, N, s->NH, s->HD, s->rope.dim, P, err);
  OP(rope_bwd, m->dk, cos, sin, m->pos, N, s->KVH, s->HD, s->rope.dim, P, err);
  void *dq = m->dq, *dk = m->dk;
  if (s->qk_norm) {
    FSDPC_TRY(qk_norm_bwd(m, m->dqr, g->qnorm, m->dq, a->qr, w->qnorm, a->rstdq, s->NH, err));
    FSDPC_TRY(qk_norm_bwd(m, m->dkr, g->knorm, m->dk, a->kr, w->knorm, a->rstdk, s->KVH, err));
    dq = m->dqr;
    dk = m->dkr;
  }
  const void *in = s->norm_pre ? a->ln1 : x;
  FSDPC_TRY(proj_bwd(m, 0, m->dtmp, g->wq, dq, in, w->wq, C, QD, err));
  FSDPC_TRY(proj_bwd(m, 1, m->dtmp, g->wk, dk, in, w->wk, C, KD, err));
  FSDPC_TRY(proj_bwd(m, 1, m->dtmp, g->wv, m->dv, in, w->wv, C, KD, err));
  FSDPC_TRY(bias_bwd(m, g->bias[0], dq, QD, err));
  FSDPC_TRY(bias_bwd(m, g->bias[1], dk, KD, err));
  FSDPC_TRY(bias_bwd(m, g->bias[2], m->dv, KD, err));
  if (s->fused_qkv) {
    const void *dys[3] = {dq, dk, m->dv};
    LORA_BWD(0, dys, in, m->dtmp);
  } else {
    LORA_BWD1(0, dq, in, m->dtmp);
    LORA_BWD1(1, dk, in, m->dtmp);
    LORA_BWD1(2, m->dv, in, m->dtmp);
  }
  return input_bwd(m, m->dres, m->dh, x, w->ln1, a->rstd1, g->ln1, err);
}

static fsdpc_status layer_bwd(fsdpc_model_ctx *m, int l, const fsdpc_layer_w *w0,
                              const fsdpc_layer_g *g0, fsdpc_err *err) {
  fsdpc_layer_w w;
  fsdpc_layer_g g;
  fsdpc__layer_split(&m->s, m->ops->act_size, w0, &w);
  fsdpc__layer_split_grads(&m->s, g0, &g);
  if (m->ckpt)
    FSDPC_TRY(layer_forward(m, l, &w, 1, err)); /* recompute from resid[l] */
  FSDPC_TRY(mlp_bwd(m, l, &w, &g, err));
  return attn_bwd(m, l, &w, &g, err);
}
