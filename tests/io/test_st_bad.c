/* Bad safetensors files: each is refused at open with one line that names
 * the file (and the tensor when one is at fault) and says what is wrong. */
#include <sys/stat.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "io_test_util.h"

static char dir[512];
static char path[640];

static void setup(void) {
  io_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
}

static void teardown(void) {
  unlink(path);
  rmdir(dir);
}

/* Opens path, expects failure with status, and checks the message. */
static void expect_refused(fsdpc_status status, const char *a, const char *b) {
  fsdpc_st_file *f = (fsdpc_st_file *)1;
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__st_open(path, &f, &err), status);
  ck_assert_ptr_null(f);
  ck_assert_int_eq(err.status, status);
  io_assert_msg(err.msg, path, a, b);
}

#define T1(dtype, shape, b, e)                                                                     \
  "{\"w\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}}"

static const unsigned char zeros[64];

START_TEST(empty_file) {
  io_write_bytes(path, "", 0);
  expect_refused(FSDPC_INVALID_USAGE, "file is empty (0 bytes)", NULL);
}
END_TEST

START_TEST(shorter_than_length_prefix) {
  io_write_bytes(path, "\x10\x00\x00", 3);
  expect_refused(FSDPC_INVALID_USAGE, "file is 3 bytes, too short", NULL);
}
END_TEST

START_TEST(truncated_data) {
  /* A good file with its last bytes cut off: the tensor that no longer
   * fits is named. */
  float x[8] = {0};
  fsdpc_st_entry e[2] = {{sizeof e[0], "first", 1, {4}, x}, {sizeof e[1], "last", 1, {4}, x}};
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__st_write(path, e, 2, FSDPC_DTYPE_F32, NULL, &err), FSDPC_OK);
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_int_eq(truncate(path, st.st_size - 3), 0);
  expect_refused(FSDPC_INVALID_USAGE,
                 "tensor 'last': data_offsets [16, 32] exceed the data "
                 "section (29 bytes); the file may be truncated",
                 NULL);
}
END_TEST

START_TEST(header_length_larger_than_file) {
  io_write_st(path, "{}", NULL, 0, 4096);
  expect_refused(FSDPC_INVALID_USAGE, "header length 4096 exceeds the file size (10 bytes)", NULL);
}
END_TEST

START_TEST(header_length_above_limit) {
  io_write_st(path, "{}", NULL, 0, 200ull << 20);
  expect_refused(FSDPC_INVALID_USAGE, "header length 209715200 exceeds the 100 MiB limit", NULL);
}
END_TEST

START_TEST(header_not_json) {
  io_write_st(path, "{\"w\": {\"dtype\": F32}}", NULL, 0, 0);
  expect_refused(FSDPC_INVALID_USAGE, "header is not valid JSON (error near byte", NULL);
  io_write_st(path, "PK\x03\x04 zip file", NULL, 0, 0);
  expect_refused(FSDPC_INVALID_USAGE, "header does not start with '{'", NULL);
  io_write_st(path, "{}  junk", NULL, 0, 0);
  expect_refused(FSDPC_INVALID_USAGE, "bytes after its JSON object (at byte 4)", NULL);
}
END_TEST

START_TEST(dtype_unknown) {
  io_write_st(path, T1("Q4_K", "[1]", 0, 4), zeros, 4, 0);
  expect_refused(FSDPC_INVALID_USAGE, "tensor 'w': dtype 'Q4_K' is unknown", NULL);
}
END_TEST

START_TEST(shape_negative) {
  io_write_st(path, T1("F32", "[2,-3]", 0, 24), zeros, 24, 0);
  expect_refused(FSDPC_INVALID_USAGE, "tensor 'w': shape has a negative dimension -3 at index 1",
                 NULL);
  io_write_st(path, T1("F32", "[2.5]", 0, 10), zeros, 10, 0);
  expect_refused(FSDPC_INVALID_USAGE, "tensor 'w': shape entry 0 is not a non-negative integer",
                 NULL);
}
END_TEST

START_TEST(shape_overflow) {
  io_write_st(path, T1("F32", "[4294967296,4294967296]", 0, 4), zeros, 4, 0);
  expect_refused(FSDPC_INVALID_USAGE,
                 "tensor 'w': shape [4294967296, 4294967296] overflows a 64-bit byte count", NULL);
  /* A dimension past 2^53 cannot be an exact JSON number. */
  io_write_st(path, T1("F32", "[4611686018427387904]", 0, 4), zeros, 4, 0);
  expect_refused(FSDPC_INVALID_USAGE, "tensor 'w'", "shape entry 0 is not a non-negative integer");
  /* numel (2^62) fits but the byte count does not. */
  io_write_st(path, T1("I64", "[2147483648,2147483648]", 0, 4), zeros, 4, 0);
  expect_refused(FSDPC_INVALID_USAGE, "tensor 'w'", "overflows a 64-bit byte count");
}
END_TEST

