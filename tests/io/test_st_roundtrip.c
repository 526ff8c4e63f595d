/* safetensors write -> read: F32 exact, BF16/F16 rounded to nearest even,
 * partial reads at offsets, the streaming writer, and a sparse 8 GiB file
 * read at its tail without reading the rest. */
#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/dtype.h"
#include "io/safetensors.h"
#include "io_test_util.h"
#include "util/mem.h"

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

static float *ramp(uint64_t n, float scale) {
  float *p = malloc((n ? n : 1) * sizeof *p); /* (n) */
  for (uint64_t i = 0; i < n; i++)
    p[i] = scale * ((float)i - (float)n / 3) + 0.1f;
  return p;
}

static uint64_t header_len(const char *p) {
  unsigned char b[8];
  int fd = open(p, O_RDONLY);
  ck_assert_int_eq(pread(fd, b, 8, 0), 8);
  close(fd);
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--)
    n = (n << 8) | b[i];
  return n;
}

START_TEST(f32_round_trip_exact) {
  float *w = ramp(15, 0.37f), *b = ramp(7, -1.5f), s = 3.25f;
  w[3] = NAN, w[4] = -INFINITY, w[5] = fsdpc__f32_from_bits(1); /* subnormal */
  fsdpc_st_entry e[4] = {
      {sizeof(fsdpc_st_entry), "model.layers.0.w", 2, {3, 5}, w},
      {sizeof(fsdpc_st_entry), "bias", 1, {7}, b},
      {sizeof(fsdpc_st_entry), "scalar", 0, {0}, &s},
      {sizeof(fsdpc_st_entry), "empty", 2, {0, 4}, NULL},
  };
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__st_write(path, e, 4, FSDPC_DTYPE_F32, "{\"step\": \"12\"}", &err),
                   FSDPC_OK);
  ck_assert_uint_eq(header_len(path) % 8, 0); /* padded like the reference */

  fsdpc_st_file *f;
  ck_assert_msg(fsdpc__st_open(path, &f, &err) == FSDPC_OK, "%s", err.msg);
  ck_assert_uint_eq(fsdpc__st_count(f), 4);
  ck_assert_str_eq(fsdpc__st_meta_get(f, "step"), "12");
  ck_assert_str_eq(fsdpc__st_meta_get(f, "format"), "pt");
  ck_assert_ptr_null(fsdpc__st_meta_get(f, "nope"));
  /* Data is contiguous from offset 0 in layout order (what strict readers
   * such as the Rust reference require). */
  uint64_t expect_begin = 0;
  for (uint32_t i = 0; i < 4; i++) {
    const fsdpc_st_info *t = fsdpc__st_at(f, i);
    ck_assert_uint_eq(t->begin, expect_begin);
    expect_begin = t->end;
  }
  const fsdpc_st_info *t = fsdpc__st_find(f, "model.layers.0.w");
  ck_assert_ptr_nonnull(t);
  ck_assert_int_eq(t->dtype, FSDPC_DTYPE_F32);
  ck_assert_str_eq(t->dtype_name, "F32");
  ck_assert_int_eq(t->ndim, 2);
  ck_assert_int_eq(t->shape[0], 3);
  ck_assert_int_eq(t->shape[1], 5);
  ck_assert_uint_eq(t->numel, 15);
  ck_assert_int_eq(fsdpc__st_find(f, "scalar")->ndim, 0);
  ck_assert_uint_eq(fsdpc__st_find(f, "empty")->numel, 0);
  ck_assert_ptr_null(fsdpc__st_find(f, "model.layers.0"));

  float got[15];
  ck_assert_int_eq(fsdpc__st_read_f32(f, "model.layers.0.w", 0, 15, got, &err), FSDPC_OK);
  ck_assert_int_eq(memcmp(got, w, sizeof got), 0); /* bit-exact, NaN included */
  ck_assert_int_eq(fsdpc__st_read_f32(f, "bias", 0, 7, got, &err), FSDPC_OK);
  ck_assert_int_eq(memcmp(got, b, 7 * sizeof *got), 0);
  ck_assert_int_eq(fsdpc__st_read_f32(f, "scalar", 0, 1, got, &err), FSDPC_OK);
  ck_assert_float_eq(got[0], 3.25f);
  ck_assert_int_eq(fsdpc__st_read_f32(f, "empty", 0, 0, got, &err), FSDPC_OK);
  fsdpc__st_close(f);
  free(w);
  free(b);
}
END_TEST

