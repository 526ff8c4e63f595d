/* CRC-32 through zlib: the same values as the table code it replaced, so
 * token files and checkpoints written before stay readable (an old
 * checkpoint is resumed in tests/ckpt/test_crc_compat.sh). Checked against
 * an independent bitwise CRC-32 over lengths and chunkings that cross every
 * alignment. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/crc32.h"

static uint32_t bitwise_crc32(const uint8_t *p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++)
      c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

START_TEST(known_vectors) {
  ck_assert_uint_eq(fsdpc__crc32(0, "123456789", 9), 0xCBF43926u);
  ck_assert_uint_eq(fsdpc__crc32(0, "", 0), 0u);
  ck_assert_uint_eq(fsdpc__crc32(0, "The quick brown fox jumps over the lazy dog", 43),
                    0x414FA339u);
  /* an empty chunk (even a NULL one) leaves a running CRC as it was */
  ck_assert_uint_eq(fsdpc__crc32(0xCBF43926u, NULL, 0), 0xCBF43926u);
}
END_TEST

START_TEST(equals_bitwise_reference) {
  enum { N = 70000 };
  uint8_t *buf = malloc(N);
  ck_assert_ptr_nonnull(buf);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i < N; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    buf[i] = (uint8_t)x;
  }
  for (size_t n = 0; n < 300; n++)
    for (size_t off = 0; off < 9; off++)
      ck_assert_uint_eq(fsdpc__crc32(0, buf + off, n), bitwise_crc32(buf + off, n));
  /* in chunks of every size from 1 to 40, and in one piece */
  uint32_t want = bitwise_crc32(buf, N);
  ck_assert_uint_eq(fsdpc__crc32(0, buf, N), want);
  for (size_t step = 1; step <= 40; step++) {
    uint32_t c = 0;
    for (size_t i = 0; i < N; i += step)
      c = fsdpc__crc32(c, buf + i, N - i < step ? N - i : step);
    ck_assert_uint_eq(c, want);
  }
  free(buf);
}
END_TEST

int main(void) {
  Suite *s = suite_create("crc32");
  TCase *tc = tcase_create("zlib");
  tcase_add_test(tc, known_vectors);
  tcase_add_test(tc, equals_bitwise_reference);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
