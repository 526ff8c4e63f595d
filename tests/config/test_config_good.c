/* Good configs: defaults, overrides, model.config (HF config.json), dump
 * round-trip and where each value came from. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "ops/fp8.h"

#define M                                                                                          \
  "model: {vocab_size: 10, hidden_size: 8, intermediate_size: 8, num_hidden_layers: 1, "           \
  "num_attention_heads: 2}\n"
#define FIX FSDPC_SOURCE_DIR "/tests/config/fixtures/"

static fsdpc_config *load_ok(const char *yaml, const char *const *ov, int n) {
  fsdpc_config *cfg = NULL;
  fsdpc_err err = {0};
  fsdpc_status st = fsdpc__config_from_string(yaml, "cfg.yaml", ov, n, &cfg, &err);
  ck_assert_msg(st == FSDPC_OK, "load failed: %s", err.msg);
  ck_assert_ptr_nonnull(cfg);
  return cfg;
}

static const char *opt(const fsdpc_opts *o, const char *key) {
  for (int i = 0; i < fsdpc__opts_count(o); i++) {
    const char *k, *v;
    fsdpc__opts_entry(o, i, &k, &v, NULL);
    if (strcmp(k, key) == 0)
      return v;
  }
  return NULL;
}

START_TEST(defaults) {
  fsdpc_config *c = load_ok(M, NULL, 0);
  ck_assert_str_eq(c->source, "cfg.yaml");
  ck_assert_str_eq(c->model.config, "");
  ck_assert_int_eq(c->model.num_key_value_heads, 2); /* = num_attention_heads */
  ck_assert_int_eq(c->model.head_dim, 4);            /* = hidden / heads */
  ck_assert_int_eq(c->model.max_position_embeddings, 2048);
  ck_assert(c->model.rms_norm_eps == 1e-5);
  ck_assert(c->model.rope_theta == 10000);
  ck_assert_int_eq(c->model.rope_scaling.type, FSDPC_ROPE_SCALING_NONE);
  ck_assert(c->model.rope_scaling.factor == 8 && c->model.rope_scaling.high_freq_factor == 4);
  ck_assert_int_eq(c->model.rope_scaling.original_max_position_embeddings, 8192);
  ck_assert(!c->model.tie_word_embeddings);
  ck_assert_int_eq(c->model.bos_token_id, -1);
  ck_assert_str_eq(c->model.init.from, "");
  ck_assert(c->model.init.std == 0.02);
  ck_assert_str_eq(c->data.train, "");
  ck_assert_int_eq(c->data.seq_len, 512);
  ck_assert(c->data.shuffle);
  ck_assert_int_eq(c->data.seed, 42); /* -1 = train.seed */
  ck_assert(c->data.eval_fraction == 0);
  ck_assert_int_eq(c->fsdp.sharding_strategy, FSDPC_SHARD_FULL_SHARD);
  ck_assert_str_eq(c->fsdp.wrap.policy, "transformer");
  ck_assert_int_eq(fsdpc__opts_count(c->fsdp.wrap.options), 0);
  ck_assert_int_eq(c->fsdp.mixed_precision.param_dtype, -1); /* auto */
  ck_assert_int_eq(c->fsdp.mixed_precision.reduce_dtype, FSDPC_DTYPE_F32);
  ck_assert_int_eq(c->fsdp.mixed_precision.logits_dtype, -1); /* auto */
  ck_assert_int_eq(c->fsdp.mixed_precision.linear, 0);        /* bf16 */
  ck_assert_int_eq(c->fsdp.mixed_precision.fp8_recipe, FSDPC_FP8_TENSORWISE);
  ck_assert(c->fsdp.forward_prefetch && c->fsdp.backward_prefetch && !c->fsdp.cpu_offload);
  ck_assert_int_eq(c->fsdp.max_inflight_allgathers, 2);
  ck_assert_int_eq(c->fsdp.state_dict_type, FSDPC_STATE_DICT_SHARDED);
  ck_assert_int_eq(c->fsdp.align, 16);
  ck_assert_str_eq(c->collectives.impl, "auto");
  ck_assert_int_eq(c->collectives.timeout_s, 300);
  ck_assert_str_eq(c->attention.impl, "auto");
  ck_assert_str_eq(c->optim.name, "adamw");
  ck_assert(c->optim.lr == 3e-4 && c->optim.eps == 1e-8);
  ck_assert(c->optim.betas[0] == 0.9 && c->optim.betas[1] == 0.999);
  ck_assert_int_eq(c->schedule.name, FSDPC_SCHED_COSINE);
  ck_assert_int_eq(c->train.max_steps, 100);
  ck_assert(c->train.max_grad_norm == 1.0);
  ck_assert_int_eq(c->train.seed, 42);
  ck_assert_int_eq(c->train.eval_batches, 0); /* every example */
  ck_assert_int_eq(c->train.device, FSDPC_DEVICE_CPU);
  ck_assert_int_eq(c->train.generate_prompts.n, 0);
  ck_assert_int_eq(c->train.generate_tokens, 32);
  ck_assert_str_eq(c->checkpoint.resume, "none");
  ck_assert_str_eq(c->checkpoint.intermediate_format, "sharded");
  ck_assert_str_eq(c->checkpoint.final_format, "full");
  ck_assert_int_eq(c->checkpoint.final_dtype, FSDPC_DTYPE_BF16);
  ck_assert_int_eq(c->checkpoint.keep, 2);
  ck_assert_str_eq(c->log.dir, "out");
  ck_assert_int_eq(c->log.level, FSDPC_LOG_INFO);
  ck_assert_int_eq(c->log.progress, FSDPC_PROGRESS_AUTO);
  ck_assert_int_eq(c->plugins.paths.n, 0);
  char where[256];
  fsdpc__config_where(c, "optim.lr", where, sizeof where); /* a default: the file */
  ck_assert_str_eq(where, "cfg.yaml");
  fsdpc__config_destroy(c);
}
END_TEST

