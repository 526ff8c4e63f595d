/* Hugging Face checkpoint directories: a single model.safetensors, a
 * sharded index.json layout with lazily opened shards, shape checks, and
 * the errors for missing tensors and missing shard files. */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/hf_ckpt.h"
#include "io_test_util.h"

static char dir[512];

static void rm_rf(const char *d) {
  DIR *dp = opendir(d);
  if (!dp)
    return;
  struct dirent *e;
  char p[1024];
  while ((e = readdir(dp)))
    if (e->d_name[0] != '.') {
      snprintf(p, sizeof p, "%s/%s", d, e->d_name);
      unlink(p);
    }
  closedir(dp);
  rmdir(d);
}

static void setup(void) { io_tmpdir(dir, sizeof dir); }
static void teardown(void) { rm_rf(dir); }

static char *join(const char *name) {
  static char buf[4][768];
  static int k;
  char *p = buf[k++ & 3];
  snprintf(p, sizeof buf[0], "%s/%s", dir, name);
  return p;
}

/* Two shards: embed + layer 0 in the first, norm + layer 1 in the second. */
static float emb[6] = {1, 2, 3, 4, 5, 6}, l0[4] = {7, 8, 9, 10}, l1[4] = {-1, -2, -3, -4},
             nrm[3] = {0.5f, 0.25f, 0.125f};

static void write_sharded(int with_index) {
  fsdpc_err err = {0};
  fsdpc_st_entry s1[2] = {{sizeof s1[0], "model.embed_tokens.weight", 2, {3, 2}, emb},
                          {sizeof s1[1], "model.layers.0.w", 2, {2, 2}, l0}};
  fsdpc_st_entry s2[2] = {{sizeof s2[0], "model.norm.weight", 1, {3}, nrm},
                          {sizeof s2[1], "model.layers.1.w", 2, {2, 2}, l1}};
  ck_assert_int_eq(fsdpc__st_write(join("model-00001-of-00002.safetensors"), s1, 2,
                                   FSDPC_DTYPE_BF16, NULL, &err),
                   FSDPC_OK);
  ck_assert_int_eq(
      fsdpc__st_write(join("model-00002-of-00002.safetensors"), s2, 2, FSDPC_DTYPE_F32, NULL, &err),
      FSDPC_OK);
  if (!with_index)
    return;
  const char *names[4] = {"model.norm.weight", "model.layers.1.w", "model.embed_tokens.weight",
                          "model.layers.0.w"};
  const char *files[4] = {"model-00002-of-00002.safetensors", "model-00002-of-00002.safetensors",
                          "model-00001-of-00002.safetensors", "model-00001-of-00002.safetensors"};
  ck_assert_int_eq(fsdpc__hf_index_write(dir, names, files, 4, 12 + 8 + 12 + 16, &err), FSDPC_OK);
}

START_TEST(single_file) {
  fsdpc_err err = {0};
  fsdpc_st_entry e[1] = {{sizeof e[0], "lm_head.weight", 2, {3, 2}, emb}};
  ck_assert_int_eq(fsdpc__st_write(join("model.safetensors"), e, 1, FSDPC_DTYPE_F32, NULL, &err),
                   FSDPC_OK);
  fsdpc_hf_ckpt *ck;
  ck_assert_msg(fsdpc__hf_ckpt_open(dir, &ck, &err) == FSDPC_OK, "%s", err.msg);
  ck_assert_uint_eq(fsdpc__hf_ckpt_count(ck), 1);
  ck_assert_str_eq(fsdpc__hf_ckpt_name(ck, 0), "lm_head.weight");
  float got[2];
  ck_assert_int_eq(fsdpc__hf_ckpt_read_f32(ck, "lm_head.weight", 4, 2, got, &err), FSDPC_OK);
  ck_assert_float_eq(got[0], 5);
  ck_assert_float_eq(got[1], 6);
  ck_assert_int_eq(fsdpc__hf_ckpt_read_f32(ck, "model.norm.weight", 0, 1, got, &err),
                   FSDPC_INVALID_USAGE);
  io_assert_msg(err.msg, dir, "tensor 'model.norm.weight' not found in model.safetensors", NULL);
  fsdpc__hf_ckpt_close(ck);
}
END_TEST