START_TEST(offsets_out_of_range) {
  io_write_st(path, T1("F32", "[1]", 10, 99999999), zeros, 64, 0);
  expect_refused(FSDPC_INVALID_USAGE,
                 "tensor 'w': data_offsets [10, 99999999] exceed the data section (64 bytes)",
                 NULL);
  io_write_st(path, T1("F32", "[1]", 8, 4), zeros, 64, 0);
  expect_refused(FSDPC_INVALID_USAGE, "tensor 'w': data_offsets [8, 4] are reversed", NULL);
  io_write_st(path, "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", zeros, 4, 0);
  expect_refused(FSDPC_INVALID_USAGE, "tensor 'w': \"data_offsets\" must be [begin, end]", NULL);
}
END_TEST

START_TEST(offsets_size_mismatch) {
  io_write_st(path, T1("BF16", "[3,4]", 0, 48), zeros, 64, 0);
  expect_refused(FSDPC_INVALID_USAGE,
                 "tensor 'w': data_offsets [0, 48] hold 48 bytes, but BF16 [3, 4] needs 24", NULL);
}
END_TEST

START_TEST(overlapping_tensors) {
  io_write_st(path,
              "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
              zeros, 32, 0);
  expect_refused(FSDPC_INVALID_USAGE, "tensor 'b': data_offsets [8, 24] overlap tensor 'a' [0, 16]",
                 NULL);
  /* An empty tensor between them must not hide the overlap. */
  io_write_st(path,
              "{\"a\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]},"
              "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}",
              zeros, 32, 0);
  expect_refused(FSDPC_INVALID_USAGE, "tensor 'b'", "overlap tensor 'a' [0, 32]");
}
END_TEST

START_TEST(duplicate_tensor_and_bad_metadata) {
  io_write_st(path,
              "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
              "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
              zeros, 8, 0);
  expect_refused(FSDPC_INVALID_USAGE, "tensor 'a' appears twice in the header", NULL);
  io_write_st(path, "{\"__metadata__\":{\"format\":\"pt\",\"step\":7}}", NULL, 0, 0);
  expect_refused(FSDPC_INVALID_USAGE, "\"__metadata__\" key 'step' is not a string", NULL);
  io_write_st(path, "{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", zeros, 4, 0);
  expect_refused(FSDPC_INVALID_USAGE, "tensor 'w': missing array field \"shape\"", NULL);
}
END_TEST

START_TEST(hostile_name_stays_one_line) {
  io_write_st(path, "{\"evil\\nname\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}",
              zeros, 4, 0);
  expect_refused(FSDPC_INVALID_USAGE, "tensor 'evil?name'", NULL);
}
END_TEST

START_TEST(missing_file_and_directory) {
  expect_refused(FSDPC_INVALID_USAGE, "cannot open: No such file or directory", NULL);
  fsdpc_st_file *f;
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__st_open(dir, &f, &err), FSDPC_INVALID_USAGE);
  io_assert_msg(err.msg, dir, "not a regular file", NULL);
}
END_TEST

START_TEST(memory_image_same_checks) {
  unsigned char img[8 + 2] = {2, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
  fsdpc_st_file *f;
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__st_open_mem("img", img, sizeof img, &f, &err), FSDPC_OK);
  ck_assert_uint_eq(fsdpc__st_count(f), 0);
  fsdpc__st_close(f);
  img[0] = 3;
  ck_assert_int_eq(fsdpc__st_open_mem("img", img, sizeof img, &f, &err), FSDPC_INVALID_USAGE);
  io_assert_msg(err.msg, "img: header length 3 exceeds the file size (10 bytes)", NULL, NULL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("io_st_bad");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, empty_file);
  tcase_add_test(tc, shorter_than_length_prefix);
  tcase_add_test(tc, truncated_data);
  tcase_add_test(tc, header_length_larger_than_file);
  tcase_add_test(tc, header_length_above_limit);
  tcase_add_test(tc, header_not_json);
  tcase_add_test(tc, dtype_unknown);
  tcase_add_test(tc, shape_negative);
  tcase_add_test(tc, shape_overflow);
  tcase_add_test(tc, offsets_out_of_range);
  tcase_add_test(tc, offsets_size_mismatch);
  tcase_add_test(tc, overlapping_tensors);
  tcase_add_test(tc, duplicate_tensor_and_bad_metadata);
  tcase_add_test(tc, hostile_name_stays_one_line);
  tcase_add_test(tc, missing_file_and_directory);
  tcase_add_test(tc, memory_image_same_checks);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