static const char *full_yaml =
    M "data:\n"
      "  train: data/train.bin\n"
      "  seq_len: 128\n"
      "  seed: 7\n"
      "  shuffle: no\n"
      "fsdp:\n"
      "  sharding_strategy: shard_grad_op   # case does not matter\n"
      "  wrap:\n"
      "    policy: size\n"
      "    options:\n"
      "      min_num_params: 1000\n"
      "      name: \"x: y\"\n"
      "optim:\n"
      "  lr: 1e-3\n"
      "  betas:\n"
      "    - 0.8\n"
      "    - 0.95\n"
      "train:\n"
      "  max_steps: 1e3\n"
      "  generate_prompts: [\"Once upon a time\", 'true', \"\", \"a: b\"]\n"
      "log:\n"
      "  level: DEBUG\n"
      "  progress: off\n"
      "attention:\n"
      "plugins:\n"
      "  paths:\n";

START_TEST(file_values) {
  fsdpc_config *c = load_ok(full_yaml, NULL, 0);
  ck_assert_str_eq(c->data.train, "data/train.bin");
  ck_assert_int_eq(c->data.seq_len, 128);
  ck_assert_int_eq(c->data.seed, 7);
  ck_assert(!c->data.shuffle);
  ck_assert_int_eq(c->fsdp.sharding_strategy, FSDPC_SHARD_SHARD_GRAD_OP);
  ck_assert_str_eq(c->fsdp.wrap.policy, "size");
  ck_assert_str_eq(opt(c->fsdp.wrap.options, "min_num_params"), "1000");
  ck_assert_str_eq(opt(c->fsdp.wrap.options, "name"), "x: y");
  ck_assert(c->optim.lr == 1e-3);
  ck_assert(c->optim.betas[0] == 0.8 && c->optim.betas[1] == 0.95);
  ck_assert_int_eq(c->train.max_steps, 1000);
  ck_assert_int_eq(c->train.generate_prompts.n, 4);
  ck_assert_str_eq(c->train.generate_prompts.items[0], "Once upon a time");
  ck_assert_str_eq(c->train.generate_prompts.items[1], "true");
  ck_assert_str_eq(c->train.generate_prompts.items[2], "");
  ck_assert_str_eq(c->train.generate_prompts.items[3], "a: b");
  ck_assert_int_eq(c->log.level, FSDPC_LOG_DEBUG);
  ck_assert_int_eq(c->log.progress, FSDPC_PROGRESS_OFF);
  ck_assert_int_eq(c->plugins.paths.n, 0);
  char where[256];
  fsdpc__config_where(c, "optim.lr", where, sizeof where);
  ck_assert_str_eq(where, "cfg.yaml:15:7");
  fsdpc__config_destroy(c);
}
END_TEST

