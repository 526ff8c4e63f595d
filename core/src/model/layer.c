/* One Llama decoder layer, forward and backward side by side.
 *
 *   x   = resid[l]                                  (N, C)
 *   ln1 = rmsnorm(x) * w_ln1
 *   q, k, v = ln1 @ Wq^T, ln1 @ Wk^T, ln1 @ Wv^T; RoPE on q, k
 *   attn = attention(q, k, v)          (causal, GQA; the attention plugin)
 *   h   = x + attn @ Wo^T
 *   ln2 = rmsnorm(h) * w_ln2
 *   act = silu(ln2 @ Wgate^T) * (ln2 @ Wup^T)
 *   resid[l+1] = h + act @ Wdown^T
 *
 * Parameter gradients +=, activation gradients =. Backward reads d(resid[l+1])
 * from m->dres and leaves d(resid[l]) there. With activation checkpointing
 * the forward is recomputed from resid[l] first; under FSDPC_AC_SAVE_MLP the
 * layer's gate and up projections are kept from the forward (m->mlp_gate,
 * m->mlp_up) and not recomputed.
 *
 * LoRA (model/lora.h) adds s * B(A(drop(x))) to each targeted projection's
 * output right after its matmul (before RoPE for q and k); a frozen weight
 * has a NULL gradient and gets none. */
#include "model/ctx.h"

#define OP(name, ...) FSDPC_TRY(m->ops->name(m->dev, __VA_ARGS__))
/* LoRA on projection j (model/lora.h): no-ops without adapters. */
#define LORA_FWD(j, y, x) FSDPC_TRY(fsdpc__lora_fwd(m, l, j, w, y, x, err))
#define LORA_BWD(j, dy, x, dx) FSDPC_TRY(fsdpc__lora_bwd(m, l, j, w, g, dy, x, dx, err))

