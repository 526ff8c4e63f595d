/* Objective plugins through the registry, as the step loop reaches them.
 * sft: the seed and the loss are the arithmetic the loop did before
 * objectives were plugins (1 / count, sum / count), bit for bit.
 * Preference objectives: each loss against a direct computation written
 * here from TRL's formulas (log sigmoid by its definition, no shared code
 * with the plugin), each gradient against central finite differences of
 * the plugin's own loss, the metrics against their definitions, and a
 * batch split into two calls (two micro-batches or ranks) against one;
 * dpo, ipo and hinge also with objective.options.rpo_alpha (TRL's RPO: the
 * chosen's NLL added) and its refusal below 0. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/opts.h"
#include "plugin/registry.h"

typedef struct loaded {
  fsdpc_registry *reg;
  const fsdpc_component *c;
  const fsdpc_objective_v1 *v;
  fsdpc_objective *obj;
  fsdpc_opts *opts;
} loaded;

/* The component's options with rpo_alpha set (validated as the host does);
 * returns the validation's status. */
static fsdpc_status rpo_opts(loaded *l, const char *alpha, fsdpc_err *err) {
  ck_assert_int_eq(fsdpc__opts_create("objective.options", &l->opts, err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__opts_add(l->opts, "rpo_alpha", alpha, "test.yaml", 1, 1, err), FSDPC_OK);
  return fsdpc__opts_validate(l->opts, l->c->desc->options, l->c->desc->n_options,
                              "objective 'dpo'", err);
}

static loaded load_rpo(const char *name, double beta, double ls, double gamma, const char *rpo) {
  static const char *const dirs[] = {FSDPC_PLUGIN_DIR_FOR_TEST};
  loaded l = {0};
  fsdpc_err err;
  fsdpc__err_clear(&err);
  ck_assert_msg(fsdpc__registry_create_ex(dirs, 1, 1u /* FSDPC_REGISTRY_ONLY_GIVEN */, &l.reg,
                                          &err) == FSDPC_OK,
                "%s", err.msg);
  ck_assert_msg(fsdpc__registry_select(l.reg, FSDPC_KIND_OBJECTIVE, name, NULL, &l.c, &err) ==
                    FSDPC_OK,
                "%s", err.msg);
  l.v = l.c->vtable;
  if (rpo)
    ck_assert_msg(rpo_opts(&l, rpo, &err) == FSDPC_OK, "%s", err.msg);
  fsdpc_objective_init in = {.struct_size = sizeof in,
                             .opts = l.opts,
                             .host = l.c->host,
                             .beta = beta,
                             .label_smoothing = ls,
                             .gamma = gamma};
  ck_assert_int_eq(l.v->create(&in, &l.obj), FSDPC_OK);
  return l;
}

static loaded load(const char *name, double beta, double ls, double gamma) {
  return load_rpo(name, beta, ls, gamma, NULL);
}

static void unload(loaded *l) {
  l->v->destroy(l->obj);
  fsdpc__opts_destroy(l->opts);
  fsdpc__registry_destroy(l->reg);
}

START_TEST(sft_is_the_former_arithmetic) {
  loaded l = load("sft", 0.1, 0.0, 0.5);
  ck_assert_int_eq(l.v->input, FSDPC_OBJ_INPUT_TOKENS);
  ck_assert_uint_eq(l.v->n_metrics(l.obj), 0);
  const int64_t counts[] = {1, 3, 7, 97, 1000, 12345, 999983};
  const double sums[] = {0.5, 7.25, 19.000001, 312.7, 6931.47, 1e5 / 3.0, 2.5e6};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
    fsdpc_obj_batch in = {.struct_size = sizeof in,
                          .want = FSDPC_OBJ_WANT_SEED | FSDPC_OBJ_WANT_LOSS,
                          .token_loss_sum = sums[i],
                          .n_tokens = counts[i]};
    fsdpc_obj_result out = {.struct_size = sizeof out};
    ck_assert_int_eq(l.v->compute(l.obj, &in, &out), FSDPC_OK);
    /* what train/loop.c computed before: (float)(1.0 / (double)count) and
     * loss_sum / (double)count */
    float seed = (float)out.token_weight, want = (float)(1.0 / (double)counts[i]);
    ck_assert_mem_eq(&seed, &want, sizeof seed);
    double loss = sums[i] / (double)counts[i];
    ck_assert_mem_eq(&out.loss, &loss, sizeof loss);
  }
  fsdpc_obj_batch none = {.struct_size = sizeof none, .want = FSDPC_OBJ_WANT_SEED};
  fsdpc_obj_result out = {.struct_size = sizeof out};
  ck_assert_int_eq(l.v->compute(l.obj, &none, &out), FSDPC_INVALID_USAGE);
  unload(&l);
}
END_TEST

