/* Bad configs: each must fail with one line that names where (file:line:col
 * or the override text) and the key path, and must not crash or leak. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "config/config.h"

/* Line 1 of most cases: a valid model, so that only the line under test is
 * wrong. Case lines therefore start at line 2. */
#define M                                                                                          \
  "model: {vocab_size: 10, hidden_size: 8, intermediate_size: 8, num_hidden_layers: 1, "           \
  "num_attention_heads: 2}\n"
#define FIX FSDPC_SOURCE_DIR "/tests/config/fixtures/"

typedef struct bad_case {
  const char *name;
  const char *yaml;
  const char *overrides[3];
  const char *want[4]; /* substrings the message must contain; "!x": must not contain x */
} bad_case;

static const bad_case cases[] = {
    /* YAML syntax */
    {"syntax_flow", M "train: [a\n", {0}, {"cfg.yaml:3:1:", "YAML syntax error"}},
    {"syntax_tab", M "optim:\n\tlr: 1\n", {0}, {"cfg.yaml:3:1:", "YAML syntax error"}},
    {"syntax_indent", M "optim:\n  lr: 1\n eps: 2\n", {0}, {"cfg.yaml:4:", "YAML syntax error"}},
    {"second_document", M "---\ntrain: {}\n", {0}, {"cfg.yaml:3:1:", "second YAML document"}},
    /* unknown keys */
    {"unknown_did_you_mean",
     M "fsdp:\n  shardng_strategy: NO_SHARD\n",
     {0},
     {"cfg.yaml:3:3: unknown key 'fsdp.shardng_strategy' (did you mean 'sharding_strategy'?)"}},
    {"unknown_section",
     M "optm:\n  lr: 1\n",
     {0},
     {"cfg.yaml:2:1:", "unknown key 'optm'", "did you mean 'optim'"}},
    {"unknown_nested",
     M "fsdp:\n  wrap:\n    polcy: size\n",
     {0},
     {"cfg.yaml:4:5:", "unknown key 'fsdp.wrap.polcy'", "did you mean 'policy'"}},
    {"unknown_no_hint",
     M "train:\n  banana: 3\n",
     {0},
     {"cfg.yaml:3:3:", "'train.banana'", "!did you mean"}},
    {"dotted_key", M "fsdp.cpu_offload: false\n", {0}, {"cfg.yaml:2:1:", "fsdp.cpu_offload"}},
    /* types */
    {"float_type",
     M "optim:\n  lr: fast\n",
     {0},
     {"cfg.yaml:3:7:", "optim.lr", "expected a number, got 'fast'"}},
    {"int_type",
     M "train:\n  max_steps: 1.5\n",
     {0},
     {"cfg.yaml:3:14:", "train.max_steps", "expected an integer"}},
    {"bool_type",
     M "data:\n  shuffle: maybe\n",
     {0},
     {"cfg.yaml:3:12:", "data.shuffle", "expected true or false"}},
    {"list_item_type",
     M "optim:\n  betas: [0.9, x]\n",
     {0},
     {"cfg.yaml:3:16:", "optim.betas[1]", "expected a number"}},
    {"list_length",
     M "optim:\n  betas: [0.9]\n",
     {0},
     {"cfg.yaml:3:10:", "optim.betas", "expected a list of 2 numbers, got 1 item"}},
    {"scalar_for_list",
     M "plugins:\n  paths: /opt/p\n",
     {0},
     {"cfg.yaml:3:10:", "plugins.paths", "expected a list of strings, got a scalar"}},
    {"string_list_item_map",
     M "train:\n  generate_prompts: [{a: 1}]\n",
     {0},
     {"cfg.yaml:3:22:", "train.generate_prompts[0]", "expected a string, got a mapping"}},
    /* mapping vs scalar */
    {"map_for_scalar",
     M "optim:\n  lr: {a: 1}\n",
     {0},
     {"cfg.yaml:3:7:", "optim.lr", "expected a number, got a mapping"}},
    {"list_for_scalar",
     M "train:\n  max_steps: [1, 2]\n",
     {0},
     {"cfg.yaml:3:14:", "train.max_steps", "got a list"}},
    {"scalar_for_section",
     M "optim: 3\n",
     {0},
     {"cfg.yaml:2:8:", "optim", "expected a mapping (a section of keys), got a scalar"}},
    {"list_for_section",
     M "fsdp:\n  wrap: [a]\n",
     {0},
     {"cfg.yaml:3:9:", "fsdp.wrap", "got a list"}},
    {"top_level_list", "- a\n- b\n", {0}, {"cfg.yaml:1:1:", "expected a mapping of sections"}},
    {"options_nested",
     M "fsdp:\n  wrap:\n    options:\n      a: {b: 1}\n",
     {0},
     {"cfg.yaml:5:10:", "fsdp.wrap.options.a", "options are flat"}},
    {"options_scalar",
     M "optim:\n  options: 5\n",
     {0},
     {"cfg.yaml:3:12:", "optim.options", "expected a mapping of option: value"}},
    /* ranges and enums */
    {"range_min",
     M "train:\n  max_steps: 0\n",
     {0},
     {"cfg.yaml:3:14:", "train.max_steps", "0 is out of range (must be >= 1)"}},
    {"range_max",
     M "data:\n  seq_len: 2000000\n",
     {0},
     {"cfg.yaml:3:12:", "data.seq_len", "must be in [1, 1048576]"}},
    {"range_list_item",
     M "optim:\n  betas: [0.9, 1.0]\n",
     {0},
     {"cfg.yaml:3:16:", "optim.betas[1]", "must be in [0, 1)"}},
    {"bad_enum",
     M "fsdp:\n  sharding_strategy: FULL\n",
     {0},
     {"cfg.yaml:3:22:", "fsdp.sharding_strategy",
      "'FULL' is not one of FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD"}},
    {"bad_enum_level",
     M "log:\n  level: verbose\n",
     {0},
     {"cfg.yaml:3:10:", "log.level", "error, warn, info, debug"}},
    /* required */
    {"missing_model",
     "train:\n  max_steps: 3\n",
     {0},
     {"cfg.yaml: missing required key 'model.vocab_size'"}},
    {"missing_one_key",
     "model:\n  vocab_size: 10\n  hidden_size: 8\n",
     {0},
     {"cfg.yaml:1:1:", "missing required key 'model.intermediate_size'"}},
    /* duplicates */
    {"duplicate_key",
     M "optim:\n  lr: 1\n  lr: 2\n",
     {0},
     {"cfg.yaml:4:3:", "duplicate key 'optim.lr'", "line 3"}},
    {"duplicate_section",
     M "train: {}\ntrain: {}\n",
     {0},
     {"cfg.yaml:3:1:", "duplicate key 'train'"}},
    {"duplicate_option",
     M "optim:\n  options: {a: 1, a: 2}\n",
     {0},
     {"cfg.yaml:3:19:", "optim.options.a", "duplicate"}},
    /* empty */
    {"empty_file", "", {0}, {"cfg.yaml: empty config file"}},
    {"comment_only", "# nothing here\n", {0}, {"cfg.yaml: empty config file"}},
    /* not implemented */
    {"ni_inflight",
     M "fsdp:\n  max_inflight_allgathers: 3\n",
     {0},
     {"cfg.yaml:3:28: fsdp.max_inflight_allgathers=3 is not implemented in this build"}},
    {"ni_inflight_override",
     M,
     {"fsdp.max_inflight_allgathers=4"},
     {"override 'fsdp.max_inflight_allgathers=4'", "is not implemented"}},
    /* cross-key checks */
    {"kv_heads_divide",
     M,
     {"model.num_key_value_heads=3"},
     {"override 'model.num_key_value_heads=3'", "model.num_key_value_heads (3) must divide"}},
    {"hidden_divisible",
     M,
     {"model.num_attention_heads=3"},
     {"model.hidden_size (8) is not divisible by model.num_attention_heads (3)"}},
    {"warmup_both",
     M "schedule: {warmup_steps: 10, warmup_ratio: 0.1}\n",
     {0},
     {"cfg.yaml:2:44:", "schedule.warmup_ratio", "not both"}},
    {"eval_both",
     M "data: {eval: e.bin, eval_fraction: 0.1}\n",
     {0},
     {"cfg.yaml:2:36:", "data.eval_fraction"}},
    /* overrides */
    {"override_no_equals", M, {"foo"}, {"override 'foo': expected section.key=value"}},
    {"override_no_key", M, {"=3"}, {"override '=3': missing key"}},
    {"override_no_value", M, {"a.b="}, {"override 'a.b=': missing value"}},
    {"override_unknown",
     M,
     {"optim.lrr=1"},
     {"override 'optim.lrr=1': unknown key 'optim.lrr' (did you mean 'lr'?)"}},
    {"override_unknown_section",
     M,
     {"optm.lr=1"},
     {"override 'optm.lr=1'", "unknown key 'optm.lr'", "did you mean 'optim'"}},
    {"override_type",
     M,
     {"optim.lr=abc"},
     {"override 'optim.lr=abc': optim.lr: expected a number"}},
    {"override_enum",
     M,
     {"fsdp.sharding_strategy=ZERO3"},
     {"override 'fsdp.sharding_strategy=ZERO3'", "is not one of FULL_SHARD"}},
    {"override_bad_flow",
     M,
     {"plugins.paths=[a,"},
     {"override 'plugins.paths=[a,'", "plugins.paths", "bad YAML value"}},
    {"override_section_scalar", M, {"fsdp=3"}, {"override 'fsdp=3'", "fsdp is a section"}},
    {"override_section_map_unknown",
     M,
     {"optim={lrr: 1}"},
     {"override 'optim={lrr: 1}'", "unknown key 'optim.lrr'", "did you mean 'lr'"}},
    {"override_option_map",
     M,
     {"optim.options.x=[1]"},
     {"override 'optim.options.x=[1]'", "optim.options.x", "options are flat"}},
    {"override_newline", M, {"optim.lr=9\n1"}, {"override 'optim.lr=9\\n1'", "optim.lr"}},
    {"quoted_newline", M "optim:\n  lr: \"1\\n2\"\n", {0}, {"cfg.yaml:3:7:", "got '1\\n2'"}},
    {"override_later_error_wins_not",
     M,
     {"optim.lr=1e-3", "train.max_steps=-5"},
     {"override 'train.max_steps=-5'", "train.max_steps", "must be >= 1"}},
    /* quantization (QLoRA, issue 37) */
    {"nf4_without_lora",
     M "quantization:\n  method: nf4\n",
     {0},
     {"cfg.yaml:3:11:", "quantization.method nf4", "set peft.method: lora"}},
    {"quant_unknown_method",
     M "peft: {method: lora}\nquantization: {method: int4}\n",
     {0},
     {"cfg.yaml:3:24:", "quantization.method", "int4", "nf4"}},
    {"quant_block_not_power",
     M "peft: {method: lora}\nquantization: {method: nf4, block_size: 48}\n",
     {0},
     {"cfg.yaml:3:", "quantization.block_size 48", "64 (the default)"}},
    {"quant_block_range",
     M "peft: {method: lora}\n",
     {"quantization.method=nf4", "quantization.block_size=8192"},
     {"override 'quantization.block_size=8192'", "quantization.block_size"}},
    {"quant_compute_dtype",
     M "peft: {method: lora}\nquantization: {method: nf4, compute_dtype: bf16}\n"
       "fsdp: {mixed_precision: {param_dtype: fp32}}\n",
     {0},
     {"cfg.yaml:3:", "quantization.compute_dtype bf16", "param_dtype fp32", "set it to auto"}},
    /* model.config */
    {"hf_missing_file",
     M,
     {"model.config=/nonexistent/dir"},
     {"override 'model.config=/nonexistent/dir'", "model.config", "cannot read"}},
};

