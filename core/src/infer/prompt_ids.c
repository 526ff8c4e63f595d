/* How text becomes prompt ids for generation (fsdpc generate, the public
 * fsdpc_model_prompt): the model's tokenizer and chat template (prompt.c),
 * the BOS rule. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/chat.h"
#include "infer/infer.h"

fsdpc_status fsdpc__prompter_open(const fsdpc_infer_model *m, fsdpc_prompter *pr, fsdpc_err *err) {
  memset(pr, 0, sizeof *pr);
  pr->m = m;
  return fsdpc__infer_tokenizer(m, &pr->tok, err);
}

void fsdpc__prompter_close(fsdpc_prompter *pr) {
  fsdpc__tokenizer_destroy(pr->tok);
  fsdpc__chat_template_destroy(pr->chat);
  memset(pr, 0, sizeof *pr);
}

/* The model's chat template (prompt.c), loaded on first use. */
static fsdpc_status chat_template(fsdpc_prompter *pr, fsdpc_err *err) {
  return pr->chat ? FSDPC_OK : fsdpc__infer_chat_template(pr->m, &pr->chat, err);
}

static fsdpc_status tokenize(const fsdpc_tokenizer *tok, const char *text, int bos, int32_t **ids,
                             int32_t *n, fsdpc_err *err) {
  int32_t *raw = NULL;
  int64_t nr = 0;
  FSDPC_TRY(fsdpc__tokenizer_encode_alloc(tok, text, strlen(text), &raw, &nr, err));
  int32_t *p = malloc(((size_t)nr + 1) * sizeof *p);
  if (!p) {
    free(raw);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  }
  int k = 0;
  if (bos >= 0)
    p[k++] = bos;
  memcpy(p + k, raw, (size_t)nr * sizeof *raw);
  k += (int)nr;
  free(raw);
  if (k == 0) {
    free(p);
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "an empty prompt");
  }
  *ids = p;
  *n = k;
  return FSDPC_OK;
}

/* The BOS a plain prompt starts with, -1 for none: packed byte-tokenizer
 * data has EOS before every document; others as add_bos_token says. */
static int first_id(const fsdpc_tokenizer *tok, int no_bos) {
  if (no_bos)
    return -1;
  if (strcmp(fsdpc__tokenizer_name(tok), "byte") == 0)
    return fsdpc__tokenizer_eos(tok);
  return fsdpc__tokenizer_adds_bos(tok) ? fsdpc__tokenizer_bos(tok) : -1;
}

/* The conversation: messages_json, or text as the user's turn after an
 * optional system message. */
static cJSON *conversation(const char *text, const char *messages_json, const char *system,
                           fsdpc_err *err) {
  if (messages_json) {
    cJSON *m = cJSON_Parse(messages_json);
    if (!cJSON_IsArray(m)) {
      cJSON_Delete(m);
      fsdpc__fail(err, FSDPC_INVALID_USAGE, "messages: expected a JSON array of messages");
      return NULL;
    }
    return m;
  }
  cJSON *a = cJSON_CreateArray(), *m;
  if (system) {
    m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "system");
    cJSON_AddStringToObject(m, "content", system);
    cJSON_AddItemToArray(a, m);
  }
  m = cJSON_CreateObject();
  cJSON_AddStringToObject(m, "role", "user");
  cJSON_AddStringToObject(m, "content", text);
  cJSON_AddItemToArray(a, m);
  return a;
}

fsdpc_status fsdpc__prompter_ids(fsdpc_prompter *pr, const fsdpc_prompt_args *a, const char *text,
                                 const char *messages_json, int32_t **ids, int32_t *n,
                                 fsdpc_err *err) {
  int chat = a && a->chat;
  if (!text && !messages_json)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "a prompt needs text or messages");
  if (!messages_json && !chat)
    return tokenize(pr->tok, text, first_id(pr->tok, a && a->no_bos), ids, n, err);
  FSDPC_TRY(chat_template(pr, err));
  cJSON *msgs = conversation(text, messages_json, a ? a->system : NULL, err);
  if (!msgs)
    return FSDPC_INVALID_USAGE;
  char *rendered = NULL;
  size_t len = 0;
  fsdpc_status st =
      fsdpc__chat_render(pr->chat, msgs, 1, FSDPC_TRAIN_ON_ALL, &rendered, &len, NULL, NULL, err);
  /* The template writes its own BOS text; special tokens in it become ids. */
  if (st == FSDPC_OK)
    st = tokenize(pr->tok, rendered, -1, ids, n, err);
  free(rendered);
  cJSON_Delete(msgs);
  return st;
}
