/* Preference objectives (fsdpc_objective_v1) on sequence log-probs: dpo,
 * ipo, hinge, simpo and orpo, one file each (FSDPC_OBJ_<name> picks the
 * component this build describes). Sequences come in pairs (group_size 2:
 * the chosen, then the rejected); the step's loss is the mean over its
 * pairs, as TRL's (torch.mean over the batch), so each call returns its
 * pairs' sum over n_groups and the gradient of that. ORPO adds the NLL of
 * the chosen completions, a mean over the step's chosen tokens; so do dpo,
 * ipo and hinge times objective.options.rpo_alpha when it is > 0 (TRL's
 * DPOConfig.rpo_alpha, RPO: arXiv 2404.19733). */
#include <math.h>
#include <stdlib.h>

#include "../../common/host_call.h"
#include "fsdpc/plugin.h"
#include "losses.h"

#if defined(FSDPC_OBJ_dpo)
#define OBJ_NAME "dpo"
#define OBJ_KIND PREF_DPO
#define OBJ_REF 1
#define OBJ_DESC "DPO, sigmoid loss with beta and label_smoothing (TRL loss_type sigmoid)"
#elif defined(FSDPC_OBJ_ipo)
#define OBJ_NAME "ipo"
#define OBJ_KIND PREF_IPO
#define OBJ_REF 1
#define OBJ_DESC "IPO, squared loss on per-token mean log-ratios (TRL loss_type ipo)"
#elif defined(FSDPC_OBJ_hinge)
#define OBJ_NAME "hinge"
#define OBJ_KIND PREF_HINGE
#define OBJ_REF 1
#define OBJ_DESC "SLiC hinge loss relu(1 - beta * logits) (TRL loss_type hinge)"
#elif defined(FSDPC_OBJ_simpo)
#define OBJ_NAME "simpo"
#define OBJ_KIND PREF_SIMPO
#define OBJ_REF 0
#define OBJ_DESC "SimPO, reference-free, length-normalised, target margin gamma (TRL CPO simpo)"
#elif defined(FSDPC_OBJ_orpo)
#define OBJ_NAME "orpo"
#define OBJ_KIND PREF_ORPO
#define OBJ_REF 0
#define OBJ_DESC "ORPO, NLL of the chosen plus beta times the odds-ratio term (TRL ORPOTrainer)"
#else
#error "build with one of FSDPC_OBJ_dpo, _ipo, _hinge, _simpo, _orpo"
#endif

enum {
  M_REW_C,
  M_REW_R,
  M_ACC,
  M_MARGIN,
  M_LOGPS_C,
  M_LOGPS_R,
  M_NLL,
  M_LOG_ODDS_RATIO,
  M_LOG_ODDS_CHOSEN,
  M_COUNT
};
static const char *const metric_names[M_COUNT] = {
    "rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins", "logps/chosen",
    "logps/rejected", "nll_loss",         "log_odds_ratio",     "log_odds_chosen"};
#define OBJ_RPO (OBJ_KIND == PREF_DPO || OBJ_KIND == PREF_IPO || OBJ_KIND == PREF_HINGE)

struct fsdpc_objective {
  const fsdpc_host_api *host;
  pref_params p;
  double nll_weight; /* the chosen's NLL term: 1 for ORPO, rpo_alpha, or 0 */
};

/* The NLL metric is logged where the NLL is part of the loss. */
static uint32_t n_metrics_of(const fsdpc_objective *o) {
  if (OBJ_KIND == PREF_ORPO)
    return M_COUNT;
  return o->nll_weight > 0 ? M_NLL + 1 : M_NLL;
}

#if OBJ_RPO
static const fsdpc_option_desc opt_rpo_alpha = {
    /* .struct_size = */ sizeof(fsdpc_option_desc),
    /* .key = */ "rpo_alpha",
    /* .type = */ FSDPC_OPT_FLOAT,
    /* .default_value = */ "0",
    /* .min = */ 0.0,
    /* .max = */ 1e6,
    /* .help = */
    "weight of the chosen completions' NLL (a mean over the step's chosen tokens) added to "
    "the loss, TRL's rpo_alpha; 0 = off",
};
static const fsdpc_option_desc *const pref_options[] = {&opt_rpo_alpha};
#define N_OPTIONS 1
#else
#define pref_options NULL
#define N_OPTIONS 0
#endif

