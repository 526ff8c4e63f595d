/* The decoder families (issue 35) on the CPU reference, against a
 * double-precision reference written from transformers' modeling files
 * (ref_decoder.c), through the real config reader (a config.json per case),
 * run plan, engine and naive attention plugin:
 * - every parameter's Hugging Face name, in the family's named_parameters()
 *   order, with the reference reading the weights by those names;
 * - logits within 1e-5 of the largest, and the loss within 1e-5 relative;
 * - every parameter's gradient (a sample of elements of each tensor) against
 *   central differences of the reference's loss in double;
 * - activation checkpointing gives the same loss and gradients bit for bit.
 * Cases cover q/k/v(/o/MLP) biases, tied and untied heads, GQA and MQA, q/k
 * norms per head and per projection, post-norms, fused qkv_proj and
 * gate_up_proj, partial rotary, each RoPE type (default, llama3, linear,
 * dynamic, yarn, longrope with short and long factors), sliding windows
 * shorter than the sequence (every layer, some layers, with packed
 * documents), Granite's four multipliers and Gemma 2 ((1 + w) norms, four
 * per layer, GeGLU, sqrt(hidden) embeddings, query_pre_attn_scalar,
 * attention and final soft-capping on and off, alternate or listed
 * sliding layers, head_dim apart from hidden / heads) and Gemma 3 (its
 * q/k norms with (1 + w), the sliding_attention layers' own RoPE from
 * rope_local_base_freq against the full layers' rope_theta and linear
 * scaling, given as transformers 4 and as transformers 5 write it, layer
 * types from sliding_window_pattern or listed, with and without a window,
 * soft-capping off by default and on when set). */
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "fsdp/engine.h"
#include "model/family.h"
#include "ref_decoder.h"
#include "runplan/runplan.h"

enum { B = 2, T = 9 };

typedef struct family_case {
  const char *name;
  const char *json;   /* config.json */
  const char *leaves; /* layer 0's parameters after "model.layers.0.", in order */
  int docs;           /* packed documents */
} family_case;

#define GEMMA3_LEAVES                                                                              \
  "self_attn.q_proj.weight self_attn.k_proj.weight self_attn.v_proj.weight "                       \
  "self_attn.o_proj.weight self_attn.q_norm.weight self_attn.k_norm.weight "                       \
  "mlp.gate_proj.weight mlp.up_proj.weight mlp.down_proj.weight input_layernorm.weight "           \
  "post_attention_layernorm.weight pre_feedforward_layernorm.weight "                              \
  "post_feedforward_layernorm.weight"

