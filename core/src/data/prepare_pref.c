/* A preference row (TRL's layout, docs/data.md "Preference pairs") -> two
 * examples, the chosen and the rejected, each the prompt followed by its
 * completion, only the completion's tokens trained on.
 *
 * Plain rows: `prompt`, `chosen`, `rejected` strings, laid out as the
 * prompt_completion format without a template (BOS, prompt, completion,
 * a trained EOS), as TRL does not template plain text. Conversational rows:
 * message lists; the prompt's messages and the completion's one assistant
 * message rendered with the chat template, only that message trained on.
 * Without `prompt` the prompt is implicit: the longest common prefix of
 * chosen and rejected (characters, less a trailing space, as TRL's
 * extract_prompt; or whole messages). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/prepare_internal.h"

/* The chosen's object into ex, the rejected's into ex->pair (o[i] NULL:
 * out of memory); frees both objects. */
static void convert(const fsdpc_prep_ctx *pc, const char *file, int64_t line, cJSON *o[2],
                    int keep_text, fsdpc_prep_example *ex) {
  if (!o[0] || !o[1])
    ex->st =
        fsdpc__fail(&ex->err, FSDPC_SYSTEM_ERROR, "%s:%lld: out of memory", file, (long long)line);
  else {
    fsdpc__prep_example_obj(pc, file, line, o[0], keep_text, ex);
    if (ex->st == FSDPC_OK)
      fsdpc__prep_example_obj(pc, file, line, o[1], keep_text, ex->pair);
  }
  cJSON_Delete(o[0]);
  cJSON_Delete(o[1]);
}

/* The fields' types: both strings or both message lists; prompt, when
 * given, of the same kind. Returns 1 (conversational), 0 (plain), -1 bad. */
static int row_kind(fsdpc_prep_example *ex, const char *file, int64_t line, const cJSON *pr,
                    const cJSON *ch, const cJSON *rj, const char *pname) {
  if (!ch || !rj || cJSON_IsNull(ch) || cJSON_IsNull(rj)) {
    fsdpc__prep_bad(ex, file, line,
                    "missing field '%s' (the preference format needs 'chosen' and 'rejected', and "
                    "'%s' unless the prompt is their common start)",
                    !ch || cJSON_IsNull(ch) ? "chosen" : "rejected", pname);
    return -1;
  }
  int conv = cJSON_IsArray(ch);
  if (!(conv ? cJSON_IsArray(rj) : cJSON_IsString(ch) && cJSON_IsString(rj))) {
    fsdpc__prep_bad(ex, file, line,
                    "chosen is %s and rejected is %s: both strings or both lists of messages",
                    fsdpc__prep_type_name(ch), fsdpc__prep_type_name(rj));
    return -1;
  }
  if (pr && !cJSON_IsNull(pr) && !(conv ? cJSON_IsArray(pr) : cJSON_IsString(pr))) {
    fsdpc__prep_bad(ex, file, line, "%s: expected %s like chosen and rejected, got %s", pname,
                    conv ? "a list of messages" : "a string", fsdpc__prep_type_name(pr));
    return -1;
  }
  return conv;
}

/* The row's weight, if any, on the chosen's object (read there by
 * fsdpc__prep_example_obj, then given to the pair). */
static int with_weight(cJSON *o, const cJSON *row) {
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(row, "weight");
  return !w || cJSON_AddItemToObject(o, "weight", cJSON_Duplicate(w, 1));
}

/* ---- plain rows ---------------------------------------------------------- */

static void plain(const fsdpc_prep_ctx *c, const char *file, int64_t line, const char *prompt,
                  const char *chosen, const char *rejected, int keep_text, fsdpc_prep_example *ex) {
  size_t k = 0;
  if (!prompt) { /* implicit: the common start, less a space before the split */
    while (chosen[k] && chosen[k] == rejected[k])
      k++;
    if (k > 0 && chosen[k - 1] == ' ' && (chosen[k] || rejected[k]))
      k--;
  }
  char *p = prompt ? NULL : strndup(chosen, k);
  cJSON *o[2] = {cJSON_CreateObject(), cJSON_CreateObject()};
  const char *comp[2] = {chosen + k, rejected + k};
  fsdpc_prep_ctx pc = *c;
  pc.format = FSDPC_FORMAT_PROMPT_COMPLETION;
  pc.tmpl = NULL; /* TRL does not template plain text */
  int ok = (prompt || p) && o[0] && o[1] && with_weight(o[0], c->row);
  for (int i = 0; i < 2 && ok; i++)
    ok = cJSON_AddStringToObject(o[i], c->o->prompt_field, prompt ? prompt : p) &&
         cJSON_AddStringToObject(o[i], c->o->completion_field, comp[i]);
  if (ok && (!*comp[0] || !*comp[1])) {
    fsdpc__prep_bad(ex, file, line, "%s is empty after the prompt: nothing to train on",
                    *comp[0] ? "rejected" : "chosen");
    cJSON_Delete(o[0]);
    cJSON_Delete(o[1]);
  } else {
    if (!ok) /* out of memory: convert says so */
      cJSON_Delete(o[0]), o[0] = NULL;
    convert(&pc, file, line, o, keep_text, ex);
  }
  free(p);
}

/* ---- conversational rows -------------------------------------------------- */

