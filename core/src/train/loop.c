/* The step loop: for each optimizer step, every micro-batch's forward and
 * backward through the engine, then clipping and the optimizer; evaluation
 * and logging as configured; generation at the end (infer/, the same code
 * as `fsdpc generate`). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/train_hooks.h"
#include "infer/infer.h"
#include "model/lora.h"
#include "train/session.h"
#include "util/fault.h"
#include "util/log.h"
#include "util/mem.h"

static fsdpc_status train_step(fsdpc_session *s, int64_t step, double *loss, double *lr,
                               double *gnorm, fsdpc_err *err) {
  int rank = s->env.rank, world = s->env.world_size;
  int64_t count = 0;
  if (s->objective.seq) /* preference pairs: every row holds targets */
    return fsdpc__pref_train_step(s, step, loss, lr, gnorm, err);
  s->objective.have_metrics = 0;
  FSDPC_TRY(fsdpc__loader_count_labels(s->train_ld, step, s->plan->modes.batch.global, &count, err));
  if (count == 0) {
    /* Masked data (long prompts) can leave a whole global batch without a
     * target token, hours into a run: skip the step, never abort. */
    s->skipped_steps++;
    if (rank == 0)
      FSDPC_LOGW("step %lld: the global batch has no target tokens (every label masked): step "
                 "skipped (%lld so far; counted as skipped_steps in metrics.jsonl)",
                 (long long)step + 1, (long long)s->skipped_steps);
    *loss = NAN;
    *lr = fsdpc__schedule_lr(&s->sched, step);
    *gnorm = 0.0;
    return FSDPC_OK;
  }
  /* the objective's seed of each target token's gradient (sft: 1 / count) */
  double token_weight = 0.0;
  FSDPC_TRY(fsdpc__objective_token_weight(&s->objective, count, &token_weight, err));
  float grad_scale = (float)token_weight;
  double loss_sum = 0.0;
  /* lets an offloaded optimizer start its updates during the backward */
  FSDPC_TRY(fsdpc__engine_step_begin(s->eng, step + 1, fsdpc__schedule_lr(&s->sched, step),
                                     s->cfg->train.max_grad_norm, err));
  /* the loss stays on the device until the step's end (no host sync) */
  fsdpc__model_defer_loss(s->mctx, 1);
  for (int64_t m = 0; m < s->plan->modes.batch.accum; m++) {
    FSDPC_TRY(fsdpc__loader_batch(s->train_ld, step, (int32_t)m, rank, world,
                                  (int32_t)s->plan->modes.batch.micro, s->tokens, s->labels,
                                  s->doc_ids, err));
    FSDPC_TRY(fsdpc__model_set_batch(s->mctx, s->tokens, s->labels,
                                     s->use_doc_ids ? s->doc_ids : NULL, err));
    /* LoRA dropout masks: one round per (step, micro-batch, rank), so a
     * resumed run draws the same ones */
    fsdpc__model_set_lora_round(
        s->mctx,
        ((uint64_t)step * (uint64_t)s->plan->modes.batch.accum + (uint64_t)m) * (uint64_t)world +
            (uint64_t)rank,
        1);
    double ls = 0.0;
    int64_t cnt = 0;
    fsdpc_status st = fsdpc__engine_micro_step(s->eng, s->mctx, grad_scale,
                                               m == s->plan->modes.batch.accum - 1, &ls, &cnt, err);
    if (st != FSDPC_OK) {
      fsdpc__model_defer_loss(s->mctx, 0);
      return st;
    }
    loss_sum += ls;
  }
  fsdpc__model_defer_loss(s->mctx, 0);
  *lr = fsdpc__schedule_lr(&s->sched, step);
  FSDPC_TRY(fsdpc__engine_optim_step(s->eng, step + 1, *lr, s->cfg->train.max_grad_norm, gnorm,
                                     err));
  FSDPC_TRY(s->ops->sync(s->ops->ctx, err)); /* the step's time includes its device work */
  int64_t deferred_count = 0;
  fsdpc__model_deferred_losses(s->mctx, &loss_sum, &deferred_count);
  FSDPC_TRY(fsdpc__dist_all_reduce_f64(&s->dist, FSDPC_GROUP_WORLD, &loss_sum, 1, "loss", err));
  return fsdpc__objective_token_loss(&s->objective, loss_sum, count, loss, err);
}