static const family_case cases[] = {
    {"llama_biases_llama3",
     "{\"model_type\": \"llama\", \"vocab_size\": 37, \"hidden_size\": 32, "
     "\"intermediate_size\": 48, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
     "\"num_key_value_heads\": 2, \"max_position_embeddings\": 64, \"rms_norm_eps\": 1e-6, "
     "\"rope_theta\": 500000.0, \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, "
     "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
     "\"original_max_position_embeddings\": 16}, \"attention_bias\": true, \"mlp_bias\": true, "
     "\"tie_word_embeddings\": false}",
     "self_attn.q_proj.weight self_attn.q_proj.bias self_attn.k_proj.weight self_attn.k_proj.bias "
     "self_attn.v_proj.weight self_attn.v_proj.bias self_attn.o_proj.weight self_attn.o_proj.bias "
     "mlp.gate_proj.weight mlp.gate_proj.bias mlp.up_proj.weight mlp.up_proj.bias "
     "mlp.down_proj.weight mlp.down_proj.bias input_layernorm.weight "
     "post_attention_layernorm.weight",
     0},
    {"mistral_window_docs",
     "{\"model_type\": \"mistral\", \"vocab_size\": 41, \"hidden_size\": 32, "
     "\"intermediate_size\": 40, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
     "\"num_key_value_heads\": 1, \"head_dim\": 12, \"max_position_embeddings\": 64, "
     "\"rms_norm_eps\": 1e-5, \"rope_theta\": 10000.0, \"sliding_window\": 4, "
     "\"tie_word_embeddings\": false}",
     "self_attn.q_proj.weight self_attn.k_proj.weight self_attn.v_proj.weight "
     "self_attn.o_proj.weight mlp.gate_proj.weight mlp.up_proj.weight mlp.down_proj.weight "
     "input_layernorm.weight post_attention_layernorm.weight",
     1},
    {"qwen2_tied_window_layer1",
     "{\"model_type\": \"qwen2\", \"vocab_size\": 43, \"hidden_size\": 32, "
     "\"intermediate_size\": 40, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
     "\"num_key_value_heads\": 2, \"max_position_embeddings\": 64, \"rms_norm_eps\": 1e-6, "
     "\"rope_theta\": 1000000.0, \"use_sliding_window\": true, \"sliding_window\": 3, "
     "\"max_window_layers\": 1, \"tie_word_embeddings\": true}",
     "self_attn.q_proj.weight self_attn.q_proj.bias self_attn.k_proj.weight self_attn.k_proj.bias "
     "self_attn.v_proj.weight self_attn.v_proj.bias self_attn.o_proj.weight mlp.gate_proj.weight "
     "mlp.up_proj.weight mlp.down_proj.weight input_layernorm.weight "
     "post_attention_layernorm.weight",
     0},
    {"qwen3_qknorm_yarn_mqa",
     "{\"model_type\": \"qwen3\", \"vocab_size\": 39, \"hidden_size\": 32, "
     "\"intermediate_size\": 44, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
     "\"num_key_value_heads\": 1, \"head_dim\": 12, \"max_position_embeddings\": 32, "
     "\"rms_norm_eps\": 1e-6, \"attention_bias\": true, \"rope_parameters\": {\"rope_type\": "
     "\"yarn\", \"rope_theta\": 10000.0, \"factor\": 4.0, \"original_max_position_embeddings\": "
     "8}, \"use_sliding_window\": false, \"tie_word_embeddings\": false}",
     "self_attn.q_proj.weight self_attn.q_proj.bias self_attn.k_proj.weight self_attn.k_proj.bias "
     "self_attn.v_proj.weight self_attn.v_proj.bias self_attn.o_proj.weight self_attn.o_proj.bias "
     "self_attn.q_norm.weight self_attn.k_norm.weight mlp.gate_proj.weight mlp.up_proj.weight "
     "mlp.down_proj.weight input_layernorm.weight post_attention_layernorm.weight",
     0},
    {"phi3_fused_partial_longrope_long",
     "{\"model_type\": \"phi3\", \"vocab_size\": 35, \"hidden_size\": 32, "
     "\"intermediate_size\": 40, \"num_hidden_layers\": 2, \"num_attention_heads\": 2, "
     "\"num_key_value_heads\": 2, \"max_position_embeddings\": 32, "
     "\"original_max_position_embeddings\": 8, \"partial_rotary_factor\": 0.5, "
     "\"rms_norm_eps\": 1e-5, \"rope_theta\": 10000.0, \"rope_scaling\": {\"type\": "
     "\"longrope\", \"short_factor\": [1.0, 1.3, 2.0, 3.0], \"long_factor\": "
     "[1.5, 2.5, 4.5, 9.0]}, \"sliding_window\": 5, "
     "\"resid_pdrop\": 0.0, \"embd_pdrop\": 0.0, \"tie_word_embeddings\": false}",
     "self_attn.o_proj.weight self_attn.qkv_proj.weight mlp.gate_up_proj.weight "
     "mlp.down_proj.weight input_layernorm.weight post_attention_layernorm.weight",
     0},
    {"phi3_fused_partial_longrope_short_docs",
     "{\"model_type\": \"phi3\", \"vocab_size\": 35, \"hidden_size\": 32, "
     "\"intermediate_size\": 40, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
     "\"num_key_value_heads\": 2, \"max_position_embeddings\": 32, "
     "\"original_max_position_embeddings\": 8, \"partial_rotary_factor\": 0.5, "
     "\"rms_norm_eps\": 1e-5, \"rope_theta\": 10000.0, \"rope_scaling\": {\"type\": "
     "\"longrope\", \"short_factor\": [1.0, 1.4], \"long_factor\": [2.0, 3.0]}, "
     "\"sliding_window\": 3, \"tie_word_embeddings\": true}",
     "self_attn.o_proj.weight self_attn.qkv_proj.weight mlp.gate_up_proj.weight "
     "mlp.down_proj.weight input_layernorm.weight post_attention_layernorm.weight",
     1},
    {"olmo2_postnorm_projnorm_linear",
     "{\"model_type\": \"olmo2\", \"vocab_size\": 45, \"hidden_size\": 32, "
     "\"intermediate_size\": 36, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
     "\"num_key_value_heads\": 2, \"max_position_embeddings\": 64, \"rms_norm_eps\": 1e-6, "
     "\"rope_theta\": 10000.0, \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2.0}, "
     "\"attention_bias\": false, \"tie_word_embeddings\": false}",
     "self_attn.q_proj.weight self_attn.k_proj.weight self_attn.v_proj.weight "
     "self_attn.o_proj.weight self_attn.q_norm.weight self_attn.k_norm.weight "
     "mlp.gate_proj.weight mlp.up_proj.weight mlp.down_proj.weight "
     "post_attention_layernorm.weight post_feedforward_layernorm.weight",
     0},
    {"granite_multipliers_dynamic",
     "{\"model_type\": \"granite\", \"vocab_size\": 33, \"hidden_size\": 32, "
     "\"intermediate_size\": 40, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
     "\"num_key_value_heads\": 4, \"max_position_embeddings\": 16, \"rms_norm_eps\": 1e-6, "
     "\"rope_theta\": 10000.0, \"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 2.0}, "
     "\"embedding_multiplier\": 3.0, \"residual_multiplier\": 0.5, "
     "\"attention_multiplier\": 0.2, \"logits_scaling\": 4.0, \"attention_bias\": true, "
     "\"mlp_bias\": true, \"tie_word_embeddings\": true}",
     "self_attn.q_proj.weight self_attn.q_proj.bias self_attn.k_proj.weight self_attn.k_proj.bias "
     "self_attn.v_proj.weight self_attn.v_proj.bias self_attn.o_proj.weight self_attn.o_proj.bias "
     "mlp.gate_proj.weight mlp.gate_proj.bias mlp.up_proj.weight mlp.up_proj.bias "
     "mlp.down_proj.weight mlp.down_proj.bias input_layernorm.weight "
     "post_attention_layernorm.weight",
     0},
    {"gemma2_softcaps_window_tied_hd16",
     "{\"model_type\": \"gemma2\", \"vocab_size\": 37, \"hidden_size\": 32, "
     "\"intermediate_size\": 40, \"num_hidden_layers\": 3, \"num_attention_heads\": 4, "
     "\"num_key_value_heads\": 2, \"head_dim\": 16, \"max_position_embeddings\": 64, "
     "\"rms_norm_eps\": 1e-6, \"rope_theta\": 10000.0, \"hidden_act\": \"gelu_pytorch_tanh\", "
     "\"hidden_activation\": \"gelu_pytorch_tanh\", \"query_pre_attn_scalar\": 8, "
     "\"attn_logit_softcapping\": 0.5, \"final_logit_softcapping\": 1.5, "
     "\"sliding_window\": 3, \"tie_word_embeddings\": true}",
     "self_attn.q_proj.weight self_attn.k_proj.weight self_attn.v_proj.weight "
     "self_attn.o_proj.weight mlp.gate_proj.weight mlp.up_proj.weight mlp.down_proj.weight "
     "input_layernorm.weight post_attention_layernorm.weight pre_feedforward_layernorm.weight "
     "post_feedforward_layernorm.weight",
     0},
    {"gemma2_nocaps_layer_types_bias_docs",
     "{\"model_type\": \"gemma2\", \"vocab_size\": 41, \"hidden_size\": 24, "
     "\"intermediate_size\": 36, \"num_hidden_layers\": 2, \"num_attention_heads\": 2, "
     "\"num_key_value_heads\": 1, \"head_dim\": 16, \"max_position_embeddings\": 64, "
     "\"rms_norm_eps\": 1e-6, \"rope_parameters\": {\"rope_type\": \"default\", "
     "\"rope_theta\": 10000.0}, \"query_pre_attn_scalar\": 16, "
     "\"attn_logit_softcapping\": null, \"final_logit_softcapping\": null, "
     "\"attention_bias\": true, \"sliding_window\": 4, "
     "\"layer_types\": [\"full_attention\", \"sliding_attention\"], "
     "\"tie_word_embeddings\": false}",
     "self_attn.q_proj.weight self_attn.q_proj.bias self_attn.k_proj.weight self_attn.k_proj.bias "
     "self_attn.v_proj.weight self_attn.v_proj.bias self_attn.o_proj.weight self_attn.o_proj.bias "
     "mlp.gate_proj.weight mlp.up_proj.weight mlp.down_proj.weight input_layernorm.weight "
     "post_attention_layernorm.weight pre_feedforward_layernorm.weight "
     "post_feedforward_layernorm.weight",
     1},
    {"gemma3_legacy_rope_linear_pattern2_tied",
     "{\"model_type\": \"gemma3_text\", \"vocab_size\": 37, \"hidden_size\": 32, "
     "\"intermediate_size\": 40, \"num_hidden_layers\": 4, \"num_attention_heads\": 4, "
     "\"num_key_value_heads\": 2, \"head_dim\": 16, \"max_position_embeddings\": 64, "
     "\"rms_norm_eps\": 1e-6, \"rope_theta\": 10000.0, \"rope_scaling\": {\"rope_type\": "
     "\"linear\", \"factor\": 4.0}, \"rope_local_base_freq\": 100.0, "
     "\"hidden_activation\": \"gelu_pytorch_tanh\", \"query_pre_attn_scalar\": 16, "
     "\"sliding_window\": 3, \"sliding_window_pattern\": 2, \"tie_word_embeddings\": true}",
     GEMMA3_LEAVES, 0},
    {"gemma3_v5_rope_parameters_caps_bias_mqa_docs",
     "{\"model_type\": \"gemma3_text\", \"vocab_size\": 41, \"hidden_size\": 24, "
     "\"intermediate_size\": 36, \"num_hidden_layers\": 3, \"num_attention_heads\": 2, "
     "\"num_key_value_heads\": 1, \"head_dim\": 8, \"max_position_embeddings\": 64, "
     "\"rms_norm_eps\": 1e-6, \"rope_parameters\": {\"full_attention\": {\"rope_type\": "
     "\"linear\", \"factor\": 2.0, \"rope_theta\": 500.0}, \"sliding_attention\": "
     "{\"rope_type\": \"default\", \"rope_theta\": 50.0}}, \"query_pre_attn_scalar\": 8, "
     "\"attn_logit_softcapping\": 2.0, \"final_logit_softcapping\": 3.0, "
     "\"attention_bias\": true, \"sliding_window\": 4, "
     "\"layer_types\": [\"sliding_attention\", \"full_attention\", \"sliding_attention\"], "
     "\"tie_word_embeddings\": false}",
     "self_attn.q_proj.weight self_attn.q_proj.bias self_attn.k_proj.weight self_attn.k_proj.bias "
     "self_attn.v_proj.weight self_attn.v_proj.bias self_attn.o_proj.weight self_attn.o_proj.bias "
     "self_attn.q_norm.weight self_attn.k_norm.weight mlp.gate_proj.weight mlp.up_proj.weight "
     "mlp.down_proj.weight input_layernorm.weight post_attention_layernorm.weight "
     "pre_feedforward_layernorm.weight post_feedforward_layernorm.weight",
     1},
    {"gemma3_wide_heads_caps",
     "{\"model_type\": \"gemma3_text\", \"vocab_size\": 43, \"hidden_size\": 16, "
     "\"intermediate_size\": 24, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
     "\"num_key_value_heads\": 1, \"head_dim\": 64, \"max_position_embeddings\": 64, "
     "\"rms_norm_eps\": 1e-6, \"query_pre_attn_scalar\": 16, "
     "\"attn_logit_softcapping\": 2.0, \"final_logit_softcapping\": 3.0, "
     "\"sliding_window\": 4, \"layer_types\": [\"full_attention\", \"sliding_attention\"], "
     "\"tie_word_embeddings\": false}",
     GEMMA3_LEAVES, 0},
    {"gemma3_no_window_default_theta",
     "{\"model_type\": \"gemma3_text\", \"vocab_size\": 33, \"hidden_size\": 16, "
     "\"intermediate_size\": 24, \"num_hidden_layers\": 2, \"num_attention_heads\": 2, "
     "\"num_key_value_heads\": 2, \"head_dim\": 8, \"max_position_embeddings\": 32, "
     "\"rms_norm_eps\": 1e-6, \"rope_local_base_freq\": 20.0, \"sliding_window\": null, "
     "\"tie_word_embeddings\": true}",
     GEMMA3_LEAVES, 0},
};
enum { N_CASES = sizeof cases / sizeof cases[0] };

