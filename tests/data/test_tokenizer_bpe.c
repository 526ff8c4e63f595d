/* Hugging Face tokenizer.json BPE tokenizer: exact encodings derived by hand
 * from the fixture's vocab (tests/fixtures/tokenizers/llama3-tiny, made by
 * make_fixtures.py), round trips, BOS/EOS resolution, the Llama 2
 * SentencePiece layout, long inputs, and one-line errors for bad files.
 * The corpus cross-check against the Python reference is
 * test_tokenizer_bpe_ref.sh. */
#include <check.h>
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "data/tokenizer.h"
#include "data_testutil.h"

#define FIX FSDPC_SOURCE_DIR "/tests/fixtures/tokenizers/"
#define L3 FIX "llama3-tiny"
#define L3_JSON L3 "/tokenizer.json"
#define L2_JSON FIX "llama2-tiny/tokenizer.json"

/* First special id in the fixture: 256 bytes + merges + 2 extra tokens. */
static int32_t first_special;

static cJSON *load_json(const char *path) {
  size_t n;
  unsigned char *text = slurp(path, &n);
  cJSON *root = cJSON_ParseWithLength((const char *)text, n);
  free(text);
  ck_assert_ptr_nonnull(root);
  return root;
}

/* Writes root to a scratch file and returns its path (static buffer). */
static const char *write_json(cJSON *root, const char *name) {
  static char path[512];
  tmp_path(path, sizeof path, name);
  char *text = cJSON_Print(root);
  spit(path, text, strlen(text));
  free(text);
  return path;
}

/* Id of a vocab token, read from the JSON (independent of the tokenizer). */
static int32_t vid(const char *tok) {
  static cJSON *root;
  if (!root)
    root = load_json(L3_JSON);
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(
      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "model"), "vocab"),
      tok);
  ck_assert_msg(cJSON_IsNumber(v), "fixture vocab lacks '%s'", tok);
  return (int32_t)v->valueint;
}

static fsdpc_tokenizer *open_bpe(const char *path, const fsdpc_bpe_opts *o) {
  fsdpc_err err = {0};
  fsdpc_tokenizer *tok = NULL;
  fsdpc_status st = fsdpc__tokenizer_bpe_create(path, o, &tok, &err);
  ck_assert_msg(st == FSDPC_OK, "open %s: %s", path, err.msg);
  return tok;
}

/* Encodes s and checks the ids equal want (n_want), then checks the decode
 * gives s back unless no_round_trip. */
static void check_enc(const fsdpc_tokenizer *tok, const char *s, size_t len, const int32_t *want,
                      int64_t n_want, int round_trip) {
  fsdpc_err err = {0};
  int32_t *ids;
  int64_t n;
  ck_assert_msg(fsdpc__tokenizer_encode_alloc(tok, s, len, &ids, &n, &err) == FSDPC_OK, "%s",
                err.msg);
  ck_assert_msg(n == n_want, "'%s': %lld ids, expected %lld", s, (long long)n, (long long)n_want);
  for (int64_t i = 0; i < n; i++)
    ck_assert_msg(ids[i] == want[i], "'%s': id %lld is %d, expected %d", s, (long long)i, ids[i],
                  want[i]);
  if (round_trip) {
    char back[4096];
    size_t blen;
    ck_assert_int_eq(fsdpc__tokenizer_decode(tok, ids, n, back, sizeof back, &blen, &err),
                     FSDPC_OK);
    ck_assert_msg(blen == len && memcmp(back, s, len) == 0, "'%s' decodes to '%.*s'", s, (int)blen,
                  back);
  }
  free(ids);
}
#define CHECK(tok, s, rt, ...)                                                                     \
  do {                                                                                             \
    const int32_t want_[] = {__VA_ARGS__};                                                         \
    check_enc(tok, s, strlen(s), want_, (int64_t)(sizeof want_ / sizeof want_[0]), rt);            \
  } while (0)