/* This rank's rows of micro-batch m of evaluation batch b: the windows at
 * positions b*G + (m*P + rank)*mb + i (the order train's loader_batch uses),
 * those at or past `limit` padded (labels -100), so the last, smaller batch
 * counts every window once. */
static fsdpc_status eval_rows(fsdpc_session *s, int64_t b, int64_t m, int64_t limit,
                              fsdpc_err *err) {
  int64_t G = s->plan->modes.batch.global, mb = s->plan->modes.batch.micro;
  int64_t T = s->plan->modes.batch.seq_len, P = s->env.world_size;
  for (int64_t i = 0; i < mb; i++) {
    int64_t pos = b * G + (m * P + s->env.rank) * mb + i;
    int32_t *tok = s->tokens + i * T, *lab = s->labels + i * T, *doc = s->doc_ids + i * T;
    if (pos < limit) {
      FSDPC_TRY(fsdpc__loader_window(s->eval_ld, pos, tok, lab, doc, err));
      continue;
    }
    for (int64_t j = 0; j < T; j++)
      tok[j] = 0, lab[j] = FSDPC_IGNORE_INDEX, doc[j] = 0;
  }
  return FSDPC_OK;
}

fsdpc_status fsdpc__session_eval_sums(fsdpc_session *s, fsdpc__eval_hook per_micro, double sums[3],
                                      int64_t *batches, int64_t *windows, fsdpc_err *err) {
  int64_t G = s->plan->modes.batch.global,
          per_micro_rows = s->plan->modes.batch.micro * (int64_t)s->env.world_size;
  /* every window of the eval data (train.eval_batches 0), or the first
   * eval_batches global batches of it */
  int64_t limit = fsdpc__loader_num_windows(s->eval_ld), nb_cfg = s->cfg->train.eval_batches;
  if (nb_cfg > 0 && nb_cfg < (limit + G - 1) / G)
    limit = nb_cfg * G;
  int64_t nb = (limit + G - 1) / G;
  sums[0] = sums[1] = sums[2] = 0.0; /* loss sum, counted tokens, per_micro's */
  fsdpc__model_set_lora_round(s->mctx, 0, 0); /* no dropout while evaluating */
  for (int64_t b = 0; b < nb; b++) {
    /* the last batch runs only the micro-batches that hold a window (the
     * same number on every rank) */
    int64_t left = limit - b * G, accum = s->plan->modes.batch.accum;
    if (left < G)
      accum = (left + per_micro_rows - 1) / per_micro_rows;
    for (int64_t m = 0; m < accum; m++) {
      FSDPC_TRY(eval_rows(s, b, m, limit, err));
      FSDPC_TRY(fsdpc__model_set_batch(s->mctx, s->tokens, s->labels,
                                       s->eval_doc_ids ? s->doc_ids : NULL, err));
      double ls = 0.0;
      int64_t cnt = 0;
      FSDPC_TRY(fsdpc__engine_eval(s->eng, s->mctx, &ls, &cnt, err));
      if (per_micro)
        FSDPC_TRY(per_micro(s, &sums[2], err));
      sums[0] += ls;
      sums[1] += (double)cnt;
    }
  }
  /* Without per_micro only the two sums travel, as they always have. */
  FSDPC_TRY(fsdpc__dist_all_reduce_f64(&s->dist, FSDPC_GROUP_WORLD, sums, per_micro ? 3 : 2,
                                       per_micro ? "eval" : "eval_loss", err));
  *batches = nb;
  *windows = limit;
  return FSDPC_OK;
}

fsdpc_status fsdpc__session_eval(fsdpc_session *s, double *loss, fsdpc_err *err) {
  double sums[3];
  int64_t nb, nw;
  FSDPC_TRY(fsdpc__session_eval_sums(s, NULL, sums, &nb, &nw, err));
  if (!s->eval_reported && s->env.rank == 0)
    FSDPC_LOGI("eval: %lld sequences of %lld tokens (%s), %.0f target tokens, in %lld batches "
               "(the last one smaller when they do not fill it)",
               (long long)nw, (long long)s->plan->modes.batch.seq_len,
               nw == fsdpc__loader_num_windows(s->eval_ld) ? "every example"
                                                           : "train.eval_batches of them",
               sums[1], (long long)nb);
  s->eval_reported = 1;
  *loss = sums[1] > 0 ? sums[0] / sums[1] : NAN;
  return FSDPC_OK;
}