START_TEST(bf16_and_f16_round_trip_rne) {
  /* Hand-picked: ties both ways, NaN, inf, a subnormal, FLT_MAX. */
  const uint32_t bits[] = {0x3F800000u, 0x3F808000u, 0x3F818000u, 0x3F808001u,
                           0x7FC00000u, 0xFF800000u, 0x00018000u, 0x7F7FFFFFu};
  const uint16_t want[] = {0x3F80, 0x3F80, 0x3F82, 0x3F81, 0x7FC0, 0xFF80, 0x0002, 0x7F80};
  float x[8];
  for (int i = 0; i < 8; i++)
    x[i] = fsdpc__f32_from_bits(bits[i]);
  fsdpc_st_entry e = {sizeof e, "x", 1, {8}, x};
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__st_write(path, &e, 1, FSDPC_DTYPE_BF16, NULL, &err), FSDPC_OK);

  /* The stored bytes are little-endian bf16 with the expected rounding. */
  uint64_t hl = header_len(path);
  unsigned char raw[16];
  int fd = open(path, O_RDONLY);
  ck_assert_int_eq(pread(fd, raw, 16, (off_t)(8 + hl)), 16);
  close(fd);
  for (int i = 0; i < 8; i++)
    ck_assert_uint_eq((uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8), want[i]);

  fsdpc_st_file *f;
  ck_assert_int_eq(fsdpc__st_open(path, &f, &err), FSDPC_OK);
  ck_assert_str_eq(fsdpc__st_find(f, "x")->dtype_name, "BF16");
  float got[8];
  ck_assert_int_eq(fsdpc__st_read_f32(f, "x", 0, 8, got, &err), FSDPC_OK);
  for (int i = 0; i < 8; i++)
    ck_assert_uint_eq(fsdpc__f32_bits(got[i]), (uint32_t)want[i] << 16);
  fsdpc__st_close(f);

  /* F16: 1 + 2^-11 is a tie that rounds to 1, 65520 overflows to inf. */
  float y[3] = {1.0f + ldexpf(1, -11), 65520.0f, -2.5f};
  fsdpc_st_entry e16 = {sizeof e16, "y", 1, {3}, y};
  ck_assert_int_eq(fsdpc__st_write(path, &e16, 1, FSDPC_DTYPE_F16, NULL, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__st_open(path, &f, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__st_read_f32(f, "y", 0, 3, got, &err), FSDPC_OK);
  ck_assert_float_eq(got[0], 1.0f);
  ck_assert(isinf(got[1]));
  ck_assert_float_eq(got[2], -2.5f);
  fsdpc__st_close(f);
}
END_TEST

START_TEST(partial_reads_at_offsets) {
  enum { R = 100, C = 237, N = R * C }; /* N > the 8192-element read chunk */
  float *w = ramp(N, 0.013f);           /* (R, C) */
  fsdpc_st_entry e[2] = {{sizeof e[0], "a", 2, {R, C}, w}, {sizeof e[1], "b", 1, {N}, w}};
  fsdpc_err err = {0};
  for (int pass = 0; pass < 2; pass++) {
    int32_t dtype = pass ? FSDPC_DTYPE_BF16 : FSDPC_DTYPE_F32;
    ck_assert_int_eq(fsdpc__st_write(path, e, 2, dtype, NULL, &err), FSDPC_OK);
    fsdpc_st_file *f;
    ck_assert_int_eq(fsdpc__st_open(path, &f, &err), FSDPC_OK);
    float *got = malloc(N * sizeof *got);
    const uint64_t offs[][2] = {{0, 1},        {1, 5}, {C - 1, 2}, {N - 1, 1},
                                {8000, 10000}, {0, N}, {12345, 0}};
    for (size_t k = 0; k < sizeof offs / sizeof offs[0]; k++) {
      uint64_t o = offs[k][0], n = offs[k][1];
      ck_assert_int_eq(fsdpc__st_read_f32(f, pass ? "b" : "a", o, n, got, &err), FSDPC_OK);
      for (uint64_t i = 0; i < n; i++) {
        float want = pass ? fsdpc__bf16_to_f32(fsdpc__f32_to_bf16(w[o + i])) : w[o + i];
        ck_assert_msg(fsdpc__f32_bits(got[i]) == fsdpc__f32_bits(want), "pass %d offset %lu + %lu",
                      pass, (unsigned long)o, (unsigned long)i);
      }
    }
    /* Past the end, and overflowing offset + n, are refused by name. */
    ck_assert_int_eq(fsdpc__st_read_f32(f, "a", N - 1, 2, got, &err), FSDPC_INVALID_USAGE);
    io_assert_msg(err.msg, path, "tensor 'a'", "outside its 23700 elements");
    ck_assert_int_eq(fsdpc__st_read_f32(f, "a", 2, UINT64_MAX, got, &err), FSDPC_INVALID_USAGE);
    ck_assert_int_eq(fsdpc__st_read_f32(f, "zz", 0, 1, got, &err), FSDPC_INVALID_USAGE);
    io_assert_msg(err.msg, path, "tensor 'zz' not found", NULL);
    free(got);
    fsdpc__st_close(f);
  }
  free(w);
}
END_TEST

START_TEST(non_float_dtype_listed_but_refused) {
  const char *h = "{\"ids\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]},"
                  "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[16,20]}}";
  unsigned char data[20] = {0};
  io_write_st(path, h, data, sizeof data, 0);
  fsdpc_st_file *f;
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__st_open(path, &f, &err), FSDPC_OK);
  const fsdpc_st_info *t = fsdpc__st_find(f, "ids");
  ck_assert_int_eq(t->dtype, FSDPC_DTYPE_I64);
  ck_assert_uint_eq(t->elem_size, 8);
  float got[2];
  ck_assert_int_eq(fsdpc__st_read_f32(f, "ids", 0, 2, got, &err), FSDPC_INVALID_USAGE);
  io_assert_msg(err.msg, path, "tensor 'ids'", "dtype I64 cannot be read as float");
  fsdpc__st_close(f);
}
END_TEST