START_TEST(overrides) {
  const char *ov[] = {
      "optim.lr=5e-4",
      "fsdp.sharding_strategy=NO_SHARD",
      "plugins.paths=[a, /opt/b]",
      "fsdp.wrap.options.min_num_params=50", /* replaces the file's value */
      "attention.options.block=64",          /* a new options key */
      "data.train=C:\\data\\x.bin",          /* taken verbatim */
      "data.eval=''",                        /* quoted empty string */
      "schedule={name: linear, warmup_steps: 5}",
      "train.max_steps=10",
      "train.max_steps=20", /* the last override wins */
      "train.generate_prompts=[\"hi, there\", x]",
      "attention.impl=naive",
      "collectives.impl=gloo",
  };
  int n = (int)(sizeof ov / sizeof ov[0]);
  fsdpc_config *c = load_ok(full_yaml, ov, n);
  ck_assert(c->optim.lr == 5e-4);
  ck_assert_int_eq(c->fsdp.sharding_strategy, FSDPC_SHARD_NO_SHARD);
  ck_assert_int_eq(c->plugins.paths.n, 2);
  ck_assert_str_eq(c->plugins.paths.items[0], "a");
  ck_assert_str_eq(c->plugins.paths.items[1], "/opt/b");
  ck_assert_str_eq(opt(c->fsdp.wrap.options, "min_num_params"), "50");
  ck_assert_str_eq(opt(c->fsdp.wrap.options, "name"), "x: y");
  ck_assert_str_eq(opt(c->attention.options, "block"), "64");
  ck_assert_str_eq(c->data.train, "C:\\data\\x.bin");
  ck_assert_str_eq(c->data.eval, "");
  ck_assert_int_eq(c->schedule.name, FSDPC_SCHED_LINEAR);
  ck_assert_int_eq(c->schedule.warmup_steps, 5);
  ck_assert_int_eq(c->train.max_steps, 20);
  ck_assert_int_eq(c->train.generate_prompts.n, 2);
  ck_assert_str_eq(c->train.generate_prompts.items[0], "hi, there");
  ck_assert_str_eq(c->attention.impl, "naive");
  char where[256];
  fsdpc__config_where(c, "optim.lr", where, sizeof where);
  ck_assert_str_eq(where, "override 'optim.lr=5e-4'");
  fsdpc__config_where(c, "schedule.warmup_steps", where, sizeof where);
  ck_assert_str_eq(where, "override 'schedule={name: linear, warmup_steps: 5}'");
  fsdpc__config_destroy(c);
}
END_TEST

/* Not-implemented options are fine at their default, even when written out. */
START_TEST(not_implemented_at_default) {
  fsdpc_config *c = load_ok(M "fsdp:\n  cpu_offload: false\n  mixed_precision: {param_dtype: "
                              "fp32}\ntrain: {device: cpu}\ncheckpoint: {resume: none, "
                              "save_steps: 0}\n",
                            NULL, 0);
  fsdpc__config_destroy(c);
  /* An override back to the default cancels a refused file value. */
  const char *ov[] = {"fsdp.cpu_offload=false"};
  c = load_ok(M "fsdp:\n  cpu_offload: true\n", ov, 1);
  ck_assert(!c->fsdp.cpu_offload);
  fsdpc__config_destroy(c);
}
END_TEST

