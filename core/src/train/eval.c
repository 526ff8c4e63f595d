/* fsdpc eval: loss, perplexity and token accuracy of a model on data.eval,
 * computed by a training session (same loader, batches, ranks and forward
 * as train's evaluation, so the loss equals train's eval_loss at the same
 * step), plus the accuracy of the argmax on every target token. */
#include <math.h>
#include <stdlib.h>

#include "model/ctx.h"
#include "train/session.h"

/* Adds to *correct the target tokens of the micro-batch in s->mctx whose
 * argmax logit is the label. Runs after the forward (m->resid[L] holds the
 * final hidden states). */
static fsdpc_status count_correct(fsdpc_session *s, double *correct, fsdpc_err *err) {
  fsdpc_model_ctx *m = s->mctx;
  const fsdpc_ops *ops = m->ops;
  const fsdpc_model_shape *sh = &m->s;
  int L = sh->L, N = m->N, V = sh->V;
  size_t C = (size_t)sh->C, act = ops->act_size;
  int R = (int)(m->xent_scratch_bytes / ((size_t)V * sizeof(float)));
  if (R < 1)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "eval: scratch below one row");
  if (R > N)
    R = N;
  float *host = malloc((size_t)R * V * sizeof(float));
  if (!host)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  void *base[FSDPC_P_NKIND];
  fsdpc_status st = fsdpc__engine_block_weights(s->eng, L + 1, base, err);
  if (st == FSDPC_OK)
    st = ops->rmsnorm_fwd(m->dev, m->xn, m->rstdf, m->resid[L], base[FSDPC_P_NORM], N, (int)C,
                          sh->eps, err);
  for (int r0 = 0; st == FSDPC_OK && r0 < N; r0 += R) {
    int nr = N - r0 < R ? N - r0 : R, any = 0;
    for (int i = 0; i < nr; i++)
      any |= m->h_labels[r0 + i] != -100;
    if (!any)
      continue;
    st = ops->logits(m->dev, m->xent_scratch, (const char *)m->xn + (size_t)r0 * C * act,
                     base[FSDPC_P_HEAD], nr, (int)C, V, err);
    if (st == FSDPC_OK)
      st = ops->download(m->dev, host, m->xent_scratch, (size_t)nr * V * sizeof(float), err);
    for (int i = 0; st == FSDPC_OK && i < nr; i++) {
      int32_t y = m->h_labels[r0 + i];
      if (y == -100)
        continue;
      const float *x = host + (size_t)i * V;
      int best = 0;
      for (int v = 1; v < V; v++)
        if (x[v] > x[best])
          best = v;
      *correct += best == y ? 1.0 : 0.0;
    }
  }
  fsdpc_status st2 = fsdpc__engine_block_done(s->eng, L + 1, err);
  free(host);
  return st != FSDPC_OK ? st : st2;
}

fsdpc_status fsdpc__eval_run(fsdpc_session *s, double out[4], fsdpc_err *err) {
  if (!s->eval_ld)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "eval: no data.eval");
  double sums[3]; /* loss sum, counted tokens, correct */
  int64_t nb = 0;
  FSDPC_TRY(fsdpc__session_eval_sums(s, count_correct, sums, &nb, err));
  out[0] = sums[1] > 0 ? sums[0] / sums[1] : NAN; /* loss */
  out[1] = sums[1];                               /* target tokens */
  out[2] = sums[1] > 0 ? sums[2] / sums[1] : NAN; /* token accuracy */
  out[3] = (double)nb;                            /* batches */
  return FSDPC_OK;
}
