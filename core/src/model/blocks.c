/* The embedding block and the head block (final RMSNorm, lm_head, fused
 * cross-entropy), forward and backward side by side, through the ops table.
 * Granite's multipliers: embeddings times embed_mult; logits divided by
 * logits_div, done on the normed input of the lm_head (x W^T / d = (x / d)
 * W^T), so the fused cross-entropy needs no parameter for it. Gemma 2's
 * final soft-capping is the fused op's (lmhead_xent_capped).
 * Parameter gradients +=, activation gradients =. */
#include <math.h>

#include "model/ctx.h"

#define OP(name, ...) FSDPC_TRY(m->ops->name(m->dev, __VA_ARGS__))

fsdpc_status fsdpc__model_norm_fwd(const fsdpc_ops *ops, const fsdpc_model_shape *s, void *out,
                                   float *rstd, const void *inp, const void *weight, int N, int C,
                                   fsdpc_err *err) {
  if (s->norm_offset != 0.0f)
    return ops->rmsnorm_off_fwd(ops->ctx, out, rstd, inp, weight, N, C, s->eps, s->norm_offset,
                                err);
  return ops->rmsnorm_fwd(ops->ctx, out, rstd, inp, weight, N, C, s->eps, err);
}

fsdpc_status fsdpc__model_norm_bwd(const fsdpc_ops *ops, const fsdpc_model_shape *s, void *dinp,
                                   float *dweight, const void *dout, const void *inp,
                                   const void *weight, const float *rstd, int N, int C,
                                   fsdpc_err *err) {
  if (s->norm_offset != 0.0f)
    return ops->rmsnorm_off_bwd(ops->ctx, dinp, dweight, dout, inp, weight, rstd, N, C,
                                s->norm_offset, err);
  return ops->rmsnorm_bwd(ops->ctx, dinp, dweight, dout, inp, weight, rstd, N, C, err);
}

fsdpc_status fsdpc__model_embed_fwd(fsdpc_model_ctx *m, const void *wte, fsdpc_err *err) {
  for (int i = 0; i < m->N; i++) /* a clear message beats a silent zero row */
    if (m->h_tokens[i] < 0 || m->h_tokens[i] >= m->s.V)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "token id %d at batch position %d is outside the vocabulary "
                         "(model.vocab_size %d)",
                         m->h_tokens[i], i, m->s.V);
  OP(embedding_fwd, m->resid[0], m->tokens, wte, m->N, m->s.C, m->s.V, err);
  if (m->s.embed_mult != 1.0f)
    OP(scale, m->resid[0], (size_t)m->N * m->s.C, m->s.embed_mult, err);
  return FSDPC_OK;
}

fsdpc_status fsdpc__model_embed_bwd(fsdpc_model_ctx *m, float *dwte, fsdpc_err *err) {
  if (!dwte)
    return FSDPC_OK;           /* frozen */
  if (m->s.embed_mult != 1.0f) /* d(resid[0]) is read here last */
    OP(scale, m->dres, (size_t)m->N * m->s.C, m->s.embed_mult, err);
  OP(embedding_bwd, dwte, m->dres, m->tokens, m->N, m->s.C, m->s.V, err);
  return FSDPC_OK;
}