START_TEST(llama3_hand_derived_encodings) {
  fsdpc_tokenizer *tok = open_bpe(L3, NULL);
  ck_assert_str_eq(fsdpc__tokenizer_name(tok), "bpe");
  ck_assert_int_eq(fsdpc__tokenizer_vocab_size(tok), first_special + 11);
  /* Pre-tokens "Hello" " world" "!", each whole in the vocab. */
  CHECK(tok, "Hello world!", 1, vid("Hello"), vid("\xc4\xa0world"), vid("!"));
  /* Digits split in threes; a run of spaces gives all but its last space to
   * its own pre-token (\s+(?!\S)), which the merge "Ġ Ġ" joins. */
  CHECK(tok, "12345", 1, vid("123"), vid("45"));
  CHECK(tok, "   hello", 1, vid("\xc4\xa0\xc4\xa0"), vid("\xc4\xa0hello"));
  /* "zzzz" is in the vocab but no merge builds it: only ignore_merges finds
   * it; "zzzzz" is not in the vocab and no merge has z: five bytes. */
  CHECK(tok, "zzzz", 1, vid("zzzz"));
  CHECK(tok, "zzzzz", 1, vid("z"), vid("z"), vid("z"), vid("z"), vid("z"));
  /* Contractions are their own pre-tokens; "'S" folds case. */
  CHECK(tok, "IT'S", 1, vid("I"), vid("T"), vid("'"), vid("S"));
  /* Special tokens: parsed, longest match, between ordinary pieces. */
  int32_t eot = first_special + 9, bos = first_special, sh = first_special + 6;
  CHECK(tok, "<|eot_id|>", 1, eot);
  CHECK(tok, "Hello<|eot_id|><|start_header_id|>", 1, vid("Hello"), eot, sh);
  CHECK(tok, "<|begin_of_text|>Hello", 0, bos, vid("Hello"));
  /* An empty text has no ids. */
  check_enc(tok, "", 0, NULL, 0, 1);
  fsdpc__tokenizer_destroy(tok);
}
END_TEST

START_TEST(llama3_special_options_and_ids) {
  /* tokenizer_config.json in the folder names BOS and EOS. */
  fsdpc_tokenizer *tok = open_bpe(L3, NULL);
  ck_assert_int_eq(fsdpc__tokenizer_bos(tok), first_special);
  ck_assert_int_eq(fsdpc__tokenizer_eos(tok), first_special + 1);
  ck_assert_int_eq(fsdpc__tokenizer_pad(tok), -1);
  /* Decode skips BOS/EOS but prints other specials. */
  fsdpc_err err = {0};
  int32_t ids[] = {first_special, vid("Hello"), first_special + 9, first_special + 1};
  char out[64];
  size_t len;
  ck_assert_int_eq(fsdpc__tokenizer_decode(tok, ids, 4, out, sizeof out, &len, &err), FSDPC_OK);
  ck_assert_uint_eq(len, strlen("Hello<|eot_id|>"));
  ck_assert_int_eq(memcmp(out, "Hello<|eot_id|>", len), 0);
  int32_t bad[] = {vid("Hello"), first_special + 11};
  ck_assert_int_eq(fsdpc__tokenizer_decode(tok, bad, 2, out, sizeof out, &len, &err),
                   FSDPC_INVALID_USAGE);
  ASSERT_ONE_LINE_ERROR(err, "id", "at position 1", "is not in its vocabulary");
  fsdpc__tokenizer_destroy(tok);

  /* parse_special 0: the string is plain text and round-trips. */
  fsdpc_bpe_opts o;
  fsdpc__bpe_opts_default(&o);
  o.parse_special = 0;
  o.eos_token = "<|eot_id|>";
  tok = open_bpe(L3_JSON, &o);
  ck_assert_int_eq(fsdpc__tokenizer_eos(tok), first_special + 9);
  int32_t *got;
  int64_t n;
  const char *s = "<|eot_id|>";
  ck_assert_int_eq(fsdpc__tokenizer_encode_alloc(tok, s, strlen(s), &got, &n, &err), FSDPC_OK);
  ck_assert_int_gt(n, 1);
  for (int64_t i = 0; i < n; i++)
    ck_assert_int_lt(got[i], first_special);
  ck_assert_int_eq(fsdpc__tokenizer_decode(tok, got, n, out, sizeof out, &len, &err), FSDPC_OK);
  ck_assert_int_eq(memcmp(out, s, strlen(s)), 0);
  free(got);
  fsdpc__tokenizer_destroy(tok);

  /* Explicit ids win; a bad id or name is one line. */
  fsdpc__bpe_opts_default(&o);
  o.bos_id = -1;
  o.eos_id = 7;
  tok = open_bpe(L3_JSON, &o);
  ck_assert_int_eq(fsdpc__tokenizer_bos(tok), -1);
  ck_assert_int_eq(fsdpc__tokenizer_eos(tok), 7);
  fsdpc__tokenizer_destroy(tok);
  o.eos_id = first_special + 11;
  ck_assert_int_eq(fsdpc__tokenizer_bpe_create(L3_JSON, &o, &tok, &err), FSDPC_INVALID_USAGE);
  ASSERT_ONE_LINE_ERROR(err, "tokenizer.json: EOS id", "is not in the vocabulary");
  fsdpc__bpe_opts_default(&o);
  o.eos_token = "<|nope|>";
  ck_assert_int_eq(fsdpc__tokenizer_bpe_create(L3_JSON, &o, &tok, &err), FSDPC_INVALID_USAGE);
  ASSERT_ONE_LINE_ERROR(err, "EOS token '<|nope|>' is not in the vocabulary");
  ck_assert_ptr_null(tok);
}
END_TEST

