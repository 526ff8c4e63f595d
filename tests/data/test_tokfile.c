/* Token file format: writer/reader round trip, and one clear one-line error
 * (never a crash) for every kind of corrupt file. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/crc32.h"
#include "data/tokfile.h"
#include "data_testutil.h"

START_TEST(crc32_known_vectors) {
  ck_assert_uint_eq(fsdpc__crc32(0, "123456789", 9), 0xCBF43926u);
  ck_assert_uint_eq(fsdpc__crc32(0, "", 0), 0u);
  /* Chunked == whole, across the 8-byte fast path boundary. */
  const char *s = "The quick brown fox jumps over the lazy dog";
  uint32_t whole = fsdpc__crc32(0, s, strlen(s));
  ck_assert_uint_eq(whole, 0x414FA339u);
  uint32_t c = fsdpc__crc32(0, s, 5);
  c = fsdpc__crc32(c, s + 5, 13);
  c = fsdpc__crc32(c, s + 18, strlen(s) - 18);
  ck_assert_uint_eq(c, whole);
}
END_TEST

/* Docs [1 2 3], [], [4..9] with the last three tokens masked out; vocab 300. */
static void write_small(const char *path) {
  fsdpc_err err = {0};
  fsdpc_tokfile_writer *w;
  ck_assert_int_eq(fsdpc__tokfile_writer_create(path, 300, 299, 1, &w, &err), FSDPC_OK);
  int32_t a[] = {1, 2, 3}, b[] = {4, 5, 6, 7, 8, 9};
  uint8_t mb[] = {1, 1, 1, 0, 0, 0};
  ck_assert_int_eq(fsdpc__tokfile_writer_add_doc(w, a, NULL, 3, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__tokfile_writer_end_doc(w, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__tokfile_writer_append(w, b, mb, 2, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__tokfile_writer_append(w, b + 2, mb + 2, 4, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__tokfile_writer_end_doc(w, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__tokfile_writer_finish(w, &err), FSDPC_OK);
  fsdpc__tokfile_writer_destroy(w);
}
#define SMALL_BYTES (64 + 24 + 4 * 8 + 2)
#define SMALL_OFFSETS_AT (64 + 24)

START_TEST(round_trip_u16_with_mask) {
  char path[512];
  tmp_path(path, sizeof path, "rt16.tok");
  write_small(path);
  struct stat sb;
  ck_assert_int_eq(stat(path, &sb), 0);
  ck_assert_int_eq(sb.st_size, SMALL_BYTES);
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  ck_assert_int_ne(stat(tmp, &sb), 0); /* renamed into place */

  fsdpc_err err = {0};
  fsdpc_tokfile *tf;
  ck_assert_int_eq(fsdpc__tokfile_open(path, &tf, &err), FSDPC_OK);
  ck_assert_uint_eq(tf->hdr.token_bytes, 2);
  ck_assert_uint_eq(tf->hdr.vocab_size, 300);
  ck_assert_uint_eq(tf->hdr.eos_id, 299);
  ck_assert_int_eq(fsdpc__tokfile_n_tokens(tf), 9);
  ck_assert_int_eq(fsdpc__tokfile_n_docs(tf), 3);
  uint64_t want_off[] = {0, 3, 3, 9};
  for (int d = 0; d < 4; d++)
    ck_assert_uint_eq(tf->offsets[d], want_off[d]);
  int32_t toks[9];
  fsdpc__tokfile_read(tf, 0, 9, toks);
  for (int i = 0; i < 9; i++) {
    ck_assert_int_eq(toks[i], i + 1);
    ck_assert_int_eq(fsdpc__tokfile_token(tf, i), i + 1);
    ck_assert_int_eq(fsdpc__tokfile_mask(tf, i), i < 6);
  }
  fsdpc__tokfile_close(tf);
  unlink(path);
}
END_TEST

START_TEST(round_trip_u32_without_mask) {
  char path[512];
  tmp_path(path, sizeof path, "rt32.tok");
  fsdpc_err err = {0};
  fsdpc_tokfile_writer *w;
  ck_assert_int_eq(fsdpc__tokfile_writer_create(path, 128256, 128001, 0, &w, &err), FSDPC_OK);
  enum { N = 5000 };
  int32_t *t = malloc(N * sizeof *t);
  for (int i = 0; i < N; i++)
    t[i] = (int32_t)((i * 7919u) % 128256u);
  /* Streamed in uneven pieces across many documents. */
  int pos = 0, d = 0;
  while (pos < N) {
    int len = 1 + (d * 37) % 300;
    if (pos + len > N)
      len = N - pos;
    ck_assert_int_eq(fsdpc__tokfile_writer_add_doc(w, t + pos, NULL, len, &err), FSDPC_OK);
    pos += len, d++;
  }
  ck_assert_int_eq(fsdpc__tokfile_writer_finish(w, &err), FSDPC_OK);
  fsdpc__tokfile_writer_destroy(w);

  fsdpc_tokfile *tf;
  ck_assert_int_eq(fsdpc__tokfile_open(path, &tf, &err), FSDPC_OK);
  ck_assert_uint_eq(tf->hdr.token_bytes, 4);
  ck_assert_ptr_null(tf->mask);
  ck_assert_int_eq(fsdpc__tokfile_n_docs(tf), d);
  int32_t *back = malloc(N * sizeof *back);
  fsdpc__tokfile_read(tf, 0, N, back);
  ck_assert_int_eq(memcmp(back, t, N * sizeof *t), 0);
  ck_assert_int_eq(fsdpc__tokfile_mask(tf, 17), 1);
  fsdpc__tokfile_close(tf);
  free(t);
  free(back);
  unlink(path);
}
END_TEST

START_TEST(writer_rejects_bad_input) {
  char path[512];
  tmp_path(path, sizeof path, "wbad.tok");
  fsdpc_err err = {0};
  fsdpc_tokfile_writer *w;
  ck_assert_int_ne(fsdpc__tokfile_writer_create(path, 10, 10, 0, &w, &err), FSDPC_OK);
  ASSERT_ONE_LINE_ERROR(err, path, "eos_id 10");
  ck_assert_int_eq(fsdpc__tokfile_writer_create(path, 10, 9, 1, &w, &err), FSDPC_OK);
  int32_t bad[] = {1, 10};
  ck_assert_int_ne(fsdpc__tokfile_writer_append(w, bad, NULL, 2, &err), FSDPC_OK);
  ASSERT_ONE_LINE_ERROR(err, "token id 10", "[0, 10)");
  int32_t neg[] = {-1};
  ck_assert_int_ne(fsdpc__tokfile_writer_append(w, neg, NULL, 1, &err), FSDPC_OK);
  /* The refused appends leave no token and no mask bit behind. */
  int32_t ok[] = {3, 4};
  uint8_t ctx[] = {0, 0};
  ck_assert_int_eq(fsdpc__tokfile_writer_add_doc(w, ok, ctx, 2, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__tokfile_writer_finish(w, &err), FSDPC_OK);
  ck_assert_int_ne(fsdpc__tokfile_writer_end_doc(w, &err), FSDPC_OK);
  fsdpc__tokfile_writer_destroy(w);
  fsdpc_tokfile *tf;
  ck_assert_int_eq(fsdpc__tokfile_open(path, &tf, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__tokfile_n_tokens(tf), 2);
  ck_assert_int_eq(fsdpc__tokfile_token(tf, 0), 3);
  ck_assert_int_eq(fsdpc__tokfile_mask(tf, 0), 0);
  ck_assert_int_eq(fsdpc__tokfile_mask(tf, 1), 0);
  fsdpc__tokfile_close(tf);
  unlink(path);

  /* Tokens after the last end_doc: finish refuses, destroy removes PATH.tmp. */
  ck_assert_int_eq(fsdpc__tokfile_writer_create(path, 10, 9, 0, &w, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__tokfile_writer_append(w, ok, NULL, 2, &err), FSDPC_OK);
  ck_assert_int_ne(fsdpc__tokfile_writer_finish(w, &err), FSDPC_OK);
  ASSERT_ONE_LINE_ERROR(err, "2 tokens appended after the last end_doc");
  fsdpc__tokfile_writer_destroy(w);
  struct stat sb;
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  ck_assert_int_ne(stat(tmp, &sb), 0);
  ck_assert_int_ne(stat(path, &sb), 0);
}
END_TEST

/* ---- corruption -------------------------------------------------------- */

static void fix_header_crc(unsigned char *b) {
  uint32_t c = fsdpc__tokfile_header_crc(b);
  for (int i = 0; i < 4; i++)
    b[28 + i] = (unsigned char)(c >> (8 * i));
}
static void fix_payload_crc(unsigned char *b, size_t len) {
  uint32_t c = fsdpc__crc32(0, b + 64, len - 64);
  for (int i = 0; i < 4; i++)
    b[48 + i] = (unsigned char)(c >> (8 * i));
  fix_header_crc(b);
}
static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

/* Writes a corrupt copy of the small file and expects open() to fail with a
 * one-line error naming the file and containing `what`. */
static void expect_corrupt(const unsigned char *data, size_t len, const char *what) {
  char path[512];
  tmp_path(path, sizeof path, "corrupt.tok");
  spit(path, data, len);
  fsdpc_err err = {0};
  fsdpc_tokfile *tf = (fsdpc_tokfile *)(uintptr_t)1;
  ck_assert_int_eq(fsdpc__tokfile_open(path, &tf, &err), FSDPC_INVALID_USAGE);
  ck_assert_ptr_null(tf);
  ASSERT_ONE_LINE_ERROR(err, path, what);
  unlink(path);
}

static unsigned char *small_bytes(size_t *len) {
  char path[512];
  tmp_path(path, sizeof path, "small.tok");
  write_small(path);
  unsigned char *b = slurp(path, len);
  unlink(path);
  ck_assert_uint_eq(*len, SMALL_BYTES);
  return b;
}

START_TEST(missing_and_short_files) {
  fsdpc_err err = {0};
  fsdpc_tokfile *tf;
  ck_assert_int_eq(fsdpc__tokfile_open("/nonexistent/x.tok", &tf, &err), FSDPC_INVALID_USAGE);
  ASSERT_ONE_LINE_ERROR(err, "/nonexistent/x.tok", "cannot open");
  expect_corrupt((const unsigned char *)"", 0, "truncated");
  expect_corrupt((const unsigned char *)"FSDPCTOK", 8, "truncated");
}
END_TEST

START_TEST(bad_magic) {
  size_t len;
  unsigned char *b = small_bytes(&len);
  memcpy(b, "GGUF\0\0\0\0", 8);
  expect_corrupt(b, len, "bad magic");
  free(b);
}
END_TEST

START_TEST(bad_version) {
  size_t len;
  unsigned char *b = small_bytes(&len);
  put32(b + 8, 2);
  expect_corrupt(b, len, "bad version 2"); /* even before the header CRC check */
  fix_header_crc(b);
  expect_corrupt(b, len, "bad version 2");
  free(b);
}
END_TEST

START_TEST(header_checksum) {
  size_t len;
  unsigned char *b = small_bytes(&len);
  b[40] ^= 1; /* n_docs */
  expect_corrupt(b, len, "header checksum mismatch");
  free(b);
}
END_TEST

START_TEST(bad_header_fields) {
  size_t len;
  unsigned char *b = small_bytes(&len);
  put32(b + 20, 300); /* eos_id == vocab_size */
  fix_header_crc(b);
  expect_corrupt(b, len, "bad header: eos_id 300");
  free(b);
  b = small_bytes(&len);
  put32(b + 12, 3); /* token width */
  fix_header_crc(b);
  expect_corrupt(b, len, "bad header: token width 3");
  free(b);
  b = small_bytes(&len);
  put32(b + 16, 70000); /* vocab does not fit u16 */
  fix_header_crc(b);
  expect_corrupt(b, len, "does not fit");
  free(b);
  b = small_bytes(&len);
  put32(b + 24, 10); /* bit 3: unknown (bit 2 marks preference pairs) */
  fix_header_crc(b);
  expect_corrupt(b, len, "unknown flags");
  free(b);
}
END_TEST

START_TEST(truncated_and_trailing) {
  size_t len;
  unsigned char *b = small_bytes(&len);
  expect_corrupt(b, len - 1, "truncated");
  expect_corrupt(b, 64, "truncated");
  /* A header claiming absurd counts must not overflow the size arithmetic. */
  put64(b + 32, UINT64_MAX / 2);
  fix_header_crc(b);
  expect_corrupt(b, len, "truncated");
  free(b);
  b = small_bytes(&len);
  unsigned char *longer = calloc(1, len + 5);
  memcpy(longer, b, len);
  expect_corrupt(longer, len + 5, "trailing bytes");
  free(longer);
  free(b);
}
END_TEST

START_TEST(payload_checksum) {
  size_t len;
  unsigned char *b = small_bytes(&len);
  b[64 + 4] ^= 0x10; /* a token */
  expect_corrupt(b, len, "checksum mismatch");
  free(b);
  b = small_bytes(&len);
  b[len - 1] ^= 0x01; /* a mask bit */
  expect_corrupt(b, len, "checksum mismatch");
  free(b);
}
END_TEST

START_TEST(offsets_out_of_order) {
  size_t len;
  unsigned char *b = small_bytes(&len);
  put64(b + SMALL_OFFSETS_AT + 8, 5); /* off = 0 5 3 9 */
  fix_payload_crc(b, len);
  expect_corrupt(b, len, "offsets out of order: document 1");
  free(b);
  b = small_bytes(&len);
  put64(b + SMALL_OFFSETS_AT + 24, 8); /* last offset != n_tokens */
  fix_payload_crc(b, len);
  expect_corrupt(b, len, "bad offsets");
  free(b);
  b = small_bytes(&len);
  put64(b + SMALL_OFFSETS_AT, 1); /* first offset != 0 */
  fix_payload_crc(b, len);
  expect_corrupt(b, len, "bad offsets: document 0 starts at 1");
  free(b);
  b = small_bytes(&len);
  put64(b + SMALL_OFFSETS_AT + 16, 1000); /* beyond the tokens */
  fix_payload_crc(b, len);
  expect_corrupt(b, len, "offsets out of order");
  free(b);
}
END_TEST

START_TEST(token_outside_vocab) {
  size_t len;
  unsigned char *b = small_bytes(&len);
  b[64 + 2 * 4] = 0x2C, b[64 + 2 * 4 + 1] = 0x01; /* token 4 := 300 */
  fix_payload_crc(b, len);
  expect_corrupt(b, len, "token id 300 at position 4");
  free(b);
}
END_TEST

/* Every single-bit flip and every truncation of a valid file is refused with
 * a one-line error: the CRCs cover every byte. */
START_TEST(every_flip_and_cut_is_caught) {
  size_t len;
  unsigned char *b = small_bytes(&len);
  char path[512];
  tmp_path(path, sizeof path, "fuzz.tok");
  fsdpc_err err;
  fsdpc_tokfile *tf;
  for (size_t i = 0; i < len; i++) {
    for (int bit = 0; bit < 8; bit += 3) {
      b[i] ^= (unsigned char)(1u << bit);
      spit(path, b, len);
      err.status = FSDPC_OK;
      ck_assert_msg(fsdpc__tokfile_open(path, &tf, &err) != FSDPC_OK, "flip at byte %zu bit %d", i,
                    bit);
      ASSERT_ONE_LINE_ERROR(err, path);
      b[i] ^= (unsigned char)(1u << bit);
    }
  }
  for (size_t cut = 0; cut < len; cut++) {
    spit(path, b, cut);
    ck_assert_int_ne(fsdpc__tokfile_open(path, &tf, &err), FSDPC_OK);
    ASSERT_ONE_LINE_ERROR(err, path, "truncated");
  }
  spit(path, b, len);
  ck_assert_int_eq(fsdpc__tokfile_open(path, &tf, &err), FSDPC_OK);
  fsdpc__tokfile_close(tf);
  unlink(path);
  free(b);
}
END_TEST

int main(void) {
  Suite *s = suite_create("data_tokfile");
  TCase *tc = tcase_create("format");
  tcase_add_test(tc, crc32_known_vectors);
  tcase_add_test(tc, round_trip_u16_with_mask);
  tcase_add_test(tc, round_trip_u32_without_mask);
  tcase_add_test(tc, writer_rejects_bad_input);
  suite_add_tcase(s, tc);
  TCase *tcc = tcase_create("corruption");
  tcase_add_test(tcc, missing_and_short_files);
  tcase_add_test(tcc, bad_magic);
  tcase_add_test(tcc, bad_version);
  tcase_add_test(tcc, header_checksum);
  tcase_add_test(tcc, bad_header_fields);
  tcase_add_test(tcc, truncated_and_trailing);
  tcase_add_test(tcc, payload_checksum);
  tcase_add_test(tcc, offsets_out_of_order);
  tcase_add_test(tcc, token_outside_vocab);
  tcase_add_test(tcc, every_flip_and_cut_is_caught);
  suite_add_tcase(s, tcc);
  return run_suite(s);
}