/* Final norm, lm_head and fused cross-entropy, forward and backward. */
static fsdpc_status head_work(fsdpc_model_ctx *m, const void *norm_w, const void *head_w,
                              float grad_scale, float *dnorm_w, float *dhead_w, fsdpc_err *err) {
  const fsdpc_model_shape *s = &m->s;
  int N = m->N, C = s->C;
  const void *x = m->resid[s->L];
  int bwd = grad_scale != 0.0f;
  FSDPC_TRY(fsdpc__model_norm_fwd(m->ops, s, m->xn, m->rstdf, x, norm_w, N, C, err));
  if (s->logits_div != 1.0f)
    OP(scale, m->xn, (size_t)N * C, 1.0f / s->logits_div, err);
  if (m->row_loss && !m->ops->lmhead_xent_rows)
    return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                       "objectives on sequence log-probs need a per-token cross-entropy "
                       "(lmhead_xent_rows), which this device lacks: train them on the CPU or "
                       "CUDA");
  if (m->row_loss && s->logit_softcap > 0.0f)
    return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                       "objectives on sequence log-probs do not soft-cap the final logits yet: "
                       "train them on a model without final_logit_softcapping");
  if (m->row_loss && bwd && m->row_seeder) { /* the losses, then the seeds from them */
    OP(lmhead_xent_rows, m->loss2, m->row_loss, NULL, NULL, NULL, m->xn, head_w, m->labels, N, C,
       s->V, m->chunk_rows, m->logits_bf16, m->xent_scratch, m->xent_scratch_bytes, err);
    FSDPC_TRY(m->row_seeder(m->row_seeder_ctx, err));
  }
  if (m->row_loss)
    OP(lmhead_xent_rows, m->loss2, m->row_loss, bwd ? m->row_seed : NULL, bwd ? m->dtmp : NULL,
       bwd ? dhead_w : NULL, m->xn, head_w, m->labels, N, C, s->V, m->chunk_rows, m->logits_bf16,
       m->xent_scratch, m->xent_scratch_bytes, err);
  else if (s->logit_softcap > 0.0f)
    OP(lmhead_xent_capped, m->loss2, bwd ? m->dtmp : NULL, bwd ? dhead_w : NULL, m->xn, head_w,
       m->labels, N, C, s->V, grad_scale, m->chunk_rows, m->logits_bf16, s->logit_softcap,
       m->xent_scratch, m->xent_scratch_bytes, err);
  else
    OP(lmhead_xent, m->loss2, bwd ? m->dtmp : NULL, bwd ? dhead_w : NULL, m->xn, head_w, m->labels,
       N, C, s->V, grad_scale, m->chunk_rows, m->logits_bf16, m->xent_scratch,
       m->xent_scratch_bytes, err);
  if (bwd && !dnorm_w) { /* a frozen norm (LoRA): its weight gradient is discarded */
    OP(memset0, m->dnorm_sink, (size_t)C * sizeof(float), err);
    dnorm_w = m->dnorm_sink;
  }
  if (bwd && s->logits_div != 1.0f)
    OP(scale, m->dtmp, (size_t)N * C, 1.0f / s->logits_div, err);
  if (bwd)
    FSDPC_TRY(fsdpc__model_norm_bwd(m->ops, s, m->dres, dnorm_w, m->dtmp, x, norm_w, m->rstdf, N, C,
                                    err));
  return FSDPC_OK;
}

/* The head's work (grad_overwrite: the final norm's and the head's weight
 * gradients written, not added: the backward's first writers; tied, the
 * embedding adds into the head's gradient later). */
static fsdpc_status head_ops(fsdpc_model_ctx *m, const void *norm_w, const void *head_w,
                             float grad_scale, float *dnorm_w, float *dhead_w, fsdpc_err *err) {
  if (!m->grad_overwrite || grad_scale == 0.0f)
    return head_work(m, norm_w, head_w, grad_scale, dnorm_w, dhead_w, err);
  m->ops->grad_overwrite(m->dev, 1);
  fsdpc_status st = head_work(m, norm_w, head_w, grad_scale, dnorm_w, dhead_w, err);
  m->ops->grad_overwrite(m->dev, 0);
  return st;
}

