/* The chat side of data preparation: a dataset line's messages, tools,
 * documents and template kwargs as the chat template gets them, with the
 * conventions of TRL's SFT and transformers' apply_chat_template:
 *
 * - messages: OpenAI style objects passed as given (every key: content as a
 *   string or a list of parts, tool_calls with function.arguments as an
 *   object or a JSON string, tool_call_id, name, reasoning_content,
 *   thinking, any other); ShareGPT {from, value} becomes {role, content}
 *   (human -> user, gpt -> assistant) with its other keys kept.
 * - "tools": a list of tool schemas, or a JSON string of one (TRL loads it).
 * - "documents": a list of {title, text} objects.
 * - "chat_template_kwargs": an object of extra template variables (TRL's
 *   per-example column), over the dataset's data.template_kwargs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/opts.h"
#include "data/prepare_internal.h"
#include "template/jinja.h"

/* A YAML scalar as YAML 1.2's core schema types it. */
static cJSON *yaml_scalar(const char *v) {
  if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "TRUE"))
    return cJSON_CreateTrue();
  if (!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "FALSE"))
    return cJSON_CreateFalse();
  if (!*v || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL"))
    return cJSON_CreateNull();
  char *end;
  double d = strtod(v, &end);
  size_t n = strlen(v);
  int numeric = *end == '\0' && strspn(v, "+-0123456789.eE") == n && strpbrk(v, "0123456789");
  if (numeric) {
    cJSON *num = cJSON_CreateNumber(d);
    if (num && !(num->valuestring = strdup(v[0] == '+' ? v + 1 : v))) {
      cJSON_Delete(num);
      return NULL;
    }
    return num;
  }
  return cJSON_CreateString(v);
}

fsdpc_status fsdpc__prep_kwargs(const fsdpc_prepare_opts *o, cJSON **out, fsdpc_err *err) {
  *out = NULL;
  int n = fsdpc__opts_count(o->template_kwargs);
  const char *js = o->template_kwargs_json ? o->template_kwargs_json : "";
  if (n == 0 && !js[0])
    return FSDPC_OK;
  cJSON *kw = cJSON_CreateObject();
  if (!kw)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "template kwargs: out of memory");
  for (int i = 0; i < n; i++) {
    const char *key, *val;
    int user;
    fsdpc__opts_entry(o->template_kwargs, i, &key, &val, &user);
    cJSON *v = yaml_scalar(val);
    if (!v || !cJSON_AddItemToObject(kw, key, v)) {
      cJSON_Delete(v);
      cJSON_Delete(kw);
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "template kwargs: out of memory");
    }
  }
  if (js[0]) {
    cJSON *j = cJSON_Parse(js);
    char why[300];
    if (!cJSON_IsObject(j) || fsdpc__jinja_json_text(j, js, strlen(js), why, sizeof why)) {
      cJSON_Delete(j);
      cJSON_Delete(kw);
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "template kwargs: expected a JSON object such as "
                         "'{\"enable_thinking\": false}'");
    }
    while (j->child) {
      cJSON *item = cJSON_DetachItemViaPointer(j, j->child);
      cJSON_DeleteItemFromObjectCaseSensitive(kw, item->string);
      cJSON_AddItemToObject(kw, item->string, item);
    }
    cJSON_Delete(j);
  }
  *out = kw;
  return FSDPC_OK;
}

static const char *role_of_sharegpt(const char *r) {
  static const char *const map[][2] = {{"human", "user"}, {"gpt", "assistant"}};
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (strcmp(r, map[i][0]) == 0)
      return map[i][1];
  return r;
}

/* The checks a message gets before the template sees it; NULL when fine,
 * else what is wrong (written to why). */
