/* The optimizer step of an objective on sequence log-probs (preference
 * pairs; docs/objectives.md). A row of a micro-batch holds one pair (the
 * loader's pair packing: doc id 0 the chosen, 1 the rejected), so sequence
 * 2i + d is row i's document d.
 *
 * Per step: (1) every micro-batch of this rank: its sequences' target
 * counts (the step's chosen tokens, summed over ranks) and, for an
 * objective with a reference, the reference's log-probs (forward only;
 * LoRA: the same model with the adapters off, as TRL does with PEFT;
 * objective.reference precompute: a table computed from the initial
 * weights before the first step). (2) The training micro-steps: in each,
 * the head first writes each token's -log p(label) (model_set_rows), the
 * seeder sums them per sequence into the policy's log-probs and runs the
 * objective (its loss, d loss / d logps and metric sums; the losses are
 * means over the step's pairs on every rank), and the head's backward then
 * seeds each completion token of sequence i with -dlogps[i] * (softmax -
 * onehot) instead of the mean-loss seed: one policy forward gives both.
 * Evaluation stays the token cross-entropy. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/lora.h"
#include "train/session.h"
#include "util/log.h"

struct fsdpc_pref_state {
  int64_t mb, T, accum, n_seqs; /* n_seqs = 2 mb per micro-batch */
  double *row_loss;             /* (mb * T) */
  float *row_seed;              /* (mb * T) */
  double *logps, *ref, *dlogps; /* (accum * n_seqs) */
  int64_t *lens;                /* (accum * n_seqs) */
  double *table;                /* precompute: (max_steps * accum * n_seqs), or NULL */
  int64_t table_steps;
  /* the seeder's micro-batch, the step's chosen tokens and loss/metric sums */
  fsdpc_session *s;
  int64_t m;
  double chosen_tokens, *sums;
};

void fsdpc__pref_free(fsdpc_pref_state *p) {
  if (!p)
    return;
  free(p->row_loss), free(p->row_seed), free(p->logps), free(p->ref), free(p->dlogps);
  free(p->lens), free(p->table);
  free(p);
}

static fsdpc_status pref_alloc(fsdpc_session *s, fsdpc_err *err) {
  const fsdpc_run_batch *b = &s->plan->modes.batch;
  fsdpc_pref_state *p = calloc(1, sizeof *p);
  if (!p)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory for the preference step");
  p->mb = b->micro, p->T = b->seq_len, p->accum = b->accum, p->n_seqs = 2 * b->micro;
  size_t rows = (size_t)(p->mb * p->T), seqs = (size_t)(p->accum * p->n_seqs);
  p->row_loss = calloc(rows, sizeof *p->row_loss);
  p->row_seed = calloc(rows, sizeof *p->row_seed);
  p->logps = calloc(seqs, sizeof *p->logps);
  p->ref = calloc(seqs, sizeof *p->ref);
  p->dlogps = calloc(seqs, sizeof *p->dlogps);
  p->lens = calloc(seqs, sizeof *p->lens);
  s->pref = p;
  if (!p->row_loss || !p->row_seed || !p->logps || !p->ref || !p->dlogps || !p->lens)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory for the preference step");
  return FSDPC_OK;
}

/* Sequence sums of one micro-batch: logps[2i + d] = sum of log p(label)
 * over row i's target tokens of document d, lens their count. */
static void seq_sums(const fsdpc_session *s, double *logps, int64_t *lens) {
  const fsdpc_pref_state *p = s->pref;
  memset(logps, 0, (size_t)p->n_seqs * sizeof *logps);
  memset(lens, 0, (size_t)p->n_seqs * sizeof *lens);
  for (int64_t i = 0; i < p->mb; i++)
    for (int64_t j = 0; j < p->T; j++) {
      int64_t k = i * p->T + j;
      int32_t d = s->doc_ids[k];
      if (s->labels[k] == FSDPC_IGNORE_INDEX || d < 0 || d > 1)
        continue;
      logps[2 * i + d] -= p->row_loss[k];
      lens[2 * i + d]++;
    }
}

static fsdpc_status load(fsdpc_session *s, int64_t step, int64_t m, fsdpc_err *err) {
  FSDPC_TRY(fsdpc__loader_batch(s->train_ld, step, (int32_t)m, s->env.rank, s->env.world_size,
                                (int32_t)s->pref->mb, s->tokens, s->labels, s->doc_ids, err));
  return fsdpc__model_set_batch(s->mctx, s->tokens, s->labels, s->doc_ids, err);
}

static uint64_t lora_round(const fsdpc_session *s, int64_t step, int64_t m) {
  return ((uint64_t)step * (uint64_t)s->pref->accum + (uint64_t)m) * (uint64_t)s->env.world_size +
         (uint64_t)s->env.rank;
}