/* The engine's gathered units as the decoder's weights (infer/infer.h). */
static fsdpc_status engine_block(void *ctx, int b, void *base[FSDPC_P_NKIND], fsdpc_err *err) {
  return fsdpc__engine_block_weights(ctx, b, base, err);
}
static fsdpc_status engine_done(void *ctx, int b, fsdpc_err *err) {
  return fsdpc__engine_block_done(ctx, b, err);
}

fsdpc_status fsdpc__session_generate(fsdpc_session *s, const char *prompt, int n, char *out,
                                     size_t cap, fsdpc_err *err) {
  int32_t *text_ids = NULL;
  int64_t nt = 0;
  FSDPC_TRY(fsdpc__tokenizer_encode_alloc(s->tok, prompt, strlen(prompt), &text_ids, &nt, err));
  /* Packed training data puts EOS between documents, so a document always
   * follows one; start the prompt the same way. Whole examples start a row
   * (or a restarted position) on their own. */
  int lead = !s->examples;
  int32_t *ids = malloc(((size_t)nt + 1) * sizeof(int32_t));
  if (!ids) {
    free(text_ids);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  }
  int32_t eos[2] = {fsdpc__tokenizer_eos(s->tok), s->plan->shape.eos_id};
  ids[0] = eos[0];
  memcpy(ids + lead, text_ids, (size_t)nt * sizeof(int32_t));
  free(text_ids);
  int len = (int)nt + lead;
  if (len < 1) {
    free(ids);
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "generation prompt '%s' has no tokens", prompt);
  }
  const int32_t *pp[1] = {ids};
  fsdpc_infer_weights w = {.ctx = s->eng, .block = engine_block, .done = engine_done};
  fsdpc_decoder_opts dopt = {.shape = &s->plan->shape,
                             .ops = s->ops,
                             .attention = s->plan->attn,
                             .lora = s->plan->has_lora ? &s->plan->lora : NULL,
                             .attention_opts = s->cfg->attention.options};
  fsdpc_gen_opts g = {.max_new_tokens = n, .eos = eos, .n_eos = eos[1] >= 0 ? 2 : 1,
                      .tok = s->tok};
  fsdpc_gen_result *r = NULL;
  fsdpc_status st = fsdpc__generate(&dopt, &w, pp, &len, 1, &g, &r, err);
  if (st == FSDPC_OK) snprintf(out, cap, "%s", r[0].text);
  fsdpc__gen_results_free(r, 1);
  free(ids);
  return st;
}

/* C-style escaping so that a prompt or answer stays on one line. */
static void escape(const char *in, char *out, size_t cap) {
  size_t o = 0;
  for (; *in && o + 5 < cap; in++) {
    unsigned char c = (unsigned char)*in;
    if (c == '\n') o += (size_t)snprintf(out + o, cap - o, "\\n");
    else if (c == '"' || c == '\\') o += (size_t)snprintf(out + o, cap - o, "\\%c", c);
    else if (c < 32) o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
    else out[o++] = (char)c;
  }
  out[o] = '\0';
}

/* FSDPC_FAULT (util/fault.h): an error, or a trapping kernel, at this step. */
static fsdpc_status fault_step(fsdpc_session *s, int64_t step, fsdpc_err *err) {
#ifdef FSDPC_WITH_CUDA
  if (fsdpc__fault_kernel(step) && s->ops->device == FSDPC_DEVICE_CUDA)
    fsdpc__fault_cuda_trap(s->ops->stream(s->ops->ctx));
#endif
  fsdpc_status st = fsdpc__fault_step(step, err);
  return st == FSDPC_OK ? st : fsdpc__err_prefix(err, "rank %d", s->env.rank);
}

fsdpc_status fsdpc__session_failed(fsdpc_session *s, fsdpc_status st, fsdpc_err *err) {
  return s ? fsdpc__dist_job_fail(s->job, st, err) : st;
}

