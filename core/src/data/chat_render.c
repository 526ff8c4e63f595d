/* Rendering a conversation as transformers' apply_chat_template does: the
 * messages as given, tools, documents, the extra template variables and
 * the special tokens; and the variants of a conversation the mask
 * derivation renders (a prefix, fields replaced by sentinels, a probe
 * message appended). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/chat_internal.h"

const cJSON *fsdpc__chat_msg_at(const cJSON *msgs, size_t i) {
  const cJSON *m = msgs->child;
  while (m && i--)
    m = m->next;
  return m;
}

int fsdpc__chat_is_assistant(const cJSON *m) {
  const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
  return cJSON_IsString(r) && strcmp(r->valuestring, "assistant") == 0;
}

int fsdpc__chat_trainable(const cJSON *m) {
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(m, "weight");
  if (cJSON_IsNumber(w) && w->valuedouble == 0)
    return 0;
  return !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(m, "train"));
}

static const char *const RESERVED[] = {"messages", "tools", "documents", "add_generation_prompt",
                                       NULL};

static fsdpc_status validate(const fsdpc_chat_template *t, const cJSON *msgs,
                             const fsdpc_chat_ctx *ctx, size_t *n, fsdpc_err *err) {
  if (!cJSON_IsArray(msgs))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "messages: expected a list of messages");
  size_t i = 0;
  for (const cJSON *m = msgs->child; m; m = m->next, i++) {
    if (!cJSON_IsObject(m))
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "messages[%zu]: expected an object", i);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
    if (!cJSON_IsString(r))
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "messages[%zu].role: expected a string", i);
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(m, "train");
    if (tr && !cJSON_IsBool(tr))
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "messages[%zu].train: expected true or false",
                         i);
  }
  if (ctx && ctx->kwargs) {
    if (!cJSON_IsObject(ctx->kwargs))
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: template kwargs must be a mapping",
                         t->origin);
    for (const cJSON *k = ctx->kwargs->child; k; k = k->next)
      for (size_t r = 0; RESERVED[r]; r++)
        if (!strcmp(k->string, RESERVED[r]))
          return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                             "template kwargs: '%s' is set by fsdpc itself (give it as the "
                             "dataset's own column instead)",
                             RESERVED[r]);
  }
  if (ctx && ctx->tools && !cJSON_IsArray(ctx->tools) && !cJSON_IsNull(ctx->tools))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "tools: expected a list of tool schemas");
  if (ctx && ctx->documents && !cJSON_IsArray(ctx->documents) && !cJSON_IsNull(ctx->documents))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "documents: expected a list of documents");
  if (ctx && cJSON_IsArray(ctx->documents))
    for (const cJSON *d = ctx->documents->child; d; d = d->next)
      if (!cJSON_IsObject(d))
        return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                           "documents: each document must be an object with title and text");
  *n = i;
  return FSDPC_OK;
}

cJSON *fsdpc__chat_field_node(cJSON *m, const chat_field *f) {
  static const char *const reasoning_keys[] = {"reasoning_content", "reasoning", "thinking"};
  cJSON *c;
  switch (f->kind) {
  case CF_CONTENT:
    return cJSON_GetObjectItemCaseSensitive(m, "content");
  case CF_PART:
    c = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(m, "content"), f->k);
    return cJSON_GetObjectItemCaseSensitive(c, "text");
  case CF_REASONING:
    return cJSON_GetObjectItemCaseSensitive(m, reasoning_keys[f->k]);
  case CF_CALL_NAME:
  case CF_CALL_ARGS: {
    c = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(m, "tool_calls"), f->k);
    cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
    if (cJSON_IsObject(fn))
      c = fn;
    return cJSON_GetObjectItemCaseSensitive(c, f->kind == CF_CALL_NAME ? "name" : "arguments");
  }
  }
  return NULL;
}

/* The variables of one render, as transformers passes them: the special
 * tokens, then the template kwargs (which win over them), then messages,
 * tools, documents and add_generation_prompt. */