static const size_t n_cases = sizeof cases / sizeof cases[0];

START_TEST(bad_config) {
  const bad_case *c = &cases[_i];
  int n_over = 0;
  while (n_over < 3 && c->overrides[n_over])
    n_over++;
  fsdpc_config *cfg = (fsdpc_config *)1;
  fsdpc_err err = {0};
  fsdpc_status st =
      fsdpc__config_from_string(c->yaml, "cfg.yaml", c->overrides, n_over, &cfg, &err);
  ck_assert_msg(st != FSDPC_OK, "case %s: loaded without error", c->name);
  ck_assert_msg(cfg == NULL, "case %s: *out not NULL on failure", c->name);
  ck_assert_msg(err.status == st, "case %s: err.status %d != %d", c->name, err.status, st);
  ck_assert_msg(strchr(err.msg, '\n') == NULL, "case %s: message is not one line: %s", c->name,
                err.msg);
  for (int i = 0; i < 4 && c->want[i]; i++) {
    if (c->want[i][0] == '!')
      ck_assert_msg(strstr(err.msg, c->want[i] + 1) == NULL, "case %s: message\n  %s\nhas\n  %s",
                    c->name, err.msg, c->want[i] + 1);
    else
      ck_assert_msg(strstr(err.msg, c->want[i]) != NULL, "case %s: message\n  %s\nlacks\n  %s",
                    c->name, err.msg, c->want[i]);
  }
}
END_TEST

