/* libFuzzer harness for the tokenizer.json loader and the BPE encoder.
 *
 * The input is a tokenizer.json image, then optionally a NUL byte and a
 * text to encode (without one, a fixed text mixing ASCII, UTF-8, invalid
 * bytes and special-token strings is encoded). Whatever the image holds,
 * loading must either refuse it with one line naming the file, with no
 * raw control character in it (file strings are escaped), or give a
 * tokenizer whose encoding of the text has ids inside the vocabulary,
 * offsets inside the text on character boundaries in order, equals the
 * plain encode, and decodes without error. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/tokenizer.h"

#include "fuzz_check.h"

static const char default_text[] = "Hello  world! caf\xc3\xa9 \xf0\x9f\x98\x80 \xff\xfe 123456\n"
                                   "<s></s><|eot_id|>\t<|im_start|> \xe2\x96\x81x";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *nul = memchr(data, 0, size);
  size_t json_len = nul ? (size_t)(nul - data) : size;
  const char *text = nul ? (const char *)nul + 1 : default_text;
  size_t text_len = nul ? size - json_len - 1 : sizeof default_text - 1;
  fsdpc_err err = {0};
  fsdpc_tokenizer *tok = NULL;
  fsdpc_status s =
      fsdpc__tokenizer_bpe_create_mem("fuzz.json", (const char *)data, json_len, &tok, &err);
  if (s != FSDPC_OK) {
    CHECK(tok == NULL);
    CHECK(err.status == s);
    CHECK(strncmp(err.msg, "fuzz.json", 9) == 0);
    for (const char *p = err.msg; *p; p++)
      CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
    return 0;
  }
  int32_t vocab = fsdpc__tokenizer_vocab_size(tok);
  int32_t *ids = NULL, *ids2 = NULL;
  size_t(*offs)[2] = NULL;
  int64_t n = 0, n2 = 0;
  s = fsdpc__tokenizer_encode_offsets(tok, text, text_len, &ids, &offs, &n, &err);
  if (s == FSDPC_OK) {
    CHECK(fsdpc__tokenizer_encode_alloc(tok, text, text_len, &ids2, &n2, &err) == FSDPC_OK);
    CHECK(n == n2);
    size_t prev = 0;
    for (int64_t i = 0; i < n; i++) {
      CHECK(ids[i] == ids2[i]);
      CHECK(ids[i] >= 0 && ids[i] < vocab);
      CHECK(offs[i][0] <= offs[i][1] && offs[i][1] <= text_len);
      CHECK(offs[i][0] >= prev); /* in text order */
      prev = offs[i][0];
      CHECK(fsdpc__tokenizer_token_str(tok, ids[i]) != NULL || ids[i] < vocab);
    }
    size_t len = 0;
    fsdpc__tokenizer_decode(tok, ids, n, NULL, 0, &len, &err);
    char *out = malloc(len + 1);
    CHECK(out != NULL);
    CHECK(fsdpc__tokenizer_decode(tok, ids, n, out, len, &len, &err) == FSDPC_OK);
    free(out);
  } else {
    CHECK(strchr(err.msg, '\n') == NULL);
  }
  free(ids);
  free(ids2);
  free(offs);
  fsdpc__tokenizer_destroy(tok);
  return 0;
}