static cJSON *make_vars(const fsdpc_chat_template *t, const cJSON *msgs, const fsdpc_chat_ctx *ctx,
                        int agp) {
  cJSON *vars = cJSON_CreateObject();
  int ok = vars != NULL;
  const char *names[] = {"bos_token", "eos_token", "unk_token", "pad_token"};
  const char *vals[] = {t->bos, t->eos, t->unk, t->pad};
  for (int i = 0; i < 4 && ok; i++)
    if (vals[i] && !(ctx && ctx->kwargs && cJSON_GetObjectItemCaseSensitive(ctx->kwargs, names[i])))
      ok = cJSON_AddStringToObject(vars, names[i], vals[i]) != NULL;
  if (ok && ctx && ctx->kwargs)
    for (const cJSON *k = ctx->kwargs->child; k && ok; k = k->next)
      ok = cJSON_AddItemReferenceToObject(vars, k->string, (cJSON *)k);
  ok = ok && cJSON_AddItemReferenceToObject(vars, "messages", (cJSON *)msgs);
  ok = ok && (ctx && ctx->tools ? cJSON_AddItemReferenceToObject(vars, "tools", (cJSON *)ctx->tools)
                                : cJSON_AddNullToObject(vars, "tools") != NULL);
  ok = ok && (ctx && ctx->documents
                  ? cJSON_AddItemReferenceToObject(vars, "documents", (cJSON *)ctx->documents)
                  : cJSON_AddNullToObject(vars, "documents") != NULL);
  ok = ok && cJSON_AddBoolToObject(vars, "add_generation_prompt", agp);
  if (!ok) {
    cJSON_Delete(vars);
    return NULL;
  }
  return vars;
}

void fsdpc__chat_out_free(chat_out *o) {
  free(o->text);
  free(o->gen);
  free(o->ends);
  memset(o, 0, sizeof *o);
}

static fsdpc_status render_vars(const fsdpc_chat_template *t, const cJSON *vars, int want,
                                chat_out *out, fsdpc_err *err) {
  memset(out, 0, sizeof *out);
  fsdpc_jinja_opts o = {.now = t->now,
                        .max_steps = t->max_steps,
                        .max_output = t->max_output,
                        .max_memory = t->max_memory,
                        .gen = want & CHAT_WANT_GEN ? &out->gen : NULL,
                        .n_gen = &out->n_gen,
                        .ends = want & CHAT_WANT_ENDS ? &out->ends : NULL,
                        .n_ends = &out->n_ends};
  return fsdpc__jinja_render_opts(t->jinja, vars, &o, &out->text, &out->len, err);
}

/* messages[0, k) by reference, the messages with replaced fields as copies */
static cJSON *variant_array(const cJSON *msgs, size_t k, const chat_variant *v) {
  cJSON *arr = cJSON_CreateArray();
  if (!arr)
    return NULL;
  size_t i = 0;
  for (const cJSON *m = msgs->child; m && i < k; m = m->next, i++) {
    int replaced = 0;
    for (size_t r = 0; v && r < v->n_repl && !replaced; r++)
      replaced = v->repl[r]->msg == i;
    cJSON *item = replaced ? cJSON_Duplicate(m, 1) : cJSON_CreateObjectReference(m->child);
    if (!item || !cJSON_AddItemToArray(arr, item)) {
      cJSON_Delete(item);
      cJSON_Delete(arr);
      return NULL;
    }
    for (size_t r = 0; replaced && r < v->n_repl; r++) {
      if (v->repl[r]->msg != i)
        continue;
      cJSON *node = fsdpc__chat_field_node(item, v->repl[r]);
      char *s = node && cJSON_IsString(node) ? strdup(v->with[r]) : NULL;
      if (!s) {
        cJSON_Delete(arr);
        return NULL;
      }
      free(node->valuestring);
      node->valuestring = s;
    }
  }
  if (v && v->extra && !cJSON_AddItemReferenceToArray(arr, (cJSON *)v->extra)) {
    cJSON_Delete(arr);
    return NULL;
  }
  return arr;
}

fsdpc_status fsdpc__chat_render_variant(const fsdpc_chat_template *t, const cJSON *msgs, size_t k,
                                        const fsdpc_chat_ctx *ctx, const chat_variant *v, int agp,
                                        int want, chat_out *out, fsdpc_err *err) {
  cJSON *arr = variant_array(msgs, k, v);
  cJSON *vars = arr ? make_vars(t, arr, ctx, agp) : NULL;
  if (!vars) {
    cJSON_Delete(arr);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "chat template: out of memory");
  }
  fsdpc_status st = render_vars(t, vars, want, out, err);
  cJSON_Delete(vars);
  cJSON_Delete(arr);
  return st;
}