START_TEST(streaming_writer_pieces_in_any_order) {
  float *a = ramp(1000, 0.5f), *b = ramp(64, -0.25f), *c = ramp(9000, 0.001f);
  fsdpc_st_entry layout[3] = {{sizeof layout[0], "a", 2, {10, 100}, NULL},
                              {sizeof layout[1], "b", 1, {64}, NULL},
                              {sizeof layout[2], "c", 1, {9000}, NULL}};
  fsdpc_err err = {0};
  for (int pass = 0; pass < 2; pass++) {
    int32_t dtype = pass ? FSDPC_DTYPE_BF16 : FSDPC_DTYPE_F32;
    fsdpc_st_writer *w;
    ck_assert_int_eq(
        fsdpc__st_writer_begin(path, layout, 3, dtype, "{\"format\":\"pt\"}", &w, &err), FSDPC_OK);
    uint64_t size = fsdpc__st_writer_file_size(w);
    /* c in two halves, last half first; a in three pieces; b whole. */
    ck_assert_int_eq(fsdpc__st_writer_put(w, 2, c + 4500, 4500, 4500, &err), FSDPC_OK);
    ck_assert_int_eq(fsdpc__st_writer_put(w, 0, a + 600, 600, 400, &err), FSDPC_OK);
    ck_assert_int_eq(fsdpc__st_writer_put(w, 1, b, 0, 64, &err), FSDPC_OK);
    ck_assert_int_eq(fsdpc__st_writer_put(w, 0, a, 0, 250, &err), FSDPC_OK);
    ck_assert_int_eq(fsdpc__st_writer_put(w, 2, c, 0, 4500, &err), FSDPC_OK);
    ck_assert_int_eq(fsdpc__st_writer_put(w, 0, a + 250, 250, 350, &err), FSDPC_OK);
    /* Out of range and bad index are refused without writing. */
    ck_assert_int_ne(fsdpc__st_writer_put(w, 1, b, 60, 5, &err), FSDPC_OK);
    io_assert_msg(err.msg, path, "tensor 'b'", "outside its 64 elements");
    ck_assert_int_ne(fsdpc__st_writer_put(w, 3, b, 0, 1, &err), FSDPC_OK);
    ck_assert_int_eq(fsdpc__st_writer_end(w, &err), FSDPC_OK);

    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq((uint64_t)st.st_size, size);
    fsdpc_st_file *f;
    ck_assert_int_eq(fsdpc__st_open(path, &f, &err), FSDPC_OK);
    float *got = malloc(9000 * sizeof *got);
    const float *src[3] = {a, b, c};
    const char *names[3] = {"a", "b", "c"};
    const uint64_t n[3] = {1000, 64, 9000};
    for (int t = 0; t < 3; t++) {
      ck_assert_int_eq(fsdpc__st_read_f32(f, names[t], 0, n[t], got, &err), FSDPC_OK);
      for (uint64_t i = 0; i < n[t]; i++) {
        float want = pass ? fsdpc__bf16_to_f32(fsdpc__f32_to_bf16(src[t][i])) : src[t][i];
        ck_assert_uint_eq(fsdpc__f32_bits(got[i]), fsdpc__f32_bits(want));
      }
    }
    free(got);
    fsdpc__st_close(f);
  }
  free(a);
  free(b);
  free(c);
}
END_TEST

