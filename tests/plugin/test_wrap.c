/* Wrap plugins (transformer, size) on a Llama-like parameter list, tied and
 * untied, loaded through the registry and configured through options. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "config/opts.h"
#include "plugin/registry.h"

/* A tiny Llama: V=1000, C=64, I=128, L=4. A decoder layer holds 36992
 * parameters; embedding and lm_head 64000 each. */
enum { V = 1000, C = 64, I = 128, L = 4, PER_LAYER = 9 };
enum { N_PARAMS = 1 + L * PER_LAYER + 2 };
#define LAYER_NUMEL 36992u

static char names[N_PARAMS][96], modules[N_PARAMS][64];
static fsdpc_wrap_param params[N_PARAMS];

static void add(int *n, const char *name, const char *module, const char *type, uint64_t numel,
                int layer, int tie) {
  snprintf(names[*n], sizeof names[*n], "%s", name);
  snprintf(modules[*n], sizeof modules[*n], "%s", module);
  params[*n] = (fsdpc_wrap_param){.struct_size = sizeof(fsdpc_wrap_param),
                                  .name = names[*n],
                                  .module = modules[*n],
                                  .module_type = type,
                                  .numel = numel,
                                  .layer = layer,
                                  .tie_group = tie};
  (*n)++;
}

static void build_llama(int tied) {
  static const struct {
    const char *name;
    uint64_t numel;
  } layer[PER_LAYER] = {
      {"input_layernorm.weight", C},          {"self_attn.q_proj.weight", C * C},
      {"self_attn.k_proj.weight", C * C / 2}, {"self_attn.v_proj.weight", C * C / 2},
      {"self_attn.o_proj.weight", C * C},     {"post_attention_layernorm.weight", C},
      {"mlp.gate_proj.weight", C * I},        {"mlp.up_proj.weight", C * I},
      {"mlp.down_proj.weight", I * C},
  };
  int n = 0;
  add(&n, "model.embed_tokens.weight", "model.embed_tokens", "embedding", V * C, -1, tied ? 0 : -1);
  for (int l = 0; l < L; l++) {
    char mod[64], name[96];
    snprintf(mod, sizeof mod, "model.layers.%d", l);
    for (int k = 0; k < PER_LAYER; k++) {
      snprintf(name, sizeof name, "%s.%s", mod, layer[k].name);
      add(&n, name, mod, "decoder_layer", layer[k].numel, l, -1);
    }
  }
  add(&n, "model.norm.weight", "model.norm", "norm", C, -1, -1);
  add(&n, "lm_head.weight", "lm_head", "lm_head", V * C, -1, tied ? 0 : -1);
  ck_assert_int_eq(n, N_PARAMS);
}

static fsdpc_registry *g_reg;

static const fsdpc_component *wrap(const char *name) {
  const fsdpc_component *c;
  fsdpc_err err;
  ck_assert_msg(fsdpc__registry_select(g_reg, FSDPC_KIND_WRAP, name, NULL, &c, &err) == FSDPC_OK,
                "%s", err.msg);
  return c;
}

/* Runs c's plan with options given as "key=value" pairs. */
static uint32_t plan(const fsdpc_component *c, const char *const *kv, int n_kv, uint32_t *unit) {
  fsdpc_opts *opts;
  fsdpc_err err;
  ck_assert_int_eq(fsdpc__opts_create("wrap.options", &opts, &err), FSDPC_OK);
  for (int i = 0; i < n_kv; i++) {
    char key[64];
    const char *eq = strchr(kv[i], '=');
    snprintf(key, sizeof key, "%.*s", (int)(eq - kv[i]), kv[i]);
    ck_assert_int_eq(fsdpc__opts_add(opts, key, eq + 1, "test.yaml", 1, 1, &err), FSDPC_OK);
  }
  ck_assert_msg(fsdpc__opts_validate(opts, c->desc->options, c->desc->n_options, "wrap", &err) ==
                    FSDPC_OK,
                "%s", err.msg);
  uint32_t n_units = 12345;
  int32_t st = ((const fsdpc_wrap_v1 *)c->vtable)->plan(opts, params, N_PARAMS, unit, &n_units);
  if (st != FSDPC_OK)
    fsdpc__plugin_fail(c, st, &err);
  ck_assert_msg(st == FSDPC_OK, "%s", err.msg);
  fsdpc__opts_destroy(opts);

  /* Invariants of every plan: numbered by first appearance, tied together. */
  uint32_t seen = 0;
  for (int i = 0; i < N_PARAMS; i++) {
    ck_assert_uint_lt(unit[i], n_units);
    ck_assert_uint_le(unit[i], seen);
    if (unit[i] == seen)
      seen++;
    for (int j = 0; j < i; j++)
      if (params[i].tie_group >= 0 && params[i].tie_group == params[j].tie_group)
        ck_assert_uint_eq(unit[i], unit[j]);
  }
  ck_assert_uint_eq(seen, n_units);
  return n_units;
}