START_TEST(llama3_round_trips_any_bytes) {
  fsdpc_tokenizer *tok = open_bpe(L3, NULL);
  const char *texts[] = {
      "The quick brown fox\n\n  jumps   over\tthe lazy dog.\r\n",
      "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80\xf0\x9f\x91\x8d 1234567",
      "invalid \xff\xfe \xc3( \xe2\x82 \xed\xa0\x80 \x80\x80 end", /* byte-level keeps every byte */
      "\x00\x01\x02 nul and controls \x7f",
      "<|eot_id|> <|reserved_special_token_2|>x<|eot_id",
  };
  fsdpc_err err = {0};
  for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
    size_t n = k == 3 ? 22 : strlen(texts[k]); /* text 3 starts with NUL */
    int32_t *ids;
    int64_t n_ids;
    ck_assert_int_eq(fsdpc__tokenizer_encode_alloc(tok, texts[k], n, &ids, &n_ids, &err), FSDPC_OK);
    ck_assert_int_le(n_ids, (int64_t)n);
    char back[256];
    size_t blen;
    ck_assert_int_eq(fsdpc__tokenizer_decode(tok, ids, n_ids, back, sizeof back, &blen, &err),
                     FSDPC_OK);
    ck_assert_msg(blen == n && memcmp(back, texts[k], n) == 0, "text %zu does not round-trip", k);
    /* Too small buffers report what they need. */
    int32_t few[2];
    int64_t need = 0;
    if (n_ids > 2) {
      ck_assert_int_eq(fsdpc__tokenizer_encode(tok, texts[k], n, few, 2, &need, &err),
                       FSDPC_INVALID_USAGE);
      ck_assert_int_eq(need, n_ids);
      ASSERT_ONE_LINE_ERROR(err, "buffer holds 2");
    }
    ck_assert_int_eq(fsdpc__tokenizer_decode(tok, ids, n_ids, back, 3, &blen, &err),
                     FSDPC_INVALID_USAGE);
    ck_assert_uint_eq(blen, n);
    free(ids);
  }
  fsdpc__tokenizer_destroy(tok);
}
END_TEST

/* Merges as [a, b] pairs (newer tokenizers) give the same ids as "a b";
 * ignore_merges false makes "zzzz" go through BPE. */
START_TEST(llama3_variants) {
  const char *text = "Hello   world! training tokenizers 12345 zzzz caf\xc3\xa9\n\n";
  fsdpc_tokenizer *tok = open_bpe(L3_JSON, NULL);
  fsdpc_err err = {0};
  int32_t *base, *ids;
  int64_t n_base, n;
  ck_assert_int_eq(fsdpc__tokenizer_encode_alloc(tok, text, strlen(text), &base, &n_base, &err),
                   FSDPC_OK);
  fsdpc__tokenizer_destroy(tok);

  cJSON *root = load_json(L3_JSON);
  cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
  cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges"), *pairs = cJSON_CreateArray();
  const cJSON *m;
  cJSON_ArrayForEach(m, merges) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", m->valuestring);
    char *sp = strchr(buf, ' ');
    *sp = '\0';
    const char *two[] = {buf, sp + 1};
    cJSON_AddItemToArray(pairs, cJSON_CreateStringArray(two, 2));
  }
  cJSON_ReplaceItemInObjectCaseSensitive(model, "merges", pairs);
  tok = open_bpe(write_json(root, "pairs.json"), NULL);
  ck_assert_int_eq(fsdpc__tokenizer_encode_alloc(tok, text, strlen(text), &ids, &n, &err),
                   FSDPC_OK);
  ck_assert_int_eq(n, n_base);
  ck_assert_int_eq(memcmp(ids, base, (size_t)n * sizeof *ids), 0);
  free(ids);
  fsdpc__tokenizer_destroy(tok);

  cJSON_ReplaceItemInObjectCaseSensitive(model, "ignore_merges", cJSON_CreateFalse());
  tok = open_bpe(write_json(root, "nomerge.json"), NULL);
  CHECK(tok, "zzzz", 1, vid("z"), vid("z"), vid("z"), vid("z"));
  CHECK(tok, "Hello world!", 1, vid("Hello"), vid("\xc4\xa0world"), vid("!"));
  fsdpc__tokenizer_destroy(tok);
  cJSON_Delete(root);
  free(base);
}
END_TEST