/* ---- direct computations, from TRL's formulas ---- */

typedef struct case_ {
  const char *name;
  double beta, ls, gamma;
  const char *rpo; /* objective.options.rpo_alpha, or NULL */
} case_;

static const case_ cases[] = {
    {"dpo", 0.1, 0.0, 0.0, NULL},   {"dpo", 0.5, 0.2, 0.0, NULL},    {"ipo", 0.1, 0.0, 0.0, NULL},
    {"ipo", 0.7, 0.0, 0.0, NULL},   {"hinge", 0.1, 0.0, 0.0, NULL},  {"hinge", 2.0, 0.0, 0.0, NULL},
    {"simpo", 2.0, 0.0, 0.5, NULL}, {"simpo", 2.5, 0.1, 1.2, NULL},  {"orpo", 0.1, 0.0, 0.0, NULL},
    {"orpo", 1.0, 0.0, 0.0, NULL},  {"dpo", 0.1, 0.0, 0.0, "1.0"},   {"dpo", 0.5, 0.2, 0.0, "0.25"},
    {"ipo", 0.7, 0.0, 0.0, "2"},    {"hinge", 2.0, 0.0, 0.0, "0.5"},
};

static double lsig(double x) {
  return log(1.0 / (1.0 + exp(-x)));
}

enum { NP = 4 }; /* pairs in the batch */

typedef struct batch {
  double logps[2 * NP], ref[2 * NP];
  int64_t len[2 * NP];
} batch;

/* Pairs with both signs of the margin, some far past the hinge's kink. */
static batch make_batch(void) {
  batch b;
  const double lp[2 * NP] = {-12.0, -15.5, -30.2, -21.0, -8.4, -8.1, -44.0, -60.5};
  const double rf[2 * NP] = {-13.1, -14.9, -28.0, -25.5, -8.0, -9.0, -47.5, -55.0};
  const int64_t ln[2 * NP] = {6, 9, 17, 11, 4, 5, 23, 31};
  memcpy(b.logps, lp, sizeof lp);
  memcpy(b.ref, rf, sizeof rf);
  memcpy(b.len, ln, sizeof ln);
  return b;
}

static int64_t chosen_tokens(const batch *b) {
  int64_t n = 0;
  for (int i = 0; i < NP; i++)
    n += b->len[2 * i];
  return n;
}

/* The step's loss, straight from the definitions; rc/rr the rewards. */
static double direct_loss(const case_ *k, const batch *b, double rc[NP], double rr[NP]) {
  double total = 0.0, nll = 0.0;
  for (int i = 0; i < NP; i++) {
    double pc = b->logps[2 * i], pr = b->logps[2 * i + 1];
    double qc = b->ref[2 * i], qr = b->ref[2 * i + 1];
    double lc = (double)b->len[2 * i], lr = (double)b->len[2 * i + 1], l;
    if (!strcmp(k->name, "dpo")) {
      double z = k->beta * ((pc - pr) - (qc - qr));
      l = -lsig(z) * (1 - k->ls) - lsig(-z) * k->ls;
      rc[i] = k->beta * (pc - qc), rr[i] = k->beta * (pr - qr);
    } else if (!strcmp(k->name, "hinge")) {
      double z = k->beta * ((pc - pr) - (qc - qr));
      l = fmax(0.0, 1.0 - z);
      rc[i] = k->beta * (pc - qc), rr[i] = k->beta * (pr - qr);
    } else if (!strcmp(k->name, "ipo")) {
      double u = (pc / lc - pr / lr) - (qc / lc - qr / lr) - 1.0 / (2.0 * k->beta);
      l = u * u;
      rc[i] = k->beta * (pc - qc) / lc, rr[i] = k->beta * (pr - qr) / lr;
    } else if (!strcmp(k->name, "simpo")) {
      double z = k->beta * ((pc / lc - pr / lr) - k->gamma / k->beta);
      l = -lsig(z) * (1 - k->ls) - lsig(-z) * k->ls;
      rc[i] = k->beta * pc / lc, rr[i] = k->beta * pr / lr;
    } else { /* orpo */
      double ac = pc / lc, ar = pr / lr;
      double lo = (ac - ar) - (log(1 - exp(ac)) - log(1 - exp(ar)));
      l = -k->beta * lsig(lo);
      nll += -pc;
      rc[i] = k->beta * ac, rr[i] = k->beta * ar;
    }
    total += l;
  }
  total /= NP;
  if (!strcmp(k->name, "orpo"))
    total += nll / (double)chosen_tokens(b);
  if (k->rpo) { /* TRL's rpo_alpha * nll_loss: the chosen's mean token NLL */
    double c = 0.0;
    for (int i = 0; i < NP; i++)
      c -= b->logps[2 * i];
    total += atof(k->rpo) * c / (double)chosen_tokens(b);
  }
  return total;
}

