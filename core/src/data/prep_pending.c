/* TEMPORARY (branch dataprep): stand-ins for the calls of prep_pending.h so
 * that `fsdpc data prepare` builds and its non-template paths can be tested
 * before the `jinja` and `tokenizers` branches land. The chat "template" here
 * renders ChatML only and is not a Jinja engine. Deleted at the merge. */
#define _GNU_SOURCE
#include "data/prep_pending.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fsdpc_chat_template {
  int unused;
};

fsdpc_status fsdpc__chat_template_load(const char *model_dir, const char *template_file,
                                       const char *name, fsdpc_chat_template **out,
                                       fsdpc_err *err) {
  (void)model_dir, (void)template_file, (void)name;
  *out = calloc(1, sizeof **out);
  return *out ? FSDPC_OK : fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
}
void fsdpc__chat_template_destroy(fsdpc_chat_template *t) {
  free(t);
}

fsdpc_status fsdpc__chat_render(const fsdpc_chat_template *t, const cJSON *messages,
                                int add_generation_prompt, int train_on, char **text,
                                size_t *text_len, fsdpc_chat_span **spans, size_t *n_spans,
                                fsdpc_err *err) {
  (void)t;
  char *buf = NULL;
  size_t len = 0, ns = 0;
  FILE *f = open_memstream(&buf, &len);
  fsdpc_chat_span *sp = calloc((size_t)cJSON_GetArraySize(messages) + 1, sizeof *sp);
  int n = cJSON_GetArraySize(messages), last_asst = -1;
  for (int i = 0; i < n; i++)
    if (!strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(messages, i), "role")->valuestring,
                "assistant"))
      last_asst = i;
  for (int i = 0; i < n; i++) {
    const cJSON *m = cJSON_GetArrayItem(messages, i);
    const char *role = cJSON_GetObjectItem(m, "role")->valuestring;
    const char *content = cJSON_GetObjectItem(m, "content")->valuestring;
    const cJSON *tr = cJSON_GetObjectItem(m, "train");
    fprintf(f, "<|im_start|>%s\n", role);
    fflush(f);
    size_t b = len;
    fprintf(f, "%s<|im_end|>", content);
    fflush(f);
    int asst = !strcmp(role, "assistant");
    int want = train_on == FSDPC_TRAIN_ON_ALL || (asst && train_on == FSDPC_TRAIN_ON_ASSISTANT) ||
               (i == last_asst && train_on == FSDPC_TRAIN_ON_LAST_ASSISTANT);
    if (tr && cJSON_IsBool(tr))
      want = cJSON_IsTrue(tr);
    if (want)
      sp[ns++] = (fsdpc_chat_span){b, len};
    fputc('\n', f);
  }
  if (add_generation_prompt)
    fputs("<|im_start|>assistant\n", f);
  fclose(f);
  *text = buf;
  *text_len = len;
  *spans = sp;
  *n_spans = ns;
  (void)err;
  return FSDPC_OK;
}

fsdpc_status fsdpc__tokenizer_load(const char *path, fsdpc_tokenizer **out, fsdpc_err *err) {
  return fsdpc__tokenizer_open(path, out, err);
}

fsdpc_status fsdpc__tokenizer_encode_offsets(const fsdpc_tokenizer *tok, const char *text,
                                             size_t len, int32_t **ids, size_t (**offsets)[2],
                                             int64_t *n, fsdpc_err *err) {
  FSDPC_TRY(fsdpc__tokenizer_encode_alloc(tok, text, len, ids, n, err));
  size_t(*off)[2] = malloc((size_t)(*n > 0 ? *n : 1) * sizeof *off);
  size_t at = 0;
  for (int64_t i = 0; i < *n; i++) {
    char piece[256];
    size_t pl = 0;
    fsdpc_err e2;
    if (fsdpc__tokenizer_decode(tok, *ids + i, 1, piece, sizeof piece, &pl, &e2) != FSDPC_OK)
      pl = 0;
    off[i][0] = at;
    off[i][1] = at + pl <= len ? at + pl : len;
    at = off[i][1];
  }
  *offsets = off;
  return FSDPC_OK;
}

int fsdpc__tokenizer_adds_bos(const fsdpc_tokenizer *tok) {
  return fsdpc__tokenizer_bos(tok) >= 0 && strcmp(fsdpc__tokenizer_name(tok), "byte");
}
int fsdpc__tokenizer_adds_eos(const fsdpc_tokenizer *tok) {
  (void)tok;
  return 0;
}
int32_t fsdpc__tokenizer_token_id(const fsdpc_tokenizer *tok, const char *token) {
  (void)tok, (void)token;
  return -1;
}
const char *fsdpc__tokenizer_token_str(const fsdpc_tokenizer *tok, int32_t id) {
  if (id == fsdpc__tokenizer_bos(tok))
    return "<bos>";
  if (id == fsdpc__tokenizer_eos(tok))
    return "<eos>";
  if (id == fsdpc__tokenizer_pad(tok))
    return "<pad>";
  return NULL;
}
