/* Issue 36: Gemma 3 text configs read as Gemma3TextConfig reads them, into
 * the model description's switches (config reader, rules, resolver):
 * - google/gemma-3-1b-it's config.json as the Hub holds it (transformers 4
 *   keys: rope_theta, rope_local_base_freq, sliding_window_pattern 6, null
 *   soft-capping): 5 sliding layers of window 512 with RoPE base 1e4 to 1
 *   full layer with 1e6, (1 + w) q/k norms per head, no soft-capping, and
 *   999,885,952 parameters (transformers' count of the 1B), the q/k norms
 *   counted and started at 0;
 * - a 4B-style text config as transformers 5 writes it (rope_parameters per
 *   layer type, linear scaling on the full layers only, layer_types listed);
 * - tie_word_embeddings and rope_theta left out: Gemma3TextConfig's true
 *   and 1e6; sliding_window null: no
 *   window, yet the local RoPE on the sliding_attention layers;
 * - refused in one line: another RoPE type on the sliding_attention layers,
 *   RoPE per layer type in another family, an activation other than
 *   gelu_pytorch_tanh. */
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_run.h"
#include "config/config.h"
#include "model/family.h"
#include "model/hf_rules.h"
#include "runplan/runplan.h"

/* google/gemma-3-1b-it config.json (the Hub's, trimmed of nothing fsdpc
 * reads) */
static const char *const hub_1b =
    "{\"architectures\": [\"Gemma3ForCausalLM\"], \"attention_bias\": false, "
    "\"attention_dropout\": 0.0, \"attn_logit_softcapping\": null, \"bos_token_id\": 2, "
    "\"cache_implementation\": \"hybrid\", \"eos_token_id\": [1, 106], "
    "\"final_logit_softcapping\": null, \"head_dim\": 256, \"hidden_activation\": "
    "\"gelu_pytorch_tanh\", \"hidden_size\": 1152, \"initializer_range\": 0.02, "
    "\"intermediate_size\": 6912, \"max_position_embeddings\": 32768, \"model_type\": "
    "\"gemma3_text\", \"num_attention_heads\": 4, \"num_hidden_layers\": 26, "
    "\"num_key_value_heads\": 1, \"pad_token_id\": 0, \"query_pre_attn_scalar\": 256, "
    "\"rms_norm_eps\": 1e-06, \"rope_local_base_freq\": 10000, \"rope_scaling\": null, "
    "\"rope_theta\": 1000000, \"sliding_window\": 512, \"sliding_window_pattern\": 6, "
    "\"torch_dtype\": \"bfloat16\", \"use_cache\": true, \"vocab_size\": 262144}";

/* A 4B-style text decoder as transformers 5 writes it */
static const char *const v5_4b =
    "{\"model_type\": \"gemma3_text\", \"vocab_size\": 1000, \"hidden_size\": 64, "
    "\"intermediate_size\": 96, \"num_hidden_layers\": 6, \"num_attention_heads\": 4, "
    "\"num_key_value_heads\": 2, \"head_dim\": 32, \"max_position_embeddings\": 4096, "
    "\"rms_norm_eps\": 1e-06, \"query_pre_attn_scalar\": 32, \"sliding_window\": 1024, "
    "\"rope_parameters\": {\"full_attention\": {\"rope_type\": \"linear\", \"factor\": 8.0, "
    "\"rope_theta\": 1000000.0}, \"sliding_attention\": {\"rope_type\": \"default\", "
    "\"rope_theta\": 10000.0}}, \"layer_types\": [\"sliding_attention\", \"sliding_attention\", "
    "\"full_attention\", \"sliding_attention\", \"sliding_attention\", \"full_attention\"], "
    "\"tie_word_embeddings\": true}";

/* Gemma3TextConfig's defaults: rope_theta, sliding_window null */
static const char *const defaults =
    "{\"model_type\": \"gemma3_text\", \"vocab_size\": 100, \"hidden_size\": 32, "
    "\"intermediate_size\": 48, \"num_hidden_layers\": 7, \"num_attention_heads\": 2, "
    "\"head_dim\": 16, \"max_position_embeddings\": 64, \"sliding_window\": null}";