typedef struct run {
  fsdpc_config *cfg;
  fsdpc_run_plan *plan;
  fsdpc_dist dist;
  fsdpc_engine *eng;
  fsdpc_model_ctx *m;
} run;

static void ok(fsdpc_status st, const fsdpc_err *err) {
  ck_assert_msg(st == FSDPC_OK, "%s", err->msg);
}

static float *master_of(fsdpc_engine *e, int p, float **grad) {
  uint64_t off;
  int u;
  fsdpc__engine_param(e, p, &off, &u);
  const fsdpc_unit *un = fsdpc__engine_unit(e, u);
  if (grad)
    *grad = un->grad ? un->grad + off : NULL;
  return un->master + off;
}

/* A plan, engine and model context for config.json in dir. */
static void run_open(run *r, const char *dir, int ckpt) {
  memset(r, 0, sizeof *r);
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "model: {config: %s, init: {std: 0.15}}\n"
           "data: {seq_len: %d}\n"
           "attention: {impl: naive}\n"
           "train: {micro_batch_size: %d, seed: 3}\n"
           "fsdp: {activation_checkpointing: %s}\n",
           dir, T, B, ckpt ? "true" : "false");
  fsdpc_err err;
  ok(fsdpc__config_from_string(yaml, "families.yaml", NULL, 0, &r->cfg, &err), &err);
  fsdpc_run_world w = {1, 1};
  ok(fsdpc__run_plan_create(r->cfg, &w, 0, &r->plan, &err), &err);
  fsdpc__dist_single(&r->dist);
  const fsdpc_run_plan *p = r->plan;
  fsdpc_engine_env env = {.dist = &r->dist, .threads = 1};
  ok(fsdpc__engine_create(p, &env, &r->eng, &err), &err);
  ok(fsdpc__engine_init_random(r->eng, 5, 0.15, &err), &err);
  /* norms away from 1, so that a norm weight read from the wrong tensor
   * shows */
  for (int q = 0; q < p->n_params; q++) {
    if (p->params[q].ndim != 1)
      continue;
    float *nw = master_of(r->eng, q, NULL);
    for (uint64_t i = 0; i < p->params[q].numel; i++)
      nw[i] += 0.2f * sinf((float)(3 * i + 7 * q));
  }
  fsdpc_model_ctx_opts mo = {.shape = &p->shape,
                             .B = B,
                             .T = T,
                             .activation_checkpointing = ckpt ? FSDPC_AC_FULL : 0,
                             .attention = p->attn,
                             .attention_opts = r->cfg->attention.options};
  ok(fsdpc__model_ctx_create(&mo, &r->m, &err), &err);
}