/* A forward of the loaded micro-batch (lora_off: the base model), its
 * sequences' log-probs into logps and lens. */
static fsdpc_status forward(fsdpc_session *s, int lora_off, double *logps, int64_t *lens,
                            fsdpc_err *err) {
  double ls = 0.0;
  int64_t cnt = 0;
  fsdpc__model_set_rows(s->mctx, s->pref->row_loss, NULL);
  fsdpc__model_set_lora_off(s->mctx, lora_off);
  fsdpc_status st = fsdpc__engine_eval(s->eng, s->mctx, &ls, &cnt, err);
  fsdpc__model_set_lora_off(s->mctx, 0);
  fsdpc__model_set_rows(s->mctx, NULL, NULL);
  if (st == FSDPC_OK)
    seq_sums(s, logps, lens);
  return st;
}

/* objective.reference precompute: every step's reference log-probs from
 * the weights as they are before the first step. */
static fsdpc_status precompute(fsdpc_session *s, fsdpc_err *err) {
  fsdpc_pref_state *p = s->pref;
  int64_t steps = s->plan->modes.batch.max_steps, per_step = p->accum * p->n_seqs;
  if (s->next_step != 0)
    return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                       "objective.reference precompute: the run resumes at step %lld, and the "
                       "reference log-probs come from the initial weights, which a resumed run "
                       "no longer has; start the run anew",
                       (long long)s->next_step);
  p->table = malloc((size_t)(steps * per_step > 0 ? steps * per_step : 1) * sizeof *p->table);
  if (!p->table)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR,
                       "out of memory for %lld steps of reference log-probs", (long long)steps);
  fsdpc_loader_state ls;
  fsdpc__loader_state(s->train_ld, &ls); /* reading ahead must not move the data state */
  double t0 = fsdpc__now();
  fsdpc__model_set_lora_round(s->mctx, 0, 0);
  for (int64_t st = 0; st < steps; st++)
    for (int64_t m = 0; m < p->accum; m++) {
      FSDPC_TRY(load(s, st, m, err));
      FSDPC_TRY(forward(s, 1, p->table + st * per_step + m * p->n_seqs, p->lens, err));
    }
  p->table_steps = steps;
  FSDPC_TRY(fsdpc__loader_restore(s->train_ld, &ls, err));
  if (s->env.rank == 0)
    FSDPC_LOGI("objective: reference log-probs of %lld steps precomputed in %.1f s",
               (long long)steps, fsdpc__now() - t0);
  return FSDPC_OK;
}

/* Target-token counts of the loaded micro-batch per sequence, as
 * seq_sums counts them. */
static void seq_lens(const fsdpc_session *s, int64_t *lens) {
  const fsdpc_pref_state *p = s->pref;
  memset(lens, 0, (size_t)p->n_seqs * sizeof *lens);
  for (int64_t k = 0; k < p->mb * p->T; k++) {
    int32_t d = s->doc_ids[k];
    if (s->labels[k] != FSDPC_IGNORE_INDEX && d >= 0 && d <= 1)
      lens[2 * (k / p->T) + d]++;
  }
}

/* Pass 1: the chosen tokens of the step (every rank's) and the reference's
 * log-probs of every micro-batch. */
static fsdpc_status prepass(fsdpc_session *s, int64_t step, fsdpc_err *err) {
  fsdpc_pref_state *p = s->pref;
  const fsdpc_train_objective *o = &s->objective;
  double chosen = 0.0;
  for (int64_t m = 0; m < p->accum; m++) {
    double *ref = p->ref + m * p->n_seqs;
    int64_t *lens = p->lens + m * p->n_seqs;
    FSDPC_TRY(load(s, step, m, err));
    seq_lens(s, lens);
    if (o->needs_ref && p->table)
      memcpy(ref, p->table + (step * p->accum + m) * p->n_seqs, (size_t)p->n_seqs * sizeof *ref);
    else if (o->needs_ref)
      FSDPC_TRY(forward(s, 1, ref, lens, err));
    for (int64_t i = 0; i < p->n_seqs; i += 2)
      chosen += (double)lens[i];
  }
  p->chosen_tokens = chosen;
  return fsdpc__dist_all_reduce_f64(&s->dist, FSDPC_GROUP_WORLD, &p->chosen_tokens, 1,
                                    "chosen tokens", err);
}

/* The head's seeder of micro-batch p->m (fsdpc__model_set_row_seeder): the
 * policy's log-probs from the rows' losses, the objective on them (its
 * loss and metrics added to p->sums), each target token of sequence i
 * seeded with -dlogps[i] (d loss / d(-log p) per token). */
