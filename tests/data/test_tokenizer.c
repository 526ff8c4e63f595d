/* Byte tokenizer through the common interface: exact round trip of every
 * byte value, specials, and refusal of unknown ids. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "data/tokenizer.h"
#include "data_testutil.h"

static fsdpc_tokenizer *byte_tok(void) {
  fsdpc_err err = {0};
  fsdpc_tokenizer *tok = NULL;
  ck_assert_int_eq(fsdpc__tokenizer_byte_create(&tok, &err), FSDPC_OK);
  ck_assert_ptr_nonnull(tok);
  return tok;
}

START_TEST(identity_and_specials) {
  fsdpc_tokenizer *tok = byte_tok();
  ck_assert_str_eq(fsdpc__tokenizer_name(tok), "byte");
  ck_assert_int_eq(fsdpc__tokenizer_vocab_size(tok), 259);
  ck_assert_int_eq(fsdpc__tokenizer_bos(tok), 256);
  ck_assert_int_eq(fsdpc__tokenizer_eos(tok), 257);
  ck_assert_int_eq(fsdpc__tokenizer_pad(tok), 258);
  fsdpc__tokenizer_destroy(tok);
  fsdpc__tokenizer_destroy(NULL);
}
END_TEST

START_TEST(all_256_bytes_round_trip) {
  fsdpc_tokenizer *tok = byte_tok();
  char text[512];
  for (int i = 0; i < 512; i++)
    text[i] = (char)(unsigned char)((i * 167) % 256); /* incl. NUL */
  int32_t ids[512];
  int64_t n;
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__tokenizer_encode(tok, text, 512, ids, 512, &n, &err), FSDPC_OK);
  ck_assert_int_eq(n, 512);
  int seen[256] = {0};
  for (int i = 0; i < 512; i++) {
    ck_assert_int_eq(ids[i], (unsigned char)text[i]);
    seen[ids[i]] = 1;
  }
  for (int b = 0; b < 256; b++)
    ck_assert_msg(seen[b], "byte %d not covered", b);
  char back[512];
  size_t len;
  ck_assert_int_eq(fsdpc__tokenizer_decode(tok, ids, 512, back, sizeof back, &len, &err), FSDPC_OK);
  ck_assert_uint_eq(len, 512);
  ck_assert_int_eq(memcmp(back, text, 512), 0);
  /* UTF-8 is just bytes: a multi-byte character becomes several ids. */
  const char *utf8 = "na\xc3\xafve \xe2\x82\xac";
  int32_t *alloc_ids;
  ck_assert_int_eq(fsdpc__tokenizer_encode_alloc(tok, utf8, strlen(utf8), &alloc_ids, &n, &err),
                   FSDPC_OK);
  ck_assert_int_eq(n, (int64_t)strlen(utf8));
  ck_assert_int_eq(alloc_ids[2], 0xc3);
  ck_assert_int_eq(fsdpc__tokenizer_decode(tok, alloc_ids, n, back, sizeof back, &len, &err),
                   FSDPC_OK);
  ck_assert_int_eq(memcmp(back, utf8, strlen(utf8)), 0);
  free(alloc_ids);
  fsdpc__tokenizer_destroy(tok);
}
END_TEST

START_TEST(decode_skips_specials_and_refuses_unknown_ids) {
  fsdpc_tokenizer *tok = byte_tok();
  fsdpc_err err = {0};
  char out[16];
  size_t len;
  int32_t ids[] = {256, 'h', 'i', 257, 258, '!'};
  ck_assert_int_eq(fsdpc__tokenizer_decode(tok, ids, 6, out, sizeof out, &len, &err), FSDPC_OK);
  ck_assert_uint_eq(len, 3);
  ck_assert_int_eq(memcmp(out, "hi!", 3), 0);
  int32_t bad[][2] = {{'a', 259}, {'a', 300}, {-1, 'a'}};
  const char *want[] = {"id 259 at position 1", "id 300 at position 1", "id -1 at position 0"};
  for (int k = 0; k < 3; k++) {
    ck_assert_int_eq(fsdpc__tokenizer_decode(tok, bad[k], 2, out, sizeof out, &len, &err),
                     FSDPC_INVALID_USAGE);
    ASSERT_ONE_LINE_ERROR(err, want[k], "[0, 259)");
  }
  fsdpc__tokenizer_destroy(tok);
}
END_TEST

START_TEST(small_buffers_report_needed_size) {
  fsdpc_tokenizer *tok = byte_tok();
  fsdpc_err err = {0};
  int32_t ids[4];
  int64_t n = 0;
  ck_assert_int_eq(fsdpc__tokenizer_encode(tok, "hello", 5, ids, 4, &n, &err), FSDPC_INVALID_USAGE);
  ck_assert_int_eq(n, 5);
  ASSERT_ONE_LINE_ERROR(err, "buffer holds 4");
  int32_t five[] = {'h', 'e', 'l', 'l', 'o'};
  char out[3];
  size_t len = 0;
  ck_assert_int_eq(fsdpc__tokenizer_decode(tok, five, 5, out, sizeof out, &len, &err),
                   FSDPC_INVALID_USAGE);
  ck_assert_uint_eq(len, 5);
  /* Empty input is fine. */
  ck_assert_int_eq(fsdpc__tokenizer_encode(tok, "", 0, ids, 0, &n, &err), FSDPC_OK);
  ck_assert_int_eq(n, 0);
  fsdpc__tokenizer_destroy(tok);
}
END_TEST

int main(void) {
  Suite *s = suite_create("data_tokenizer");
  TCase *tc = tcase_create("byte");
  tcase_add_test(tc, identity_and_specials);
  tcase_add_test(tc, all_256_bytes_round_trip);
  tcase_add_test(tc, decode_skips_specials_and_refuses_unknown_ids);
  tcase_add_test(tc, small_buffers_report_needed_size);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
