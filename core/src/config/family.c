/* The decoder families as data (see family.h) and the checks of a config
 * against its family; the resolver into the model description's switches
 * is model/family_resolve.c. Each row is read off the family's transformers
 * modeling file. */
#include "config/family.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config/meta.h"

enum {
  R_BIAS = FSDPC_READS_ATTENTION_BIAS,
  R_MLP = FSDPC_READS_MLP_BIAS,
  R_WIN = FSDPC_READS_WINDOW,
  R_WINL = FSDPC_READS_WINDOW_LAYERS,
  R_PART = FSDPC_READS_PARTIAL_ROTARY,
  R_MULT = FSDPC_READS_MULTIPLIERS,
  R_GEMMA = FSDPC_READS_GEMMA,
  R_LOCAL = FSDPC_READS_LOCAL_ROPE
};

/* model_type, architecture, bias_qkv, qk_norm, norm_pre, norm_post, fused,
 * o_first, reads, default sliding_window, default max_window_layers */
static const fsdpc_family_info families[FSDPC_FAMILY_COUNT] = {
    [FSDPC_FAMILY_LLAMA] = {"llama", "LlamaForCausalLM", 0, FSDPC_QK_NORM_NONE, 1, 0, 0, 0,
                            R_BIAS | R_MLP, 0, 0},
    [FSDPC_FAMILY_MISTRAL] = {"mistral", "MistralForCausalLM", 0, FSDPC_QK_NORM_NONE, 1, 0, 0, 0,
                              R_WIN, 4096, 0},
    [FSDPC_FAMILY_QWEN2] = {"qwen2", "Qwen2ForCausalLM", 1, FSDPC_QK_NORM_NONE, 1, 0, 0, 0, R_WINL,
                            4096, 28},
    [FSDPC_FAMILY_QWEN3] = {"qwen3", "Qwen3ForCausalLM", 0, FSDPC_QK_NORM_HEAD, 1, 0, 0, 0,
                            R_BIAS | R_WINL, 4096, 28},
    [FSDPC_FAMILY_PHI3] = {"phi3", "Phi3ForCausalLM", 0, FSDPC_QK_NORM_NONE, 1, 0, 1, 1,
                           R_WIN | R_PART, 0, 0},
    [FSDPC_FAMILY_OLMO2] = {"olmo2", "Olmo2ForCausalLM", 0, FSDPC_QK_NORM_PROJ, 0, 1, 0, 0, R_BIAS,
                            0, 0},
    [FSDPC_FAMILY_GRANITE] = {"granite", "GraniteForCausalLM", 0, FSDPC_QK_NORM_NONE, 1, 0, 0, 0,
                              R_BIAS | R_MLP | R_MULT, 0, 0},
    [FSDPC_FAMILY_GEMMA2] = {"gemma2", "Gemma2ForCausalLM", 0, FSDPC_QK_NORM_NONE, 1, 1, 0, 0,
                             R_BIAS | R_GEMMA, 4096, 0},
    [FSDPC_FAMILY_GEMMA3] = {"gemma3_text", "Gemma3ForCausalLM", 0, FSDPC_QK_NORM_HEAD, 1, 1, 0, 0,
                             R_BIAS | R_GEMMA | R_LOCAL, 4096, 0},
};

const fsdpc_family_info *fsdpc__family(int f) {
  return f >= 0 && f < FSDPC_FAMILY_COUNT ? &families[f] : NULL;
}

int fsdpc__family_by_name(const char *name) {
  for (int f = 0; name && f < FSDPC_FAMILY_COUNT; f++)
    if (strcmp(families[f].model_type, name) == 0)
      return f;
  return -1;
}

const char *fsdpc__family_names(void) {
  return "llama, mistral, qwen2, qwen3, phi3, olmo2, granite, gemma2, gemma3_text";
}

/* The config keys that only some families read, and the FSDPC_READS_* bit
 * that says which: one table for the reader (hf.c) and the YAML check. */