int fsdpc__session_exit_code(const fsdpc_session *s, const fsdpc_err *err) {
  return fsdpc__dist_job_exit_code(s ? s->job : NULL, err);
}

fsdpc_status fsdpc__session_step(fsdpc_session *s, fsdpc_session_step *out, int *stop,
                                 fsdpc_err *err) {
  const fsdpc_config *c = s->cfg;
  int64_t step = s->next_step;
  *stop = 0;
  if (!s->started) {
    fsdpc__report_memory(s, "start");
    s->started = 1;
  }
  /* the job's first failure, as the watchdog knows it (no store request) */
  FSDPC_TRY(fsdpc__dist_job_check(s->job, err));
  FSDPC_TRY(fault_step(s, step + 1, err));
  fsdpc__session_mem_reset_peak(s);
  fsdpc__dist_reset_counters(&s->dist);
  double t0 = fsdpc__now(), loss = 0, lr = 0, gnorm = 0;
  int64_t skipped = s->skipped_steps;
  FSDPC_TRY(train_step(s, step, &loss, &lr, &gnorm, err));
  if (s->skipped_steps == skipped)
    fsdpc__ckpt_note_loss(&s->ckpt, loss); /* rotation's divergence rule */
  double dt = fsdpc__now() - t0;
  fsdpc__engine_comm_bytes(s->eng, &s->last_comm);
  double eval_loss = NAN;
  int last = step + 1 == s->plan->modes.batch.max_steps;
  if (s->eval_ld && ((c->train.eval_every > 0 && (step + 1) % c->train.eval_every == 0) || last))
    FSDPC_TRY(fsdpc__session_eval(s, &eval_loss, err));
  fsdpc__report_step(s, step + 1, loss, lr, gnorm, dt, eval_loss);
  if (c->log.memory_every > 0 && (step + 1) % c->log.memory_every == 0)
    fsdpc__report_memory(s, "step");
  s->next_step = step + 1;
  *out = (fsdpc_session_step){.step = step + 1,
                              .loss = loss,
                              .lr = lr,
                              .grad_norm = gnorm,
                              .step_s = dt,
                              .eval_loss = eval_loss};
  /* a stop signal: a checkpoint was written, the caller leaves cleanly */
  return fsdpc__ckpt_after_step(&s->ckpt, step + 1, stop, err);
}

fsdpc_status fsdpc__session_finish(fsdpc_session *s, fsdpc_err *err) {
  FSDPC_TRY(fsdpc__ckpt_final(&s->ckpt, err));
  fsdpc__report_memory(s, "end");
  return fsdpc__report_rank_summary(s, err);
}

fsdpc_status fsdpc__session_generate_prompts(fsdpc_session *s, fsdpc_err *err) {
  const fsdpc_config *c = s->cfg;
  if (c->train.generate_tokens == 0) /* 0 turns the samples off */
    return FSDPC_OK;
  for (int i = 0; i < c->train.generate_prompts.n; i++) {
    char text[4096];
    const char *prompt = c->train.generate_prompts.items[i];
    FSDPC_TRY(fsdpc__session_generate(s, prompt, (int)c->train.generate_tokens, text,
                                      sizeof text, err));
    if (s->env.rank == 0) {
      size_t n = strlen(text);
      while (n && text[n - 1] == '\n') text[--n] = '\0';
      char ep[1024], et[1024];
      escape(prompt, ep, sizeof ep);
      escape(text, et, sizeof et);
      printf("generate: \"%s\" -> \"%s\"\n", ep, et);
      fflush(stdout);
    }
  }
  return FSDPC_OK;
}

fsdpc_status fsdpc__session_train(fsdpc_session *s, fsdpc_err *err) {
  while (s->next_step < s->plan->modes.batch.max_steps) {
    fsdpc_session_step m;
    int stop = 0;
    FSDPC_TRY(fsdpc__session_step(s, &m, &stop, err));
    if (stop)
      return FSDPC_OK; /* a checkpoint was written: leave cleanly */
  }
  FSDPC_TRY(fsdpc__session_finish(s, err));
  return fsdpc__session_generate_prompts(s, err);
}
