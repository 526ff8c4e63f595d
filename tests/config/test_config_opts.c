/* Plugin options: values from a config file checked against a plugin's
 * fsdpc_option_desc list, with file:line:col in every error; typed reads,
 * defaults, clone. Also the did-you-mean distance. */
#include <check.h>
#include <string.h>

#include "config/config.h"
#include "config/suggest.h"

static const fsdpc_option_desc d_min = {
    sizeof(fsdpc_option_desc),     "min_num_params", FSDPC_OPT_INT, "100000000", 1, 1e12,
    "smallest unit, in parameters"};
static const fsdpc_option_desc d_ratio = {
    sizeof(fsdpc_option_desc), "ratio", FSDPC_OPT_FLOAT, "0.5", 0, 1, "a fraction"};
static const fsdpc_option_desc d_flag = {
    sizeof(fsdpc_option_desc),  "embedding_unit", FSDPC_OPT_BOOL, "false", 1, 0,
    "embedding in its own unit"};
static const fsdpc_option_desc d_name = {sizeof(fsdpc_option_desc),
                                         "layer_name",
                                         FSDPC_OPT_STRING,
                                         "decoder_layer",
                                         1,
                                         0,
                                         "module type"};
static const fsdpc_option_desc d_req = {
    sizeof(fsdpc_option_desc), "key", FSDPC_OPT_STRING, NULL, 1, 0, "required"};
static const fsdpc_option_desc *const descs[] = {&d_min, &d_ratio, &d_flag, &d_name};

#define M                                                                                          \
  "model: {vocab_size: 10, hidden_size: 8, intermediate_size: 8, num_hidden_layers: 1, "           \
  "num_attention_heads: 2}\n"

static fsdpc_config *load_wrap(const char *options_yaml, const char *override) {
  char yaml[1024];
  snprintf(yaml, sizeof yaml, M "fsdp:\n  wrap:\n    policy: size\n    options:\n%s", options_yaml);
  fsdpc_config *c = NULL;
  fsdpc_err err = {0};
  const char *ov[] = {override};
  ck_assert_msg(fsdpc__config_from_string(yaml, "cfg.yaml", ov, override ? 1 : 0, &c, &err) ==
                    FSDPC_OK,
                "%s", err.msg);
  return c;
}

/* Validates the wrap options and returns the error message ("" = OK). */
static const char *validate(const char *options_yaml, const char *override) {
  static fsdpc_err err;
  fsdpc__err_clear(&err);
  fsdpc_config *c = load_wrap(options_yaml, override);
  fsdpc__opts_validate(c->fsdp.wrap.options, descs, 4, "wrap 'size'", &err);
  fsdpc__config_destroy(c);
  return err.msg;
}

