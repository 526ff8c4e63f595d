/* Preference objectives through the model (issue 38): a tiny model's
 * per-token losses from the fused head (fsdpc__model_set_rows) summed into
 * sequence log-probs of (chosen, rejected) pairs, one pair a row (doc ids 0
 * and 1, as the loader's pair packing gives them), the DPO and SimPO losses
 * of TRL's definitions written here from the formulas, and the engine's
 * backward seeded per token with -d loss / d logps against central finite
 * differences of that loss, for a full fine-tune (a fixed reference, as
 * objective.reference precompute gives it) and for LoRA (the reference is
 * the same model with the adapters off, checked to differ from the policy
 * and to equal a model whose B matrices are zero). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "tiny_model.h"

enum { B = TINY_B, T = TINY_T, V = 40, NSEQ = 2 * B }; /* 2 x 12 */
static const double BETA = 0.5, GAMMA = 0.3;

typedef struct fx {
  tiny_model t; /* tok, lab, doc: B x T */
  double row_loss[B * T], ref[NSEQ];
  float seed[B * T];
  int simpo;
} fx;

/* Row i: the chosen at positions 0..5 (prompt 0..2), the rejected at
 * 6..10 (prompt 6..8), padding at 11; targets are the completions. */
static void batch(fx *f) {
  for (int i = 0; i < B; i++)
    for (int j = 0; j < T; j++) {
      int k = i * T + j, d = j < 6 ? 0 : j < 11 ? 1 : 2, at = d == 0 ? j : j - 6;
      f->t.tok[k] = (k * 7 + 3 + i) % V;
      f->t.doc[k] = d;
      f->t.lab[k] = d < 2 && at >= 2 && !(d == 0 && j == 5) && !(d == 1 && j == 10)
                        ? (k * 11 + 1 + 3 * i) % V
                        : -100;
    }
}

static void setup(fx *f, int lora, int simpo) {
  memset(f, 0, sizeof *f);
  f->simpo = simpo;
  char yaml[1024];
  snprintf(yaml, sizeof yaml,
           "model: {vocab_size: %d, hidden_size: 16, intermediate_size: 24, num_hidden_layers: 2,\n"
           "        num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 16,\n"
           "        tie_word_embeddings: false, init: {std: 0.2}}\n"
           "data: {seq_len: %d}\nattention: {impl: naive}\ntrain: {micro_batch_size: %d, seed: 5}\n"
           "%s",
           V, T, B,
           lora ? "peft: {method: lora, r: 3, alpha: 6, target_modules: [all-linear]}\n" : "");
  tiny_model_open(&f->t, yaml, "pref.yaml", 0);
  batch(f);
  fsdpc_err err;
  ok(fsdpc__model_set_batch(f->t.m, f->t.tok, f->t.lab, f->t.doc, &err), &err);
}

static void teardown(fx *f) {
  tiny_model_close(&f->t);
}

static float *master_of(fx *f, int p, float **grad) {
  return tiny_master(&f->t, p, grad);
}

/* Sequence log-probs and completion lengths of a forward (lora_off: the
 * base model alone). */
static void logps(fx *f, int lora_off, double lp[NSEQ], int64_t len[NSEQ]) {
  double ls;
  int64_t n;
  fsdpc_err err;
  fsdpc__model_set_rows(f->t.m, f->row_loss, NULL);
  fsdpc__model_set_lora_off(f->t.m, lora_off);
  ok(fsdpc__engine_eval(f->t.eng, f->t.m, &ls, &n, &err), &err);
  fsdpc__model_set_lora_off(f->t.m, 0);
  fsdpc__model_set_rows(f->t.m, NULL, NULL);
  for (int s = 0; s < NSEQ; s++)
    lp[s] = 0.0, len[s] = 0;
  for (int k = 0; k < B * T; k++)
    if (f->t.lab[k] != -100) {
      int s = 2 * (k / T) + f->t.doc[k];
      lp[s] -= f->row_loss[k];
      len[s]++;
    }
}

static double logsig(double z) {
  return z >= 0 ? -log1p(exp(-z)) : z - log1p(exp(z));
}

/* The step's loss (mean over pairs) from TRL's definitions, and d loss /
 * d logps. DPO (sigmoid): z = beta((c - r) - (c0 - r0)); SimPO: z =
 * beta(c/|c| - r/|r|) - gamma; loss -log sigmoid(z). */