START_TEST(streaming_writer_incomplete_is_an_error) {
  float a[4] = {1, 2, 3, 4};
  fsdpc_st_entry layout[2] = {{sizeof layout[0], "a", 1, {4}, NULL},
                              {sizeof layout[1], "b", 1, {4}, NULL}};
  fsdpc_err err = {0};
  fsdpc_st_writer *w;
  ck_assert_int_eq(fsdpc__st_writer_begin(path, layout, 2, FSDPC_DTYPE_F32, NULL, &w, &err),
                   FSDPC_OK);
  ck_assert_int_eq(fsdpc__st_writer_put(w, 0, a, 0, 4, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__st_writer_put(w, 1, a, 0, 3, &err), FSDPC_OK);
  ck_assert_int_ne(fsdpc__st_writer_end(w, &err), FSDPC_OK);
  io_assert_msg(err.msg, path, "tensor 'b'", "3 of 4 elements were written");
  ck_assert_int_ne(access(path, F_OK), 0); /* the partial file is gone */

  /* Bad layouts: duplicate names, negative shape, bad metadata, bad dtype. */
  fsdpc_st_entry dup[2] = {{sizeof dup[0], "x", 1, {1}, a}, {sizeof dup[1], "x", 1, {1}, a}};
  ck_assert_int_eq(fsdpc__st_write(path, dup, 2, FSDPC_DTYPE_F32, NULL, &err), FSDPC_INVALID_USAGE);
  io_assert_msg(err.msg, path, "tensor 'x' is listed twice", NULL);
  fsdpc_st_entry neg = {sizeof neg, "n", 2, {2, -1}, a};
  ck_assert_int_eq(fsdpc__st_write(path, &neg, 1, FSDPC_DTYPE_F32, NULL, &err),
                   FSDPC_INVALID_USAGE);
  io_assert_msg(err.msg, "tensor 'n'", "shape [2, -1] is negative", NULL);
  ck_assert_int_eq(fsdpc__st_write(path, layout, 1, FSDPC_DTYPE_F32, "{\"k\": 3}", &err),
                   FSDPC_INVALID_USAGE);
  io_assert_msg(err.msg, "metadata key 'k' is not a string", NULL, NULL);
  ck_assert_int_eq(fsdpc__st_write(path, layout, 1, FSDPC_DTYPE_I64, NULL, &err),
                   FSDPC_INVALID_USAGE);
  ck_assert_int_ne(access(path, F_OK), 0);
}
END_TEST

START_TEST(sparse_8gib_file_reads_only_the_range) {
  /* An 8 GiB tensor in a sparse file: reading its last elements must not
   * read (or allocate) the rest. */
  const uint64_t R = 65536, C = 32768, N = R * C, bytes = N * 4;
  char h[256];
  snprintf(h, sizeof h,
           "{\"big\":{\"dtype\":\"F32\",\"shape\":[%llu,%llu],\"data_offsets\":[0,%llu]}}",
           (unsigned long long)R, (unsigned long long)C, (unsigned long long)bytes);
  io_write_st(path, h, NULL, 0, 0);
  int fd = open(path, O_WRONLY);
  uint64_t data_start = 8 + strlen(h);
  ck_assert_int_eq(ftruncate(fd, (off_t)(data_start + bytes)), 0);
  float tail[4] = {1.5f, -2.0f, 3.0f, 42.0f};
  ck_assert_int_eq(pwrite(fd, tail, sizeof tail, (off_t)(data_start + bytes - sizeof tail)),
                   (ssize_t)sizeof tail);
  close(fd);

  int64_t rss0, peak0, rss1, peak1;
  fsdpc__mem_rss(&rss0, &peak0);
  fsdpc_st_file *f;
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__st_open(path, &f, &err), FSDPC_OK);
  float got[5];
  ck_assert_int_eq(fsdpc__st_read_f32(f, "big", N - 5, 5, got, &err), FSDPC_OK);
  ck_assert_float_eq(got[0], 0.0f); /* a hole reads as zero */
  ck_assert_int_eq(memcmp(got + 1, tail, sizeof tail), 0);
  fsdpc__mem_rss(&rss1, &peak1);
  ck_assert_int_lt(rss1 - rss0, 64 << 20);
  fsdpc__st_close(f);
}
END_TEST

int main(void) {
  Suite *s = suite_create("io_st_roundtrip");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, f32_round_trip_exact);
  tcase_add_test(tc, bf16_and_f16_round_trip_rne);
  tcase_add_test(tc, partial_reads_at_offsets);
  tcase_add_test(tc, non_float_dtype_listed_but_refused);
  tcase_add_test(tc, streaming_writer_pieces_in_any_order);
  tcase_add_test(tc, streaming_writer_incomplete_is_an_error);
  tcase_add_test(tc, sparse_8gib_file_reads_only_the_range);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