START_TEST(valid_values_and_defaults) {
  fsdpc_config *c = load_wrap("      min_num_params: 1e6\n      embedding_unit: yes\n", NULL);
  fsdpc_opts *o = c->fsdp.wrap.options;
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__opts_validate(o, descs, 4, "wrap 'size'", &err), FSDPC_OK);
  int64_t min = 0;
  double ratio = 0;
  int32_t flag = 0;
  char name[32];
  ck_assert_int_eq(fsdpc__opts_get(o, "min_num_params", FSDPC_OPT_INT, &min, 0, &err), FSDPC_OK);
  ck_assert_int_eq(min, 1000000);
  ck_assert_int_eq(fsdpc__opts_get(o, "ratio", FSDPC_OPT_FLOAT, &ratio, 0, &err), FSDPC_OK);
  ck_assert(ratio == 0.5);
  ck_assert_int_eq(fsdpc__opts_get(o, "embedding_unit", FSDPC_OPT_BOOL, &flag, 0, &err), FSDPC_OK);
  ck_assert_int_eq(flag, 1);
  ck_assert_int_eq(fsdpc__opts_get(o, "layer_name", FSDPC_OPT_STRING, name, sizeof name, &err),
                   FSDPC_OK);
  ck_assert_str_eq(name, "decoder_layer");
  ck_assert_int_eq(fsdpc__opts_count(o), 4);
  ck_assert_str_eq(fsdpc__opts_where(o), "fsdp.wrap.options");
  /* Reading with the wrong type is a bug in the caller. */
  ck_assert_int_eq(fsdpc__opts_get(o, "ratio", FSDPC_OPT_INT, &min, 0, &err), FSDPC_INTERNAL_ERROR);
  /* A buffer too small for the string. */
  char tiny[4];
  ck_assert_int_eq(fsdpc__opts_get(o, "layer_name", FSDPC_OPT_STRING, tiny, sizeof tiny, &err),
                   FSDPC_INVALID_USAGE);
  ck_assert_int_eq(fsdpc__opts_get(o, "nope", FSDPC_OPT_INT, &min, 0, &err), FSDPC_INVALID_USAGE);

  /* The clone is independent and keeps the validated values. */
  fsdpc_opts *copy = NULL;
  ck_assert_int_eq(fsdpc__opts_clone(o, &copy, &err), FSDPC_OK);
  fsdpc__config_destroy(c);
  ck_assert_int_eq(fsdpc__opts_get(copy, "min_num_params", FSDPC_OPT_INT, &min, 0, &err), FSDPC_OK);
  ck_assert_int_eq(min, 1000000);
  /* Validating again against another plugin starts from the user's values
   * only: the first plugin's defaults (ratio, layer_name) are gone. */
  const fsdpc_option_desc *only_min[] = {&d_min};
  ck_assert_int_eq(fsdpc__opts_validate(copy, only_min, 1, "wrap 'other'", &err),
                   FSDPC_INVALID_USAGE);
  ck_assert_msg(strstr(err.msg, "cfg.yaml:7:23: unknown option 'fsdp.wrap.options.embedding_unit' "
                                "for wrap 'other'"),
                "%s", err.msg);
  ck_assert_int_eq(fsdpc__opts_count(copy), 2);
  ck_assert_int_eq(fsdpc__opts_validate(copy, descs, 4, "wrap 'size'", &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__opts_count(copy), 4); /* defaults filled once, not twice */
  fsdpc__opts_destroy(copy);
}
END_TEST

START_TEST(override_value_wins) {
  fsdpc_config *c = load_wrap("      min_num_params: 5\n", "fsdp.wrap.options.min_num_params=7");
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__opts_validate(c->fsdp.wrap.options, descs, 4, "wrap 'size'", &err),
                   FSDPC_OK);
  int64_t v = 0;
  ck_assert_int_eq(
      fsdpc__opts_get(c->fsdp.wrap.options, "min_num_params", FSDPC_OPT_INT, &v, 0, &err),
      FSDPC_OK);
  ck_assert_int_eq(v, 7);
  fsdpc__config_destroy(c);
}
END_TEST

START_TEST(errors_name_file_line_col) {
  /* Lines: 1 model, 2 fsdp, 3 wrap, 4 policy, 5 options, 6 first option. */
  const char *msg = validate("      min_num_param: 5\n", NULL);
  ck_assert_str_eq(msg, "cfg.yaml:6:22: unknown option 'fsdp.wrap.options.min_num_param' for "
                        "wrap 'size' (did you mean 'min_num_params'?)");
  msg = validate("      ratio: 0.5\n      min_num_params: many\n", NULL);
  ck_assert_msg(strstr(msg, "cfg.yaml:7:23: fsdp.wrap.options.min_num_params: expected an "
                            "integer, got 'many'"),
                "%s", msg);
  msg = validate("      ratio: 1.5\n", NULL);
  ck_assert_msg(strstr(msg, "cfg.yaml:6:14: fsdp.wrap.options.ratio: 1.5 is out of range") &&
                    strstr(msg, "[0, 1]"),
                "%s", msg);
  msg = validate("      embedding_unit: sometimes\n", NULL);
  ck_assert_msg(strstr(msg, "cfg.yaml:6:23: fsdp.wrap.options.embedding_unit: expected true or "
                            "false"),
                "%s", msg);
  msg = validate("      min_num_params: 0\n", NULL);
  ck_assert_msg(strstr(msg, "cfg.yaml:6:23:") && strstr(msg, "out of range"), "%s", msg);
  msg = validate("      zzz: 1\n", NULL);
  ck_assert_msg(strstr(msg, "cfg.yaml:6:12: unknown option 'fsdp.wrap.options.zzz'") &&
                    !strstr(msg, "did you mean"),
                "%s", msg);
  /* From an override: the message names the override text. */
  msg = validate("      ratio: 0.1\n", "fsdp.wrap.options.ratio=2");
  ck_assert_str_eq(msg, "override 'fsdp.wrap.options.ratio=2': fsdp.wrap.options.ratio: 2 is "
                        "out of range (must be in [0, 1]) (option of wrap 'size')");
}
END_TEST

