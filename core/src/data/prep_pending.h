/* TEMPORARY (branch dataprep): declarations of the chat-template and
 * tokenizer calls that the `jinja` and `tokenizers` branches add in
 * data/chat.h and data/tokenizer.h. Removed when those land on main. */
#ifndef FSDPC_DATA_PREP_PENDING_H
#define FSDPC_DATA_PREP_PENDING_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "data/tokenizer.h"
#include "util/err.h"

typedef struct fsdpc_chat_template fsdpc_chat_template;
fsdpc_status fsdpc__chat_template_load(const char *model_dir, const char *template_file,
                                       const char *name, fsdpc_chat_template **out, fsdpc_err *err);
void fsdpc__chat_template_destroy(fsdpc_chat_template *t);
typedef struct fsdpc_chat_span {
  size_t begin, end;
} fsdpc_chat_span;
enum { FSDPC_TRAIN_ON_ASSISTANT = 0, FSDPC_TRAIN_ON_ALL = 1, FSDPC_TRAIN_ON_LAST_ASSISTANT = 2 };
fsdpc_status fsdpc__chat_render(const fsdpc_chat_template *t, const cJSON *messages,
                                int add_generation_prompt, int train_on, char **text,
                                size_t *text_len, fsdpc_chat_span **spans, size_t *n_spans,
                                fsdpc_err *err);

fsdpc_status fsdpc__tokenizer_load(const char *path, fsdpc_tokenizer **out, fsdpc_err *err);
fsdpc_status fsdpc__tokenizer_encode_offsets(const fsdpc_tokenizer *tok, const char *text,
                                             size_t len, int32_t **ids, size_t (**offsets)[2],
                                             int64_t *n, fsdpc_err *err);
int fsdpc__tokenizer_adds_bos(const fsdpc_tokenizer *tok);
int fsdpc__tokenizer_adds_eos(const fsdpc_tokenizer *tok);
int32_t fsdpc__tokenizer_token_id(const fsdpc_tokenizer *tok, const char *token);
const char *fsdpc__tokenizer_token_str(const fsdpc_tokenizer *tok, int32_t id);

#endif
