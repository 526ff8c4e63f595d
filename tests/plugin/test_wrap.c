/* Wrap plugins (transformer, size) on a Llama-like parameter list, tied and
 * untied, loaded through the registry and configured through options; and
 * the plugin ABI 1.1 host context (bottom). */
#include <check.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/opts.h"
#include "plugin/call.h"
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
  int32_t st = fsdpc__call_wrap_plan(c, opts, params, N_PARAMS, unit, &n_units);
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
  int32_t st = fsdpc__call_wrap_plan(c, NULL, NULL, 3, NULL, &n_units);
  ck_assert_int_eq(st, FSDPC_INVALID_USAGE);
  fsdpc__plugin_fail(c, st, &err);
  ck_assert_str_eq(err.msg, "wrap 'size': wrap size: params, unit_of_param and n_units must be "
                            "non-NULL");
  c = wrap("transformer");
  build_llama(0);
  uint32_t unit[N_PARAMS];
  fsdpc_wrap_param broken = params[1];
  broken.struct_size = 8;
  st = fsdpc__call_wrap_plan(c, NULL, &broken, 1, unit, &n_units);
  ck_assert_int_eq(st, FSDPC_INVALID_USAGE);
  /* Empty model: zero units, not an error. */
  ck_assert_int_eq(fsdpc__call_wrap_plan(c, NULL, params, 0, unit, &n_units), FSDPC_OK);
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

/* ---------------------------------------------------------------------- */
/* Plugin ABI 1.1 ("No globals" in fsdpc/plugin.h): a plugin built the 1.0 */
/* way (global host pointer, 1.0-sized vtables, abi_minor 0) still loads   */
/* and works through the 1.1 host, and two hosts in one process (two       */
/* registries, as two embedded trainers would have) each get their own     */
/* plugin errors, also after the other is gone.                            */

static fsdpc_registry *open_dir(const char *dir) {
  fsdpc_registry *reg = NULL;
  fsdpc_err err;
  fsdpc__err_clear(&err);
  ck_assert_msg(fsdpc__registry_create_ex(&dir, 1, FSDPC_REGISTRY_ONLY_GIVEN, &reg, &err) ==
                    FSDPC_OK,
                "%s", err.msg);
  return reg;
}

static const fsdpc_component *pick(fsdpc_registry *reg, int32_t kind, const char *name) {
  const fsdpc_component *c = NULL;
  fsdpc_err err;
  fsdpc__err_clear(&err);
  ck_assert_msg(fsdpc__registry_select(reg, kind, name, NULL, &c, &err) == FSDPC_OK, "%s", err.msg);
  return c;
}