/* Pathological inputs stay fast (the merge heap is O(n log n); regex
 * backtracking on long whitespace falls back from the JIT stack). */
START_TEST(llama3_long_inputs) {
  fsdpc_tokenizer *tok = open_bpe(L3, NULL);
  size_t n = 1 << 20;
  char *text = malloc(n);
  const char fills[] = {' ', 'a', '\n', '7', '!'};
  fsdpc_err err = {0};
  for (size_t f = 0; f < sizeof fills; f++) {
    memset(text, fills[f], n);
    text[n / 2] = 'x';
    int32_t *ids;
    int64_t n_ids;
    ck_assert_msg(fsdpc__tokenizer_encode_alloc(tok, text, n, &ids, &n_ids, &err) == FSDPC_OK,
                  "fill '%c': %s", fills[f], err.msg);
    char *back = malloc(n);
    size_t blen;
    ck_assert_int_eq(fsdpc__tokenizer_decode(tok, ids, n_ids, back, n, &blen, &err), FSDPC_OK);
    ck_assert(blen == n && memcmp(back, text, n) == 0);
    free(back);
    free(ids);
  }
  free(text);
  fsdpc__tokenizer_destroy(tok);
}
END_TEST

START_TEST(llama2_sentencepiece_layout) {
  fsdpc_tokenizer *tok = open_bpe(L2_JSON, NULL);
  ck_assert_int_eq(fsdpc__tokenizer_bos(tok), 1);
  ck_assert_int_eq(fsdpc__tokenizer_eos(tok), 2);
  /* Ids: <unk> 0, <s> 1, </s> 2, <0x00>.. 3..258, then pieces in order. */
  const int32_t B = 3, P = 259;
  const int32_t meta = P + 0, hello = P + 18, world = P + 22;
  CHECK(tok, "hello world", 1, hello, world);
  CHECK(tok, "the", 1, P + 23, P + 14); /* "▁t" + "he": see below */
  CHECK(tok, "h", 1, P + 13);           /* "▁h" */
  /* "▁hello▁▁the": rank order decides, not length. "h e" (rank 1) fires
   * before "▁ t" (11) and "▁ ▁" (14), so "the" ends as "▁t" + "he", and the
   * stale "▁ ▁" candidate (its right side is now "▁t") is dropped. */
  CHECK(tok, "hello  the", 1, hello, meta, P + 23, P + 14);
  /* Unknown characters fall back to bytes: "é" = C3 A9; "▁" before it stays. */
  CHECK(tok, "\xc3\xa9", 1, meta, B + 0xc3, B + 0xa9);
  /* <s> is cut out first; the piece after it gets its own "▁". */
  CHECK(tok, "<s>hello", 0, 1, hello);
  /* Decode: "▁" -> " ", one leading space stripped, BOS skipped. */
  fsdpc_err err = {0};
  int32_t ids[] = {1, hello, world, B + '!'};
  char out[64];
  size_t len;
  ck_assert_int_eq(fsdpc__tokenizer_decode(tok, ids, 4, out, sizeof out, &len, &err), FSDPC_OK);
  ck_assert_uint_eq(len, 12);
  ck_assert_int_eq(memcmp(out, "hello world!", 12), 0);
  fsdpc__tokenizer_destroy(tok);
}
END_TEST