/* The plugin on sequences [lo, hi) of b (a whole number of pairs). */
static double plugin_loss(loaded *l, const batch *b, int lo, int hi, double *d, double *m) {
  fsdpc_obj_batch in = {.struct_size = sizeof in,
                        .want = FSDPC_OBJ_WANT_SEED | FSDPC_OBJ_WANT_LOSS,
                        .n_tokens = chosen_tokens(b),
                        .n_seqs = (uint32_t)(hi - lo),
                        .group_size = 2,
                        .logps = b->logps + lo,
                        .ref_logps = l->v->needs_ref ? b->ref + lo : NULL,
                        .lengths = b->len + lo,
                        .n_groups = NP};
  fsdpc_obj_result out = {.struct_size = sizeof out, .dlogps = d, .metrics = m};
  ck_assert_int_eq(l->v->compute(l->obj, &in, &out), FSDPC_OK);
  return out.loss;
}

static int metric_index(loaded *l, const char *name) {
  for (uint32_t i = 0; i < l->v->n_metrics(l->obj); i++)
    if (!strcmp(l->v->metric_name(l->obj, i), name))
      return (int)i;
  ck_abort_msg("no metric %s", name);
  return -1;
}

START_TEST(preference_loss_gradient_metrics) {
  const case_ *k = &cases[_i];
  loaded l = load_rpo(k->name, k->beta, k->ls, k->gamma, k->rpo);
  ck_assert_int_eq(l.v->input, FSDPC_OBJ_INPUT_SEQ_LOGPS);
  ck_assert_int_eq(l.v->needs_ref, !strcmp(k->name, "simpo") || !strcmp(k->name, "orpo") ? 0 : 1);
  batch b = make_batch();
  double rc[NP], rr[NP], d[2 * NP], m[16] = {0};
  double want = direct_loss(k, &b, rc, rr);
  double got = plugin_loss(&l, &b, 0, 2 * NP, d, m);
  ck_assert_msg(fabs(got - want) <= 1e-12 * fmax(1.0, fabs(want)), "%s loss %.17g, direct %.17g",
                k->name, got, want);
  /* the gradient: central differences of the plugin's loss */
  for (int i = 0; i < 2 * NP; i++) {
    const double h = 1e-5;
    batch bp = b, bm = b;
    bp.logps[i] += h;
    bm.logps[i] -= h;
    double dd[2 * NP], mm[16] = {0};
    double fd =
        (plugin_loss(&l, &bp, 0, 2 * NP, dd, mm) - plugin_loss(&l, &bm, 0, 2 * NP, dd, mm)) /
        (2 * h);
    ck_assert_msg(fabs(fd - d[i]) <= 1e-7 + 1e-6 * fabs(fd), "%s d/dlogps[%d] %.10g, fd %.10g",
                  k->name, i, d[i], fd);
  }
  /* metrics (sums over pairs: the host divides by the step's pairs) */
  double acc = 0, margin = 0, src = 0, srr = 0;
  for (int i = 0; i < NP; i++)
    acc += rc[i] > rr[i], margin += rc[i] - rr[i], src += rc[i], srr += rr[i];
  ck_assert_double_eq_tol(m[metric_index(&l, "rewards/chosen")], src, 1e-12);
  ck_assert_double_eq_tol(m[metric_index(&l, "rewards/rejected")], srr, 1e-12);
  ck_assert_double_eq(m[metric_index(&l, "rewards/accuracies")], acc);
  ck_assert_double_eq_tol(m[metric_index(&l, "rewards/margins")], margin, 1e-12);
  ck_assert(acc > 0 && acc < NP); /* the batch has both outcomes */
  int has_nll = 0;
  for (uint32_t i = 0; i < l.v->n_metrics(l.obj); i++)
    has_nll |= !strcmp(l.v->metric_name(l.obj, i), "nll_loss");
  ck_assert_int_eq(has_nll, k->rpo != NULL || !strcmp(k->name, "orpo"));
  if (k->rpo) { /* the NLL metric: the chosen's mean token NLL, times the step's pairs */
    double c = 0.0;
    for (int i = 0; i < NP; i++)
      c -= b.logps[2 * i];
    ck_assert_double_eq_tol(m[metric_index(&l, "nll_loss")], c / chosen_tokens(&b) * NP, 1e-12);
  }
  /* two calls of two pairs each (two micro-batches or ranks) add up to one */
  double d2[2 * NP], m2[16] = {0};
  double split = plugin_loss(&l, &b, 0, NP, d2, m2) + plugin_loss(&l, &b, NP, 2 * NP, d2 + NP, m2);
  ck_assert_double_eq_tol(split, got, 1e-14);
  for (int i = 0; i < 2 * NP; i++)
    ck_assert_double_eq(d2[i], d[i]);
  for (uint32_t i = 0; i < l.v->n_metrics(l.obj); i++)
    ck_assert_double_eq_tol(m2[i], m[i], 1e-12);
  unload(&l);
}
END_TEST

