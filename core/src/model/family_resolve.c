/* The resolver from a config to the model description's switches, by the
 * family's row (config/family.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config/meta.h"
#include "model/family.h"

/* The config's longrope limit is the RoPE table's. */
_Static_assert((int)FSDPC_ROPE_SCALING_MAX_FACTORS == (int)FSDPC_ROPE_MAX_FACTORS,
               "config.h and ops.h disagree on the longrope factors");

/* Gemma2Config's defaults for the keys a config.json may leave out. */
#define GEMMA2_QUERY_PRE_ATTN_SCALAR 256.0
#define GEMMA2_ATTN_SOFTCAP 50.0
#define GEMMA2_FINAL_SOFTCAP 30.0

static int key_set(const fsdpc_config *c, const char *path) {
  int ki;
  return fsdpc__cfg_find(path, &ki) && c->meta->keys[ki].set;
}

/* Gemma3TextConfig's layer types: layer_types, else sliding_attention
 * except where (i + 1) is a multiple of sliding_window_pattern. */
static void local_layer_types(const fsdpc_config *c, fsdpc_model_shape *sh) {
  const fsdpc_config_model *m = &c->model;
  if (m->layer_types.n > 0) {
    fsdpc__family_layer_type_bits(&m->layer_types, sh->window_layers);
    return;
  }
  int every = (int)m->sliding_window_pattern;
  for (int l = 0; l < sh->L && l < FSDPC_WINDOW_MAX_LAYERS; l++)
    if ((l + 1) % every != 0)
      sh->window_layers[l / 64] |= 1ull << (l % 64);
}

/* The sliding window of each layer, as transformers derives it: every
 * layer (Mistral, Phi-3: a non-null sliding_window), or Qwen's layer_types
 * (given, else sliding from max_window_layers on when use_sliding_window). */
static void resolve_window(const fsdpc_config *c, const fsdpc_family_info *fi,
                           fsdpc_model_shape *sh) {
  const fsdpc_config_model *m = &c->model;
  int window = m->sliding_window >= 0 ? (int)m->sliding_window : fi->default_window;
  memset(sh->window_layers, 0, sizeof sh->window_layers);
  sh->window = 0;
  if (fi->reads & FSDPC_READS_LOCAL_ROPE)
    local_layer_types(c, sh); /* the local RoPE's layers, with or without a window */
  if (window <= 0)
    return;
  if (fi->reads & FSDPC_READS_WINDOW) {
    for (int l = 0; l < sh->L && l < FSDPC_WINDOW_MAX_LAYERS; l++)
      sh->window_layers[l / 64] |= 1ull << (l % 64);
  } else if (fi->reads & FSDPC_READS_LOCAL_ROPE) {
    /* the layer types, set above */
  } else if (fi->reads & FSDPC_READS_GEMMA) { /* Gemma2Config: even layers slide unless listed */
    if (m->layer_types.n > 0)
      fsdpc__family_layer_type_bits(&m->layer_types, sh->window_layers);
    else
      for (int l = 0; l < sh->L && l < FSDPC_WINDOW_MAX_LAYERS; l += 2)
        sh->window_layers[l / 64] |= 1ull << (l % 64);
  } else if (fi->reads & FSDPC_READS_WINDOW_LAYERS) {
    if (!m->use_sliding_window)
      return; /* transformers sets sliding_window to None */
    if (m->layer_types.n > 0) {
      fsdpc__family_layer_type_bits(&m->layer_types, sh->window_layers);
    } else {
      int from =
          m->max_window_layers >= 0 ? (int)m->max_window_layers : fi->default_max_window_layers;
      for (int l = from; l < sh->L && l < FSDPC_WINDOW_MAX_LAYERS; l++)
        sh->window_layers[l / 64] |= 1ull << (l % 64);
    }
  } else {
    return;
  }
  sh->window = window;
}

static void resolve_rope(const fsdpc_config *c, fsdpc_model_shape *sh, double partial) {
  const fsdpc_config_model *m = &c->model;
  fsdpc_rope *r = &sh->rope;
  memset(r, 0, sizeof *r);
  r->type = m->rope_scaling.type; /* the same numbers (config.h) */
  r->dim = (int)(sh->HD * partial);
  r->max_pos = sh->max_pos;
  r->theta = m->rope_theta;
  r->factor = m->rope_scaling.factor;
  r->low_freq_factor = m->rope_scaling.low_freq_factor;
  r->high_freq_factor = m->rope_scaling.high_freq_factor;
  r->original_max_pos = (int)m->rope_scaling.original_max_position_embeddings;
  /* yarn and longrope derive what their config leaves out from
   * max_position_embeddings (rope_table.c), not from llama3's defaults. */
  if (r->type == FSDPC_ROPE_YARN || r->type == FSDPC_ROPE_LONGROPE) {
    if (!key_set(c, "model.rope_scaling.factor"))
      r->factor = 0.0;
    if (!key_set(c, "model.rope_scaling.original_max_position_embeddings"))
      r->original_max_pos = 0;
  }
  r->attention_factor = m->rope_scaling.attention_factor;
  r->beta_fast = m->rope_scaling.beta_fast;
  r->beta_slow = m->rope_scaling.beta_slow;
  r->mscale = m->rope_scaling.mscale;
  r->mscale_all_dim = m->rope_scaling.mscale_all_dim;
  r->truncate = m->rope_scaling.truncate;
  const fsdpc_strlist *sf = &m->rope_scaling.short_factor, *lf = &m->rope_scaling.long_factor;
  r->n_factors = sf->n < FSDPC_ROPE_MAX_FACTORS ? sf->n : FSDPC_ROPE_MAX_FACTORS;
  for (int i = 0; i < r->n_factors; i++) {
    r->short_factor[i] = strtod(sf->items[i], NULL);
    r->long_factor[i] = i < lf->n ? strtod(lf->items[i], NULL) : r->short_factor[i];
  }
}