static int32_t pref_create(const fsdpc_objective_init *init, fsdpc_objective **out) {
  const fsdpc_host_api *h = FSDPC_PL_HOST_OF(init, fsdpc_objective_init);
  if (!(init->beta > 0))
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                         OBJ_NAME ": beta %g must be > 0; set objective.beta", init->beta);
  if (!(init->label_smoothing >= 0 && init->label_smoothing < 0.5))
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                         OBJ_NAME ": label_smoothing %g is outside [0, 0.5); set "
                                  "objective.label_smoothing",
                         init->label_smoothing);
  double nll_weight = OBJ_KIND == PREF_ORPO ? 1.0 : 0.0;
  int32_t st;
  if (OBJ_RPO && init->opts != NULL &&
      (st = fsdpc_pl_opt(h, init->opts, "rpo_alpha", FSDPC_OPT_FLOAT, &nll_weight,
                         sizeof nll_weight)) != FSDPC_OK)
    return st; /* the host has said why */
  if (!(nll_weight >= 0 && isfinite(nll_weight)))
    return fsdpc_pl_fail(h, FSDPC_INVALID_USAGE,
                         OBJ_NAME ": rpo_alpha %g must be >= 0; set objective.options.rpo_alpha",
                         nll_weight);
  fsdpc_objective *o = calloc(1, sizeof *o);
  if (!o)
    return fsdpc_pl_fail(h, FSDPC_SYSTEM_ERROR, OBJ_NAME ": out of memory");
  o->host = h;
  o->p = (pref_params){init->beta, init->label_smoothing, init->gamma};
  o->nll_weight = nll_weight;
  *out = o;
  return FSDPC_OK;
}

static void pref_destroy(fsdpc_objective *o) {
  free(o);
}

static uint32_t pref_n_metrics(const fsdpc_objective *o) {
  return n_metrics_of(o);
}

static const char *pref_metric_name(const fsdpc_objective *o, uint32_t i) {
  return i < n_metrics_of(o) ? metric_names[i] : NULL;
}

static int32_t check_batch(const fsdpc_objective *o, const fsdpc_obj_batch *in) {
  if (in->group_size != 2 || in->n_seqs % 2 != 0)
    return fsdpc_pl_fail(o->host, FSDPC_INVALID_USAGE,
                         OBJ_NAME ": needs (chosen, rejected) pairs, got %u sequences in groups of "
                                  "%u; prepare the data with `fsdpc data prepare --format "
                                  "preference`",
                         in->n_seqs, in->group_size);
  if (OBJ_REF && !in->ref_logps)
    return fsdpc_pl_fail(o->host, FSDPC_INVALID_USAGE,
                         OBJ_NAME ": needs the reference model's log-probs and got none");
  if (in->n_groups <= 0 || (o->nll_weight > 0 && in->n_tokens <= 0))
    return fsdpc_pl_fail(o->host, FSDPC_INVALID_USAGE,
                         OBJ_NAME ": the step has %lld pairs and %lld chosen tokens",
                         (long long)in->n_groups, (long long)in->n_tokens);
  for (uint32_t i = 0; i < in->n_seqs; i++)
    if (in->lengths[i] <= 0)
      return fsdpc_pl_fail(o->host, FSDPC_INVALID_USAGE,
                           OBJ_NAME ": sequence %u has no completion token (every label masked)",
                           i);
  return FSDPC_OK;
}

/* One pair's metric values, added into m. */
static void add_metrics(const fsdpc_objective *o, const pref_out *po, double nll_share, double *m) {
  m[M_REW_C] += po->reward_c;
  m[M_REW_R] += po->reward_r;
  m[M_ACC] += po->reward_c > po->reward_r ? 1.0 : 0.0;
  m[M_MARGIN] += po->reward_c - po->reward_r;
  m[M_LOGPS_C] += po->logps_c;
  m[M_LOGPS_R] += po->logps_r;
  if (n_metrics_of(o) > M_NLL)
    m[M_NLL] += nll_share;
  if (OBJ_KIND == PREF_ORPO) {
    m[M_LOG_ODDS_RATIO] += po->log_odds_ratio;
    m[M_LOG_ODDS_CHOSEN] += po->log_odds;
  }
}

