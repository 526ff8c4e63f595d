/* fsdpc eval: loss, perplexity and token accuracy of a model on data.eval,
 * computed by a training session (same loader, batches, ranks and forward
 * as train's evaluation, so the loss equals train's eval_loss at the same
 * step), plus the accuracy of the argmax on every target token. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/ckpt.h"
#include "ckpt/peft.h"
#include "io/fileio.h"
#include "model/ctx.h"
#include "model/hf_rules.h"
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
    st = fsdpc__model_norm_fwd(ops, sh, m->xn, m->rstdf, m->resid[L], base[FSDPC_P_NORM], N, (int)C,
                               err);
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

fsdpc_status fsdpc__eval_run(fsdpc_session *s, double out[5], fsdpc_err *err) {
  if (!s->eval_ld)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "eval: no data.eval");
  double sums[3]; /* loss sum, counted tokens, correct */
  int64_t nb = 0, nw = 0;
  FSDPC_TRY(fsdpc__session_eval_sums(s, count_correct, sums, &nb, &nw, err));
  out[0] = sums[1] > 0 ? sums[0] / sums[1] : NAN; /* loss */
  out[1] = sums[1];                               /* target tokens */
  out[2] = sums[1] > 0 ? sums[2] / sums[1] : NAN; /* token accuracy */
  out[3] = (double)nb;                            /* batches */
  out[4] = (double)nw;                            /* sequences */
  return FSDPC_OK;
}

static int has_file(const char *dir, const char *name) {
  char p[4200];
  struct stat sb;
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* The overrides fsdpc eval makes for model and data (written into buf, k
 * of them at ov): the weights (an HF folder as the initial model, an fsdpc
 * checkpoint resumed: its optimizer state is read and unused), the data,
 * no checkpoints, the logs, and the folder's tokenizer when it ships one
 * and the caller's overrides name none. */
static int eval_overrides(const char *model, const char *data, const char *log_dir,
                          const char *const *user, int n_user, char buf[6][4200], const char **ov) {
  int k = 0, nb = 0, hf = fsdpc__hf_is_folder(model);
  /* A PEFT adapter folder is merged into its base (model.adapter). */
  snprintf(buf[nb], 4200,
           fsdpc__peft_is_folder(model) ? "model.adapter=%s"
           : hf                         ? "model.init.from=%s"
                                        : "checkpoint.resume=%s",
           model);
  ov[k++] = buf[nb++];
  snprintf(buf[nb], 4200, "data.train=%s", data);
  ov[k++] = buf[nb++];
  snprintf(buf[nb], 4200, "data.eval=%s", data);
  ov[k++] = buf[nb++];
  ov[k++] = "data.eval_fraction=0"; /* data is the eval data, whatever the run held out */
  ov[k++] = "checkpoint.dir=''";
  ov[k++] = "log.progress=off";
  snprintf(buf[nb], 4200, "log.dir=%s", log_dir);
  ov[k++] = buf[nb++];
  if (hf && !has_file(model, FSDPC_CKPT_CONFIG_FILE)) {
    snprintf(buf[nb], 4200, "model.config=%s", model);
    ov[k++] = buf[nb++];
  }
  /* A JSONL dataset is prepared with the model's own tokenizer and chat
   * template when the folder ships them (an HF folder, fsdpc's final/), as
   * fsdpc generate does, unless data.tokenizer is given. */
  int user_tok = 0;
  for (int i = 0; i < n_user; i++)
    user_tok |= strncmp(user[i], "data.tokenizer=", 15) == 0;
  if (!user_tok && (has_file(model, "tokenizer.json") || has_file(model, "tokenizer.model"))) {
    snprintf(buf[nb], 4200, "data.tokenizer=%s", model);
    ov[k++] = buf[nb++];
  }
  for (int i = 0; i < n_user; i++)
    ov[k++] = user[i];
  return k;
}

fsdpc_status fsdpc__eval_config(const char *model, const char *data, const char *log_dir,
                                const char *const *overrides, int n_overrides, fsdpc_config **out,
                                fsdpc_err *err) {
  struct stat sb;
  if (stat(model, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: no such model folder", model);
  char buf[6][4200];
  const char **ov = calloc((size_t)n_overrides + 10, sizeof *ov); /* 9 of eval_overrides */
  if (!ov)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  int k = eval_overrides(model, data, log_dir, overrides, n_overrides, buf, ov);
  /* The config: MODEL/config.yaml, else defaults + MODEL's config.json. */
  char *own = fsdpc__path_join(model, FSDPC_CKPT_CONFIG_FILE);
  fsdpc_status st = !own ? fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory")
                    : stat(own, &sb) == 0
                        ? fsdpc__config_load_checkpoint(own, ov, k, out, err)
                        : fsdpc__config_from_string("train: {}\n", model, ov, k, out, err);
  free(own);
  free(ov);
  return st;
}