/* Indices into params. */
#define EMB 0
#define LAYER0(l) (1 + (l)*PER_LAYER)
#define NORM (1 + L * PER_LAYER)
#define HEAD (NORM + 1)

static void assert_layers(const uint32_t *unit, uint32_t first) {
  for (int l = 0; l < L; l++)
    for (int k = 0; k < PER_LAYER; k++)
      ck_assert_uint_eq(unit[LAYER0(l) + k], first + l);
}

START_TEST(transformer_default_root_unit) {
  uint32_t unit[N_PARAMS];
  for (int tied = 0; tied <= 1; tied++) {
    build_llama(tied);
    ck_assert_uint_eq(plan(wrap("transformer"), NULL, 0, unit), 1 + L);
    ck_assert_uint_eq(unit[EMB], 0); /* root: embedding, norm, lm_head */
    assert_layers(unit, 1);
    ck_assert_uint_eq(unit[NORM], 0);
    ck_assert_uint_eq(unit[HEAD], 0);
  }
}
END_TEST

START_TEST(transformer_separate_untied) {
  uint32_t unit[N_PARAMS];
  build_llama(0);
  const char *both[] = {"separate_embedding=true", "separate_lm_head=true"};
  ck_assert_uint_eq(plan(wrap("transformer"), both, 2, unit), 1 + L + 2);
  ck_assert_uint_eq(unit[EMB], 0);
  assert_layers(unit, 1);
  ck_assert_uint_eq(unit[NORM], L + 1); /* root now holds only the norm */
  ck_assert_uint_eq(unit[HEAD], L + 2);

  const char *emb_only[] = {"separate_embedding=true"};
  ck_assert_uint_eq(plan(wrap("transformer"), emb_only, 1, unit), 1 + L + 1);
  ck_assert_uint_eq(unit[EMB], 0);
  ck_assert_uint_eq(unit[NORM], L + 1);
  ck_assert_uint_eq(unit[HEAD], L + 1);

  const char *head_only[] = {"separate_lm_head=yes"};
  ck_assert_uint_eq(plan(wrap("transformer"), head_only, 1, unit), 1 + L + 1);
  ck_assert_uint_eq(unit[EMB], 0); /* root */
  ck_assert_uint_eq(unit[NORM], 0);
  ck_assert_uint_eq(unit[HEAD], L + 1);
}
END_TEST

START_TEST(transformer_separate_tied_stay_together) {
  uint32_t unit[N_PARAMS];
  build_llama(1);
  const char *both[] = {"separate_embedding=true", "separate_lm_head=true"};
  ck_assert_uint_eq(plan(wrap("transformer"), both, 2, unit), 1 + L + 1);
  ck_assert_uint_eq(unit[EMB], 0);
  ck_assert_uint_eq(unit[HEAD], 0); /* tied: shares the embedding's unit */
  assert_layers(unit, 1);
  ck_assert_uint_eq(unit[NORM], L + 1);

  const char *head_only[] = {"separate_lm_head=true"};
  ck_assert_uint_eq(plan(wrap("transformer"), head_only, 1, unit), 1 + L);
  ck_assert_uint_eq(unit[HEAD], unit[EMB]);
}
END_TEST

START_TEST(size_two_thresholds_untied) {
  uint32_t unit[N_PARAMS];
  build_llama(0);
  /* 70000: more than one layer, less than two. */
  const char *big[] = {"min_num_params=70000"};
  ck_assert_uint_eq(plan(wrap("size"), big, 1, unit), 3);
  ck_assert_uint_eq(unit[EMB], 0);       /* 64000, still open ... */
  ck_assert_uint_eq(unit[LAYER0(0)], 0); /* ... closed by layer 0 */
  ck_assert_uint_eq(unit[LAYER0(1)], 1);
  ck_assert_uint_eq(unit[LAYER0(2) + 8], 1);
  ck_assert_uint_eq(unit[LAYER0(3)], 2);
  ck_assert_uint_eq(unit[NORM], 2);
  ck_assert_uint_eq(unit[HEAD], 2);
  /* A layer is never split, whatever the threshold. */
  for (int l = 0; l < L; l++)
    for (int k = 1; k < PER_LAYER; k++)
      ck_assert_uint_eq(unit[LAYER0(l) + k], unit[LAYER0(l)]);

  /* 30000: every layer and the embedding close a unit on their own. */
  const char *small[] = {"min_num_params=30000"};
  ck_assert_uint_eq(plan(wrap("size"), small, 1, unit), 1 + L + 1);
  ck_assert_uint_eq(unit[EMB], 0);
  assert_layers(unit, 1);
  ck_assert_uint_eq(unit[NORM], L + 1);
  ck_assert_uint_eq(unit[HEAD], L + 1);

  /* Default 1e8: the whole tiny model is one unit. */
  ck_assert_uint_eq(plan(wrap("size"), NULL, 0, unit), 1);
}
END_TEST