static int32_t pref_compute(fsdpc_objective *o, const fsdpc_obj_batch *in, fsdpc_obj_result *out) {
  int32_t st = check_batch(o, in);
  if (st != FSDPC_OK)
    return st;
  double inv_groups = 1.0 / (double)in->n_groups, loss = 0.0;
  for (uint32_t i = 0; i + 1 < in->n_seqs; i += 2) {
    pref_pair pp = {.logp_c = in->logps[i],
                    .logp_r = in->logps[i + 1],
                    .ref_c = in->ref_logps ? in->ref_logps[i] : 0.0,
                    .ref_r = in->ref_logps ? in->ref_logps[i + 1] : 0.0,
                    .len_c = in->lengths[i],
                    .len_r = in->lengths[i + 1]};
    if (!OBJ_REF) /* reference-free: a reference given anyway is not used */
      pp.ref_c = pp.ref_r = 0.0;
    pref_out po;
    fsdpc_pref_pair(OBJ_KIND, &o->p, &pp, &po);
    double d_c = po.d_c * inv_groups, d_r = po.d_r * inv_groups, nll = 0.0;
    loss += po.loss * inv_groups;
    if (o->nll_weight > 0) { /* the chosen's NLL, a mean over the step's chosen tokens */
      nll = -pp.logp_c / (double)in->n_tokens;
      loss += o->nll_weight * nll;
      d_c -= o->nll_weight / (double)in->n_tokens;
    }
    if ((in->want & FSDPC_OBJ_WANT_SEED) && out->dlogps) {
      out->dlogps[i] = d_c;
      out->dlogps[i + 1] = d_r;
    }
    /* metrics are means over the step's pairs: the host divides by
     * n_groups, so nll (already a share of the step's mean) is scaled up */
    if ((in->want & FSDPC_OBJ_WANT_LOSS) && out->metrics)
      add_metrics(o, &po, nll * (double)in->n_groups, out->metrics);
  }
  out->loss = loss;
  return FSDPC_OK;
}

static const fsdpc_objective_v1 pref_vtable = {
    /* .struct_size = */ sizeof(fsdpc_objective_v1),
    /* .input = */ FSDPC_OBJ_INPUT_SEQ_LOGPS,
    /* .needs_ref = */ OBJ_REF,
    /* .create = */ pref_create,
    /* .destroy = */ pref_destroy,
    /* .n_metrics = */ pref_n_metrics,
    /* .metric_name = */ pref_metric_name,
    /* .compute = */ pref_compute,
};

static const fsdpc_component_desc pref_component = {
    /* .struct_size = */ sizeof(fsdpc_component_desc),
    /* .kind = */ FSDPC_KIND_OBJECTIVE,
    /* .name = */ OBJ_NAME,
    /* .version = */ "1.0.0",
    /* .iface_version = */ 1,
    /* .default_score = */ 0, /* never picked by auto: sft is the default */
    /* .description = */ OBJ_DESC,
    /* .capabilities = */
    OBJ_REF ? "sequence log-probs of (chosen, rejected) pairs; reference "
              "log-probs"
            : "sequence log-probs of (chosen, rejected) pairs; "
              "reference-free",
    /* .options = */ pref_options,
    /* .n_options = */ N_OPTIONS,
    /* .vtable = */ &pref_vtable,
};

static const fsdpc_component_desc *const pref_components[] = {&pref_component};

static const fsdpc_plugin_desc pref_plugin = {
    /* .struct_size = */ sizeof(fsdpc_plugin_desc),
    /* .abi_major = */ FSDPC_PLUGIN_ABI_MAJOR,
    /* .abi_minor = */ FSDPC_PLUGIN_ABI_MINOR,
    /* .name = */ OBJ_NAME,
    /* .components = */ pref_components,
    /* .n_components = */ 1,
};

FSDPC_PLUGIN_DEFINE(pref_plugin, 3)
