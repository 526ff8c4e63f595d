/* One JSONL line -> one example: parse, check the fields of its format,
 * render the text with its target spans, tokenize once with byte offsets and
 * set each token's mask bit from the spans (docs/data.md has the layouts).
 * Every error is one line: "FILE:LINE: field: what is wrong". */
#define _GNU_SOURCE
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/prepare_internal.h"
#include "template/jinja.h"

/* ---- growable text with target spans ----------------------------------- */

typedef struct textbuf {
  char *s;
  size_t len, cap;
  fsdpc_chat_span *spans;
  size_t n_spans, spans_cap;
} textbuf;

static int tb_add(textbuf *b, const char *s, size_t n, int target) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1)
      cap *= 2;
    char *p = realloc(b->s, cap);
    if (!p)
      return 0;
    b->s = p, b->cap = cap;
  }
  if (target && n) {
    if (b->n_spans == b->spans_cap) {
      size_t cap = b->spans_cap ? b->spans_cap * 2 : 4;
      fsdpc_chat_span *p = realloc(b->spans, cap * sizeof *p);
      if (!p)
        return 0;
      b->spans = p, b->spans_cap = cap;
    }
    b->spans[b->n_spans++] = (fsdpc_chat_span){b->len, b->len + n};
  }
  memcpy(b->s + b->len, s, n);
  b->len += n;
  b->s[b->len] = '\0';
  return 1;
}
static int tb_str(textbuf *b, const char *s, int target) {
  return tb_add(b, s, strlen(s), target);
}

/* ---- errors ------------------------------------------------------------- */