START_TEST(sharded_index) {
  write_sharded(1);
  fsdpc_err err = {0};
  fsdpc_hf_ckpt *ck;
  ck_assert_msg(fsdpc__hf_ckpt_open(dir, &ck, &err) == FSDPC_OK, "%s", err.msg);
  ck_assert_uint_eq(fsdpc__hf_ckpt_count(ck), 4);
  ck_assert_str_eq(fsdpc__hf_ckpt_name(ck, 0), "model.embed_tokens.weight"); /* sorted */
  ck_assert(fsdpc__hf_ckpt_has(ck, "model.layers.1.w"));
  ck_assert(!fsdpc__hf_ckpt_has(ck, "model.layers.2.w"));

  const fsdpc_st_info *info;
  ck_assert_int_eq(fsdpc__hf_ckpt_find(ck, "model.layers.0.w", &info, &err), FSDPC_OK);
  ck_assert_str_eq(info->dtype_name, "BF16");
  ck_assert_int_eq(info->shape[0], 2);
  float got[6];
  ck_assert_int_eq(fsdpc__hf_ckpt_read_f32(ck, "model.embed_tokens.weight", 0, 6, got, &err),
                   FSDPC_OK);
  for (int i = 0; i < 6; i++)
    ck_assert_float_eq(got[i], emb[i]); /* exact in bf16 */
  ck_assert_int_eq(fsdpc__hf_ckpt_read_f32(ck, "model.norm.weight", 1, 2, got, &err), FSDPC_OK);
  ck_assert_float_eq(got[0], 0.25f);
  ck_assert_float_eq(got[1], 0.125f);
  ck_assert_int_eq(fsdpc__hf_ckpt_read_f32(ck, "model.layers.1.w", 3, 1, got, &err), FSDPC_OK);
  ck_assert_float_eq(got[0], -4);

  int64_t good[2] = {2, 2}, bad[2] = {4, 1};
  ck_assert_int_eq(fsdpc__hf_ckpt_expect(ck, "model.layers.1.w", 2, good, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__hf_ckpt_expect(ck, "model.layers.1.w", 2, bad, &err),
                   FSDPC_INVALID_USAGE);
  io_assert_msg(err.msg, join("model-00002-of-00002.safetensors"),
                ": tensor 'model.layers.1.w' has shape [2, 2], expected [4, 1]", NULL);
  ck_assert_int_eq(fsdpc__hf_ckpt_expect(ck, "model.norm.weight", 2, good, &err),
                   FSDPC_INVALID_USAGE);
  io_assert_msg(err.msg, "tensor 'model.norm.weight' has shape [3], expected [2, 2]", NULL, NULL);

  ck_assert_int_eq(fsdpc__hf_ckpt_read_f32(ck, "model.layers.9.w", 0, 1, got, &err),
                   FSDPC_INVALID_USAGE);
  io_assert_msg(err.msg, dir,
                ": tensor 'model.layers.9.w' not found in model.safetensors.index.json", NULL);
  ck_assert_int_eq(fsdpc__hf_ckpt_expect(ck, "x", 1, good, &err), FSDPC_INVALID_USAGE);
  fsdpc__hf_ckpt_close(ck);
}
END_TEST

START_TEST(index_file_format) {
  write_sharded(1);
  char *text;
  size_t len;
  FILE *fp = fopen(join("model.safetensors.index.json"), "rb");
  ck_assert_ptr_nonnull(fp);
  text = calloc(1, 4096);
  len = fread(text, 1, 4095, fp);
  fclose(fp);
  ck_assert_uint_gt(len, 0);
  /* total_size is a plain integer and keys are sorted, as transformers writes. */
  ck_assert_ptr_nonnull(strstr(text, "\"total_size\":\t48"));
  const char *a = strstr(text, "model.embed_tokens.weight"), *b = strstr(text, "model.norm");
  ck_assert(a && b && a < b);
  free(text);

  fsdpc_err err = {0};
  const char *names[2] = {"a", "a"}, *files[2] = {"x.safetensors", "y.safetensors"};
  ck_assert_int_ne(fsdpc__hf_index_write(dir, names, files, 2, 0, &err), FSDPC_OK);
  io_assert_msg(err.msg, "tensor 'a' is listed twice", NULL, NULL);
  const char *evil[1] = {"../x.safetensors"};
  ck_assert_int_ne(fsdpc__hf_index_write(dir, names, evil, 1, 0, &err), FSDPC_OK);
}
END_TEST

START_TEST(index_points_at_missing_file) {
  write_sharded(1);
  ck_assert_int_eq(unlink(join("model-00002-of-00002.safetensors")), 0);
  fsdpc_err err = {0};
  fsdpc_hf_ckpt *ck = (fsdpc_hf_ckpt *)1;
  ck_assert_int_eq(fsdpc__hf_ckpt_open(dir, &ck, &err), FSDPC_INVALID_USAGE);
  ck_assert_ptr_null(ck);
  io_assert_msg(err.msg, join("model-00002-of-00002.safetensors"),
                ": listed in model.safetensors.index.json (for tensor 'model.",
                "cannot be opened: No such file or directory");
}
END_TEST

START_TEST(index_maps_tensor_to_wrong_shard) {
  write_sharded(0);
  const char *names[1] = {"model.norm.weight"};
  const char *files[1] = {"model-00001-of-00002.safetensors"};
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__hf_index_write(dir, names, files, 1, 0, &err), FSDPC_OK);
  fsdpc_hf_ckpt *ck;
  ck_assert_int_eq(fsdpc__hf_ckpt_open(dir, &ck, &err), FSDPC_OK);
  float got[1];
  ck_assert_int_eq(fsdpc__hf_ckpt_read_f32(ck, "model.norm.weight", 0, 1, got, &err),
                   FSDPC_INVALID_USAGE);
  io_assert_msg(err.msg, join("model-00001-of-00002.safetensors"),
                ": tensor 'model.norm.weight' not found in this file, although "
                "model.safetensors.index.json maps it here",
                NULL);
  fsdpc__hf_ckpt_close(ck);
}
END_TEST