/* A completion: exactly one message, an assistant's. */
static int one_assistant(fsdpc_prep_example *ex, const char *file, int64_t line, const char *name,
                         const cJSON *list, int from) {
  int n = cJSON_GetArraySize(list) - from;
  const cJSON *m = cJSON_GetArrayItem(list, from);
  const cJSON *role = m ? cJSON_GetObjectItemCaseSensitive(m, "role") : NULL;
  if (n != 1 || !cJSON_IsString(role) || strcmp(role->valuestring, "assistant") != 0) {
    fsdpc__prep_bad(ex, file, line,
                    "%s: the completion must be one assistant message (after the prompt), got %d "
                    "message(s)%s",
                    name, n, n == 1 ? " whose role is not 'assistant'" : "");
    return 0;
  }
  return 1;
}

/* {messages_field: prompt messages + list[from..]} (deep copies). */
static cJSON *conversation(const char *field, const cJSON *prompt, int n_prompt, const cJSON *list,
                           int from) {
  cJSON *o = cJSON_CreateObject(), *a = cJSON_CreateArray();
  if (!o || !a || !cJSON_AddItemToObject(o, field, a)) {
    cJSON_Delete(o);
    cJSON_Delete(a);
    return NULL;
  }
  for (int i = 0; i < n_prompt; i++)
    if (!cJSON_AddItemToArray(a, cJSON_Duplicate(cJSON_GetArrayItem(prompt, i), 1))) {
      cJSON_Delete(o);
      return NULL;
    }
  for (int i = from; i < cJSON_GetArraySize(list); i++)
    if (!cJSON_AddItemToArray(a, cJSON_Duplicate(cJSON_GetArrayItem(list, i), 1))) {
      cJSON_Delete(o);
      return NULL;
    }
  return o;
}

static void chat(const fsdpc_prep_ctx *c, const char *file, int64_t line, const cJSON *prompt,
                 const cJSON *chosen, const cJSON *rejected, int keep_text,
                 fsdpc_prep_example *ex) {
  if (!c->tmpl) {
    fsdpc__prep_bad(
        ex, file, line,
        "a conversational row needs a chat template (data.chat_template, or a model folder as "
        "data.tokenizer)%s%s",
        c->tmpl_why[0] ? ": " : "", c->tmpl_why);
    return;
  }
  int n_prompt = prompt ? cJSON_GetArraySize(prompt) : 0, from = 0;
  const cJSON *src = prompt;
  if (!prompt) { /* implicit: the messages chosen and rejected start with */
    int nc = cJSON_GetArraySize(chosen), nr = cJSON_GetArraySize(rejected);
    while (from < nc && from < nr &&
           cJSON_Compare(cJSON_GetArrayItem(chosen, from), cJSON_GetArrayItem(rejected, from), 1))
      from++;
    src = chosen, n_prompt = from;
  }
  if (!one_assistant(ex, file, line, "chosen", chosen, from) ||
      !one_assistant(ex, file, line, "rejected", rejected, from))
    return;
  fsdpc_prepare_opts po = *c->o;
  po.train_on = FSDPC_TRAIN_ON_LAST_ASSISTANT; /* the completion, never the prompt's turns */
  fsdpc_prep_ctx pc = *c;
  pc.o = &po;
  pc.format = FSDPC_FORMAT_CHAT;
  cJSON *o[2] = {conversation(po.messages_field, src, n_prompt, chosen, from),
                 conversation(po.messages_field, src, n_prompt, rejected, from)};
  if (o[0] && !with_weight(o[0], c->row))
    cJSON_Delete(o[0]), o[0] = NULL;
  convert(&pc, file, line, o, keep_text, ex);
}

void fsdpc__prep_pair(const fsdpc_prep_ctx *c, const char *file, int64_t line, const cJSON *obj,
                      int keep_text, fsdpc_prep_example *ex) {
  const char *pname = c->o->prompt_field;
  const cJSON *pr = cJSON_GetObjectItemCaseSensitive(obj, pname);
  const cJSON *ch = cJSON_GetObjectItemCaseSensitive(obj, "chosen");
  const cJSON *rj = cJSON_GetObjectItemCaseSensitive(obj, "rejected");
  int conv = row_kind(ex, file, line, pr, ch, rj, pname);
  if (conv < 0)
    return;
  if (pr && cJSON_IsNull(pr))
    pr = NULL;
  if (!(ex->pair = calloc(1, sizeof *ex->pair))) {
    ex->st =
        fsdpc__fail(&ex->err, FSDPC_SYSTEM_ERROR, "%s:%lld: out of memory", file, (long long)line);
    return;
  }
  fsdpc_prep_ctx rc = *c;
  rc.row = obj;
  c = &rc;
  if (conv)
    chat(c, file, line, pr, ch, rj, keep_text, ex);
  else
    plain(c, file, line, pr ? pr->valuestring : NULL, ch->valuestring, rj->valuestring, keep_text,
          ex);
  if (ex->st == FSDPC_OK && ex->pair->st != FSDPC_OK) { /* the rejected's error for the row */
    ex->st = ex->pair->st;
    ex->err = ex->pair->err;
  }
  if (ex->st == FSDPC_OK) /* the row's weight (read with the chosen) counts for the pair */
    ex->pair->copies = ex->copies;
}