static void run_close(run *r) {
  fsdpc__model_ctx_destroy(r->m);
  fsdpc__engine_destroy(r->eng);
  fsdpc__run_plan_destroy(r->plan);
  fsdpc__config_destroy(r->cfg);
}

/* The weights as doubles by name, for the reference. */
typedef struct wmap {
  int n;
  const char **names;
  double **vals;
  uint64_t *numel;
} wmap;

static const double *wmap_get(void *ctx, const char *name, uint64_t n) {
  wmap *m = ctx;
  for (int i = 0; i < m->n; i++)
    if (strcmp(m->names[i], name) == 0) {
      ck_assert_msg(m->numel[i] == n, "%s: %llu elements, the reference reads %llu", name,
                    (unsigned long long)m->numel[i], (unsigned long long)n);
      return m->vals[i];
    }
  ck_abort_msg("the reference reads '%s', which fsdpc does not have", name);
  return NULL;
}

static void wmap_fill(wmap *m, run *r) {
  const fsdpc_run_plan *p = r->plan;
  m->n = p->n_params;
  m->names = calloc((size_t)m->n, sizeof *m->names);
  m->vals = calloc((size_t)m->n, sizeof *m->vals);
  m->numel = calloc((size_t)m->n, sizeof *m->numel);
  for (int q = 0; q < m->n; q++) {
    const float *w = master_of(r->eng, q, NULL);
    m->names[q] = p->params[q].name;
    m->numel[q] = p->params[q].numel;
    m->vals[q] = malloc(m->numel[q] * sizeof(double));
    for (uint64_t i = 0; i < m->numel[q]; i++)
      m->vals[q][i] = w[i];
  }
}