/* -1 = the family's default */
static double or_default(double v, double d) {
  return v < 0.0 ? d : v;
}

/* Gemma 2: (1 + w) norms, GeGLU, embeddings times sqrt(hidden_size) (an
 * fp32 number here: the compute dtype's), the softmax scale
 * query_pre_attn_scalar^-1/2 and the two soft-cappings. */
static void resolve_gemma(const fsdpc_config *c, const fsdpc_family_info *fi,
                          fsdpc_model_shape *sh) {
  const fsdpc_config_model *m = &c->model;
  sh->norm_offset = 0.0f;
  sh->act = FSDPC_ACT_SILU;
  sh->attn_softcap = sh->logit_softcap = 0.0f;
  if (!(fi->reads & FSDPC_READS_GEMMA))
    return;
  sh->norm_offset = 1.0f;
  sh->act = FSDPC_ACT_GELU_TANH;
  sh->embed_mult = (float)sqrt((double)sh->C);
  sh->attn_scale =
      (float)(1.0 / sqrt(or_default(m->query_pre_attn_scalar, GEMMA2_QUERY_PRE_ATTN_SCALAR)));
  /* Gemma 3 caps nothing by default, and its attention never caps:
   * transformers' Gemma3Attention keeps attn_logit_softcapping from the
   * config but does not hand it to the attention function (5.x, checked
   * against the gemma3_softcap_untied fixture); the final cap it applies. */
  int gemma3 = (fi->reads & FSDPC_READS_LOCAL_ROPE) != 0;
  sh->attn_softcap = gemma3 ? 0.0f : (float)or_default(m->attn_logit_softcapping,
                                                       GEMMA2_ATTN_SOFTCAP);
  sh->logit_softcap =
      (float)or_default(m->final_logit_softcapping, gemma3 ? 0.0 : GEMMA2_FINAL_SOFTCAP);
}

/* Gemma 3's sliding_attention layers turn by plain RoPE of base
 * rope_local_base_freq (Gemma3RotaryEmbedding per layer type: rope_scaling
 * is the full_attention layers' only; their rope_theta defaults to 1e6,
 * config/check.c). */
static void resolve_local_rope(const fsdpc_config *c, const fsdpc_family_info *fi,
                               fsdpc_model_shape *sh) {
  memset(&sh->rope_local, 0, sizeof sh->rope_local);
  if (!(fi->reads & FSDPC_READS_LOCAL_ROPE))
    return;
  sh->rope_local.type = FSDPC_ROPE_DEFAULT;
  sh->rope_local.dim = sh->rope.dim;
  sh->rope_local.max_pos = sh->max_pos;
  sh->rope_local.theta = c->model.rope_local_base_freq;
}

void fsdpc__family_resolve(const fsdpc_config *c, fsdpc_model_shape *sh) {
  const fsdpc_config_model *m = &c->model;
  const fsdpc_family_info *fi = fsdpc__family(m->model_type);
  sh->family = fi ? m->model_type : FSDPC_FAMILY_LLAMA;
  if (!fi)
    fi = fsdpc__family(FSDPC_FAMILY_LLAMA);
  int attn_bias = (fi->reads & FSDPC_READS_ATTENTION_BIAS) && m->attention_bias;
  sh->bias_qkv = fi->bias_qkv || attn_bias;
  sh->bias_o = attn_bias;
  sh->bias_mlp = (fi->reads & FSDPC_READS_MLP_BIAS) && m->mlp_bias;
  sh->qk_norm = fi->qk_norm;
  sh->norm_pre = fi->norm_pre;
  sh->norm_post = fi->norm_post;
  sh->fused_qkv = sh->fused_gate_up = fi->fused;
  int mult = (fi->reads & FSDPC_READS_MULTIPLIERS) != 0;
  sh->embed_mult = mult ? (float)m->embedding_multiplier : 1.0f;
  sh->resid_mult = mult ? (float)m->residual_multiplier : 1.0f;
  sh->logits_div = mult ? (float)m->logits_scaling : 1.0f;
  sh->attn_scale = mult ? (float)m->attention_multiplier : 0.0f;
  resolve_gemma(c, fi, sh);
  resolve_rope(c, sh, (fi->reads & FSDPC_READS_PARTIAL_ROTARY) ? m->partial_rotary_factor : 1.0);
  resolve_local_rope(c, fi, sh);
  resolve_window(c, fi, sh);
}