fsdpc_status fsdpc__chat_render_ctx(const fsdpc_chat_template *t, const cJSON *messages,
                                    const fsdpc_chat_ctx *ctx, const fsdpc_chat_opts *o,
                                    char **text, size_t *text_len, fsdpc_chat_span **spans,
                                    size_t *n_spans, fsdpc_err *err) {
  *text = NULL;
  if (text_len)
    *text_len = 0;
  if (spans)
    *spans = NULL;
  if (n_spans)
    *n_spans = 0;
  if (t->tool_use && ctx && ctx->tools && !cJSON_IsNull(ctx->tools))
    t = t->tool_use; /* transformers: tools given and a "tool_use" template */
  size_t nmsg = 0;
  FSDPC_TRY(validate(t, messages, ctx, &nmsg, err));
  if (o->train_on < FSDPC_TRAIN_ON_ASSISTANT || o->train_on > FSDPC_TRAIN_ON_LAST_ASSISTANT)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "chat render: unknown train_on %d", o->train_on);
  cJSON *vars = make_vars(t, messages, ctx, o->add_generation_prompt);
  if (!vars)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "chat template: out of memory");
  chat_out R;
  fsdpc_status st = render_vars(t, vars, spans ? CHAT_WANT_ENDS : 0, &R, err);
  cJSON_Delete(vars);
  if (st != FSDPC_OK)
    return st;
  if (spans)
    st = fsdpc__chat_mask(t, messages, nmsg, ctx, o, &R, spans, n_spans, err);
  if (st != FSDPC_OK) {
    fsdpc__chat_out_free(&R);
    return st;
  }
  *text = R.text;
  if (text_len)
    *text_len = R.len;
  free(R.ends);
  free(R.gen);
  return FSDPC_OK;
}

fsdpc_status fsdpc__chat_render(const fsdpc_chat_template *t, const cJSON *messages,
                                int add_generation_prompt, int train_on, char **text,
                                size_t *text_len, fsdpc_chat_span **spans, size_t *n_spans,
                                fsdpc_err *err) {
  fsdpc_chat_opts o = {add_generation_prompt, train_on, 1};
  return fsdpc__chat_render_ctx(t, messages, NULL, &o, text, text_len, spans, n_spans, err);
}

void fsdpc__chat_py_strip(const char *s, size_t n, size_t *b, size_t *e) {
  /* Python whitespace: ASCII \t..\r, \x1c..\x20 and the Unicode spaces. */
  size_t i = 0, j = n;
  while (i < j) {
    size_t l = 0;
    unsigned char c = (unsigned char)s[i];
    if ((c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20))
      l = 1;
    else if (i + 1 < j && c == 0xC2 &&
             ((unsigned char)s[i + 1] == 0x85 || (unsigned char)s[i + 1] == 0xA0))
      l = 2;
    else if (i + 2 < j && c == 0xE1 && (unsigned char)s[i + 1] == 0x9A &&
             (unsigned char)s[i + 2] == 0x80)
      l = 3;
    else if (i + 2 < j && c == 0xE2 && (unsigned char)s[i + 1] == 0x80 &&
             (((unsigned char)s[i + 2] >= 0x80 && (unsigned char)s[i + 2] <= 0x8A) ||
              (unsigned char)s[i + 2] == 0xA8 || (unsigned char)s[i + 2] == 0xA9 ||
              (unsigned char)s[i + 2] == 0xAF))
      l = 3;
    else if (i + 2 < j && c == 0xE2 && (unsigned char)s[i + 1] == 0x81 &&
             (unsigned char)s[i + 2] == 0x9F)
      l = 3;
    else if (i + 2 < j && c == 0xE3 && (unsigned char)s[i + 1] == 0x80 &&
             (unsigned char)s[i + 2] == 0x80)
      l = 3;
    if (!l)
      break;
    i += l;
  }
  while (j > i) {
    unsigned char c = (unsigned char)s[j - 1];
    size_t l = 0;
    if ((c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20))
      l = 1;
    else if (j - i >= 2 && (unsigned char)s[j - 2] == 0xC2 && (c == 0x85 || c == 0xA0))
      l = 2;
    else if (j - i >= 3) {
      unsigned char a = (unsigned char)s[j - 3], b2 = (unsigned char)s[j - 2];
      if ((a == 0xE1 && b2 == 0x9A && c == 0x80) ||
          (a == 0xE2 && b2 == 0x80 &&
           ((c >= 0x80 && c <= 0x8A) || c == 0xA8 || c == 0xA9 || c == 0xAF)) ||
          (a == 0xE2 && b2 == 0x81 && c == 0x9F) || (a == 0xE3 && b2 == 0x80 && c == 0x80))
        l = 3;
    }
    if (!l)
      break;
    j -= l;
  }
  *b = i;
  *e = j;
}