START_TEST(hf_config) {
  /* YAML wins over config.json: num_hidden_layers comes from the override. */
  const char *ov[] = {"model.num_hidden_layers=2"};
  fsdpc_config *c = load_ok("model:\n  config: " FIX "llama3_2_1b\n", ov, 1);
  const fsdpc_config_model *m = &c->model;
  ck_assert_int_eq(m->vocab_size, 128256);
  ck_assert_int_eq(m->hidden_size, 2048);
  ck_assert_int_eq(m->intermediate_size, 8192);
  ck_assert_int_eq(m->num_hidden_layers, 2);
  ck_assert_int_eq(m->num_attention_heads, 32);
  ck_assert_int_eq(m->num_key_value_heads, 8);
  ck_assert_int_eq(m->head_dim, 64);
  ck_assert_int_eq(m->max_position_embeddings, 131072);
  ck_assert(m->rms_norm_eps == 1e-5);
  ck_assert(m->rope_theta == 500000.0);
  ck_assert_int_eq(m->rope_scaling.type, FSDPC_ROPE_SCALING_LLAMA3);
  ck_assert(m->rope_scaling.factor == 32.0);
  ck_assert(m->rope_scaling.low_freq_factor == 1.0);
  ck_assert(m->rope_scaling.high_freq_factor == 4.0);
  ck_assert_int_eq(m->rope_scaling.original_max_position_embeddings, 8192);
  ck_assert(m->tie_word_embeddings);
  ck_assert_int_eq(m->bos_token_id, 128000);
  ck_assert_int_eq(m->eos_token_id, 128001);
  char where[512];
  fsdpc__config_where(c, "model.hidden_size", where, sizeof where);
  ck_assert_msg(strstr(where, "llama3_2_1b/config.json field 'hidden_size'"), "%s", where);
  fsdpc__config_destroy(c);
}
END_TEST

START_TEST(hf_variants) {
  /* A file path (not a folder); eos list; bos null; rope type "default";
   * no head_dim or num_key_value_heads (derived). */
  fsdpc_config *c =
      load_ok("model:\n  config: " FIX "hf_variants/config.json\n  rope_theta: 20000\n", NULL, 0);
  const fsdpc_config_model *m = &c->model;
  ck_assert_int_eq(m->hidden_size, 96);
  ck_assert_int_eq(m->num_attention_heads, 6);
  ck_assert_int_eq(m->num_key_value_heads, 6);
  ck_assert_int_eq(m->head_dim, 16);
  ck_assert_int_eq(m->eos_token_id, 2);
  ck_assert_int_eq(m->bos_token_id, -1);
  ck_assert_int_eq(m->rope_scaling.type, FSDPC_ROPE_SCALING_NONE);
  ck_assert(m->rms_norm_eps == 1e-6);
  ck_assert(m->rope_theta == 20000);                  /* YAML wins */
  ck_assert_int_eq(m->max_position_embeddings, 2048); /* not in JSON: default */
  fsdpc__config_destroy(c);
}
END_TEST

static char *dump_to_string(const fsdpc_config *c) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(fsdpc__config_dump(c, f), FSDPC_OK);
  fclose(f);
  return buf;
}

/* load(dump(cfg)) == cfg, and dumping again gives the same text. */
static void round_trip(const char *yaml, const char *const *ov, int n) {
  fsdpc_config *a = load_ok(yaml, ov, n);
  char *text = dump_to_string(a);
  fsdpc_config *b = NULL;
  fsdpc_err err = {0};
  ck_assert_msg(fsdpc__config_from_string(text, "dump.yaml", NULL, 0, &b, &err) == FSDPC_OK,
                "reloading the dump failed: %s\n%s", err.msg, text);
  const char *diff = NULL;
  ck_assert_msg(fsdpc__config_equal(a, b, &diff), "round trip changed %s\n%s", diff, text);
  char *again = dump_to_string(b);
  /* The first line names the source file; compare the rest. */
  ck_assert_str_eq(strchr(text, '\n'), strchr(again, '\n'));
  free(text);
  free(again);
  fsdpc__config_destroy(a);
  fsdpc__config_destroy(b);
}