void fsdpc__layer_views(void *const base[FSDPC_P_NKIND], fsdpc_layer_w *w) {
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

/* recompute: the forward again inside the backward (activation
 * checkpointing). The backward does not read resid[l + 1] (layer l + 1's
 * backward has), so the down projection that makes it is skipped there, a
 * quarter of the layer's forward GEMM work, unless LoRA targets that
 * projection (its backward reads the adapter's input product, which the
 * recompute makes again); so are the saved gate and up projections
 * (FSDPC_AC_SAVE_MLP), unless LoRA targets either. */
static fsdpc_status layer_forward(fsdpc_model_ctx *m, int l, const fsdpc_layer_w *w, int recompute,
                                  fsdpc_err *err) {
  const fsdpc_model_shape *s = &m->s;
  int N = m->N, C = s->C, F = s->F, QD = s->NH * s->HD, KD = s->KVH * s->HD, P = s->max_pos;
  fsdpc_layer_acts *a = fsdpc__model_acts(m, l);
  const void *x = m->resid[l];
  void *out = m->resid[l + 1];

  OP(rmsnorm_fwd, a->ln1, a->rstd1, x, w->ln1, N, C, s->eps, err);
  OP(matmul_fwd, a->q, a->ln1, w->wq, NULL, N, C, QD, err);
  OP(matmul_fwd, a->k, a->ln1, w->wk, NULL, N, C, KD, err);
  OP(matmul_fwd, a->v, a->ln1, w->wv, NULL, N, C, KD, err);
  LORA_FWD(0, a->q, a->ln1);
  LORA_FWD(1, a->k, a->ln1);
  LORA_FWD(2, a->v, a->ln1);
  OP(rope_fwd, a->q, m->rope_cos, m->rope_sin, m->pos, N, s->NH, s->HD, P, err);
  OP(rope_fwd, a->k, m->rope_cos, m->rope_sin, m->pos, N, s->KVH, s->HD, P, err);
  m->ashape.doc_ids = m->doc_ids;
  int32_t st = m->av->forward(m->actx, &m->ashape, a->q, a->k, a->v, a->attn, a->attn_saved,
                              m->attn_ws, m->ops->stream(m->dev));
  if (st != FSDPC_OK) return fsdpc__plugin_fail(m->attn, st, err);
  OP(matmul_fwd, a->h, a->attn, w->wo, x, N, QD, C, err); /* h = x + attn @ Wo^T */
  LORA_FWD(3, a->h, a->attn);
  OP(rmsnorm_fwd, a->ln2, a->rstd2, a->h, w->ln2, N, C, s->eps, err);
  void *gate, *up;
  mlp_slots(m, l, &gate, &up);
  int lora_mlp = m->has_lora && (w->lora_a[4] || w->lora_a[5]);
  if (!(recompute && m->mlp_gate && !lora_mlp)) {
    OP(matmul_fwd, gate, a->ln2, w->wgate, NULL, N, C, F, err);
    OP(matmul_fwd, up, a->ln2, w->wup, NULL, N, C, F, err);
    LORA_FWD(4, gate, a->ln2);
    LORA_FWD(5, up, a->ln2);
  }
  OP(swiglu_fwd, a->act, gate, up, N, F, err);
  if (recompute && !(m->has_lora && w->lora_a[6]))
    return FSDPC_OK;
  OP(matmul_fwd, out, a->act, w->wdown, a->h, N, F, C, err); /* out = h + act @ Wdown^T */
  LORA_FWD(6, out, a->act);
  return FSDPC_OK;
}

fsdpc_status fsdpc__model_layer_fwd(fsdpc_model_ctx *m, int l, const fsdpc_layer_w *w,
                                    fsdpc_err *err) {
  return layer_forward(m, l, w, 0, err);
}

/* dinp (+)= dout @ weight, dweight += dout^T @ inp. Accumulating: inside
 * the GEMM where the device has it (ops->matmul_bwd_acc), else through
 * m->dtmp2 and an add (the CPU's sequence, so its rounding is unchanged). */
static fsdpc_status proj_bwd(fsdpc_model_ctx *m, int acc, void *dinp, float *dweight,
                             const void *dout, const void *inp, const void *weight, int C, int OC,
                             fsdpc_err *err) {
  int N = m->N;
  if (!acc) {
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
  if (m->ops->rmsnorm_bwd_add) {
    OP(rmsnorm_bwd_add, dinp, dweight, dout, dresid, inp, weight, rstd, N, C, err);
  } else {
    OP(rmsnorm_bwd, dinp, dweight, dout, inp, weight, rstd, N, C, err);
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

static fsdpc_status layer_bwd(fsdpc_model_ctx *m, int l, const fsdpc_layer_w *w,
                              const fsdpc_layer_g *g, fsdpc_err *err) {
  const fsdpc_model_shape *s = &m->s;
  int N = m->N, C = s->C, F = s->F, QD = s->NH * s->HD, KD = s->KVH * s->HD, P = s->max_pos;
  if (m->ckpt) FSDPC_TRY(layer_forward(m, l, w, 1, err)); /* recompute from resid[l] */
  fsdpc_layer_acts *a = fsdpc__model_acts(m, l);
  const void *x = m->resid[l];
  void *gate, *up;
  mlp_slots(m, l, &gate, &up);

  /* MLP: resid[l+1] = h + act @ Wdown^T */
  OP(matmul_bwd, m->dact, g->wdown, m->dres, a->act, w->wdown, N, F, C, err);
  LORA_BWD(6, m->dres, a->act, m->dact);
  OP(swiglu_bwd, m->dgate, m->dup, m->dact, gate, up, N, F, err);
  FSDPC_TRY(proj_bwd(m, 0, m->dtmp, g->wgate, m->dgate, a->ln2, w->wgate, C, F, err));
  FSDPC_TRY(proj_bwd(m, 1, m->dtmp, g->wup, m->dup, a->ln2, w->wup, C, F, err));
  LORA_BWD(4, m->dgate, a->ln2, m->dtmp);
  LORA_BWD(5, m->dup, a->ln2, m->dtmp);
  float *dln;
  FSDPC_TRY(norm_grad(m, g->ln2, &dln, err));
  FSDPC_TRY(norm_bwd(m, m->dh, dln, m->dtmp, m->dres, a->h, w->ln2, a->rstd2, err));

  /* Attention: h = x + attn @ Wo^T */
  OP(matmul_bwd, m->dattn, g->wo, m->dh, a->attn, w->wo, N, QD, C, err);
  LORA_BWD(3, m->dh, a->attn, m->dattn);
  m->ashape.doc_ids = m->doc_ids;
  int32_t st = m->av->backward(m->actx, &m->ashape, a->q, a->k, a->v, a->attn, m->dattn,
                               a->attn_saved, m->dq, m->dk, m->dv, m->attn_ws,
                               m->ops->stream(m->dev));
  if (st != FSDPC_OK) return fsdpc__plugin_fail(m->attn, st, err);
  OP(rope_bwd, m->dq, m->rope_cos, m->rope_sin, m->pos, N, s->NH, s->HD, P, err);
  OP(rope_bwd, m->dk, m->rope_cos, m->rope_sin, m->pos, N, s->KVH, s->HD, P, err);
  FSDPC_TRY(proj_bwd(m, 0, m->dtmp, g->wq, m->dq, a->ln1, w->wq, C, QD, err));
  FSDPC_TRY(proj_bwd(m, 1, m->dtmp, g->wk, m->dk, a->ln1, w->wk, C, KD, err));
  FSDPC_TRY(proj_bwd(m, 1, m->dtmp, g->wv, m->dv, a->ln1, w->wv, C, KD, err));
  LORA_BWD(0, m->dq, a->ln1, m->dtmp);
  LORA_BWD(1, m->dk, a->ln1, m->dtmp);
  LORA_BWD(2, m->dv, a->ln1, m->dtmp);
  FSDPC_TRY(norm_grad(m, g->ln1, &dln, err));
  FSDPC_TRY(norm_bwd(m, m->dres, dln, m->dtmp, m->dh, x, w->ln1, a->rstd1, err));
  return FSDPC_OK;
}