typedef struct loaded {
  char dir[64];
  fsdpc_config *cfg;
  fsdpc_model_shape sh;
  cJSON *json;
} loaded;

static void write_config(loaded *l, const char *json) {
  snprintf(l->dir, sizeof l->dir, "/tmp/fsdpc_gemma3_XXXXXX");
  ck_assert(mkdtemp(l->dir) != NULL);
  char path[128];
  snprintf(path, sizeof path, "%s/config.json", l->dir);
  FILE *f = fopen(path, "w");
  ck_assert(f != NULL);
  fputs(json, f);
  fclose(f);
  l->json = cJSON_Parse(json);
  ck_assert(l->json != NULL);
}

static void cleanup(loaded *l) {
  char path[128];
  snprintf(path, sizeof path, "%s/config.json", l->dir);
  unlink(path);
  rmdir(l->dir);
  cJSON_Delete(l->json);
  fsdpc__config_destroy(l->cfg);
}

/* Loads config.json as model.config; the rules pass and the shape is made. */
static void load(loaded *l, const char *json) {
  write_config(l, json);
  char yaml[256];
  snprintf(yaml, sizeof yaml, "model: {config: %s}\n", l->dir);
  fsdpc_err err = {0};
  fsdpc_status st = fsdpc__config_from_string(yaml, "g3.yaml", NULL, 0, &l->cfg, &err);
  ck_assert_msg(st == FSDPC_OK, "load: %s", err.msg);
  st = fsdpc__hf_rules_config(l->json, "config.json", 0, &err);
  ck_assert_msg(st == FSDPC_OK, "rules: %s", err.msg);
  fsdpc__run_shape_from_config(l->cfg, &l->sh);
}

/* Each layer's window and RoPE: full_attention where full(layer). */
static void check_layers(const fsdpc_model_shape *s, int (*full)(int), int window) {
  for (int layer = 0; layer < s->L; layer++) {
    int f = full(layer);
    ck_assert_msg(fsdpc__layer_window(s, layer) == (f ? 0 : window), "layer %d window", layer);
    ck_assert_msg(fsdpc__layer_rope(s, layer) == (f ? &s->rope : &s->rope_local), "layer %d RoPE",
                  layer);
  }
}
static int every_sixth(int layer) { /* 5 local : 1 global */
  return (layer + 1) % 6 == 0;
}
static int listed_full(int layer) { /* v5_4b's layer_types */
  return layer == 2 || layer == 5;
}

/* The full layers' RoPE (type, factor, theta), the local one plain of base
 * 1e4 over as many dims, and tied embeddings (all three configs'). */
static void check_ropes(const fsdpc_model_shape *s, int type, double factor, double theta) {
  ck_assert_int_eq(s->rope.type, type);
  ck_assert(s->rope.theta == theta && (type == FSDPC_ROPE_DEFAULT || s->rope.factor == factor));
  ck_assert(s->rope_local.type == FSDPC_ROPE_DEFAULT && s->rope_local.theta == 1e4);
  ck_assert_int_eq(s->rope_local.dim, s->rope.dim);
  ck_assert(s->tied);
}

