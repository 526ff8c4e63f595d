/* The model-folder tokenizer interface (fsdpc__tokenizer_load and friends)
 * over the three kinds: byte, tokenizer.json (llama3-tiny fixture) and
 * tokenizer.model (the real Llama 2 SentencePiece model in shared/): which
 * file a folder opens, encode_offsets (ids equal to encode, ranges that tile
 * the text, specials exactly covered, the empty string), token_id /
 * token_str, add_bos_token, the escaping of untrusted strings. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/tokenizer.h"
#include "data_testutil.h"

#define FIX FSDPC_SOURCE_DIR "/tests/fixtures/tokenizers/"
#define L3 FIX "llama3-tiny"
#define SPM FSDPC_SOURCE_DIR "/tests/fixtures/tokenizers/vocab/llama2/tokenizer.model"

static fsdpc_tokenizer *load(const char *path) {
  fsdpc_err err = {0};
  fsdpc_tokenizer *tok = NULL;
  ck_assert_msg(fsdpc__tokenizer_load(path, &tok, &err) == FSDPC_OK, "%s: %s", path, err.msg);
  return tok;
}

/* encode_offsets agrees with encode, and the ranges are ordered, inside the
 * text, on character boundaries, and cover every byte of it. */
static void check_offsets(const fsdpc_tokenizer *tok, const char *s) {
  fsdpc_err err = {0};
  size_t len = strlen(s);
  int32_t *ids, *ids2;
  size_t(*offs)[2];
  int64_t n, n2;
  ck_assert_int_eq(fsdpc__tokenizer_encode_offsets(tok, s, len, &ids, &offs, &n, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__tokenizer_encode_alloc(tok, s, len, &ids2, &n2, &err), FSDPC_OK);
  ck_assert_int_eq(n, n2);
  size_t covered = 0;
  for (int64_t i = 0; i < n; i++) {
    ck_assert_int_eq(ids[i], ids2[i]);
    ck_assert_uint_le(offs[i][0], offs[i][1]);
    ck_assert_uint_le(offs[i][1], len);
    ck_assert_msg(offs[i][0] == len || (s[offs[i][0]] & 0xc0) != 0x80,
                  "'%s' id %lld starts "
                  "mid-character",
                  s, (long long)i);
    ck_assert_msg(offs[i][0] <= covered, "'%s': a gap before id %lld", s, (long long)i);
    if (offs[i][1] > covered)
      covered = offs[i][1];
  }
  ck_assert_uint_eq(covered, len);
  free(ids);
  free(ids2);
  free(offs);
}

START_TEST(folder_json_offsets_and_ids) {
  fsdpc_tokenizer *tok = load(L3); /* a folder with tokenizer.json */
  ck_assert_str_eq(fsdpc__tokenizer_name(tok), "bpe");
  int32_t eot = fsdpc__tokenizer_token_id(tok, "<|eot_id|>");
  ck_assert_int_ge(eot, 0);
  ck_assert_str_eq(fsdpc__tokenizer_token_str(tok, eot), "<|eot_id|>");
  ck_assert_ptr_null(fsdpc__tokenizer_token_str(tok, -1));
  ck_assert_ptr_null(fsdpc__tokenizer_token_str(tok, fsdpc__tokenizer_vocab_size(tok)));
  ck_assert_int_eq(fsdpc__tokenizer_token_id(tok, "<|no such token|>"), -1);
  /* Byte-level strings as written in the file: "\u0120" (G-dot) is a space. */
  int32_t sp = fsdpc__tokenizer_token_id(tok, "\xc4\xa0");
  ck_assert_int_ge(sp, 0);
  ck_assert_int_eq(fsdpc__tokenizer_token_id(tok, " "), sp);
  /* llama3-tiny's post_processor adds <|begin_of_text|> (TemplateProcessing). */
  ck_assert_int_eq(fsdpc__tokenizer_adds_bos(tok), 1);
  ck_assert_int_eq(fsdpc__tokenizer_adds_eos(tok), 0);

  const char *s = "Hi caf\xc3\xa9 \xf0\x9f\x98\x80<|eot_id|>  12345\n";
  check_offsets(tok, s);
  check_offsets(tok, "\xe4\xb8\x80\xe4\xba\x8c"); /* CJK: partial-byte tokens widened */
  fsdpc_err err = {0};
  int32_t *ids;
  size_t(*offs)[2];
  int64_t n;
  ck_assert_int_eq(fsdpc__tokenizer_encode_offsets(tok, s, strlen(s), &ids, &offs, &n, &err),
                   FSDPC_OK);
  const char *at = strstr(s, "<|eot_id|>");
  int found = 0;
  for (int64_t i = 0; i < n; i++)
    if (ids[i] == eot) {
      ck_assert_uint_eq(offs[i][0], (size_t)(at - s));
      ck_assert_uint_eq(offs[i][1], (size_t)(at - s) + 10);
      found = 1;
    }
  ck_assert(found);
  free(ids);
  free(offs);
  /* Empty text: no ids, and offsets may be NULL. */
  ck_assert_int_eq(fsdpc__tokenizer_encode_offsets(tok, "", 0, &ids, NULL, &n, &err), FSDPC_OK);
  ck_assert_int_eq(n, 0);
  free(ids);
  fsdpc__tokenizer_destroy(tok);
}
END_TEST

START_TEST(folder_with_only_tokenizer_model) {
  char dir[512], model[600];
  tmp_path(dir, sizeof dir, "spm");
  ck_assert_int_eq(mkdir(dir, 0755), 0);
  snprintf(model, sizeof model, "%s/tokenizer.model", dir);
  size_t n;
  unsigned char *bytes = slurp(SPM, &n);
  spit(model, bytes, n);
  free(bytes);
  fsdpc_tokenizer *tok = load(dir);
  ck_assert_str_eq(fsdpc__tokenizer_name(tok), "sentencepiece");
  ck_assert_int_eq(fsdpc__tokenizer_vocab_size(tok), 32000);
  ck_assert_int_eq(fsdpc__tokenizer_bos(tok), 1);
  ck_assert_int_eq(fsdpc__tokenizer_eos(tok), 2);
  ck_assert_int_eq(fsdpc__tokenizer_adds_bos(tok), 1); /* LlamaTokenizer's default */
  ck_assert_int_eq(fsdpc__tokenizer_adds_eos(tok), 0);
  ck_assert_int_eq(fsdpc__tokenizer_token_id(tok, "</s>"), 2);
  ck_assert_int_eq(fsdpc__tokenizer_token_id(tok, "\xe2\x96\x81Hello"), 15043);
  ck_assert_str_eq(fsdpc__tokenizer_token_str(tok, 15043), "\xe2\x96\x81Hello");
  /* "Hello world!</s>": the control piece in the text is its id. */
  const char *s = "Hello world!</s>";
  fsdpc_err err = {0};
  int32_t *ids;
  size_t(*offs)[2];
  int64_t k;
  ck_assert_int_eq(fsdpc__tokenizer_encode_offsets(tok, s, strlen(s), &ids, &offs, &k, &err),
                   FSDPC_OK);
  int32_t want[] = {15043, 3186, 29991, 2};
  size_t want_offs[][2] = {{0, 5}, {5, 11}, {11, 12}, {12, 16}};
  ck_assert_int_eq(k, 4);
  for (int i = 0; i < 4; i++) {
    ck_assert_int_eq(ids[i], want[i]);
    ck_assert_uint_eq(offs[i][0], want_offs[i][0]);
    ck_assert_uint_eq(offs[i][1], want_offs[i][1]);
  }
  free(ids);
  free(offs);
  check_offsets(tok, "caf\xc3\xa9 \xf0\x9f\x98\x80 <s>  7");
  char back[64];
  size_t blen;
  int32_t hello[] = {1, 15043, 3186, 29991, 2};
  ck_assert_int_eq(fsdpc__tokenizer_decode(tok, hello, 5, back, sizeof back, &blen, &err),
                   FSDPC_OK);
  ck_assert_int_eq((int)blen, 12);
  ck_assert(memcmp(back, "Hello world!", 12) == 0);
  int32_t bad = 32000;
  ck_assert_int_eq(fsdpc__tokenizer_decode(tok, &bad, 1, back, sizeof back, &blen, &err),
                   FSDPC_INVALID_USAGE);
  ASSERT_ONE_LINE_ERROR(err, "id 32000 at position 0 is not in its vocabulary");
  fsdpc__tokenizer_destroy(tok);
  remove(model);
  rmdir(dir);
}
END_TEST

START_TEST(byte_and_errors) {
  fsdpc_tokenizer *tok = load("byte");
  ck_assert_int_eq(fsdpc__tokenizer_token_id(tok, "A"), 'A');
  ck_assert_str_eq(fsdpc__tokenizer_token_str(tok, 10), "<0x0A>");
  ck_assert_str_eq(fsdpc__tokenizer_token_str(tok, FSDPC_BYTE_EOS), "<eos>");
  ck_assert_int_eq(fsdpc__tokenizer_adds_bos(tok), 0);
  check_offsets(tok, "ab\xc3\xa9");
  fsdpc__tokenizer_destroy(tok);

  fsdpc_err err = {0};
  char path[512];
  tmp_path(path, sizeof path, "bad.model");
  spit(path, "\x0a\x05hello garbage", 15);
  tok = NULL;
  ck_assert_int_eq(fsdpc__tokenizer_load(path, &tok, &err), FSDPC_INVALID_USAGE);
  ASSERT_ONE_LINE_ERROR(err, "bad.model: ");
  ck_assert_ptr_null(tok);
  remove(path);
  ck_assert_int_eq(fsdpc__tokenizer_load("", &tok, &err), FSDPC_INVALID_USAGE);
}
END_TEST

START_TEST(escape_untrusted_strings) {
  char b[32];
  ck_assert_str_eq(fsdpc__tok_esc(b, sizeof b, "a\nb\x1b[31m\\"), "a\\nb\\x1b[31m\\\\");
  ck_assert_str_eq(fsdpc__tok_esc(b, sizeof b, "caf\xc3\xa9"), "caf\xc3\xa9"); /* UTF-8 kept */
  ck_assert_str_eq(fsdpc__tok_esc(b, sizeof b, "\xc2\x9b"), "\\xc2\\x9b");     /* C1 CSI */
  ck_assert_str_eq(fsdpc__tok_esc(b, sizeof b, "\xff\xfe"), "\\xff\\xfe");
  ck_assert_str_eq(fsdpc__tok_esc(b, 12, "abcdefghijklmnop"), "abcdefgh...");
  ck_assert_uint_lt(strlen(fsdpc__tok_esc(b, sizeof b, "\x01\x01\x01\x01\x01\x01\x01\x01\x01")),
                    sizeof b);
}
END_TEST

int main(void) {
  Suite *s = suite_create("data_tokenizer_api");
  TCase *tc = tcase_create("api");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, folder_json_offsets_and_ids);
  tcase_add_test(tc, folder_with_only_tokenizer_model);
  tcase_add_test(tc, byte_and_errors);
  tcase_add_test(tc, escape_untrusted_strings);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