START_TEST(preference_refuses_bad_batches) {
  loaded l = load("dpo", 0.1, 0.0, 0.0);
  batch b = make_batch();
  fsdpc_obj_batch in = {.struct_size = sizeof in,
                        .want = FSDPC_OBJ_WANT_LOSS,
                        .n_seqs = 3,
                        .group_size = 2,
                        .logps = b.logps,
                        .ref_logps = b.ref,
                        .lengths = b.len,
                        .n_groups = 2};
  fsdpc_obj_result out = {.struct_size = sizeof out};
  ck_assert_int_eq(l.v->compute(l.obj, &in, &out), FSDPC_INVALID_USAGE); /* odd: not pairs */
  in.n_seqs = 2;
  in.ref_logps = NULL;
  ck_assert_int_eq(l.v->compute(l.obj, &in, &out), FSDPC_INVALID_USAGE); /* dpo needs a ref */
  fsdpc_err err;
  fsdpc__err_clear(&err);
  ck_assert_int_eq(fsdpc__plugin_fail(l.c, FSDPC_INVALID_USAGE, &err), FSDPC_INVALID_USAGE);
  ck_assert_msg(strstr(err.msg, "objective 'dpo'") && strstr(err.msg, "reference"), "%s", err.msg);
  fsdpc_objective *bad = NULL;
  fsdpc_objective_init init = {.struct_size = sizeof init, .host = l.c->host, .beta = 0.0};
  ck_assert_int_eq(l.v->create(&init, &bad), FSDPC_INVALID_USAGE);
  /* rpo_alpha below 0: the option's range refuses it in one line */
  ck_assert_int_eq(rpo_opts(&l, "-1", &err), FSDPC_INVALID_USAGE);
  ck_assert_msg(strstr(err.msg, "rpo_alpha") && !strchr(err.msg, '\n'), "%s", err.msg);
  unload(&l);
}
END_TEST

START_TEST(unknown_objective_is_one_line) {
  static const char *const dirs[] = {FSDPC_PLUGIN_DIR_FOR_TEST};
  fsdpc_registry *reg = NULL;
  fsdpc_err err;
  fsdpc__err_clear(&err);
  ck_assert_int_eq(fsdpc__registry_create_ex(dirs, 1, 1u, &reg, &err), FSDPC_OK);
  const fsdpc_component *c = NULL;
  ck_assert_int_eq(fsdpc__registry_select(reg, FSDPC_KIND_OBJECTIVE, "kto", NULL, &c, &err),
                   FSDPC_INVALID_USAGE);
  ck_assert_msg(strstr(err.msg, "objective 'kto' not found") &&
                    strstr(err.msg, "libfsdpc-objective-kto.so") && !strchr(err.msg, '\n'),
                "%s", err.msg);
  /* auto picks sft, the highest default score */
  ck_assert_int_eq(fsdpc__registry_select(reg, FSDPC_KIND_OBJECTIVE, "auto", NULL, &c, &err),
                   FSDPC_OK);
  ck_assert_str_eq(c->desc->name, "sft");
  fsdpc__registry_destroy(reg);
}
END_TEST

int main(void) {
  Suite *s = suite_create("objective");
  TCase *tc = tcase_create("objective");
  tcase_add_test(tc, sft_is_the_former_arithmetic);
  tcase_add_loop_test(tc, preference_loss_gradient_metrics, 0, sizeof cases / sizeof cases[0]);
  tcase_add_test(tc, preference_refuses_bad_batches);
  tcase_add_test(tc, unknown_objective_is_one_line);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