/* Each bad file gives one line naming the file and the component. */
START_TEST(bad_files_one_line_errors) {
  struct {
    const char *name, *json, *want;
  } cases[] = {
      {"syntax.json", "{\n  \"model\": {\n    \"vocab\": {,}\n  }\n}",
       "syntax.json:3:16: invalid JSON"},
      {"array.json", "[1, 2]", "expected a JSON object"},
      {"nomodel.json", "{\"version\": \"1.0\"}", "no \"model\""},
      {"unigram.json", "{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}",
       "model type 'Unigram' is not supported (only BPE)"},
      {"metaspace.json",
       "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
       " \"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"*\"},"
       " \"decoder\": {\"type\": \"Metaspace\"}}",
       "pre_tokenizer Metaspace with a replacement other than"},
      {"metaspace_dec.json",
       "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
       " \"pre_tokenizer\": {\"type\": \"Metaspace\"}}",
       "decoder 'null' is not supported yet with a SentencePiece-style tokenizer"},
      {"lower.json",
       "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
       " \"normalizer\": {\"type\": \"Lowercase\"}}",
       "normalizer 'Lowercase' is not supported yet"},
      {"nfc.json",
       "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
       " \"normalizer\": {\"type\": \"NFC\"}}",
       "pre_tokenizer null is not supported yet"},
      /* Issue 19: these three crashed the loader (a NULL dereference on its
       * error path) before they gave this line. */
      {"i19_empty_vocab.json",
       "{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []},"
       " \"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"decoder\": {\"type\": \"ByteLevel\"},"
       " \"added_tokens\": [{\"id\": 0, \"content\": \"<s>\", \"special\": true}]}",
       "model.vocab is empty"},
      {"i19_no_content.json",
       "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
       " \"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"decoder\": {\"type\": \"ByteLevel\"},"
       " \"added_tokens\": [{\"id\": 1, \"content\": \"<s>\"}, {\"id\": 2, \"special\": true}]}",
       "added_tokens[1]: no content string"},
      {"i19_bad_id.json",
       "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
       " \"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"decoder\": {\"type\": \"ByteLevel\"},"
       " \"added_tokens\": [{\"id\": 1, \"content\": \"<s>\"}, {\"id\": -5, \"content\": "
       "\"</s>\"}]}",
       "added_tokens: token '</s>' has id out of range"},
      /* Issue 19: strings from the file are escaped (no raw newline or ESC). */
      {"escape.json", "{\"model\": {\"type\": \"Uni\\u001b[31m\\ngram\", \"vocab\": []}}",
       "model type 'Uni\\x1b[31m\\ngram' is not supported"},
      {"wordpiece_dec.json",
       "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
       " \"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"decoder\": {\"type\": \"WordPiece\"}}",
       "decoder 'WordPiece' is not supported yet"},
      {"split.json",
       "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
       " \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\","
       " \"pattern\": {\"Regex\": \"a\"}, \"behavior\": \"Removed\"}, {\"type\": \"ByteLevel\","
       " \"use_regex\": false}]}, \"decoder\": {\"type\": \"ByteLevel\"}}",
       "Split behavior 'Removed' is not supported yet"},
      {"nobytes.json",
       "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
       " \"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"decoder\": {\"type\": \"ByteLevel\"}}",
       "model.vocab lacks the byte-level token U+0100 for byte 0x00"},
      {"alphabet.json",
       "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"\\u4e00\": 0}, \"merges\": []},"
       " \"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"decoder\": {\"type\": \"ByteLevel\"}}",
       "(id 0) has a character outside the byte-level alphabet"},
      {"badid.json",
       "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -3}, \"merges\": []},"
       " \"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"decoder\": {\"type\": \"ByteLevel\"}}",
       "model.vocab: token 'a' has id out of range"},
  };
  fsdpc_err err = {0};
  fsdpc_tokenizer *tok = NULL;
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    char path[512];
    tmp_path(path, sizeof path, cases[k].name);
    spit(path, cases[k].json, strlen(cases[k].json));
    ck_assert_int_eq(fsdpc__tokenizer_bpe_create(path, NULL, &tok, &err), FSDPC_INVALID_USAGE);
    ASSERT_ONE_LINE_ERROR(err, cases[k].name, cases[k].want);
    ck_assert_ptr_null(tok);
    remove(path);
  }

  /* Faults spliced into the real fixture. */
  cJSON *root = load_json(L3_JSON);
  cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
  cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
  cJSON_ReplaceItemInArray(merges, 3, cJSON_CreateString("\xc4\xa0t qq"));
  ck_assert_int_eq(fsdpc__tokenizer_bpe_create(write_json(root, "m.json"), NULL, &tok, &err),
                   FSDPC_INVALID_USAGE);
  ASSERT_ONE_LINE_ERROR(err, "m.json: model.merges[3]", "'qq' is not in model.vocab");
  cJSON_ReplaceItemInArray(merges, 3, cJSON_CreateString("a b c"));
  ck_assert_int_eq(fsdpc__tokenizer_bpe_create(write_json(root, "m.json"), NULL, &tok, &err),
                   FSDPC_INVALID_USAGE);
  ASSERT_ONE_LINE_ERROR(err, "model.merges[3]: expected \"left right\"");
  cJSON_Delete(root);

  root = load_json(L3_JSON);
  cJSON *split = cJSON_GetArrayItem(
      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"),
                                       "pretokenizers"),
      0);
  cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(split, "pattern"),
                                         "Regex", cJSON_CreateString("(\\p{L}+"));
  ck_assert_int_eq(fsdpc__tokenizer_bpe_create(write_json(root, "re.json"), NULL, &tok, &err),
                   FSDPC_INVALID_USAGE);
  ASSERT_ONE_LINE_ERROR(err, "re.json: pre_tokenizer Split regex does not compile at offset");
  cJSON_Delete(root);

  root = load_json(L3_JSON);
  cJSON *added = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), 2);
  cJSON_ReplaceItemInObjectCaseSensitive(added, "lstrip", cJSON_CreateTrue());
  ck_assert_int_eq(fsdpc__tokenizer_bpe_create(write_json(root, "a.json"), NULL, &tok, &err),
                   FSDPC_INVALID_USAGE);
  ASSERT_ONE_LINE_ERROR(err, "a.json: added_tokens: '<|reserved_special_token_0|>'",
                        "lstrip true, which is not supported yet");
  cJSON_Delete(root);

  ck_assert_int_eq(fsdpc__tokenizer_bpe_create("/nonexistent/tok.json", NULL, &tok, &err),
                   FSDPC_INVALID_USAGE);
  ASSERT_ONE_LINE_ERROR(err, "/nonexistent/tok.json: cannot read tokenizer");
}
END_TEST