START_TEST(bad_shard_is_reported_lazily) {
  write_sharded(1);
  io_write_bytes(join("model-00002-of-00002.safetensors"), "", 0);
  fsdpc_err err = {0};
  fsdpc_hf_ckpt *ck;
  ck_assert_int_eq(fsdpc__hf_ckpt_open(dir, &ck, &err), FSDPC_OK);
  float got[1];
  /* Shard 1 is fine and shard 2 is never parsed until asked for. */
  ck_assert_int_eq(fsdpc__hf_ckpt_read_f32(ck, "model.layers.0.w", 0, 1, got, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__hf_ckpt_read_f32(ck, "model.norm.weight", 0, 1, got, &err),
                   FSDPC_INVALID_USAGE);
  io_assert_msg(err.msg, join("model-00002-of-00002.safetensors"), ": file is empty", NULL);
  fsdpc__hf_ckpt_close(ck);
}
END_TEST

START_TEST(bad_index_and_empty_dir) {
  fsdpc_err err = {0};
  fsdpc_hf_ckpt *ck;
  ck_assert_int_eq(fsdpc__hf_ckpt_open(dir, &ck, &err), FSDPC_INVALID_USAGE);
  io_assert_msg(err.msg, dir, "neither model.safetensors nor model.safetensors.index.json", NULL);
  io_write_bytes(join("model.safetensors.index.json"), "{\"weight_map\": [", 16);
  ck_assert_int_eq(fsdpc__hf_ckpt_open(dir, &ck, &err), FSDPC_INVALID_USAGE);
  io_assert_msg(err.msg, "model.safetensors.index.json: not valid JSON", NULL, NULL);
  const char *t = "{\"weight_map\": {\"a\": \"/etc/passwd\"}}";
  io_write_bytes(join("model.safetensors.index.json"), t, strlen(t));
  ck_assert_int_eq(fsdpc__hf_ckpt_open(dir, &ck, &err), FSDPC_INVALID_USAGE);
  io_assert_msg(err.msg, "weight_map entry 'a' must map a tensor name to a file name", NULL, NULL);
  const char *u = "{\"metadata\": {}}";
  io_write_bytes(join("model.safetensors.index.json"), u, strlen(u));
  ck_assert_int_eq(fsdpc__hf_ckpt_open(dir, &ck, &err), FSDPC_INVALID_USAGE);
  io_assert_msg(err.msg, "\"weight_map\" is missing, empty or not an object", NULL, NULL);
  ck_assert_int_eq(fsdpc__hf_ckpt_open(join("nope"), &ck, &err), FSDPC_INVALID_USAGE);
  io_assert_msg(err.msg, "nope: not a directory", NULL, NULL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("io_hf_ckpt");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, single_file);
  tcase_add_test(tc, sharded_index);
  tcase_add_test(tc, index_file_format);
  tcase_add_test(tc, index_points_at_missing_file);
  tcase_add_test(tc, index_maps_tensor_to_wrong_shard);
  tcase_add_test(tc, bad_shard_is_reported_lazily);
  tcase_add_test(tc, bad_index_and_empty_dir);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
