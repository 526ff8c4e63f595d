/* Internal to data preparation: one JSONL line -> one tokenized example. */
#ifndef FSDPC_DATA_PREPARE_INTERNAL_H
#define FSDPC_DATA_PREPARE_INTERNAL_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "data/chat.h"
#include "data/jsonl.h"
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
  cJSON *kwargs; /* the dataset's template kwargs (an object), or NULL */
  char tmpl_why[512]; /* preference: why the optional template did not load */
  const cJSON *row;   /* preference: the row being converted (prepare_pref.c) */
} fsdpc_prep_ctx;

typedef struct fsdpc_prep_example fsdpc_prep_example;
struct fsdpc_prep_example {
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
  /* preference: this example is the chosen, pair the rejected (owned) */
  fsdpc_prep_example *pair;
};

/* The dataset's template kwargs as a JSON object (NULL when there are
 * none): data.template_kwargs' YAML scalars typed as YAML reads them
 * (true, 3, 1.5, null, text), then the JSON text's keys. */
fsdpc_status fsdpc__prep_kwargs(const fsdpc_prepare_opts *o, cJSON **out, fsdpc_err *err);

/* prepare_chat.c: the messages of a chat example as the template gets them
 * (references into obj; ShareGPT messages converted). NULL with why set
 * (or *oom) when the example is bad. */
cJSON *fsdpc__prep_messages(const cJSON *obj, const char *field, char *why, size_t cap, int *oom);
/* The example's tools, documents and template kwargs; *owned (may be NULL)
 * keeps what was parsed or merged alive until the render ends. Returns 0,
 * -1 with why set for a bad example, -2 out of memory. */
int fsdpc__prep_chat_ctx(const fsdpc_prep_ctx *c, const cJSON *obj, fsdpc_chat_ctx *ctx,
                         cJSON **owned, char *why, size_t cap);

/* Detects the format of one parsed example; FSDPC_FORMAT_AUTO if unknown. */
int fsdpc__prep_detect(const fsdpc_prepare_opts *o, const cJSON *obj);
/* Converts one line (or JSON-array element). Always fills ex (ex->st tells
 * success). */
void fsdpc__prep_example(const fsdpc_prep_ctx *c, const char *file, const fsdpc_jsonl_line *line,
                         int keep_text, fsdpc_prep_example *ex);
/* The same from a parsed JSON object (c->format other than PREFERENCE). */
void fsdpc__prep_example_obj(const fsdpc_prep_ctx *c, const char *file, int64_t line_no,
                             const cJSON *obj, int keep_text, fsdpc_prep_example *ex);
/* prepare_pref.c: a preference row: ex the chosen, ex->pair the rejected. */
void fsdpc__prep_pair(const fsdpc_prep_ctx *c, const char *file, int64_t line_no, const cJSON *obj,
                      int keep_text, fsdpc_prep_example *ex);
void fsdpc__prep_example_free(fsdpc_prep_example *ex);
/* ex->st and ex->err: "FILE:LINE: what" (a bad example, one line). */
void fsdpc__prep_bad(fsdpc_prep_example *ex, const char *file, int64_t line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "a string", "a number", ..., "nothing" (NULL): for error messages. */
const char *fsdpc__prep_type_name(const cJSON *v);

#endif