void fsdpc__prep_bad(fsdpc_prep_example *ex, const char *file, int64_t line, const char *fmt, ...) {
  char what[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  ex->st = fsdpc__fail(&ex->err, FSDPC_INVALID_USAGE, "%s:%lld: %s", file, (long long)line, what);
}

const char *fsdpc__prep_type_name(const cJSON *v) {
  if (!v)
    return "nothing";
  if (cJSON_IsString(v))
    return "a string";
  if (cJSON_IsNumber(v))
    return "a number";
  if (cJSON_IsBool(v))
    return "a boolean";
  if (cJSON_IsNull(v))
    return "null";
  if (cJSON_IsArray(v))
    return "an array";
  return "an object";
}

/* The string field `name` of obj; NULL (with ex->st set) when it is missing
 * (and required) or not a string. *present = 0 for a missing optional one. */
static const char *str_field(fsdpc_prep_example *ex, const char *file, int64_t line,
                             const cJSON *obj, const char *name, int required, const char *fmt_name,
                             const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
  if (!v || cJSON_IsNull(v)) {
    if (required)
      fsdpc__prep_bad(
          ex, file, line,
          "missing field '%s' (the %s format needs it; if your data names it differently set "
          "data.%s_field)",
          name, fmt_name, key);
    return NULL;
  }
  if (!cJSON_IsString(v)) {
    fsdpc__prep_bad(ex, file, line, "%s: expected a string, got %s", name,
                    fsdpc__prep_type_name(v));
    return NULL;
  }
  return v->valuestring;
}

/* ---- format detection --------------------------------------------------- */

int fsdpc__prep_detect(const fsdpc_prepare_opts *o, const cJSON *obj) {
  if (!cJSON_IsObject(obj))
    return FSDPC_FORMAT_AUTO;
#define HAS(k) (cJSON_GetObjectItemCaseSensitive(obj, (k)) != NULL)
  if (HAS("chosen") && HAS("rejected"))
    return FSDPC_FORMAT_PREFERENCE;
  if (HAS(o->messages_field) || HAS("messages") || HAS("conversations"))
    return FSDPC_FORMAT_CHAT;
  if (HAS(o->prompt_field) && HAS(o->completion_field))
    return FSDPC_FORMAT_PROMPT_COMPLETION;
  if (HAS(o->instruction_field) && HAS(o->output_field))
    return FSDPC_FORMAT_INSTRUCTION;
  if (HAS(o->text_field))
    return FSDPC_FORMAT_TEXT;
#undef HAS
  return FSDPC_FORMAT_AUTO;
}

/* Adds one {role, content} message (contents borrowed) to msgs. */
static int add_msg(cJSON *msgs, const char *role, const char *content) {
  cJSON *m = cJSON_CreateObject();
  if (!m)
    return 0;
  cJSON_AddItemToArray(msgs, m);
  return cJSON_AddItemToObject(m, "role", cJSON_CreateStringReference(role)) &&
         cJSON_AddItemToObject(m, "content", cJSON_CreateStringReference(content));
}

/* ---- rendering ----------------------------------------------------------- */

/* Renders obj into tb (plain layouts) or into msgs (a template will render
 * it). Returns 0 with ex->st set on a bad example. */
static int render(const fsdpc_prep_ctx *c, fsdpc_prep_example *ex, const char *file, int64_t line,
                  const cJSON *obj, textbuf *tb, cJSON **msgs, cJSON **owned) {
  const fsdpc_prepare_opts *o = c->o;
  int ok;
  switch (c->format) {
  case FSDPC_FORMAT_TEXT: {
    const char *t = str_field(ex, file, line, obj, o->text_field, 1, "text", "text");
    return t && tb_str(tb, t, 1);
  }
  case FSDPC_FORMAT_PROMPT_COMPLETION: {
    const char *p =
        str_field(ex, file, line, obj, o->prompt_field, 1, "prompt_completion", "prompt");
    const char *q = p ? str_field(ex, file, line, obj, o->completion_field, 1, "prompt_completion",
                                  "completion")
                      : NULL;
    if (!q)
      return 0;
    if (c->tmpl) {
      *msgs = cJSON_CreateArray();
      return *msgs && add_msg(*msgs, "user", p) && add_msg(*msgs, "assistant", q);
    }
    return tb_str(tb, p, 0) && tb_str(tb, q, 1);
  }
  case FSDPC_FORMAT_INSTRUCTION: {
    const char *ins =
        str_field(ex, file, line, obj, o->instruction_field, 1, "instruction", "instruction");
    const char *in = NULL, *out = NULL, *sys = NULL;
    if (ins && ex->st == FSDPC_OK)
      in = str_field(ex, file, line, obj, o->input_field, 0, "instruction", "input");
    if (ins && ex->st == FSDPC_OK)
      out = str_field(ex, file, line, obj, o->output_field, 1, "instruction", "output");
    if (out && ex->st == FSDPC_OK)
      sys = str_field(ex, file, line, obj, o->system_field, 0, "instruction", "system");
    if (!out || ex->st != FSDPC_OK)
      return 0;
    int has_in = in && *in, has_sys = sys && *sys;
    if (c->tmpl) {
      *msgs = cJSON_CreateArray();
      char *user = NULL;
      if (!*msgs || asprintf(&user, "%s%s%s", ins, has_in ? "\n\n" : "", has_in ? in : "") < 0)
        return 0;
      /* the joined user text must outlive the message list: the caller
       * frees *owned after rendering */
      *owned = cJSON_CreateString(user);
      free(user);
      return *owned && (!has_sys || add_msg(*msgs, "system", sys)) &&
             add_msg(*msgs, "user", (*owned)->valuestring) && add_msg(*msgs, "assistant", out);
    }
    ok = (!has_sys || (tb_str(tb, sys, 0) && tb_str(tb, "\n\n", 0))) &&
         tb_str(tb, "### Instruction:\n", 0) && tb_str(tb, ins, 0) && tb_str(tb, "\n\n", 0) &&
         (!has_in ||
          (tb_str(tb, "### Input:\n", 0) && tb_str(tb, in, 0) && tb_str(tb, "\n\n", 0))) &&
         tb_str(tb, "### Response:\n", 0) && tb_str(tb, out, 1);
    return ok;
  }
  case FSDPC_FORMAT_CHAT: {
    char why[600];
    int oom;
    *msgs = fsdpc__prep_messages(obj, o->messages_field, why, sizeof why, &oom);
    if (!*msgs && !oom)
      fsdpc__prep_bad(ex, file, line, "%s", why);
    return *msgs != NULL;
  }
  }
  return 0;
}

/* ---- tokens and mask ------------------------------------------------------ */

/* mask[i] = 1 iff token i's byte range overlaps a span; a zero-width token
 * counts when its position lies inside one. Spans are sorted and disjoint. */
static void spans_to_mask(size_t (*off)[2], int64_t n, const fsdpc_chat_span *sp, size_t ns,
                          uint8_t *mask) {
  size_t s = 0;
  for (int64_t i = 0; i < n; i++) {
    size_t a = off[i][0], b = off[i][1];
    while (s < ns && sp[s].end <= a && !(a == b && sp[s].begin <= a && a < sp[s].end))
      s++;
    int hit = 0;
    for (size_t k = s; k < ns && sp[k].begin < (b > a ? b : a + 1); k++)
      if (b > a ? (sp[k].begin < b && a < sp[k].end) : (sp[k].begin <= a && a < sp[k].end)) {
        hit = 1;
        break;
      }
    mask[i] = (uint8_t)hit;
  }
}

void fsdpc__prep_example(const fsdpc_prep_ctx *c, const char *file, const fsdpc_jsonl_line *line,
                         int keep_text, fsdpc_prep_example *ex) {
  memset(ex, 0, sizeof *ex);
  ex->copies = 1;
  cJSON *obj = NULL; /* parsed as Python does (data/jsonl.h) */
  ex->st = fsdpc__jsonl_parse(file, line, &obj, &ex->err);
  if (!obj)
    return;
  if (!cJSON_IsObject(obj))
    fsdpc__prep_bad(ex, file, line->line_no, "expected a JSON object per line, got %s",
                    fsdpc__prep_type_name(obj));
  else if (c->format == FSDPC_FORMAT_PREFERENCE)
    fsdpc__prep_pair(c, file, line->line_no, obj, keep_text, ex);
  else
    fsdpc__prep_example_obj(c, file, line->line_no, obj, keep_text, ex);
  cJSON_Delete(obj);
}

void fsdpc__prep_example_obj(const fsdpc_prep_ctx *c, const char *file, int64_t line_no,
                             const cJSON *obj, int keep_text, fsdpc_prep_example *ex) {
  textbuf tb = {0};
  cJSON *msgs = NULL, *owned = NULL, *ctx_owned = NULL;
  char *rtext = NULL;
  size_t rlen = 0;
  fsdpc_chat_span *spans = NULL;
  size_t ns = 0;
  int32_t *ids = NULL;
  size_t(*off)[2] = NULL;
  int64_t n = 0;
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(obj, "weight");
  if (w) {
    double v = cJSON_IsNumber(w) ? w->valuedouble : -1;
    if (!(v >= 0 && v <= 1000 && floor(v) == v)) {
      fsdpc__prep_bad(
          ex, file, line_no,
          "weight: expected a whole number 0..1000 (an example of weight k is trained on k "
          "times per epoch; 0 leaves it out), got %s",
          cJSON_IsNumber(w) ? "a fraction or out-of-range number" : fsdpc__prep_type_name(w));
      goto done;
    }
    ex->copies = (int64_t)v;
  }
  if (!render(c, ex, file, line_no, obj, &tb, &msgs, &owned)) {
    if (ex->st == FSDPC_OK)
      ex->st = fsdpc__fail(&ex->err, FSDPC_SYSTEM_ERROR, "%s:%lld: out of memory", file,
                           (long long)line_no);
    goto done;
  }
  if (msgs) {
    if (!c->tmpl) {
      fsdpc__prep_bad(ex, file, line_no,
                      "the chat format needs a chat template (data.chat_template)");
      goto done;
    }
    fsdpc_err rerr = {0};
    fsdpc_chat_ctx cctx = {0};
    char why[600];
    int r = c->format == FSDPC_FORMAT_CHAT
                ? fsdpc__prep_chat_ctx(c, obj, &cctx, &ctx_owned, why, sizeof why)
                : (cctx.kwargs = c->kwargs, 0);
    if (r == -2)
      goto oom;
    if (r) {
      fsdpc__prep_bad(ex, file, line_no, "%s", why);
      goto done;
    }
    fsdpc_chat_opts copts = {0, c->o->train_on, c->o->train_on_reasoning};
    if (fsdpc__chat_render_ctx(c->tmpl, msgs, &cctx, &copts, &rtext, &rlen, &spans, &ns, &rerr) !=
        FSDPC_OK) {
      fsdpc__prep_bad(ex, file, line_no, "chat template: %s", rerr.msg);
      goto done;
    }
  } else {
    rtext = tb.s, rlen = tb.len, spans = tb.spans, ns = tb.n_spans;
    tb.s = NULL, tb.spans = NULL;
    if (!rtext && !(rtext = calloc(1, 1)))
      goto oom;
  }
  if ((ex->st = fsdpc__tokenizer_encode_offsets(c->tok, rtext, rlen, &ids, &off, &n, &ex->err)) !=
      FSDPC_OK) {
    char m[sizeof ex->err.msg];
    snprintf(m, sizeof m, "%s", ex->err.msg);
    fsdpc__prep_bad(ex, file, line_no, "%s", m);
    goto done;
  }
  /* Formats rendered without a template get BOS (when the tokenizer adds
   * one) and a trained EOS; a template writes its own. */
  int plain = msgs == NULL, bos = plain && c->add_bos && c->bos >= 0, eos = plain;
  int64_t total = n + bos + eos;
  ex->ids = malloc((size_t)(total > 0 ? total : 1) * sizeof *ex->ids);
  ex->mask = malloc((size_t)(total > 0 ? total : 1));
  if (keep_text)
    ex->offsets = malloc((size_t)(total > 0 ? total : 1) * sizeof *ex->offsets);
  if (!ex->ids || !ex->mask || (keep_text && !ex->offsets))
    goto oom;
  if (bos) {
    ex->ids[0] = c->bos;
    ex->mask[0] = 0;
  }
  memcpy(ex->ids + bos, ids, (size_t)n * sizeof *ids);
  spans_to_mask(off, n, spans, ns, ex->mask + bos);
  if (eos) {
    ex->ids[bos + n] = c->eos;
    ex->mask[bos + n] = 1;
  }
  if (keep_text) {
    for (int64_t i = 0; i < total; i++)
      ex->offsets[i][0] = ex->offsets[i][1] = (i < bos) ? 0 : rlen;
    memcpy(ex->offsets + bos, off, (size_t)n * sizeof *off);
    ex->text = rtext, ex->text_len = rlen;
    rtext = NULL;
  }
  ex->n = total;
  goto done;
oom:
  ex->st =
      fsdpc__fail(&ex->err, FSDPC_SYSTEM_ERROR, "%s:%lld: out of memory", file, (long long)line_no);
done:
  free(ids);
  free(off);
  free(rtext);
  free(spans);
  free(tb.s);
  free(tb.spans);
  cJSON_Delete(msgs);
  cJSON_Delete(owned);
  cJSON_Delete(ctx_owned);
}

void fsdpc__prep_example_free(fsdpc_prep_example *ex) {
  if (ex->pair) {
    fsdpc__prep_example_free(ex->pair);
    free(ex->pair);
  }
  free(ex->ids);
  free(ex->mask);
  free(ex->text);
  free(ex->offsets);
  memset(ex, 0, sizeof *ex);
}