static const char *check_message(const cJSON *m, const char *ck, char *why, size_t cap) {
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, ck);
  if (c && !cJSON_IsString(c) && !cJSON_IsArray(c) && !cJSON_IsNull(c)) {
    snprintf(why, cap, ".%s: expected a string, a list of content parts or null, got %s", ck,
             fsdpc__prep_type_name(c));
    return why;
  }
  for (const cJSON *p = cJSON_IsArray(c) ? c->child : NULL; p; p = p->next)
    if (!cJSON_IsObject(p)) {
      snprintf(why, cap,
               ".%s: each content part must be an object ({\"type\": \"text\", "
               "\"text\": ...}), got %s",
               ck, fsdpc__prep_type_name(p));
      return why;
    }
  const cJSON *tc = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
  if (tc && !cJSON_IsArray(tc) && !cJSON_IsNull(tc)) {
    snprintf(why, cap, ".tool_calls: expected a list of tool calls, got %s",
             fsdpc__prep_type_name(tc));
    return why;
  }
  int k = 0;
  for (const cJSON *call = cJSON_IsArray(tc) ? tc->child : NULL; call; call = call->next, k++) {
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
    const cJSON *o = cJSON_IsObject(fn) ? fn : call;
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(o, "name");
    const cJSON *ar = cJSON_GetObjectItemCaseSensitive(o, "arguments");
    if (!cJSON_IsObject(call) || !cJSON_IsString(nm)) {
      snprintf(why, cap,
               ".tool_calls[%d]: expected {\"type\": \"function\", \"function\": "
               "{\"name\": ..., \"arguments\": ...}}",
               k);
      return why;
    }
    if (ar && !cJSON_IsObject(ar) && !cJSON_IsString(ar)) {
      snprintf(why, cap,
               ".tool_calls[%d].function.arguments: expected an object or a JSON "
               "string, got %s",
               k, fsdpc__prep_type_name(ar));
      return why;
    }
  }
  const cJSON *tr = cJSON_GetObjectItemCaseSensitive(m, "train");
  if (tr && !cJSON_IsBool(tr)) {
    snprintf(why, cap, ".train: expected true or false, got %s", fsdpc__prep_type_name(tr));
    return why;
  }
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(m, "weight");
  if (w && (!cJSON_IsNumber(w) || (w->valuedouble != 0.0 && w->valuedouble != 1.0))) {
    snprintf(why, cap, ".weight: expected 0 or 1 (train on this message or not)");
    return why;
  }
  return NULL;
}

/* A ShareGPT message as {role, content, its other keys}. */
static cJSON *from_sharegpt(const cJSON *m, const cJSON *r, const cJSON *v) {
  cJSON *o = cJSON_CreateObject();
  if (!o || !cJSON_AddItemToObject(o, "role",
                                   cJSON_CreateStringReference(role_of_sharegpt(r->valuestring))))
    goto fail;
  if (v && !cJSON_AddItemReferenceToObject(o, "content", (cJSON *)v))
    goto fail;
  for (const cJSON *f = m->child; f; f = f->next)
    if (strcmp(f->string, "from") && strcmp(f->string, "value") &&
        !cJSON_AddItemReferenceToObject(o, f->string, (cJSON *)f))
      goto fail;
  return o;
fail:
  cJSON_Delete(o);
  return NULL;
}

cJSON *fsdpc__prep_messages(const cJSON *obj, const char *field, char *why, size_t cap, int *oom) {
  *oom = 0;
  const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(obj, field);
  int sharegpt = !msgs && strcmp(field, "messages") == 0;
  if (sharegpt && (msgs = cJSON_GetObjectItemCaseSensitive(obj, "conversations")))
    field = "conversations";
  if (!msgs) {
    snprintf(why, cap,
             "missing field '%s'%s (the chat format needs a list of messages; set "
             "data.messages_field if your data names it differently)",
             field, sharegpt ? " (or ShareGPT 'conversations')" : "");
    return NULL;
  }
  if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0) {
    snprintf(why, cap, "%s: expected a non-empty array of messages, got %s", field,
             cJSON_IsArray(msgs) ? "an empty array" : fsdpc__prep_type_name(msgs));
    return NULL;
  }
  cJSON *out = cJSON_CreateArray();
  if (!out)
    goto oom;
  int i = 0;
  for (const cJSON *m = msgs->child; m; m = m->next, i++) {
    if (!cJSON_IsObject(m)) {
      snprintf(why, cap, "%s[%d]: expected a message object, got %s", field, i,
               fsdpc__prep_type_name(m));
      goto fail;
    }
    const char *rk = "role", *ck = "content";
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, rk);
    if (!r && cJSON_GetObjectItemCaseSensitive(m, "from"))
      r = cJSON_GetObjectItemCaseSensitive(m, rk = "from"), ck = "value";
    if (!r) {
      snprintf(why, cap, "%s[%d]: missing field 'role' (or ShareGPT 'from')", field, i);
      goto fail;
    }
    if (!cJSON_IsString(r)) {
      snprintf(why, cap, "%s[%d].%s: expected a string, got %s", field, i, rk,
               fsdpc__prep_type_name(r));
      goto fail;
    }
    char what[300];
    if (check_message(m, ck, what, sizeof what)) {
      snprintf(why, cap, "%s[%d]%s", field, i, what);
      goto fail;
    }
    cJSON *item = ck[0] == 'v' ? from_sharegpt(m, r, cJSON_GetObjectItemCaseSensitive(m, ck))
                               : cJSON_CreateObjectReference(m->child);
    if (!item || !cJSON_AddItemToArray(out, item)) {
      cJSON_Delete(item);
      goto oom;
    }
  }
  return out;