/* Cases whose exact column is not worth pinning but whose key path is. */
START_TEST(exclusive_min_and_init_from) {
  fsdpc_config *cfg;
  fsdpc_err err = {0};
  ck_assert_int_ne(
      fsdpc__config_from_string(M "model:\n  rms_norm_eps: 0\n", "cfg.yaml", NULL, 0, &cfg, &err),
      FSDPC_OK);
  /* Line 1 opens `model:` too, so the second `model:` is a duplicate key. */
  ck_assert_msg(strstr(err.msg, "duplicate key 'model'"), "%s", err.msg);
  ck_assert_int_ne(fsdpc__config_from_string("model: {vocab_size: 10, hidden_size: 8, "
                                             "intermediate_size: 8, num_hidden_layers: 1, "
                                             "num_attention_heads: 2, rms_norm_eps: 0}\n",
                                             "cfg.yaml", NULL, 0, &cfg, &err),
                   FSDPC_OK);
  ck_assert_msg(strstr(err.msg, "cfg.yaml:1:") && strstr(err.msg, "model.rms_norm_eps") &&
                    strstr(err.msg, "must be in (0, 1]"),
                "%s", err.msg);
  const char *ov[] = {"fsdp.max_inflight_allgathers=4"};
  ck_assert_int_ne(fsdpc__config_from_string(M, "cfg.yaml", ov, 1, &cfg, &err), FSDPC_OK);
  ck_assert_str_eq(err.msg, "override 'fsdp.max_inflight_allgathers=4': "
                            "fsdp.max_inflight_allgathers=4 is not implemented in this build");
}
END_TEST

