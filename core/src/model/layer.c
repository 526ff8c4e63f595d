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
 * the forward is recomputed from resid[l] first. */
#include "model/ctx.h"

#define OP(name, ...) FSDPC_TRY(m->ops->name(m->dev, __VA_ARGS__))

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
}

static fsdpc_status layer_forward(fsdpc_model_ctx *m, int l, const fsdpc_layer_w *w,
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
  OP(rope_fwd, a->q, m->rope_cos, m->rope_sin, m->pos, N, s->NH, s->HD, P, err);
  OP(rope_fwd, a->k, m->rope_cos, m->rope_sin, m->pos, N, s->KVH, s->HD, P, err);
  m->ashape.doc_ids = m->doc_ids;
  int32_t st = m->av->forward(m->actx, &m->ashape, a->q, a->k, a->v, a->attn, a->attn_saved,
                              m->attn_ws, m->ops->stream(m->dev));
  if (st != FSDPC_OK) return fsdpc__plugin_fail(m->attn, st, err);
  OP(matmul_fwd, a->h, a->attn, w->wo, x, N, QD, C, err); /* h = x + attn @ Wo^T */
  OP(rmsnorm_fwd, a->ln2, a->rstd2, a->h, w->ln2, N, C, s->eps, err);
  OP(matmul_fwd, a->gate, a->ln2, w->wgate, NULL, N, C, F, err);
  OP(matmul_fwd, a->up, a->ln2, w->wup, NULL, N, C, F, err);
  OP(swiglu_fwd, a->act, a->gate, a->up, N, F, err);
  OP(matmul_fwd, out, a->act, w->wdown, a->h, N, F, C, err); /* out = h + act @ Wdown^T */
  return FSDPC_OK;
}

fsdpc_status fsdpc__model_layer_fwd(fsdpc_model_ctx *m, int l, const fsdpc_layer_w *w,
                                    fsdpc_err *err) {
  return layer_forward(m, l, w, err);
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

fsdpc_status fsdpc__model_layer_bwd(fsdpc_model_ctx *m, int l, const fsdpc_layer_w *w,
                                    const fsdpc_layer_g *g, fsdpc_err *err) {
  const fsdpc_model_shape *s = &m->s;
  int N = m->N, C = s->C, F = s->F, QD = s->NH * s->HD, KD = s->KVH * s->HD, P = s->max_pos;
  if (m->ckpt) FSDPC_TRY(layer_forward(m, l, w, err)); /* recompute from resid[l] */
  fsdpc_layer_acts *a = fsdpc__model_acts(m, l);
  const void *x = m->resid[l];

  /* MLP: resid[l+1] = h + act @ Wdown^T */
  OP(matmul_bwd, m->dact, g->wdown, m->dres, a->act, w->wdown, N, F, C, err);
  OP(swiglu_bwd, m->dgate, m->dup, m->dact, a->gate, a->up, N, F, err);
  FSDPC_TRY(proj_bwd(m, 0, m->dtmp, g->wgate, m->dgate, a->ln2, w->wgate, C, F, err));
  FSDPC_TRY(proj_bwd(m, 1, m->dtmp, g->wup, m->dup, a->ln2, w->wup, C, F, err));
  FSDPC_TRY(norm_bwd(m, m->dh, g->ln2, m->dtmp, m->dres, a->h, w->ln2, a->rstd2, err));

  /* Attention: h = x + attn @ Wo^T */
  OP(matmul_bwd, m->dattn, g->wo, m->dh, a->attn, w->wo, N, QD, C, err);
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
  FSDPC_TRY(norm_bwd(m, m->dres, g->ln1, m->dtmp, m->dh, x, w->ln1, a->rstd1, err));
  return FSDPC_OK;
}