oom:
  *oom = 1;
fail:
  cJSON_Delete(out);
  return NULL;
}

/* obj[key] in *out when it is of the wanted kind; NULL when it is absent or
 * null; -1 (why: "KEY: expected WANT, got TYPE") when it is anything else. */
static int column(const cJSON *obj, const char *key, cJSON_bool (*is)(const cJSON *const),
                  const char *want, const cJSON **out, char *why, size_t cap) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  *out = NULL;
  if (!v || cJSON_IsNull(v))
    return 0;
  if (!is(v)) {
    snprintf(why, cap, "%s: expected %s, got %s", key, want, fsdpc__prep_type_name(v));
    return -1;
  }
  *out = v;
  return 0;
}

/* The tools column: a list, or (TRL: json.loads of a string column) a JSON
 * string of one, parsed into *owned. */
static int tools_column(const cJSON *obj, const cJSON **tools, cJSON **owned, char *why,
                        size_t cap) {
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(obj, "tools");
  if (!cJSON_IsString(t))
    return column(obj, "tools", cJSON_IsArray, "a list of tool schemas (or a JSON string of one)",
                  tools, why, cap);
  const char *text = t->valuestring;
  *owned = cJSON_Parse(text);
  char w2[200];
  if (!cJSON_IsArray(*owned) && !cJSON_IsNull(*owned)) {
    snprintf(why, cap, "tools: the string is not a JSON list of tool schemas");
    return -1;
  }
  if (fsdpc__jinja_json_text(*owned, text, strlen(text), w2, sizeof w2)) {
    snprintf(why, cap, "tools: %s", w2);
    return -1;
  }
  *tools = cJSON_IsArray(*owned) ? *owned : NULL;
  return 0;
}

/* The dataset's kwargs and the example's (its keys win) in one object that
 * *owned keeps alive, beside the tools parse if there is one. */
static int merge_kwargs(const cJSON *dataset, const cJSON *kw, fsdpc_chat_ctx *ctx, cJSON **owned) {
  cJSON *merged = cJSON_CreateObject();
  int ok = merged != NULL;
  for (const cJSON *k = dataset->child; k && ok; k = k->next)
    if (!cJSON_GetObjectItemCaseSensitive(kw, k->string))
      ok = cJSON_AddItemReferenceToObject(merged, k->string, (cJSON *)k);
  for (const cJSON *k = kw->child; k && ok; k = k->next)
    ok = cJSON_AddItemReferenceToObject(merged, k->string, (cJSON *)k);
  cJSON *pair = ok && *owned ? cJSON_CreateArray() : NULL;
  if (!ok || (*owned && !pair)) {
    cJSON_Delete(merged);
    return -2;
  }
  if (pair) {
    cJSON_AddItemToArray(pair, *owned);
    cJSON_AddItemToArray(pair, merged);
  }
  *owned = pair ? pair : merged;
  ctx->kwargs = merged;
  return 0;
}

int fsdpc__prep_chat_ctx(const fsdpc_prep_ctx *c, const cJSON *obj, fsdpc_chat_ctx *ctx,
                         cJSON **owned, char *why, size_t cap) {
  *owned = NULL;
  memset(ctx, 0, sizeof *ctx);
  const cJSON *kw;
  if (tools_column(obj, &ctx->tools, owned, why, cap) ||
      column(obj, "documents", cJSON_IsArray, "a list of {\"title\", \"text\"} objects",
             &ctx->documents, why, cap) ||
      column(obj, "chat_template_kwargs", cJSON_IsObject, "an object", &kw, why, cap))
    return -1;
  if (!kw || !kw->child || !c->kwargs) {
    ctx->kwargs = kw && kw->child ? kw : c->kwargs;
    return 0;
  }
  return merge_kwargs(c->kwargs, kw, ctx, owned);
}