START_TEST(hf_errors) {
  fsdpc_config *cfg;
  fsdpc_err err = {0};
  const char *bad_json[] = {"model.config=" FIX "hf_bad_json"};
  ck_assert_int_ne(fsdpc__config_from_string("train: {}\n", "cfg.yaml", bad_json, 1, &cfg, &err),
                   FSDPC_OK);
  ck_assert_msg(strstr(err.msg, "hf_bad_json/config.json:3:") && strstr(err.msg, "invalid JSON"),
                "%s", err.msg);
  const char *bad_type[] = {"model.config=" FIX "hf_bad_type/config.json"};
  ck_assert_int_ne(fsdpc__config_from_string("train: {}\n", "cfg.yaml", bad_type, 1, &cfg, &err),
                   FSDPC_OK);
  ck_assert_msg(strstr(err.msg, "hf_bad_type/config.json field 'hidden_size'") &&
                    strstr(err.msg, "model.hidden_size") &&
                    strstr(err.msg, "expected an integer, got '64.5'"),
                "%s", err.msg);
  /* The YAML value wins, so the bad JSON field is never read. */
  const char *fixed[] = {"model.config=" FIX "hf_bad_type", "model.hidden_size=64"};
  ck_assert_int_eq(fsdpc__config_from_string("train: {}\n", "cfg.yaml", fixed, 2, &cfg, &err),
                   FSDPC_OK);
  ck_assert_int_eq(cfg->model.hidden_size, 64);
  fsdpc__config_destroy(cfg);
  /* A required key missing from both YAML and JSON. */
  ck_assert_int_ne(fsdpc__config_from_string("train: {}\nmodel:\n  config: " FIX "hf_incomplete\n",
                                             "cfg.yaml", NULL, 0, &cfg, &err),
                   FSDPC_OK);
  ck_assert_msg(strstr(err.msg, "cfg.yaml:2:1: missing required key 'model.intermediate_size'") &&
                    strstr(err.msg, "hf_incomplete"),
                "%s", err.msg);
}
END_TEST

START_TEST(missing_file) {
  fsdpc_config *cfg;
  fsdpc_err err = {0};
  ck_assert_int_ne(fsdpc__config_load("/nonexistent/cfg.yaml", NULL, 0, &cfg, &err), FSDPC_OK);
  ck_assert_msg(strstr(err.msg, "/nonexistent/cfg.yaml: cannot open config"), "%s", err.msg);
}
END_TEST

int main(void) {
  Suite *s = suite_create("config_errors");
  TCase *tc = tcase_create("bad");
  tcase_add_loop_test(tc, bad_config, 0, (int)n_cases);
  tcase_add_test(tc, exclusive_min_and_init_from);
  tcase_add_test(tc, hf_errors);
  tcase_add_test(tc, missing_file);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
