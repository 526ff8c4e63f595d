/* The decoder families fsdpc computes, as data: one row per Hugging Face
 * model_type (family.c) says what is fixed for the family (Qwen2's q/k/v
 * biases, Qwen3's per-head q/k norms, OLMo 2's post-norms, Phi-3's fused
 * tensors), which config.json keys it reads (attention_bias, sliding_window,
 * the Granite multipliers, ...), its tensor names and its
 * named_parameters() order. The resolver (model/family_resolve.c) turns a
 * config (YAML keys named as config.json's, filled from model.config) into
 * the switches of the model description (model/llama.h); the one layer
 * (model/layer.c) computes every family. The table sits in config/ because
 * the config reads it: which config.json keys a model_type reads (hf.c) and
 * the checks of a config against its family (check.c).
 *
 * What a family's config.json may set that fsdpc does not compute is
 * refused by the rules in model/hf_rules.c, which read the same table.
 *
 * Gemma (later) fits the same switches: norm_pre and norm_post together
 * (its four norms), embed_mult sqrt(hidden), attn_scale from
 * query_pre_attn_scalar, per-layer window bits; it would add a norm weight
 * offset, GeGLU and logit soft-capping as op parameters. */
#ifndef FSDPC_CONFIG_FAMILY_H
#define FSDPC_CONFIG_FAMILY_H

#include <stdint.h>

#include "config/config.h"

/* q/k RMSNorm before RoPE: none, over each head's HD dims with one (HD)
 * weight (Qwen3), or over the whole projection (OLMo 2). */
enum { FSDPC_QK_NORM_NONE = 0, FSDPC_QK_NORM_HEAD = 1, FSDPC_QK_NORM_PROJ = 2 };
enum { FSDPC_WINDOW_MAX_LAYERS = 256 }; /* layers a sliding-window pattern may name */

/* Keys a family reads from its config (fsdpc_family_info.reads). */
enum {
  FSDPC_READS_ATTENTION_BIAS = 1 << 0, /* attention_bias: q/k/v/o biases */
  FSDPC_READS_MLP_BIAS = 1 << 1,       /* mlp_bias: gate/up/down biases */
  FSDPC_READS_WINDOW = 1 << 2,         /* sliding_window on every layer (Mistral, Phi-3) */
  FSDPC_READS_WINDOW_LAYERS = 1 << 3,  /* use_sliding_window, max_window_layers, layer_types */
  FSDPC_READS_PARTIAL_ROTARY = 1 << 4, /* partial_rotary_factor */
  FSDPC_READS_MULTIPLIERS = 1 << 5, /* embedding/residual/attention multipliers, logits_scaling */
  FSDPC_READS_GEMMA = 1 << 6,       /* query_pre_attn_scalar, soft-capping, hidden_activation, and
                                     * sliding_window on the layer_types layers (default: even ones) */
  FSDPC_READS_LOCAL_ROPE = 1 << 7   /* Gemma 3: rope_local_base_freq for the sliding_attention
                                     * layers, sliding_window_pattern; no soft-capping by default */
};

typedef struct fsdpc_family_info {
  const char *model_type;   /* config.json model_type */
  const char *architecture; /* config.json architectures[0] of its causal LM */
  int bias_qkv;             /* q/k/v biases whatever the config says (Qwen2) */
  int qk_norm;              /* FSDPC_QK_NORM_* */
  int norm_pre, norm_post;  /* where the layer's RMSNorms sit */
  int fused;                /* qkv_proj and gate_up_proj tensors (Phi-3) */
  int o_first;              /* o_proj before qkv_proj in named_parameters() (Phi-3) */
  unsigned reads;           /* FSDPC_READS_* */
  int default_window;       /* sliding_window when the config has no such key */
  int default_max_window_layers;
} fsdpc_family_info;

/* The row of family f (FSDPC_FAMILY_*), or NULL. */
const fsdpc_family_info *fsdpc__family(int f);
/* The family whose model_type is name, or -1. */
int fsdpc__family_by_name(const char *name);
/* "llama, mistral, qwen2, ..." for messages. */
const char *fsdpc__family_names(void);

/* layer_types as a bit per layer (bits: FSDPC_WINDOW_MAX_LAYERS bits); -1
 * when it names another type than full_attention / sliding_attention. */
int fsdpc__family_layer_type_bits(const fsdpc_strlist *t, uint64_t *bits);
/* A config's model keys against its family: a key the family does not read
 * set in YAML, a sliding-window pattern over more than
 * FSDPC_WINDOW_MAX_LAYERS layers, a layer type other than full_attention /
 * sliding_attention, longrope factors of the wrong length. where(key) names
 * the place a key was set, for the one-line error. */
fsdpc_status fsdpc__family_check_config(const fsdpc_config *c,
                                        const char *(*where)(const fsdpc_config *, const char *),
                                        fsdpc_err *err);
/* Whether model_type f reads config.json key hf (a row of the schema with
 * an hf field): keys of other families are left to transformers' own
 * defaults, as transformers ignores them too. */
int fsdpc__family_reads_hf(int f, const char *hf);

#endif