START_TEST(hub_1b_legacy_keys) {
  loaded l;
  load(&l, hub_1b);
  const fsdpc_model_shape *s = &l.sh;
  ck_assert_int_eq(s->family, FSDPC_FAMILY_GEMMA3);
  ck_assert_int_eq(s->qk_norm, FSDPC_QK_NORM_HEAD);
  ck_assert(s->norm_pre && s->norm_post);
  ck_assert(s->norm_offset == 1.0f);
  ck_assert_int_eq(s->act, FSDPC_ACT_GELU_TANH);
  ck_assert(s->embed_mult == (float)sqrt(1152.0));
  ck_assert(s->attn_scale == 1.0f / 16.0f);
  ck_assert(s->attn_softcap == 0.0f && s->logit_softcap == 0.0f);
  check_ropes(s, FSDPC_ROPE_DEFAULT, 0, 1e6); /* tied: the Hub's config leaves it out */
  ck_assert_int_eq(s->rope.dim, 256);
  ck_assert_int_eq(s->eos_id, 1);
  check_layers(s, every_sixth, 512);
  /* the planner's parameter list: transformers' count, q/k norms included */
  ck_assert_uint_eq(fsdpc__model_numel(s), 999885952ull);
  fsdpc_param_info *p = NULL;
  int n = 0;
  fsdpc_err err = {0};
  ck_assert(fsdpc__model_params(s, &p, &n, &err) == FSDPC_OK);
  int qk = 0;
  for (int i = 0; i < n; i++)
    if (strstr(p[i].name, "self_attn.q_norm.weight") ||
        strstr(p[i].name, "self_attn.k_norm.weight")) {
      ck_assert_int_eq(p[i].numel, 256);
      ck_assert_msg(p[i].init_zero && !p[i].decay, "%s: starts at 0, no decay", p[i].name);
      qk++;
    }
  ck_assert_int_eq(qk, 2 * 26);
  free(p);
  cleanup(&l);
}
END_TEST

/* transformers 5's rope_parameters per layer type; then Gemma3TextConfig's
 * defaults with a null window */
START_TEST(rope_per_layer_type_and_defaults) {
  loaded v5, d;
  load(&v5, v5_4b);
  check_ropes(&v5.sh, FSDPC_ROPE_LINEAR, 8.0, 1e6);
  check_layers(&v5.sh, listed_full, 1024);
  cleanup(&v5);
  load(&d, defaults);
  check_ropes(&d.sh, FSDPC_ROPE_DEFAULT, 0, 1e6);
  ck_assert(d.sh.attn_scale == 1.0f / 16.0f); /* query_pre_attn_scalar 256 */
  ck_assert(d.sh.attn_softcap == 0.0f && d.sh.logit_softcap == 0.0f);
  check_layers(&d.sh, every_sixth, 0); /* no window: the local RoPE alone */
  cleanup(&d);
}
END_TEST

/* config.json edited by replacing from with to must be refused in one line
 * naming want (by the rules, else by the config load). */
static void refused(const char *json, const char *from, const char *to, const char *want) {
  char edited[4096];
  const char *at = strstr(json, from);
  ck_assert_msg(at != NULL, "'%s' not in the config", from);
  snprintf(edited, sizeof edited, "%.*s%s%s", (int)(at - json), json, to, at + strlen(from));
  loaded l = {0};
  write_config(&l, edited);
  fsdpc_err err = {0};
  fsdpc_status st = fsdpc__hf_rules_config(l.json, "config.json", 0, &err);
  if (st == FSDPC_OK) {
    char yaml[256];
    snprintf(yaml, sizeof yaml, "model: {config: %s}\n", l.dir);
    st = fsdpc__config_from_string(yaml, "g3.yaml", NULL, 0, &l.cfg, &err);
  }
  ck_assert_msg(st != FSDPC_OK, "'%s' was accepted", to);
  ck_assert_msg(strstr(err.msg, want) && !strchr(err.msg, '\n'), "got '%s', want '%s'", err.msg,
                want);
  cleanup(&l);
}

START_TEST(refusals) {
  refused(v5_4b, "\"sliding_attention\": {\"rope_type\": \"default\"",
          "\"sliding_attention\": {\"rope_type\": \"linear\", \"factor\": 2.0",
          "rope_parameters.sliding_attention has rope_type 'linear'");
  refused(v5_4b, "\"gemma3_text\"", "\"qwen3\"", "sets RoPE per layer type");
  refused(hub_1b, "\"hidden_activation\": \"gelu_pytorch_tanh\"", "\"hidden_activation\": \"gelu\"",
          "gelu_pytorch_tanh only");
}
END_TEST

int main(void) {
  Suite *s = suite_create("gemma3_config");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, hub_1b_legacy_keys);
  tcase_add_test(tc, rope_per_layer_type_and_defaults);
  tcase_add_test(tc, refusals);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