START_TEST(no_options_and_required) {
  fsdpc_config *c = load_wrap("      anything: 1\n", NULL);
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__opts_validate(c->fsdp.wrap.options, NULL, 0, "wrap 'transformer'", &err),
                   FSDPC_INVALID_USAGE);
  ck_assert_str_eq(err.msg, "cfg.yaml:6:17: unknown option 'fsdp.wrap.options.anything': wrap "
                            "'transformer' takes no options");
  fsdpc__config_destroy(c);

  fsdpc_opts *o;
  ck_assert_int_eq(fsdpc__opts_create("optim.options", &o, &err), FSDPC_OK);
  const fsdpc_option_desc *req[] = {&d_req};
  ck_assert_int_eq(fsdpc__opts_validate(o, req, 1, "optim 'x'", &err), FSDPC_INVALID_USAGE);
  ck_assert_str_eq(err.msg, "optim 'x': missing required option 'optim.options.key'");
  ck_assert_int_eq(fsdpc__opts_add(o, "key", "v", "<override>", 0, 0, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__opts_validate(o, req, 1, "optim 'x'", &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__opts_add(o, "", "v", "f.yaml", 2, 3, &err), FSDPC_INVALID_USAGE);
  ck_assert_msg(strstr(err.msg, "f.yaml:2:3"), "%s", err.msg);
  fsdpc__opts_destroy(o);
  fsdpc__opts_destroy(NULL);

  /* A plugin whose default does not parse is reported as its bug. */
  static const fsdpc_option_desc bad_default = {
      sizeof(fsdpc_option_desc), "n", FSDPC_OPT_INT, "lots", 1, 0, "broken"};
  const fsdpc_option_desc *bad[] = {&bad_default};
  ck_assert_int_eq(fsdpc__opts_create("optim.options", &o, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__opts_validate(o, bad, 1, "optim 'broken'", &err), FSDPC_INTERNAL_ERROR);
  fsdpc__opts_destroy(o);
}
END_TEST

START_TEST(did_you_mean) {
  ck_assert_int_eq(fsdpc__edit_distance("", ""), 0);
  ck_assert_int_eq(fsdpc__edit_distance("lr", "lr"), 0);
  ck_assert_int_eq(fsdpc__edit_distance("shardng", "sharding"), 1);
  ck_assert_int_eq(fsdpc__edit_distance("ab", "ba"), 1); /* a swap counts once */
  ck_assert_int_eq(fsdpc__edit_distance("kitten", "sitting"), 3);
  const char *names[] = {"lr", "eps", "betas", "weight_decay"};
  ck_assert_str_eq(fsdpc__did_you_mean("wieght_decay", names, 4), "weight_decay");
  ck_assert_str_eq(fsdpc__did_you_mean("lrr", names, 4), "lr");
  ck_assert_ptr_null(fsdpc__did_you_mean("momentum", names, 4));
}
END_TEST

int main(void) {
  Suite *s = suite_create("config_opts");
  TCase *tc = tcase_create("opts");
  tcase_add_test(tc, valid_values_and_defaults);
  tcase_add_test(tc, override_value_wins);
  tcase_add_test(tc, errors_name_file_line_col);
  tcase_add_test(tc, no_options_and_required);
  tcase_add_test(tc, did_you_mean);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