static void wmap_free(wmap *m) {
  for (int q = 0; q < m->n; q++)
    free(m->vals[q]);
  free(m->names);
  free(m->vals);
  free(m->numel);
}

static void batch(int32_t *ids, int32_t *labels, int32_t *doc, int V, int docs) {
  for (int i = 0; i < B * T; i++) {
    ids[i] = (int32_t)((i * 7 + 3 + i / T) % V);
    labels[i] = i % T == T - 1 || i == 4 ? -100 : (int32_t)((i * 11 + 1) % V);
    doc[i] = docs ? (i % T < 5 ? 0 : 1) + 2 * (i / T) : 0;
  }
}

static void check_names(const run *r, const family_case *fc) {
  char want[1024], got[2048] = "";
  snprintf(want, sizeof want, "%s", fc->leaves);
  for (int q = 0; q < r->plan->n_params; q++) {
    const char *n = r->plan->params[q].name;
    if (strncmp(n, "model.layers.0.", 15) == 0)
      snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", got[0] ? " " : "", n + 15);
  }
  ck_assert_msg(strcmp(got, want) == 0, "%s: layer 0 has\n  %s\nwant\n  %s", fc->name, got, want);
}

static void check_case(const family_case *fc) {
  char dir[] = "/tmp/fsdpc_families_XXXXXX", path[256];
  ck_assert(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *f = fopen(path, "w");
  ck_assert(f != NULL);
  fputs(fc->json, f);
  fclose(f);
  cJSON *cj = cJSON_Parse(fc->json);
  ck_assert_msg(cj != NULL, "%s: bad JSON", fc->name);
  const char *why = NULL;
  ref_model *ref = ref_create(cj, &why);
  ck_assert_msg(ref != NULL, "%s: reference: %s", fc->name, why ? why : "?");

  run r, rc;
  run_open(&r, dir, 0);
  check_names(&r, fc);
  const fsdpc_model_shape *s = &r.plan->shape;
  for (int l = 0; l < s->L; l++)
    ck_assert_msg(fsdpc__layer_window(s, l) == ref_layer_window(ref, l),
                  "%s: layer %d window %d, transformers %d", fc->name, l, fsdpc__layer_window(s, l),
                  ref_layer_window(ref, l));
  int V = ref_vocab(ref);
  int32_t ids[B * T], labels[B * T], doc[B * T];
  batch(ids, labels, doc, V, fc->docs);
  const int32_t *docp = fc->docs ? doc : NULL;
  fsdpc_err err;
  ok(fsdpc__model_set_batch(r.m, ids, labels, docp, &err), &err);
  wmap wm;
  wmap_fill(&wm, &r);
  double *rl = malloc((size_t)B * T * V * sizeof(double));
  double ref_loss = ref_forward(ref, wmap_get, &wm, ids, labels, docp, B, T, rl);

  /* logits at every position, relative to the largest */
  float *lg = malloc((size_t)B * V * sizeof(float));
  double mx = 0.0, worst = 0.0;
  for (int i = 0; i < B * T * V; i++)
    mx = fmax(mx, fabs(rl[i]));
  for (int t = 0; t < T; t++) {
    ok(fsdpc__engine_logits_at(r.eng, r.m, t, lg, &err), &err);
    for (int b = 0; b < B; b++)
      for (int v = 0; v < V; v++)
        worst = fmax(worst, fabs(lg[b * V + v] - rl[((size_t)b * T + t) * V + v]));
  }
  ck_assert_msg(worst <= 1e-5 * mx, "%s: logits differ by %.3g (largest %.3g)", fc->name, worst,
                mx);

  /* the loss and the gradients */
  double ls;
  int64_t cnt;
  ok(fsdpc__model_set_batch(r.m, ids, labels, docp, &err), &err);
  ok(fsdpc__engine_eval(r.eng, r.m, &ls, &cnt, &err), &err);
  ck_assert_msg(fabs(ls / cnt - ref_loss) <= 1e-5 * fabs(ref_loss), "%s: loss %.9g, reference %.9g",
                fc->name, ls / cnt, ref_loss);
  ok(fsdpc__engine_micro_step(r.eng, r.m, (float)(1.0 / (double)cnt), 1, &ls, &cnt, &err), &err);
  for (int q = 0; q < r.plan->n_params; q++) {
    float *g;
    master_of(r.eng, q, &g);
    ck_assert(g != NULL);
    uint64_t n = wm.numel[q];
    for (uint64_t k = 0; k < 4; k++) {
      uint64_t i = (k * 97 + (uint64_t)q * 13) % n;
      double keep = wm.vals[q][i], h = 1e-4;
      wm.vals[q][i] = keep + h;
      double lp = ref_forward(ref, wmap_get, &wm, ids, labels, docp, B, T, NULL);
      wm.vals[q][i] = keep - h;
      double lm = ref_forward(ref, wmap_get, &wm, ids, labels, docp, B, T, NULL);
      wm.vals[q][i] = keep;
      double fd = (lp - lm) / (2 * h);
      ck_assert_msg(fabs(g[i] - fd) <= 3e-5 + 2e-3 * fabs(fd),
                    "%s: d/d %s[%llu]: fsdpc %.8g, transformers' math %.8g", fc->name, wm.names[q],
                    (unsigned long long)i, (double)g[i], fd);
    }
  }

  /* activation checkpointing: the same loss and gradients, bit for bit */
  run_open(&rc, dir, 1);
  double ls2;
  int64_t cnt2;
  ok(fsdpc__model_set_batch(rc.m, ids, labels, docp, &err), &err);
  ok(fsdpc__engine_micro_step(rc.eng, rc.m, (float)(1.0 / (double)cnt), 1, &ls2, &cnt2, &err),
     &err);
  ck_assert_msg(ls2 == ls, "%s: checkpointed loss %.17g != %.17g", fc->name, ls2, ls);
  for (int q = 0; q < r.plan->n_params; q++) {
    float *g1, *g2;
    master_of(r.eng, q, &g1);
    master_of(rc.eng, q, &g2);
    ck_assert_msg(memcmp(g1, g2, wm.numel[q] * sizeof(float)) == 0,
                  "%s: checkpointed gradient of %s differs", fc->name, wm.names[q]);
  }
  run_close(&rc);
  run_close(&r);
  wmap_free(&wm);
  free(rl);
  free(lg);
  ref_destroy(ref);
  cJSON_Delete(cj);
  unlink(path);
  rmdir(dir);
}

START_TEST(family_case_matches_transformers_math) {
  check_case(&cases[_i]);
}
END_TEST

int main(void) {
  Suite *s = suite_create("families");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, family_case_matches_transformers_math, 0, N_CASES);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int nf = srunner_ntests_failed(sr);
  srunner_free(sr);
  return nf == 0 ? 0 : 1;
}