static double pref_loss(const fx *f, const double lp[NSEQ], const int64_t len[NSEQ],
                        double dl[NSEQ]) {
  double total = 0.0;
  for (int i = 0; i < B; i++) {
    double c = lp[2 * i], r = lp[2 * i + 1], dzc, dzr, z;
    if (f->simpo) {
      z = BETA * (c / (double)len[2 * i] - r / (double)len[2 * i + 1]) - GAMMA;
      dzc = BETA / (double)len[2 * i], dzr = -BETA / (double)len[2 * i + 1];
    } else {
      z = BETA * ((c - r) - (f->ref[2 * i] - f->ref[2 * i + 1]));
      dzc = BETA, dzr = -BETA;
    }
    total -= logsig(z) / B;
    double s = -exp(logsig(-z)) / B; /* d(-log sigmoid(z))/dz = -sigmoid(-z) */
    if (dl)
      dl[2 * i] = s * dzc, dl[2 * i + 1] = s * dzr;
  }
  return total;
}

static double loss_now(void *arg) {
  fx *f = arg;
  double lp[NSEQ];
  int64_t len[NSEQ];
  logps(f, 0, lp, len);
  return pref_loss(f, lp, len, NULL);
}

/* B of the adapters non-zero, so that the policy differs from the base. */
static void set_b(fx *f, float scale) {
  tiny_set_b(&f->t, scale);
}

static void check_fd(int lora, int simpo) {
  fx f;
  setup(&f, lora, simpo);
  double lp[NSEQ], dl[NSEQ];
  int64_t len[NSEQ];
  if (lora) {
    set_b(&f, 0.3f);
    logps(&f, 1, f.ref, len); /* the reference: adapters off */
    logps(&f, 0, lp, len);
    ck_assert_msg(fabs(lp[0] - f.ref[0]) > 1e-3, "the adapters change nothing: %g vs %g", lp[0],
                  f.ref[0]);
    /* adapters off = the adapters' B at zero */
    set_b(&f, 0.0f);
    double base[NSEQ];
    logps(&f, 0, base, len);
    for (int s = 0; s < NSEQ; s++)
      ck_assert_msg(base[s] == f.ref[s], "seq %d: adapters off %.9g, B = 0 %.9g", s, f.ref[s],
                    base[s]);
    set_b(&f, 0.3f);
  } else {
    logps(&f, 0, f.ref, len); /* precomputed from the initial weights, then fixed */
    for (int s = 0; s < NSEQ; s++)
      f.ref[s] += 0.7 * (s % 2 ? -1 : 1); /* an informative reference: margins not zero */
  }
  logps(&f, 0, lp, len);
  ck_assert_int_eq(len[0], 3);
  ck_assert_int_eq(len[1], 2);
  double l0 = pref_loss(&f, lp, len, dl);
  for (int k = 0; k < B * T; k++)
    f.seed[k] = f.t.lab[k] != -100 ? (float)-dl[2 * (k / T) + f.t.doc[k]] : 0.0f;
  double ls;
  int64_t cnt;
  fsdpc_err err;
  fsdpc__model_set_rows(f.t.m, f.row_loss, f.seed);
  ok(fsdpc__engine_micro_step(f.t.eng, f.t.m, 1.0f, 1, &ls, &cnt, &err), &err);
  fsdpc__model_set_rows(f.t.m, NULL, NULL);
  ck_assert_msg(fabs(loss_now(&f) - l0) < 1e-12, "the training forward changed the loss");
  int checked = 0;
  for (int p = 0; p < fsdpc__engine_n_params(f.t.eng); p++) {
    const fsdpc_param_info *pi = fsdpc__engine_param(f.t.eng, p, NULL, NULL);
    float *g, *w = master_of(&f, p, &g);
    if (!g)
      continue;
    for (uint64_t k = 0; k < 2; k++) {
      uint64_t i = (k * 37 + (uint64_t)p * 5) % pi->numel;
      double fd = tiny_central_diff(&w[i], loss_now, &f), an = g[i];
      ck_assert_msg(fabs(fd - an) <= 1e-4 + 2e-2 * fabs(fd),
                    "%s %s[%llu]: backward %.6g, finite differences %.6g", simpo ? "simpo" : "dpo",
                    pi->name, (unsigned long long)i, an, fd);
      checked++;
    }
  }
  ck_assert_int_ge(checked, lora ? 2 * 2 * 7 * 2 : 20);
  teardown(&f);
}

START_TEST(dpo_full) {
  check_fd(0, 0);
}
END_TEST

START_TEST(dpo_lora) {
  check_fd(1, 0);
}
END_TEST

START_TEST(simpo_full) {
  check_fd(0, 1);
}
END_TEST

START_TEST(simpo_lora) {
  check_fd(1, 1);
}
END_TEST

int main(void) {
  Suite *s = suite_create("pref_grad");
  TCase *tc = tcase_create("fd");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, dpo_full);
  tcase_add_test(tc, dpo_lora);
  tcase_add_test(tc, simpo_full);
  tcase_add_test(tc, simpo_lora);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