static fsdpc_status seed_rows(void *ctx, fsdpc_err *err) {
  fsdpc_pref_state *p = ctx;
  fsdpc_session *s = p->s;
  const fsdpc_train_objective *o = &s->objective;
  int64_t m = p->m;
  double *lp = p->logps + m * p->n_seqs, *dl = p->dlogps + m * p->n_seqs;
  int64_t *lens = p->lens + m * p->n_seqs;
  seq_sums(s, lp, lens);
  fsdpc_obj_batch in = {.struct_size = sizeof in,
                        .want = FSDPC_OBJ_WANT_SEED | FSDPC_OBJ_WANT_LOSS,
                        .n_tokens = (int64_t)p->chosen_tokens,
                        .n_seqs = (uint32_t)p->n_seqs,
                        .group_size = 2,
                        .logps = lp,
                        .ref_logps = o->needs_ref ? p->ref + m * p->n_seqs : NULL,
                        .lengths = lens,
                        .n_groups = s->plan->modes.batch.global};
  double loss = 0.0, metrics[FSDPC_OBJ_MAX_METRICS];
  memset(metrics, 0, sizeof metrics);
  FSDPC_TRY(fsdpc__objective_seq(o, &in, &loss, dl, metrics, err));
  p->sums[0] += loss;
  for (uint32_t k = 0; k < o->n_metrics; k++)
    p->sums[1 + k] += metrics[k];
  for (int64_t k = 0; k < p->mb * p->T; k++) {
    int32_t d = s->doc_ids[k];
    int ok = s->labels[k] != FSDPC_IGNORE_INDEX && d >= 0 && d <= 1;
    p->row_seed[k] = ok ? (float)-dl[2 * (k / p->T) + d] : 0.0f;
  }
  return FSDPC_OK;
}

/* Pass 2: the training micro-step of micro-batch m; its head seeds the
 * backward through seed_rows. */
static fsdpc_status train_micro(fsdpc_session *s, int64_t step, int64_t m, fsdpc_err *err) {
  fsdpc_pref_state *p = s->pref;
  FSDPC_TRY(load(s, step, m, err));
  p->m = m;
  fsdpc__model_set_lora_round(s->mctx, lora_round(s, step, m), 1);
  fsdpc__model_set_rows(s->mctx, p->row_loss, p->row_seed);
  fsdpc__model_set_row_seeder(s->mctx, seed_rows, p);
  double ls = 0.0;
  int64_t cnt = 0;
  /* grad_scale is only "run the backward" here: the seeds are per token */
  fsdpc_status st =
      fsdpc__engine_micro_step(s->eng, s->mctx, 1.0f, m == p->accum - 1, &ls, &cnt, err);
  fsdpc__model_set_row_seeder(s->mctx, NULL, NULL);
  fsdpc__model_set_rows(s->mctx, NULL, NULL);
  return st;
}

fsdpc_status fsdpc__pref_train_step(fsdpc_session *s, int64_t step, double *loss, double *lr,
                                    double *gnorm, fsdpc_err *err) {
  fsdpc_train_objective *o = &s->objective;
  if (!s->pref) {
    FSDPC_TRY(pref_alloc(s, err));
    if (o->precompute)
      FSDPC_TRY(precompute(s, err));
  }
  fsdpc_pref_state *p = s->pref;
  o->have_metrics = 0;
  double sums[1 + FSDPC_OBJ_MAX_METRICS] = {0};
  p->s = s, p->sums = sums;
  FSDPC_TRY(prepass(s, step, err));
  *lr = fsdpc__schedule_lr(&s->sched, step);
  FSDPC_TRY(fsdpc__engine_step_begin(s->eng, step + 1, *lr, s->cfg->train.max_grad_norm, err));
  for (int64_t m = 0; m < p->accum; m++)
    FSDPC_TRY(train_micro(s, step, m, err));
  FSDPC_TRY(
      fsdpc__engine_optim_step(s->eng, step + 1, *lr, s->cfg->train.max_grad_norm, gnorm, err));
  FSDPC_TRY(s->ops->sync(s->ops->ctx, err));
  FSDPC_TRY(fsdpc__dist_all_reduce_f64(&s->dist, FSDPC_GROUP_WORLD, sums, 1 + (int)o->n_metrics,
                                       "objective", err));
  *loss = sums[0];
  double G = (double)s->plan->modes.batch.global;
  for (uint32_t k = 0; k < o->n_metrics; k++)
    o->metrics[k] = sums[1 + k] / G;
  o->have_metrics = o->n_metrics > 0;
  return FSDPC_OK;
}
