/* The preference losses of one pair, with TRL's definitions (the version
 * and the mapping are in docs/objectives.md): the loss of a (chosen,
 * rejected) pair and its derivatives with respect to the pair's two summed
 * completion log-probabilities. Plain functions on doubles, so that tests
 * check them against a direct computation. */
#ifndef FSDPC_OBJ_LOSSES_H
#define FSDPC_OBJ_LOSSES_H

#include <stdint.h>

typedef enum pref_kind { PREF_DPO, PREF_IPO, PREF_HINGE, PREF_SIMPO, PREF_ORPO } pref_kind;

typedef struct pref_params {
  double beta, label_smoothing, gamma;
} pref_params;

/* One pair: summed completion log-probs and lengths of the chosen (c) and
 * the rejected (r), and the reference's sums (0 for a reference-free loss). */
typedef struct pref_pair {
  double logp_c, logp_r, ref_c, ref_r;
  int64_t len_c, len_r;
} pref_pair;

/* What a pair gives: its loss (without ORPO's NLL term, which is over the
 * step's tokens), d loss / d logp_c and d logp_r, and the quantities the
 * metrics are made of (TRL's implicit rewards and the log-probs it logs). */
typedef struct pref_out {
  double loss, d_c, d_r;
  double reward_c, reward_r, logps_c, logps_r;
  double log_odds, log_odds_ratio; /* ORPO only */
} pref_out;

void fsdpc_pref_pair(pref_kind k, const pref_params *p, const pref_pair *in, pref_out *out);

/* log(sigmoid(x)) without overflow, and sigmoid(x). */
double fsdpc_pref_logsigmoid(double x);
double fsdpc_pref_sigmoid(double x);

#endif
