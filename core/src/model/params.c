/* The parameter list of a decoder in its family's Hugging Face module order
 * and names, and the world-size-independent random init. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/family.h"
#include "model/llama.h"
#include "model/lora.h"
#include "util/init_rng.h"

fsdpc_status fsdpc__model_shape_check(const fsdpc_model_shape *s, fsdpc_err *err) {
  if (s->V <= 0 || s->C <= 0 || s->F <= 0 || s->L <= 0 || s->NH <= 0 || s->KVH <= 0 ||
      s->HD <= 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "model: every size must be positive (vocab %d, hidden %d, "
                       "intermediate %d, layers %d, heads %d, kv heads %d, head dim %d)",
                       s->V, s->C, s->F, s->L, s->NH, s->KVH, s->HD);
  if (s->NH % s->KVH != 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "model: num_attention_heads (%d) must be a multiple of "
                       "num_key_value_heads (%d)",
                       s->NH, s->KVH);
  if (s->rope.dim < 2 || s->rope.dim % 2 != 0 || s->rope.dim > s->HD)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "model: RoPE turns %d dims of head_dim %d; it needs an even number of at "
                       "least 2 and at most head_dim",
                       s->rope.dim, s->HD);
  if (s->rope_local.dim != 0 && s->rope_local.dim != s->rope.dim)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                       "model: the local RoPE turns %d dims, the global one %d; the layer turns "
                       "rope.dim with either table",
                       s->rope_local.dim, s->rope.dim);
  /* A zeroed switch would silently drop a norm or scale by 0: a shape is
   * made by fsdpc__family_resolve or fsdpc__model_shape_llama. */
  if (!(s->norm_pre || s->norm_post) || !(s->embed_mult > 0.0f) || !(s->resid_mult > 0.0f) ||
      !(s->logits_div > 0.0f) || s->attn_scale < 0.0f || !fsdpc__family(s->family) ||
      s->attn_softcap < 0.0f || s->logit_softcap < 0.0f)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR,
                       "model: the description's switches are unset (norms %d/%d, multipliers "
                       "%g %g %g, family %d)",
                       s->norm_pre, s->norm_post, (double)s->embed_mult, (double)s->resid_mult,
                       (double)s->logits_div, s->family);
  return FSDPC_OK;
}

void fsdpc__model_shape_llama(fsdpc_model_shape *s) {
  s->family = FSDPC_FAMILY_LLAMA;
  s->bias_qkv = s->bias_o = s->bias_mlp = 0;
  s->qk_norm = FSDPC_QK_NORM_NONE;
  s->norm_pre = 1;
  s->norm_post = 0;
  s->fused_qkv = s->fused_gate_up = 0;
  s->embed_mult = s->resid_mult = s->logits_div = 1.0f;
  s->attn_scale = 0.0f;
  s->norm_offset = 0.0f;
  s->act = FSDPC_ACT_SILU;
  s->attn_softcap = s->logit_softcap = 0.0f;
  s->window = 0;
  memset(s->window_layers, 0, sizeof s->window_layers);
  memset(&s->rope_local, 0, sizeof s->rope_local); /* one RoPE for every layer */
  s->rope.dim = s->HD;
  s->rope.max_pos = s->max_pos;
  if (s->rope.theta <= 0.0)
    s->rope.theta = 10000.0;
  s->rope.truncate = 1;
}

static void add(fsdpc_param_info *p, int *n, int kind, int layer, const char *module,
                const char *type, const char *leaf, int64_t d0, int64_t d1, int block) {
  fsdpc_param_info *q = &p[(*n)++];
  memset(q, 0, sizeof *q);
  snprintf(q->module, sizeof q->module, "%s", module);
  snprintf(q->name, sizeof q->name, "%s.%s", module, leaf);
  q->module_type = type;
  q->kind = kind;
  q->layer = layer;
  q->block = block;
  q->ndim = d1 > 0 ? 2 : 1;
  q->shape[0] = d0;
  q->shape[1] = d1 > 0 ? d1 : 0;
  q->numel = (uint64_t)d0 * (uint64_t)(d1 > 0 ? d1 : 1);
  q->decay = d1 > 0;
  q->tie_group = -1;
}

/* The module of a layer's parameter kind under "model.layers.N." (the
 * family's names: Phi-3's fused qkv_proj and gate_up_proj; the MLP's input
 * norm is pre_feedforward_layernorm when post-norms take the name
 * post_attention_layernorm), and whether the tensor is a bias. */