START_TEST(factory_opens_byte_or_path) {
  fsdpc_err err = {0};
  fsdpc_tokenizer *tok = NULL;
  ck_assert_int_eq(fsdpc__tokenizer_open("byte", &tok, &err), FSDPC_OK);
  ck_assert_str_eq(fsdpc__tokenizer_name(tok), "byte");
  fsdpc__tokenizer_destroy(tok);
  ck_assert_int_eq(fsdpc__tokenizer_open(L3, &tok, &err), FSDPC_OK); /* a folder */
  ck_assert_str_eq(fsdpc__tokenizer_name(tok), "bpe");
  ck_assert_int_eq(fsdpc__tokenizer_eos(tok), first_special + 1);
  fsdpc__tokenizer_destroy(tok);
  ck_assert_int_eq(fsdpc__tokenizer_open(L2_JSON, &tok, &err), FSDPC_OK); /* a file */
  ck_assert_int_eq(fsdpc__tokenizer_vocab_size(tok), 259 + 28);
  fsdpc__tokenizer_destroy(tok);
  ck_assert_int_eq(fsdpc__tokenizer_open("bytes", &tok, &err), FSDPC_INVALID_USAGE);
  ASSERT_ONE_LINE_ERROR(err, "bytes: cannot read tokenizer");
  ck_assert_int_eq(fsdpc__tokenizer_open("", &tok, &err), FSDPC_INVALID_USAGE);
  ASSERT_ONE_LINE_ERROR(err, "expected \"byte\" or a path");
}
END_TEST

int main(void) {
  /* Outside a test, so no ck_assert: a missing fixture fails every test. */
  FILE *f = fopen(L3_JSON, "rb");
  static char text[1 << 20];
  size_t n = f ? fread(text, 1, sizeof text, f) : 0;
  if (f)
    fclose(f);
  cJSON *root = cJSON_ParseWithLength(text, n);
  const cJSON *first =
      cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), 0);
  first_special = first ? cJSON_GetObjectItemCaseSensitive(first, "id")->valueint : -100;
  cJSON_Delete(root);
  Suite *s = suite_create("data_tokenizer_bpe");
  TCase *tc = tcase_create("bpe");
  tcase_add_test(tc, llama3_hand_derived_encodings);
  tcase_add_test(tc, llama3_special_options_and_ids);
  tcase_add_test(tc, llama3_round_trips_any_bytes);
  tcase_add_test(tc, llama3_variants);
  tcase_add_test(tc, llama3_long_inputs);
  tcase_add_test(tc, llama2_sentencepiece_layout);
  tcase_add_test(tc, bad_files_one_line_errors);
  tcase_add_test(tc, factory_opens_byte_or_path);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