START_TEST(size_tied_and_separate) {
  uint32_t unit[N_PARAMS];
  build_llama(1);
  const char *big[] = {"min_num_params=70000"};
  ck_assert_uint_eq(plan(wrap("size"), big, 1, unit), 3);
  ck_assert_uint_eq(unit[HEAD], 0); /* follows the embedding */
  ck_assert_uint_eq(unit[NORM], 2);
  const char *small[] = {"min_num_params=30000"};
  ck_assert_uint_eq(plan(wrap("size"), small, 1, unit), 1 + L + 1);
  ck_assert_uint_eq(unit[HEAD], 0);
  ck_assert_uint_eq(unit[NORM], L + 1);

  build_llama(0);
  const char *sep[] = {"min_num_params=30000", "separate_embedding=true", "separate_lm_head=true"};
  ck_assert_uint_eq(plan(wrap("size"), sep, 3, unit), 1 + L + 2);
  ck_assert_uint_eq(unit[EMB], 0);
  assert_layers(unit, 1);
  ck_assert_uint_eq(unit[NORM], L + 1);
  ck_assert_uint_eq(unit[HEAD], L + 2);
  /* Separated blocks do not count towards the running unit: with a large
   * threshold everything else is one unit between them. */
  const char *sep_big[] = {"min_num_params=100000000", "separate_embedding=true",
                           "separate_lm_head=true"};
  ck_assert_uint_eq(plan(wrap("size"), sep_big, 3, unit), 3);
  ck_assert_uint_eq(unit[LAYER0(0)], 1);
  ck_assert_uint_eq(unit[NORM], 1);
  ck_assert_uint_eq(unit[HEAD], 2);
}
END_TEST

START_TEST(bad_input_is_an_error) {
  const fsdpc_component *c = wrap("size");
  uint32_t n_units;
  fsdpc_err err;
  int32_t st = ((const fsdpc_wrap_v1 *)c->vtable)->plan(NULL, NULL, 3, NULL, &n_units);
  ck_assert_int_eq(st, FSDPC_INVALID_USAGE);
  fsdpc__plugin_fail(c, st, &err);
  ck_assert_str_eq(err.msg, "wrap 'size': wrap size: params, unit_of_param and n_units must be "
                            "non-NULL");
  c = wrap("transformer");
  build_llama(0);
  uint32_t unit[N_PARAMS];
  fsdpc_wrap_param broken = params[1];
  broken.struct_size = 8;
  st = ((const fsdpc_wrap_v1 *)c->vtable)->plan(NULL, &broken, 1, unit, &n_units);
  ck_assert_int_eq(st, FSDPC_INVALID_USAGE);
  /* Empty model: zero units, not an error. */
  ck_assert_int_eq(((const fsdpc_wrap_v1 *)c->vtable)->plan(NULL, params, 0, unit, &n_units),
                   FSDPC_OK);
  ck_assert_uint_eq(n_units, 0);
}
END_TEST

START_TEST(auto_prefers_transformer) {
  const fsdpc_component *c;
  fsdpc_err err;
  ck_assert_int_eq(fsdpc__registry_select(g_reg, FSDPC_KIND_WRAP, "auto", NULL, &c, &err),
                   FSDPC_OK);
  ck_assert_str_eq(c->desc->name, "transformer");
}
END_TEST

int main(void) {
  const char *dirs[] = {FSDPC_PLUGIN_DIR_FOR_TEST};
  fsdpc_err err;
  if (fsdpc__registry_create_ex(dirs, 1, FSDPC_REGISTRY_ONLY_GIVEN, &g_reg, &err) != FSDPC_OK) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  Suite *s = suite_create("plugin_wrap");
  TCase *tc = tcase_create("wrap");
  tcase_add_test(tc, transformer_default_root_unit);
  tcase_add_test(tc, transformer_separate_untied);
  tcase_add_test(tc, transformer_separate_tied_stay_together);
  tcase_add_test(tc, size_two_thresholds_untied);
  tcase_add_test(tc, size_tied_and_separate);
  tcase_add_test(tc, bad_input_is_an_error);
  tcase_add_test(tc, auto_prefers_transformer);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  fsdpc__registry_destroy(g_reg);
  return failed ? 1 : 0;
}
