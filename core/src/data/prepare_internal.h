/* Internal to data preparation: one JSONL line -> one tokenized example. */
#ifndef FSDPC_DATA_PREPARE_INTERNAL_H
#define FSDPC_DATA_PREPARE_INTERNAL_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "data/chat.h"
#include "data/prepare.h"
#include "data/tokenizer.h"

/* Shared, read-only while the threads run. */
typedef struct fsdpc_prep_ctx {
  const fsdpc_prepare_opts *o;
  int format;
  const fsdpc_tokenizer *tok;
  const fsdpc_chat_template *tmpl; /* NULL: no template (text, or plain layouts) */
  int add_bos;                     /* prepend BOS (formats without a template) */
  int32_t bos, eos;
} fsdpc_prep_ctx;

typedef struct fsdpc_prep_example {
  int32_t *ids;  /* (n) */
  uint8_t *mask; /* (n) 0/1 */
  int64_t n;
  int64_t copies; /* the example's weight: 0 = left out */
  /* Kept only when asked (the preview): the rendered text and each token's
   * byte range in it ([0,0) for an added BOS/EOS). */
  char *text;
  size_t text_len;
  size_t (*offsets)[2];
  fsdpc_status st; /* != OK: err says file:line: what */
  fsdpc_err err;
} fsdpc_prep_example;

/* Detects the format of one parsed example; FSDPC_FORMAT_AUTO if unknown. */
int fsdpc__prep_detect(const fsdpc_prepare_opts *o, const cJSON *obj);
/* Converts one line. Always fills ex (ex->st tells success). */
void fsdpc__prep_example(const fsdpc_prep_ctx *c, const char *file, int64_t line_no,
                         const char *line, size_t len, int keep_text, fsdpc_prep_example *ex);
void fsdpc__prep_example_free(fsdpc_prep_example *ex);

#endif