fsdpc_status fsdpc__model_head_fwd_bwd(fsdpc_model_ctx *m, const void *norm_w, const void *head_w,
                                       float grad_scale, float *dnorm_w, float *dhead_w,
                                       double *loss_sum, int64_t *count, fsdpc_err *err) {
  const fsdpc_model_shape *s = &m->s;
  int N = m->N;
  for (int i = 0; i < N; i++)
    if (m->h_labels[i] != -100 && (m->h_labels[i] < 0 || m->h_labels[i] >= s->V))
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "label %d at batch position %d is outside the vocabulary (%d)",
                         m->h_labels[i], i, s->V);
  FSDPC_TRY(head_ops(m, norm_w, head_w, grad_scale, dnorm_w, dhead_w, err));
  if (m->defer_loss && m->loss_n < m->loss_cap) {
    /* ordered after lmhead_xent on the compute stream, before the next
     * micro-batch overwrites loss2 */
    OP(copy_on, m->loss_host + 2 * m->loss_n, m->loss2, 2 * sizeof(double), NULL, err);
    m->loss_n++;
    *loss_sum = 0.0;
    *count = 0;
    return FSDPC_OK;
  }
  double l2[2];
  OP(download, l2, m->loss2, sizeof l2, err);
  *loss_sum = l2[0];
  *count = (int64_t)l2[1];
  return FSDPC_OK;
}

void fsdpc__model_set_rows(fsdpc_model_ctx *m, double *row_loss, const float *row_seed) {
  m->row_loss = row_loss;
  m->row_seed = row_seed;
}

void fsdpc__model_set_row_seeder(fsdpc_model_ctx *m, fsdpc_status (*seeder)(void *, fsdpc_err *),
                                 void *ctx) {
  m->row_seeder = seeder;
  m->row_seeder_ctx = ctx;
}

void fsdpc__model_defer_loss(fsdpc_model_ctx *m, int on) {
  if (on && !m->loss_host && m->ops->alloc_host && m->ops->copy_on) {
    m->loss_host = m->ops->alloc_host(m->dev, 64 * 2 * sizeof(double));
    m->loss_cap = m->loss_host ? 64 : 0; /* more micro-batches: the sync download */
  }
  m->defer_loss = on && m->loss_host;
  if (on)
    m->loss_n = 0;
}

void fsdpc__model_deferred_losses(fsdpc_model_ctx *m, double *loss_sum, int64_t *count) {
  double s = 0.0;
  int64_t c = 0;
  for (int i = 0; i < m->loss_n; i++) {
    s += m->loss_host[2 * i];
    c += (int64_t)m->loss_host[2 * i + 1];
  }
  *loss_sum += s;
  *count += c;
  m->loss_n = 0;
}

fsdpc_status fsdpc__model_logits_at(fsdpc_model_ctx *m, int pos, const void *norm_w,
                                    const void *head_w, float *out, fsdpc_err *err) {
  const fsdpc_model_shape *s = &m->s;
  size_t C = (size_t)s->C, act = m->ops->act_size;
  if (pos < 0 || pos >= m->T)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "logits position %d outside [0, %d)", pos, m->T);
  /* fp32 logits of one row land in the cross-entropy scratch (device
   * memory), then come to the host. */
  size_t vb = (size_t)s->V * sizeof(float);
  if (m->xent_scratch_bytes < vb)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "logits: scratch smaller than one row");
  float *row = m->xent_scratch;
  for (int b = 0; b < m->B; b++) {
    const char *x = (const char *)m->resid[s->L] + ((size_t)b * m->T + pos) * C * act;
    FSDPC_TRY(fsdpc__model_norm_fwd(m->ops, s, m->xn, m->rstdf, x, norm_w, 1, (int)C, err));
    if (s->logits_div != 1.0f)
      OP(scale, m->xn, C, 1.0f / s->logits_div, err);
    OP(logits, row, m->xn, head_w, 1, (int)C, s->V, err);
    float *o = out + (size_t)b * s->V;
    OP(download, o, row, vb, err);
    for (int v = 0; s->logit_softcap > 0.0f && v < s->V; v++) /* host memory */
      o[v] = tanhf(o[v] / s->logit_softcap) * s->logit_softcap;
  }
  return FSDPC_OK;
}