const char *fsdpc__layer_module(const fsdpc_model_shape *s, int kind, int *is_bias) {
  static const char *const proj[7] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                      "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                      "mlp.down_proj"};
  *is_bias = kind >= FSDPC_P_BQ && kind <= FSDPC_P_BDOWN;
  int j = *is_bias ? kind - FSDPC_P_BQ : kind - FSDPC_P_Q;
  if ((kind >= FSDPC_P_Q && kind <= FSDPC_P_DOWN) || *is_bias) {
    if (j == 0 && s->fused_qkv)
      return "self_attn.qkv_proj";
    if (j == 4 && s->fused_gate_up)
      return "mlp.gate_up_proj";
    return proj[j];
  }
  switch (kind) {
  case FSDPC_P_QNORM:
    return "self_attn.q_norm";
  case FSDPC_P_KNORM:
    return "self_attn.k_norm";
  case FSDPC_P_LN1:
    return "input_layernorm";
  case FSDPC_P_LN2:
    return s->norm_post ? "pre_feedforward_layernorm" : "post_attention_layernorm";
  case FSDPC_P_POST_ATTN:
    return "post_attention_layernorm";
  case FSDPC_P_POST_MLP:
    return "post_feedforward_layernorm";
  default:
    return "?";
  }
}

/* Rows (output features) of projection j (0..6 = Q..DOWN) as stored: a
 * fused tensor holds its parts' rows; a part inside one has none. */
static int64_t proj_rows(const fsdpc_model_shape *s, int j) {
  int64_t q = (int64_t)s->NH * s->HD, kv = (int64_t)s->KVH * s->HD;
  switch (j) {
  case 0:
    return s->fused_qkv ? q + 2 * kv : q;
  case 1:
  case 2:
    return s->fused_qkv ? 0 : kv;
  case 3:
    return s->C;
  case 4:
    return s->fused_gate_up ? 2 * (int64_t)s->F : s->F;
  case 5:
    return s->fused_gate_up ? 0 : s->F;
  default:
    return s->C;
  }
}

/* Whether layer kind k exists in this model, and its shape (d1 = 0: 1-D). */
static int layer_kind_shape(const fsdpc_model_shape *s, int k, int64_t *d0, int64_t *d1) {
  int64_t q = (int64_t)s->NH * s->HD, kv = (int64_t)s->KVH * s->HD;
  int64_t in[7] = {s->C, s->C, s->C, q, s->C, s->C, s->F};
  *d1 = 0;
  if (k >= FSDPC_P_Q && k <= FSDPC_P_DOWN) {
    *d0 = proj_rows(s, k - FSDPC_P_Q);
    *d1 = in[k - FSDPC_P_Q];
    return *d0 > 0;
  }
  if (k >= FSDPC_P_BQ && k <= FSDPC_P_BDOWN) {
    int j = k - FSDPC_P_BQ;
    int on = j <= 2 ? s->bias_qkv : j == 3 ? s->bias_o : s->bias_mlp;
    *d0 = proj_rows(s, j);
    return on && *d0 > 0;
  }
  switch (k) {
  case FSDPC_P_QNORM:
    *d0 = s->qk_norm == FSDPC_QK_NORM_HEAD ? s->HD : q;
    return s->qk_norm != FSDPC_QK_NORM_NONE;
  case FSDPC_P_KNORM:
    *d0 = s->qk_norm == FSDPC_QK_NORM_HEAD ? s->HD : kv;
    return s->qk_norm != FSDPC_QK_NORM_NONE;
  case FSDPC_P_LN1:
  case FSDPC_P_LN2:
    *d0 = s->C;
    return s->norm_pre;
  case FSDPC_P_POST_ATTN:
  case FSDPC_P_POST_MLP:
    *d0 = s->C;
    return s->norm_post;
  default:
    return 0;
  }
}

/* A layer's kinds in the family's named_parameters() order: the attention
 * module (each projection's weight then bias, Phi-3's o_proj before its
 * qkv_proj, then q_norm, k_norm), the MLP, then the norms in the order the
 * decoder layer defines them. */
static int layer_order(const fsdpc_model_shape *s, int *out) {
  static const int attn[] = {FSDPC_P_Q, FSDPC_P_BQ, FSDPC_P_K, FSDPC_P_BK,
                             FSDPC_P_V, FSDPC_P_BV, FSDPC_P_O, FSDPC_P_BO};
  static const int attn_o_first[] = {FSDPC_P_O, FSDPC_P_BO, FSDPC_P_Q, FSDPC_P_BQ};
  static const int rest[] = {FSDPC_P_QNORM, FSDPC_P_KNORM,     FSDPC_P_GATE, FSDPC_P_BGATE,
                             FSDPC_P_UP,    FSDPC_P_BUP,       FSDPC_P_DOWN, FSDPC_P_BDOWN,
                             FSDPC_P_LN1,   FSDPC_P_POST_ATTN, FSDPC_P_LN2,  FSDPC_P_POST_MLP};
  const fsdpc_family_info *fi = fsdpc__family(s->family);
  int n = 0;
  if (fi && fi->o_first && s->fused_qkv)
    for (size_t i = 0; i < sizeof attn_o_first / sizeof *attn_o_first; i++)
      out[n++] = attn_o_first[i];
  else
    for (size_t i = 0; i < sizeof attn / sizeof *attn; i++)
      out[n++] = attn[i];
  for (size_t i = 0; i < sizeof rest / sizeof *rest; i++)
    out[n++] = rest[i];
  return n;
}