static const struct {
  const char *hf;   /* config.json key */
  const char *path; /* YAML key */
  unsigned bit;
} family_keys[] = {
    {"attention_bias", "model.attention_bias", R_BIAS},
    {"mlp_bias", "model.mlp_bias", R_MLP},
    {"sliding_window", "model.sliding_window", R_WIN | R_WINL | R_GEMMA},
    {"use_sliding_window", "model.use_sliding_window", R_WINL},
    {"max_window_layers", "model.max_window_layers", R_WINL},
    {"layer_types", "model.layer_types", R_WINL | R_GEMMA},
    {"partial_rotary_factor", "model.partial_rotary_factor", R_PART},
    {"embedding_multiplier", "model.embedding_multiplier", R_MULT},
    {"residual_multiplier", "model.residual_multiplier", R_MULT},
    {"attention_multiplier", "model.attention_multiplier", R_MULT},
    {"logits_scaling", "model.logits_scaling", R_MULT},
    {"query_pre_attn_scalar", "model.query_pre_attn_scalar", R_GEMMA},
    {"attn_logit_softcapping", "model.attn_logit_softcapping", R_GEMMA},
    {"final_logit_softcapping", "model.final_logit_softcapping", R_GEMMA},
    {"hidden_activation", "model.hidden_activation", R_GEMMA},
    {"rope_local_base_freq", "model.rope_local_base_freq", R_LOCAL},
    {"sliding_window_pattern", "model.sliding_window_pattern", R_LOCAL},
};
enum { N_FAMILY_KEYS = sizeof family_keys / sizeof family_keys[0] };

int fsdpc__family_reads_hf(int f, const char *hf) {
  const fsdpc_family_info *fi = fsdpc__family(f);
  for (int i = 0; i < N_FAMILY_KEYS; i++)
    if (strcmp(family_keys[i].hf, hf) == 0)
      return fi && (fi->reads & family_keys[i].bit);
  return 1;
}

int fsdpc__family_layer_type_bits(const fsdpc_strlist *t, uint64_t *bits) {
  memset(bits, 0, FSDPC_WINDOW_MAX_LAYERS / 8);
  for (int l = 0; l < t->n; l++) {
    if (strcmp(t->items[l], "sliding_attention") == 0) {
      if (l >= FSDPC_WINDOW_MAX_LAYERS)
        return -1;
      bits[l / 64] |= 1ull << (l % 64);
    } else if (strcmp(t->items[l], "full_attention") != 0) {
      return -1;
    }
  }
  return 0;
}

static fsdpc_status check_factors(const fsdpc_config *c,
                                  const char *(*where)(const fsdpc_config *, const char *),
                                  fsdpc_err *err) {
  const fsdpc_config_model *m = &c->model;
  const fsdpc_family_info *fi = fsdpc__family(m->model_type);
  double partial = fi && (fi->reads & R_PART) ? m->partial_rotary_factor : 1.0;
  int half = (int)(m->head_dim * partial) / 2;
  const fsdpc_strlist *lists[2] = {&m->rope_scaling.short_factor, &m->rope_scaling.long_factor};
  const char *names[2] = {"model.rope_scaling.short_factor", "model.rope_scaling.long_factor"};
  for (int k = 0; k < 2; k++) {
    if (m->rope_scaling.type != FSDPC_ROPE_SCALING_LONGROPE || lists[k]->n != half ||
        half > FSDPC_ROPE_SCALING_MAX_FACTORS)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: %s has %d numbers; longrope needs one per rotary frequency (%d = "
                         "head_dim * partial_rotary_factor / 2, at most %d)",
                         where(c, names[k]), names[k], lists[k]->n, half,
                         FSDPC_ROPE_SCALING_MAX_FACTORS);
    for (int i = 0; i < lists[k]->n; i++) {
      char *end = NULL;
      double v = strtod(lists[k]->items[i], &end);
      if (!end || *end || !(v > 0.0) || !isfinite(v))
        return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: %s[%d] = '%s' is not a positive number",
                           where(c, names[k]), names[k], i, lists[k]->items[i]);
    }
  }
  return FSDPC_OK;
}

/* A key the family does not read, set to other than its default (a dump
 * writes every key with its value). */