START_TEST(dump_round_trip) {
  round_trip(M, NULL, 0);
  round_trip(full_yaml, NULL, 0);
  const char *ov[] = {"optim.lr=0.1",
                      "optim.weight_decay=0.123456789012345",
                      "data.eval=null",
                      "log.dir='yes'",
                      "plugins.paths=['1.5', '', 'a b', '#x', 'ü']",
                      "optim.options.flag=true",
                      "model.rope_scaling.type=llama3",
                      "model.rope_scaling.factor=1e-300",
                      "checkpoint.dir='~'"};
  round_trip(full_yaml, ov, (int)(sizeof ov / sizeof ov[0]));
  round_trip("model:\n  config: " FIX "llama3_2_1b\n", NULL, 0);
}
END_TEST

START_TEST(dump_has_every_key) {
  fsdpc_config *c = load_ok(M, NULL, 0);
  char *text = dump_to_string(c);
  const char *must[] = {"sharding_strategy: FULL_SHARD",
                        "betas: [0.9, 0.999]",
                        "options: {}",
                        "rms_norm_eps: 1.0e-05",
                        "train: \"\"",
                        "paths: []",
                        "    param_dtype: auto",
                        "  rope_scaling:\n    type: none"};
  for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
    ck_assert_msg(strstr(text, must[i]), "dump lacks '%s':\n%s", must[i], text);
  free(text);
  fsdpc__config_destroy(c);
}
END_TEST

START_TEST(equal_detects_difference) {
  fsdpc_config *a = load_ok(M, NULL, 0);
  const char *ov[] = {"fsdp.wrap.options.x=1"};
  fsdpc_config *b = load_ok(M, ov, 1);
  const char *diff = NULL;
  ck_assert(!fsdpc__config_equal(a, b, &diff));
  ck_assert_str_eq(diff, "fsdp.wrap.options");
  fsdpc__config_destroy(b);
  const char *ov2[] = {"optim.betas=[0.9, 0.99]"};
  b = load_ok(M, ov2, 1);
  ck_assert(!fsdpc__config_equal(a, b, &diff));
  ck_assert_str_eq(diff, "optim.betas");
  fsdpc__config_destroy(a);
  fsdpc__config_destroy(b);
}
END_TEST

START_TEST(load_from_file) {
  char path[] = "/tmp/fsdpc_cfg_XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  FILE *f = fdopen(fd, "w");
  fputs(M "optim:\n  lr: 0.5\n", f);
  fclose(f);
  fsdpc_config *c = NULL;
  fsdpc_err err = {0};
  const char *ov[] = {"optim.eps=1e-6"};
  ck_assert_msg(fsdpc__config_load(path, ov, 1, &c, &err) == FSDPC_OK, "%s", err.msg);
  ck_assert(c->optim.lr == 0.5 && c->optim.eps == 1e-6);
  ck_assert_str_eq(c->source, path);
  char where[256], want[256];
  fsdpc__config_where(c, "optim.lr", where, sizeof where);
  snprintf(want, sizeof want, "%s:3:7", path);
  ck_assert_str_eq(where, want);
  fsdpc__config_destroy(c);
  fsdpc__config_destroy(NULL); /* a no-op */
  unlink(path);
}
END_TEST

int main(void) {
  Suite *s = suite_create("config_good");
  TCase *tc = tcase_create("good");
  tcase_add_test(tc, defaults);
  tcase_add_test(tc, file_values);
  tcase_add_test(tc, overrides);
  tcase_add_test(tc, not_implemented_at_default);
  tcase_add_test(tc, hf_config);
  tcase_add_test(tc, hf_variants);
  tcase_add_test(tc, dump_round_trip);
  tcase_add_test(tc, dump_has_every_key);
  tcase_add_test(tc, equal_detects_difference);
  tcase_add_test(tc, load_from_file);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