fsdpc_status fsdpc__model_params(const fsdpc_model_shape *s, fsdpc_param_info **out, int *n,
                                 fsdpc_err *err) {
  FSDPC_TRY(fsdpc__model_shape_check(s, err));
  int cap = 3 + s->L * FSDPC_LAYER_NPARAM;
  fsdpc_param_info *p = calloc((size_t)cap, sizeof *p);
  if (!p) return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory for the parameter list");
  int k = 0, order[FSDPC_LAYER_NPARAM + 4], no = layer_order(s, order);
  add(p, &k, FSDPC_P_EMBED, -1, "model.embed_tokens", "embedding", "weight", s->V, s->C, 0);
  if (s->tied)
    p[0].tie_group = 0;
  for (int l = 0; l < s->L; l++) {
    char mod[48], leaf[64];
    snprintf(mod, sizeof mod, "model.layers.%d", l);
    for (int i = 0; i < no; i++) {
      int64_t d0, d1;
      int bias;
      if (!layer_kind_shape(s, order[i], &d0, &d1))
        continue;
      const char *m = fsdpc__layer_module(s, order[i], &bias);
      snprintf(leaf, sizeof leaf, "%s.%s", m, bias ? "bias" : "weight");
      add(p, &k, order[i], l, mod, "decoder_layer", leaf, d0, d1, l + 1);
    }
  }
  add(p, &k, FSDPC_P_NORM, -1, "model.norm", "norm", "weight", s->C, 0, s->L + 1);
  /* HF names the head "lm_head.weight" with module "lm_head". */
  if (!s->tied) {
    add(p, &k, FSDPC_P_HEAD, -1, "lm_head", "lm_head", "weight", s->V, s->C, s->L + 1);
    snprintf(p[k - 1].name, sizeof p[k - 1].name, "lm_head.weight");
  }
  for (int i = 0; i < k && s->norm_offset != 0.0f; i++) /* 1 + 0: the norm starts as identity */
    p[i].init_zero =
        (p[i].kind >= FSDPC_P_QNORM && p[i].kind <= FSDPC_P_LN2) || p[i].kind == FSDPC_P_NORM;
  *out = p;
  *n = k;
  return FSDPC_OK;
}

uint64_t fsdpc__model_numel(const fsdpc_model_shape *s) {
  uint64_t layer = 0;
  for (int k = FSDPC_P_Q; k <= FSDPC_P_LN2; k++) {
    int64_t d0, d1;
    if (layer_kind_shape(s, k, &d0, &d1))
      layer += (uint64_t)d0 * (uint64_t)(d1 > 0 ? d1 : 1);
  }
  uint64_t C = (uint64_t)s->C;
  return (uint64_t)s->V * C * (s->tied ? 1 : 2) + (uint64_t)s->L * layer + C;
}

int fsdpc__model_init_is_ones(const fsdpc_param_info *p) {
  return !p->init_zero &&
         ((p->kind >= FSDPC_P_QNORM && p->kind <= FSDPC_P_LN2) || p->kind == FSDPC_P_NORM);
}

uint64_t fsdpc__model_init_key(const fsdpc_param_info *p, uint64_t seed) {
  return fsdpc__init_key(seed, p->name);
}

void fsdpc__model_init_range(const fsdpc_param_info *p, uint64_t seed, double std,
                             uint64_t elem_offset, uint64_t n, float *dst) {
  if (fsdpc__lora_kind(p->kind)) {
    fsdpc__lora_init_range(p, seed, elem_offset, n, dst);
    return;
  }
  if (p->init_zero) {
    memset(dst, 0, n * sizeof *dst);
    return;
  }
  if (fsdpc__model_init_is_ones(p)) {
    for (uint64_t i = 0; i < n; i++)
      dst[i] = 1.0f;
    return;
  }
  /* the per-element function the CUDA init uses too (util/init_rng.h) */
  uint64_t key = fsdpc__model_init_key(p, seed);
#pragma omp parallel for schedule(static)
  for (uint64_t i = 0; i < n; i++)
    dst[i] = fsdpc__init_normal(key, elem_offset + i, std);
}
