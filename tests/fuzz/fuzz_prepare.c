/* libFuzzer harness for one JSONL line -> one example (data/prepare_example.c)
 * in every format, with the byte tokenizer and no chat template.
 *
 * Whatever the line holds, the converter must either refuse it with one line
 * that starts with "fuzz.jsonl:7: ", or produce tokens inside the vocabulary
 * with a 0/1 mask, the plain layouts ending in a trained EOS. ASan checks
 * that nothing outside the line is read (it is an exact-size copy). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/prepare_internal.h"

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond))                                                                                   \
      __builtin_trap();                                                                            \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static fsdpc_tokenizer *tok;
  fsdpc_err err = {0};
  if (!tok)
    CHECK(fsdpc__tokenizer_byte_create(&tok, &err) == FSDPC_OK);
  char *line = malloc(size + 1); /* the reader hands out NUL-terminated lines */
  CHECK(line);
  memcpy(line, data, size);
  line[size] = '\0';
  fsdpc_prepare_opts o;
  fsdpc__prepare_opts_default(&o);
  for (int format = FSDPC_FORMAT_TEXT; format <= FSDPC_FORMAT_CHAT; format++) {
    fsdpc_prep_ctx c = {.o = &o,
                        .format = format,
                        .tok = tok,
                        .tmpl = NULL,
                        .add_bos = 1,
                        .bos = FSDPC_BYTE_BOS,
                        .eos = FSDPC_BYTE_EOS};
    fsdpc_prep_example ex;
    fsdpc__prep_example(&c, "fuzz.jsonl", 7, line, size, format == FSDPC_FORMAT_TEXT, &ex);
    if (ex.st != FSDPC_OK) {
      CHECK(ex.err.status == ex.st);
      CHECK(strncmp(ex.err.msg, "fuzz.jsonl:7: ", 14) == 0);
      CHECK(strchr(ex.err.msg, '\n') == NULL);
      CHECK(ex.ids == NULL);
    } else {
      CHECK(format != FSDPC_FORMAT_CHAT); /* no template: chat cannot succeed */
      CHECK(ex.n >= 2 && ex.ids[0] == FSDPC_BYTE_BOS && ex.mask[0] == 0);
      CHECK(ex.ids[ex.n - 1] == FSDPC_BYTE_EOS && ex.mask[ex.n - 1] == 1);
      CHECK(ex.copies >= 0 && ex.copies <= 1000);
      for (int64_t i = 0; i < ex.n; i++)
        CHECK(ex.ids[i] >= 0 && ex.ids[i] < FSDPC_BYTE_VOCAB && ex.mask[i] <= 1);
      if (ex.text)
        for (int64_t i = 1; i + 1 < ex.n; i++) /* byte tokens: the text itself */
          CHECK(ex.offsets[i][1] == ex.offsets[i][0] + 1 &&
                (unsigned char)ex.text[ex.offsets[i][0]] == ex.ids[i]);
    }
    fsdpc__prep_example_free(&ex);
  }
  free(line);
  return 0;
}
