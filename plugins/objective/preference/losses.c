/* Preference losses of one pair (losses.h). Written from the formulas of
 * TRL's DPOTrainer.dpo_loss, CPOTrainer.cpo_loss (SimPO) and
 * ORPOTrainer.odds_ratio_loss; the derivatives are by hand and are checked
 * against finite differences in tests/objective. */
#include "losses.h"

#include <math.h>

double fsdpc_pref_logsigmoid(double x) {
  return x >= 0 ? -log1p(exp(-x)) : x - log1p(exp(x));
}

double fsdpc_pref_sigmoid(double x) {
  if (x >= 0)
    return 1.0 / (1.0 + exp(-x));
  double e = exp(x);
  return e / (1.0 + e);
}

/* -(1 - ls) log sigmoid(z) - ls log sigmoid(-z) and its derivative in z:
 * the sigmoid loss with label smoothing (DPO's conservative form). */
static double smoothed_sigmoid(double z, double ls, double *dz) {
  *dz = -(1.0 - ls) * fsdpc_pref_sigmoid(-z) + ls * fsdpc_pref_sigmoid(z);
  return -(1.0 - ls) * fsdpc_pref_logsigmoid(z) - ls * fsdpc_pref_logsigmoid(-z);
}

/* log(1 - exp(a)) for a < 0 (the log of the odds' denominator). */
static double log1mexp(double a) {
  return a > -0.693 ? log(-expm1(a)) : log1p(-exp(a));
}

/* DPO family: logits = (logp_c - logp_r) - (ref_c - ref_r), on sums (dpo,
 * hinge) or on per-token means (ipo: TRL averages the log-probs of both
 * models for it). */
static void dpo_family(pref_kind k, const pref_params *p, const pref_pair *in, pref_out *o) {
  double sc = 1.0, sr = 1.0; /* d(used log-prob) / d(summed log-prob) */
  if (k == PREF_IPO)
    sc = 1.0 / (double)in->len_c, sr = 1.0 / (double)in->len_r;
  double pc = in->logp_c * sc, pr = in->logp_r * sr, rc = in->ref_c * sc, rr = in->ref_r * sr;
  double logits = (pc - pr) - (rc - rr), dl = 0.0;
  if (k == PREF_DPO) {
    double dz;
    o->loss = smoothed_sigmoid(p->beta * logits, p->label_smoothing, &dz);
    dl = dz * p->beta;
  } else if (k == PREF_HINGE) {
    double m = 1.0 - p->beta * logits;
    o->loss = m > 0 ? m : 0.0;
    dl = m > 0 ? -p->beta : 0.0;
  } else { /* ipo */
    double u = logits - 1.0 / (2.0 * p->beta);
    o->loss = u * u;
    dl = 2.0 * u;
  }
  o->d_c = dl * sc;
  o->d_r = -dl * sr;
  o->reward_c = p->beta * (pc - rc);
  o->reward_r = p->beta * (pr - rr);
  o->logps_c = pc;
  o->logps_r = pr;
}

/* SimPO (reference-free): per-token means, a target margin gamma:
 * z = beta (a_c - a_r) - gamma, TRL's beta * (logits - gamma / beta). */
static void simpo(const pref_params *p, const pref_pair *in, pref_out *o) {
  double ac = in->logp_c / (double)in->len_c, ar = in->logp_r / (double)in->len_r, dz;
  o->loss = smoothed_sigmoid(p->beta * (ac - ar) - p->gamma, p->label_smoothing, &dz);
  o->d_c = dz * p->beta / (double)in->len_c;
  o->d_r = -dz * p->beta / (double)in->len_r;
  o->reward_c = p->beta * ac;
  o->reward_r = p->beta * ar;
  o->logps_c = ac;
  o->logps_r = ar;
}

/* ORPO's odds-ratio term on per-token means: log_odds = (a_c - a_r) -
 * (log(1 - e^a_c) - log(1 - e^a_r)), the pair's loss -beta log sigmoid(
 * log_odds) (the NLL term is added per token by the caller). */
static void orpo(const pref_params *p, const pref_pair *in, pref_out *o) {
  double ac = in->logp_c / (double)in->len_c, ar = in->logp_r / (double)in->len_r;
  double lo = (ac - ar) - (log1mexp(ac) - log1mexp(ar));
  double ratio = fsdpc_pref_logsigmoid(lo), dlo = -p->beta * fsdpc_pref_sigmoid(-lo);
  o->loss = -p->beta * ratio;
  /* d/da [a - log(1 - e^a)] = 1 / (1 - e^a) */
  o->d_c = dlo / -expm1(ac) / (double)in->len_c;
  o->d_r = -dlo / -expm1(ar) / (double)in->len_r;
  o->reward_c = p->beta * ac;
  o->reward_r = p->beta * ar;
  o->logps_c = ac;
  o->logps_r = ar;
  o->log_odds = lo;
  o->log_odds_ratio = ratio;
}

void fsdpc_pref_pair(pref_kind k, const pref_params *p, const pref_pair *in, pref_out *out) {
  *out = (pref_out){0};
  if (k == PREF_SIMPO)
    simpo(p, in, out);
  else if (k == PREF_ORPO)
    orpo(p, in, out);
  else
    dpo_family(k, p, in, out);
}
