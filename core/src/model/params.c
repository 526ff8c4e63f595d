/* The parameter list of a Llama model in Hugging Face module order, and the
 * world-size-independent random init. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  if (s->HD % 2 != 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "model: head_dim (%d) must be even for RoPE",
                       s->HD);
  return FSDPC_OK;
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

fsdpc_status fsdpc__model_params(const fsdpc_model_shape *s, fsdpc_param_info **out, int *n,
                                 fsdpc_err *err) {
  FSDPC_TRY(fsdpc__model_shape_check(s, err));
  int cap = 3 + s->L * FSDPC_LAYER_NPARAM;
  fsdpc_param_info *p = calloc((size_t)cap, sizeof *p);
  if (!p) return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory for the parameter list");
  int k = 0;
  add(p, &k, FSDPC_P_EMBED, -1, "model.embed_tokens", "embedding", "weight", s->V, s->C, 0);
  if (s->tied) p[0].tie_group = 0;
  int64_t q = (int64_t)s->NH * s->HD, kv = (int64_t)s->KVH * s->HD;
  for (int l = 0; l < s->L; l++) {
    char mod[48];
    snprintf(mod, sizeof mod, "model.layers.%d", l);
    int b = l + 1;
    add(p, &k, FSDPC_P_Q, l, mod, "decoder_layer", "self_attn.q_proj.weight", q, s->C, b);
    add(p, &k, FSDPC_P_K, l, mod, "decoder_layer", "self_attn.k_proj.weight", kv, s->C, b);
    add(p, &k, FSDPC_P_V, l, mod, "decoder_layer", "self_attn.v_proj.weight", kv, s->C, b);
    add(p, &k, FSDPC_P_O, l, mod, "decoder_layer", "self_attn.o_proj.weight", s->C, q, b);
    add(p, &k, FSDPC_P_GATE, l, mod, "decoder_layer", "mlp.gate_proj.weight", s->F, s->C, b);
    add(p, &k, FSDPC_P_UP, l, mod, "decoder_layer", "mlp.up_proj.weight", s->F, s->C, b);
    add(p, &k, FSDPC_P_DOWN, l, mod, "decoder_layer", "mlp.down_proj.weight", s->C, s->F, b);
    add(p, &k, FSDPC_P_LN1, l, mod, "decoder_layer", "input_layernorm.weight", s->C, 0, b);
    add(p, &k, FSDPC_P_LN2, l, mod, "decoder_layer", "post_attention_layernorm.weight", s->C, 0,
        b);
  }
  add(p, &k, FSDPC_P_NORM, -1, "model.norm", "norm", "weight", s->C, 0, s->L + 1);
  /* HF names the head "lm_head.weight" with module "lm_head". */
  if (!s->tied) {
    add(p, &k, FSDPC_P_HEAD, -1, "lm_head", "lm_head", "weight", s->V, s->C, s->L + 1);
    snprintf(p[k - 1].name, sizeof p[k - 1].name, "lm_head.weight");
  }
  *out = p;
  *n = k;
  return FSDPC_OK;
}

uint64_t fsdpc__model_numel(const fsdpc_model_shape *s) {
  uint64_t C = (uint64_t)s->C, q = (uint64_t)s->NH * s->HD, kv = (uint64_t)s->KVH * s->HD;
  uint64_t layer = 2 * C * q + 2 * C * kv + 3 * C * (uint64_t)s->F + 2 * C;
  return (uint64_t)s->V * C * (s->tied ? 1 : 2) + (uint64_t)s->L * layer + C;
}

int fsdpc__model_init_is_ones(const fsdpc_param_info *p) {
  return p->kind == FSDPC_P_LN1 || p->kind == FSDPC_P_LN2 || p->kind == FSDPC_P_NORM;
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