static fsdpc_opts *opts_with(const fsdpc_component *c, const char *key, const char *value) {
  fsdpc_opts *o = NULL;
  fsdpc_err err;
  ck_assert_int_eq(fsdpc__opts_create("fsdp.wrap.options", &o, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__opts_add(o, key, value, "test.yaml", 1, 1, &err), FSDPC_OK);
  ck_assert_msg(fsdpc__opts_validate(o, c->desc->options, c->desc->n_options, "wrap", &err) ==
                    FSDPC_OK,
                "%s", err.msg);
  return o;
}

static fsdpc_wrap_param five[5];

static void make_five(void) {
  for (int i = 0; i < 5; i++)
    five[i] = (fsdpc_wrap_param){.struct_size = sizeof five[i],
                                   .name = "p",
                                   .module = "m",
                                   .module_type = "decoder_layer",
                                   .numel = 10,
                                   .layer = i,
                                   .tie_group = -1};
}

START_TEST(legacy_wrap_plans_through_its_1_0_member) {
  fsdpc_registry *reg = open_dir(FSDPC_TEST_ABI10_DIR);
  const fsdpc_component *c = pick(reg, FSDPC_KIND_WRAP, "v10");
  ck_assert_uint_eq(c->abi_minor, 0);
  make_five();
  uint32_t unit[5], n_units = 0;
  fsdpc_opts *o = opts_with(c, "flag", "3");
  ck_assert_int_eq(fsdpc__call_wrap_plan(c, o, five, 5, unit, &n_units), FSDPC_OK);
  ck_assert_uint_eq(n_units, 2);
  ck_assert_uint_eq(unit[2], 0);
  ck_assert_uint_eq(unit[3], 1);
  fsdpc__opts_destroy(o);
  /* Its errors, through the host table it kept from the entry point. */
  o = opts_with(c, "flag", "0");
  int32_t st = fsdpc__call_wrap_plan(c, o, five, 5, unit, &n_units);
  ck_assert_int_eq(st, FSDPC_INVALID_USAGE);
  fsdpc_err err;
  fsdpc__plugin_fail(c, st, &err);
  ck_assert_str_eq(err.msg, "wrap 'v10': v10: flag must be >= 1");
  fsdpc__opts_destroy(o);
  fsdpc__registry_destroy(reg);
}
END_TEST

START_TEST(legacy_attention_gets_its_context_from_create) {
  fsdpc_registry *reg = open_dir(FSDPC_TEST_ABI10_DIR);
  const fsdpc_component *c = pick(reg, FSDPC_KIND_ATTENTION, "v10");
  fsdpc_attn_ctx *ctx = NULL;
  ck_assert_int_eq(fsdpc__call_attn_create(c, NULL, FSDPC_DEVICE_CPU, -1, &ctx), FSDPC_OK);
  ck_assert_ptr_nonnull(ctx);
  const fsdpc_attention_v1 *v = c->vtable;
  fsdpc_attn_shape sh = {.struct_size = sizeof sh, .B = 1, .T = 2, .NH = 1, .KVH = 1, .HD = 4};
  fsdpc_attn_shape with_host = fsdpc__call_attn_shape(c, &sh);
  ck_assert_ptr_eq(with_host.host, c->host);
  fsdpc_attn_sizes sz = {.struct_size = sizeof sz};
  ck_assert_int_eq(v->sizes(ctx, &with_host, &sz), FSDPC_OK);
  ck_assert_uint_eq(sz.saved_bytes, 1); /* it saw the context create() made */
  v->destroy(ctx);
  fsdpc__registry_destroy(reg);
}
END_TEST

/* A 1.0 statedict plugin probes through its 1.0 member; a 1.1 attention
 * plugin gets create_call (with the host) rather than create. */
START_TEST(the_host_picks_the_member_of_the_plugins_abi) {
  fsdpc_registry *reg = open_dir(FSDPC_TEST_ABI10_DIR);
  const fsdpc_component *sd = pick(reg, FSDPC_KIND_STATEDICT, "v10");
  char dir[] = "/tmp/fsdpc-abi10-XXXXXX", marker[64];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  ck_assert_int_eq(fsdpc__call_sd_probe(sd, dir), FSDPC_UNSUPPORTED);
  snprintf(marker, sizeof marker, "%s/v10.marker", dir);
  FILE *f = fopen(marker, "w");
  ck_assert_ptr_nonnull(f);
  fclose(f);
  ck_assert_int_eq(fsdpc__call_sd_probe(sd, dir), FSDPC_OK);
  remove(marker);
  remove(dir);
  const fsdpc_component *a = pick(reg, FSDPC_KIND_ATTENTION, "v11");
  fsdpc_attn_ctx *ctx = NULL;
  ck_assert_int_eq(fsdpc__call_attn_create(a, NULL, FSDPC_DEVICE_CPU, -1, &ctx), FSDPC_OK);
  fsdpc_attn_shape sh = {.struct_size = sizeof sh, .B = 1, .T = 2, .NH = 1, .KVH = 1, .HD = 4};
  fsdpc_attn_shape with_host = fsdpc__call_attn_shape(a, &sh);
  fsdpc_attn_sizes sz = {.struct_size = sizeof sz};
  ck_assert_int_eq(((const fsdpc_attention_v1 *)a->vtable)->sizes(ctx, &with_host, &sz), FSDPC_OK);
  ck_assert_uint_eq(sz.saved_bytes, 2); /* create_call ran, with this host */
  fsdpc__registry_destroy(reg);
}
END_TEST

/* Two registries load the same in-tree plugin file (one dlopen handle, two
 * entry calls). Each host's calls report to that host, and the first keeps
 * working after the second is destroyed: a plugin holding the host table of
 * the latest entry call in a global would write into the freed one. */
START_TEST(two_hosts_in_one_process) {
  fsdpc_registry *a = open_dir(FSDPC_PLUGIN_DIR_FOR_TEST);
  fsdpc_registry *b = open_dir(FSDPC_PLUGIN_DIR_FOR_TEST);
  const fsdpc_component *ca = pick(a, FSDPC_KIND_WRAP, "size");
  const fsdpc_component *cb = pick(b, FSDPC_KIND_WRAP, "size");
  ck_assert_ptr_ne(ca->host, cb->host);
  /* Each host reports its own run's threads (train.threads) in device_info. */
  fsdpc__registry_set_threads(a, 3);
  fsdpc_device_info da = {.struct_size = sizeof da}, db = {.struct_size = sizeof db};
  ck_assert_int_eq(ca->host->device_info(ca->host->host_ctx, &da), FSDPC_OK);
  ck_assert_int_eq(cb->host->device_info(cb->host->host_ctx, &db), FSDPC_OK);
  ck_assert_int_eq(da.num_threads, 3);
  ck_assert_int_eq(db.num_threads, omp_get_max_threads());
  uint32_t n_units = 0;
  fsdpc_err err;
  int32_t st = fsdpc__call_wrap_plan(cb, NULL, NULL, 3, NULL, &n_units);
  ck_assert_int_eq(st, FSDPC_INVALID_USAGE);
  fsdpc__plugin_fail(ca, st, &err); /* nothing was said to host a */
  ck_assert_ptr_nonnull(strstr(err.msg, "(it gave no message)"));
  fsdpc__registry_destroy(b);
  st = fsdpc__call_wrap_plan(ca, NULL, NULL, 3, NULL, &n_units);
  ck_assert_int_eq(st, FSDPC_INVALID_USAGE);
  fsdpc__plugin_fail(ca, st, &err);
  ck_assert_str_eq(err.msg, "wrap 'size': wrap size: params, unit_of_param and n_units must be "
                            "non-NULL");
  /* The same for an object a plugin made: an optimizer keeps its host. */
  const fsdpc_component *oa = pick(a, FSDPC_KIND_OPTIM, "adamw");
  fsdpc_optim_init init = {.struct_size = sizeof init,
                           .beta1 = 0.9,
                           .beta2 = 0.999,
                           .eps = 1e-8,
                           .device = FSDPC_DEVICE_CPU};
  fsdpc_optimizer *opt = NULL;
  ck_assert_int_eq(fsdpc__call_optim_create(oa, &init, &opt), FSDPC_OK);
  fsdpc_optim_step_info info = {.struct_size = sizeof info, .step = 0, .lr = 0.1, .grad_scale = 1};
  const fsdpc_optim_v1 *ov = oa->vtable;
  st = ov->step(opt, NULL, 0, &info);
  ck_assert_int_eq(st, FSDPC_INVALID_USAGE);
  fsdpc__plugin_fail(oa, st, &err);
  ck_assert_ptr_nonnull(strstr(err.msg, "1-based"));
  ov->destroy(opt);
  fsdpc__registry_destroy(a);
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
  tcase_add_test(tc, legacy_wrap_plans_through_its_1_0_member);
  tcase_add_test(tc, legacy_attention_gets_its_context_from_create);
  tcase_add_test(tc, two_hosts_in_one_process);
  tcase_add_test(tc, the_host_picks_the_member_of_the_plugins_abi);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  fsdpc__registry_destroy(g_reg);
  return failed ? 1 : 0;
}