static fsdpc_status check_unread(const fsdpc_config *c, const fsdpc_family_info *fi,
                                 const char *(*where)(const fsdpc_config *, const char *),
                                 fsdpc_err *err) {
  fsdpc_config *defaults = NULL;
  fsdpc_status st = FSDPC_OK;
  for (int i = 0; fi && i < N_FAMILY_KEYS && st == FSDPC_OK; i++) {
    int ki;
    const fsdpc_cfg_key *k = fsdpc__cfg_find(family_keys[i].path, &ki);
    if ((fi->reads & family_keys[i].bit) || !k || !c->meta->keys[ki].set)
      continue;
    if (!defaults && (st = fsdpc__cfg_new_defaults(c->source, &defaults, err)) != FSDPC_OK)
      break;
    if (!fsdpc__cfg_row_equal(c, defaults, k))
      st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: %s: model_type %s does not have this switch (transformers ignores it "
                       "for %s); remove it or set the model_type that reads it",
                       where(c, family_keys[i].path), family_keys[i].path, fi->model_type,
                       fi->architecture);
  }
  fsdpc__config_destroy(defaults);
  return st;
}

fsdpc_status fsdpc__family_check_config(const fsdpc_config *c,
                                        const char *(*where)(const fsdpc_config *, const char *),
                                        fsdpc_err *err) {
  const fsdpc_config_model *m = &c->model;
  const fsdpc_family_info *fi = fsdpc__family(m->model_type);
  FSDPC_TRY(check_unread(c, fi, where, err));
  if (fi && (fi->reads & R_GEMMA) && strcmp(m->hidden_activation, "gelu_pytorch_tanh") != 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: model.hidden_activation '%s': fsdpc computes %s's MLP with "
                       "gelu_pytorch_tanh only",
                       where(c, "model.hidden_activation"), m->hidden_activation, fi->model_type);
  if (fi && (fi->reads & R_GEMMA) && m->query_pre_attn_scalar == 0.0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: model.query_pre_attn_scalar must be > 0 (or -1 for 256)",
                       where(c, "model.query_pre_attn_scalar"));
  uint64_t bits[FSDPC_WINDOW_MAX_LAYERS / 64];
  if (fsdpc__family_layer_type_bits(&m->layer_types, bits) != 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: model.layer_types: fsdpc computes full_attention and "
                       "sliding_attention layers only, sliding ones among the first %d layers",
                       where(c, "model.layer_types"), FSDPC_WINDOW_MAX_LAYERS);
  if (m->layer_types.n > 0 && m->layer_types.n != m->num_hidden_layers)
    return fsdpc__fail(
        err, FSDPC_INVALID_USAGE, "%s: model.layer_types lists %d layers; the model has %lld",
        where(c, "model.layer_types"), m->layer_types.n, (long long)m->num_hidden_layers);
  int window = m->sliding_window >= 0 ? (int)m->sliding_window : (fi ? fi->default_window : 0);
  int slides =
      fi && ((fi->reads & (R_WIN | R_GEMMA)) || ((fi->reads & R_WINL) && m->use_sliding_window));
  if (window > 0 && slides && m->num_hidden_layers > FSDPC_WINDOW_MAX_LAYERS)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: model.sliding_window on %lld layers; fsdpc keeps the window of at "
                       "most %d layers",
                       where(c, "model.sliding_window"), (long long)m->num_hidden_layers,
                       FSDPC_WINDOW_MAX_LAYERS);
  if (fi && (fi->reads & R_LOCAL) && m->num_hidden_layers > FSDPC_WINDOW_MAX_LAYERS)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: model.num_hidden_layers %lld: fsdpc keeps the layer types (and local "
                       "RoPE) of at most %d layers",
                       where(c, "model.num_hidden_layers"), (long long)m->num_hidden_layers,
                       FSDPC_WINDOW_MAX_LAYERS);
  int rd = (int)(m->head_dim * ((fi && (fi->reads & R_PART)) ? m->partial_rotary_factor : 1.0));
  if (rd < 2 || rd % 2 != 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: model.partial_rotary_factor %g of head_dim %lld turns %d dims; RoPE "
                       "needs an even number of at least 2",
                       where(c, "model.partial_rotary_factor"), m->partial_rotary_factor,
                       (long long)m->head_dim, rd);
  if (m->rope_scaling.type == FSDPC_ROPE_SCALING_LONGROPE || m->rope_scaling.short_factor.n > 0 ||
      m->rope_scaling.long_factor.n > 0)
    FSDPC_TRY(check_factors(c, where, err));
  return FSDPC_OK;
}
