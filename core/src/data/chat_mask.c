/* The assistant mask: for each trained assistant turn, the byte range of
 * the rendered text the model is trained to produce. Derived from renders
 * of the conversation, without knowledge of any one template, and refused
 * (naming the template and the turn) wherever it cannot be exact:
 *
 * 1. Fields (chat_fields.c): where the turn's content, reasoning and tool
 *    call names render.
 * 2. Start: the render of the conversation before the turn with
 *    add_generation_prompt (what the model is prompted with) must be a
 *    prefix of the text; the turn starts where it ends. When it is not a
 *    prefix (a template whose generation prompt differs from the rendered
 *    history, e.g. Qwen3 without thinking), the turn starts at its first
 *    field.
 * 3. End: after the turn's last field, the end-of-turn text is what the
 *    template writes there both before what follows the turn (the next
 *    message, or a generation prompt) and before the other of the two,
 *    cut back to where both renders had ended one of the template's writes
 *    (so "<|end|>" against "<|endoftext|>" never leaves "<|" behind) and
 *    without the whitespace between turns. A turn that ends the
 *    conversation keeps all the template writes after it (an end-of-text
 *    token included), unless the template ignores add_generation_prompt
 *    and so may be writing the next header there (the original Llama 3
 *    template, Llama Guard): then only what it also writes when the
 *    conversation goes on (a probe message). A continuation the template
 *    refuses is refused too; nothing falls back to a guess.
 * 4. Reasoning is cut out when not trained: from the start through the
 *    field after it.
 * 5. A turn that no text of the template's marks is refused: the template
 *    ignores add_generation_prompt, the render before the turn is not the
 *    text before it (step 2 fell back to its first field) and nothing
 *    follows it as an end-of-turn (step 3 found none). That is a prompt
 *    which quotes the conversation (Llama Guard's classifier prompt: the
 *    agent's message inside the user's instructions, the reply asked for
 *    after them), not a conversation written as turns.
 * Templates with {% generation %} blocks use their blocks (block k is
 * assistant message k). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/chat_internal.h"

/* The anchor's sentinel in tails: U+F8F0 ... U+F8F1 (private use: no case,
 * not whitespace, kept by json.dumps). */
static const char SENT_A[] = "\xef\xa3\xb0", SENT_B[] = "\xef\xa3\xb1";

static size_t common_prefix(const char *a, size_t na, const char *b, size_t nb) {
  size_t i = 0, n = na < nb ? na : nb;
  while (i < n && a[i] == b[i])
    i++;
  return i;
}

static size_t rstrip_len(const char *s, size_t n) {
  size_t b, e;
  fsdpc__chat_py_strip(s, n, &b, &e);
  return b == e ? 0 : e;
}

typedef struct mctx {
  const fsdpc_chat_template *t;
  const cJSON *msgs;
  size_t nmsg;
  const fsdpc_chat_ctx *ctx;
  const fsdpc_chat_opts *o;
  const chat_out *R;
  int agp_ignored; /* -1 unknown, 0 the template honours add_generation_prompt, 1 ignores it */
  int no_prompt;   /* the turn being placed: the render before it is not the text before it */
  fsdpc_err *err;
} mctx;

static fsdpc_status refuse(mctx *m, size_t i, const char *why) {
  return fsdpc__fail(m->err, FSDPC_INVALID_USAGE,
                     "%s: messages[%zu]: %s, so its assistant mask cannot be derived exactly; use "
                     "a template with {%% generation %%} blocks or train_on: all",
                     m->t->origin, i, why);
}

/* Whether the template ignores add_generation_prompt (renders the same
 * text with it on and off), computed once. */
static fsdpc_status agp_ignored(mctx *m, int *out) {
  if (m->agp_ignored < 0) {
    chat_out A;
    fsdpc_err perr = {0};
    fsdpc_status st = fsdpc__chat_render_variant(m->t, m->msgs, m->nmsg, m->ctx, NULL,
                                                 !m->o->add_generation_prompt, 0, &A, &perr);
    if (st == FSDPC_SYSTEM_ERROR)
      return fsdpc__fail(m->err, st, "%s", perr.msg);
    m->agp_ignored = st == FSDPC_OK && A.len == m->R->len && memcmp(A.text, m->R->text, A.len) == 0;
    fsdpc__chat_out_free(&A);
  }
  *out = m->agp_ignored;
  return FSDPC_OK;
}

/* A tail: the text after the turn's anchor field in one render, and where
 * the template's writes end in it (offsets from the tail's start). */
typedef struct tail {
  chat_out out; /* the render it lives in (owned, unless borrowed from R) */
  const char *s;
  size_t n, at; /* at: the tail's offset in its render */
  int found;
} tail;

static int write_end(const chat_out *o, size_t off) {
  size_t lo = 0, hi = o->n_ends; /* ends are increasing: binary search */
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (o->ends[mid] < off)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < o->n_ends && o->ends[lo] == off;
}

/* The common start of two tails, cut back to a point where both renders
 * had ended a write (or a tail ended): a boundary the template itself made,
 * never the middle of "<|end|>" against "<|endoftext|>". */
static size_t common_end(const tail *a, const tail *b) {
  size_t p = common_prefix(a->s, a->n, b->s, b->n);
  while (p > 0 && !((p == a->n || write_end(&a->out, a->at + p)) &&
                    (p == b->n || write_end(&b->out, b->at + p))))
    p--;
  return p;
}

/* The tail after field `anchor` of message i in a variant of the
 * conversation (k messages, `extra` appended, add_generation_prompt agp),
 * with message i's located fields replaced by sentinels. rc != OK when the
 * template refuses that conversation; found = 0 when it does not write the
 * anchor there exactly once. */
static fsdpc_status tail_after(mctx *m, const chat_field *fi, size_t nfi, size_t anchor, size_t k,
                               const cJSON *extra, int agp, tail *t, fsdpc_err *perr) {
  memset(t, 0, sizeof *t);
  const chat_field **rp = malloc((nfi + 1) * sizeof *rp);
  const char **wp = malloc((nfi + 1) * sizeof *wp);
  char *xs = malloc((nfi + 1) * 32);
  if (!rp || !wp || !xs) {
    free(rp), free(wp), free(xs);
    return fsdpc__fail(perr, FSDPC_SYSTEM_ERROR, "chat template: out of memory");
  }
  /* only located fields: the others keep their text, so that the tails
   * after the anchor compare as the template wrote them */
  size_t nr = 0;
  for (size_t j = 0; j < nfi; j++) {
    snprintf(xs + 32 * j, 32, "%sfsdpc-t%zu%s", SENT_A, j, SENT_B);
    if (fi[j].located != 1)
      continue;
    rp[nr] = &fi[j];
    wp[nr++] = xs + 32 * j;
  }
  chat_variant v = {rp, wp, nr, extra};
  fsdpc_status st =
      fsdpc__chat_render_variant(m->t, m->msgs, k, m->ctx, &v, agp, CHAT_WANT_ENDS, &t->out, perr);
  if (st == FSDPC_OK) {
    const char *X = xs + 32 * anchor, *b = t->out.text, *hit = NULL;
    size_t nX = strlen(X), nb = t->out.len;
    for (size_t q = 0; q + nX <= nb; q++)
      if (b[q] == X[0] && memcmp(b + q, X, nX) == 0) {
        if (hit) { /* written twice: no single tail */
          hit = NULL;
          break;
        }
        hit = b + q;
      }
    if (hit) {
      t->found = 1;
      t->at = (size_t)(hit - b) + nX;
      t->s = b + t->at;
      t->n = nb - t->at;
    }
  }
  free(rp), free(wp), free(xs);
  return st;
}

/* The probe's content, in the form of message mi's: a list of text parts
 * when mi's content is a list (a template that reads only parts writes
 * nothing of a string), else a string. */
static int add_probe_content(cJSON *p, const cJSON *mi) {
  if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(mi, "content")))
    return cJSON_AddStringToObject(p, "content", "fsdpc probe") != NULL;
  cJSON *parts = cJSON_AddArrayToObject(p, "content"), *part = cJSON_CreateObject();
  if (!parts || !part || !cJSON_AddItemToArray(parts, part)) {
    cJSON_Delete(part);
    return 0;
  }
  return cJSON_AddStringToObject(part, "type", "text") &&
         cJSON_AddStringToObject(part, "text", "fsdpc probe");
}

/* A message that continues the conversation after message i: a user
 * message, or (second try) a tool result answering its first tool call. */
static cJSON *probe_message(const cJSON *mi, int kind) {
  cJSON *p = cJSON_CreateObject();
  if (!p)
    return NULL;
  int ok = 1;
  if (kind == 0) {
    ok = cJSON_AddStringToObject(p, "role", "user") && add_probe_content(p, mi);
  } else {
    const cJSON *tc = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(mi, "tool_calls"), 0);
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(tc, "id");
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(cJSON_IsObject(fn) ? fn : tc, "name");
    ok = cJSON_AddStringToObject(p, "role", "tool") && add_probe_content(p, mi) &&
         (!cJSON_IsString(id) || cJSON_AddStringToObject(p, "tool_call_id", id->valuestring)) &&
         (!cJSON_IsString(nm) || cJSON_AddStringToObject(p, "name", nm->valuestring));
  }
  if (!ok) {
    cJSON_Delete(p);
    return NULL;
  }
  return p;
}

/* The tail when the conversation goes on after message i, which ends it:
 * a probe message appended. */
static fsdpc_status probe_tail(mctx *m, size_t i, const chat_field *fi, size_t nfi, size_t anchor,
                               tail *t) {
  const cJSON *mi = fsdpc__chat_msg_at(m->msgs, i);
  int tries = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(mi, "tool_calls")) > 0 ? 2 : 1;
  for (int kind = 0; kind < tries; kind++) {
    cJSON *probe = probe_message(mi, kind);
    if (!probe)
      return fsdpc__fail(m->err, FSDPC_SYSTEM_ERROR, "chat template: out of memory");
    fsdpc__chat_out_free(&t->out);
    fsdpc_err e2 = {0};
    fsdpc_status st = tail_after(m, fi, nfi, anchor, i + 1, probe, 0, t, &e2);
    cJSON_Delete(probe);
    if (st == FSDPC_SYSTEM_ERROR)
      return fsdpc__fail(m->err, st, "%s", e2.msg);
    if (st == FSDPC_OK && t->found)
      return FSDPC_OK;
  }
  return refuse(m, i,
                "the template refuses a conversation that goes on after it, so its "
                "end-of-turn text is unknown");
}

/* The end of message i's target: the end of its anchor field plus its
 * end-of-turn text (see the file comment, 3). */
static fsdpc_status turn_end(mctx *m, size_t i, const chat_field *fi, size_t nfi, size_t anchor,
                             size_t *end) {
  const chat_out *R = m->R;
  tail r = {.out = *R,
            .s = R->text + fi[anchor].end,
            .n = R->len - fi[anchor].end,
            .at = fi[anchor].end,
            .found = 1};
  tail other = {0};
  int last = i + 1 == m->nmsg && !m->o->add_generation_prompt, ignored = 0;
  fsdpc_err perr = {0};
  fsdpc_status st = FSDPC_OK;
  size_t eot = 0;
  if (!last) {
    /* the turn's end is what it writes both before what follows in R (the
     * next message, or a generation prompt) and before the other of the
     * two (a generation prompt, or a probe message) */
    if (i + 1 < m->nmsg)
      st = tail_after(m, fi, nfi, anchor, i + 1, NULL, 1, &other, &perr);
    else
      st = probe_tail(m, i, fi, nfi, anchor, &other);
    if (st == FSDPC_SYSTEM_ERROR) {
      fsdpc__chat_out_free(&other.out);
      return fsdpc__fail(m->err, st, "%s", perr.msg);
    }
    if (st != FSDPC_OK || !other.found) {
      fsdpc__chat_out_free(&other.out);
      if (i + 1 == m->nmsg)
        return st; /* probe_tail refused */
      return refuse(m, i,
                    st != FSDPC_OK ? "the template refuses the conversation ending there"
                                   : "the turn renders differently when it ends the "
                                     "conversation");
    }
    size_t common = common_end(&other, &r);
    if (common == other.n || common == r.n) {
      /* one holds all of the other (the next message wrote nothing, and a
       * generation prompt followed in both): ask a probe message too */
      tail probe = {0};
      st = probe_tail(m, i, fi, nfi, anchor, &probe);
      if (st == FSDPC_OK) {
        size_t c2 = common_end(&probe, &r);
        common = c2 < common ? c2 : common;
      }
      fsdpc__chat_out_free(&probe.out);
    }
    eot = rstrip_len(other.s, common);
  } else {
    /* it ends the conversation: its end-of-turn is what the template
     * writes after it (an end of text included), unless the template also
     * writes a generation prompt there (it ignores add_generation_prompt):
     * then only what stays when the conversation goes on */
    st = agp_ignored(m, &ignored);
    if (st == FSDPC_OK && !ignored)
      eot = rstrip_len(r.s, r.n);
    if (st == FSDPC_OK && ignored) {
      st = probe_tail(m, i, fi, nfi, anchor, &other);
      if (st == FSDPC_OK)
        eot = rstrip_len(r.s, common_end(&r, &other));
    }
  }
  fsdpc__chat_out_free(&other.out);
  if (st != FSDPC_OK)
    return st;
  /* "</s>" after whitespace in the text that follows (a template that writes
   * the eos token only between turns) */
  const char *eos = m->t->eos;
  if (eos && *eos && i + 1 < m->nmsg) {
    size_t ws = 0, ne = strlen(eos);
    while (ws < r.n && (r.s[ws] == ' ' || r.s[ws] == '\n' || r.s[ws] == '\t' || r.s[ws] == '\r'))
      ws++;
    if (eot < ws + ne && r.n >= ws + ne && memcmp(r.s + ws, eos, ne) == 0)
      eot = ws + ne;
  }
  if (eot == 0 && m->no_prompt) { /* see the file comment, 5 */
    st = agp_ignored(m, &ignored);
    if (st == FSDPC_OK && ignored)
      return fsdpc__fail(m->err, FSDPC_INVALID_USAGE,
                         "%s: messages[%zu]: no text of the template marks it as a turn (the text "
                         "before it is not the template's prompt for a reply, nothing ends it, "
                         "and the same text follows the conversation whatever "
                         "add_generation_prompt says): the template quotes the conversation in "
                         "a prompt (a classifier such as Llama Guard), so no assistant mask can "
                         "be derived; train with the model's chat template, or on "
                         "prompt/completion data",
                         m->t->origin, i);
    if (st != FSDPC_OK)
      return st;
  }
  *end = fi[anchor].end + eot;
  return FSDPC_OK;
}

/* Where turn i's target starts (see the file comment, 2). */
static fsdpc_status turn_start(mctx *m, size_t i, size_t first, size_t *start) {
  if (i == 0) {
    *start = first;
    return FSDPC_OK;
  }
  chat_out P;
  fsdpc_err perr = {0};
  fsdpc_status st = fsdpc__chat_render_variant(m->t, m->msgs, i, m->ctx, NULL, 1, 0, &P, &perr);
  if (st == FSDPC_SYSTEM_ERROR)
    return fsdpc__fail(m->err, st, "%s", perr.msg);
  if (st != FSDPC_OK)
    return refuse(m, i,
                  "the template refuses the conversation before it with a generation "
                  "prompt");
  size_t nP = P.len, h = common_prefix(m->R->text, m->R->len, P.text, nP);
  fsdpc__chat_out_free(&P);
  if (h == nP && nP > first)
    return refuse(m, i, "its generation prompt runs into its content");
  *start = h == nP ? nP : first;
  m->no_prompt = h < first && h != nP;
  return FSDPC_OK;
}

/* Adds [b, e) of turn i to the spans, leaving out its reasoning when it is
 * not trained (see the file comment, 4). */
static void add_span(mctx *m, const chat_field *fi, size_t nfi, size_t b, size_t e,
                     fsdpc_chat_span *sp, size_t *ns) {
  if (!m->o->train_on_reasoning) {
    for (size_t r = 0; r < nfi; r++) {
      if (fi[r].kind != CF_REASONING || fi[r].located != 1)
        continue;
      size_t next = (size_t)-1; /* the first other field after the reasoning */
      for (size_t j = 0; j < nfi; j++)
        if (fi[j].kind != CF_REASONING && fi[j].located == 1 && fi[j].begin >= fi[r].end &&
            fi[j].begin < next)
          next = fi[j].begin;
      int before_others = 1;
      for (size_t j = 0; j < nfi; j++)
        if (fi[j].kind != CF_REASONING && fi[j].located == 1 && fi[j].begin < fi[r].begin)
          before_others = 0;
      if (before_others) {
        size_t cut = next != (size_t)-1 ? next : fi[r].end;
        if (cut > b)
          b = cut < e ? cut : e;
      } else if (fi[r].begin > b && fi[r].end <= e) {
        sp[(*ns)++] = (fsdpc_chat_span){b, fi[r].begin};
        b = fi[r].end;
      }
    }
  }
  if (e > b)
    sp[(*ns)++] = (fsdpc_chat_span){b, e};
}

static fsdpc_status field_mask(mctx *m, const size_t *idx, size_t ntr, fsdpc_chat_span *sp,
                               size_t *ns) {
  chat_field *f = NULL;
  size_t nf = 0, cap = 0;
  size_t *first_f = malloc((ntr + 1) * sizeof *first_f);
  fsdpc_status st = first_f ? FSDPC_OK : FSDPC_SYSTEM_ERROR;
  for (size_t k = 0; k < ntr && st == FSDPC_OK; k++) {
    first_f[k] = nf;
    if (fsdpc__chat_fields_of(m->msgs, idx[k], &f, &nf, &cap) < 0)
      st = FSDPC_SYSTEM_ERROR;
  }
  if (st != FSDPC_OK) {
    free(f), free(first_f);
    return fsdpc__fail(m->err, FSDPC_SYSTEM_ERROR, "chat template: out of memory");
  }
  first_f[ntr] = nf;
  /* the contents of the other messages after the first trained turn: none
   * may render inside a target (a template that writes tool results inside
   * the assistant turn is refused, not trained on them) */
  for (size_t j = idx[0] + 1; j < m->nmsg && st == FSDPC_OK; j++)
    if (!fsdpc__chat_is_assistant(fsdpc__chat_msg_at(m->msgs, j)) &&
        fsdpc__chat_fields_of(m->msgs, j, &f, &nf, &cap) < 0)
      st = FSDPC_SYSTEM_ERROR;
  if (st != FSDPC_OK) {
    free(f), free(first_f);
    return fsdpc__fail(m->err, FSDPC_SYSTEM_ERROR, "chat template: out of memory");
  }
  st = fsdpc__chat_locate(m->t, m->msgs, m->nmsg, m->ctx, m->o->add_generation_prompt, m->R->text,
                          m->R->len, f, nf, m->err);
  size_t prev_end = 0;
  for (size_t k = 0; k < ntr && st == FSDPC_OK; k++) {
    size_t i = idx[k];
    chat_field *fi = f ? f + first_f[k] : NULL; /* no fields at all: f is NULL */
    size_t nfi = first_f[k + 1] - first_f[k], anchor = (size_t)-1, first = (size_t)-1;
    for (size_t j = 0; j < nfi; j++) {
      if (fi[j].located != 1)
        continue;
      if (anchor == (size_t)-1 || fi[j].end > fi[anchor].end ||
          (fi[j].end == fi[anchor].end && fi[j].begin > fi[anchor].begin))
        anchor = j;
      if (fi[j].begin < first)
        first = fi[j].begin;
    }
    chat_field extra = {0};
    if (anchor == (size_t)-1) {
      /* nothing of it placed (tool calls the template leaves out): its
       * content, even empty, still places the turn */
      const cJSON *c = cJSON_GetObjectItemCaseSensitive(fsdpc__chat_msg_at(m->msgs, i), "content");
      int has = 0;
      for (size_t j = 0; j < nfi; j++)
        has |= fi[j].kind == CF_CONTENT;
      if (cJSON_IsString(c) && !has) {
        extra = (chat_field){.msg = i, .kind = CF_CONTENT, .text = c->valuestring};
        st = fsdpc__chat_locate(m->t, m->msgs, m->nmsg, m->ctx, m->o->add_generation_prompt,
                                m->R->text, m->R->len, &extra, 1, m->err);
        if (st == FSDPC_OK && extra.located == 1) {
          fi = &extra;
          nfi = 1;
          anchor = 0;
          first = extra.begin;
        }
      }
    }
    if (st == FSDPC_OK && anchor == (size_t)-1) {
      st = refuse(m, i,
                  nfi ? "none of its content, reasoning or tool calls can be placed in "
                        "the rendered text (the template changes them beyond trimming, "
                        "uses them twice or leaves them out)"
                      : "it has no content, reasoning or tool call to place");
      break;
    }
    if (!m->o->train_on_reasoning)
      for (size_t j = 0; j < nfi; j++)
        if (fi[j].kind == CF_REASONING && fi[j].located == -1)
          st = refuse(m, i,
                      "its reasoning cannot be placed in the rendered text, so it cannot "
                      "be left out (data.train_on_reasoning: false)");
    size_t b = 0, e = 0;
    m->no_prompt = 0;
    if (st == FSDPC_OK)
      st = turn_start(m, i, first, &b);
    if (st == FSDPC_OK)
      st = turn_end(m, i, fi, nfi, anchor, &e);
    if (st == FSDPC_OK && (b < prev_end || b > e))
      st = refuse(m, i, "its turn overlaps the turn before it in the rendered text");
    for (size_t j = first_f[ntr]; j < nf && st == FSDPC_OK; j++)
      if (f[j].located == 1 && f[j].begin < e && f[j].end > b && f[j].end > f[j].begin) {
        char why[160];
        snprintf(why, sizeof why,
                 "the template writes messages[%zu] (not an assistant turn) "
                 "inside its turn",
                 f[j].msg);
        st = refuse(m, i, why);
      }
    if (st == FSDPC_OK) {
      add_span(m, fi, nfi, b, e, sp, ns);
      prev_end = e;
    }
  }
  free(f), free(first_f);
  return st;
}

fsdpc_status fsdpc__chat_mask(const fsdpc_chat_template *t, const cJSON *msgs, size_t nmsg,
                              const fsdpc_chat_ctx *ctx, const fsdpc_chat_opts *o,
                              const chat_out *R, fsdpc_chat_span **spans, size_t *n_spans,
                              fsdpc_err *err) {
  fsdpc_chat_span *sp = malloc((2 * nmsg + 2) * sizeof *sp);
  size_t *idx = malloc((nmsg + 1) * sizeof *idx);
  if (!sp || !idx) {
    free(sp), free(idx);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "chat render: out of memory");
  }
  size_t ns = 0, ntr = 0, last = (size_t)-1, n_asst = 0;
  for (size_t i = 0; i < nmsg; i++)
    if (fsdpc__chat_is_assistant(fsdpc__chat_msg_at(msgs, i))) {
      last = i;
      n_asst++;
    }
  for (size_t i = 0; i < nmsg; i++) {
    const cJSON *mi = fsdpc__chat_msg_at(msgs, i);
    if (fsdpc__chat_is_assistant(mi) && fsdpc__chat_trainable(mi) &&
        (o->train_on == FSDPC_TRAIN_ON_ASSISTANT || i == last))
      idx[ntr++] = i;
  }
  mctx m = {t, msgs, nmsg, ctx, o, R, -1, 0, err};
  fsdpc_status st = FSDPC_OK;
  if (o->train_on == FSDPC_TRAIN_ON_ALL) {
    if (R->len)
      sp[ns++] = (fsdpc_chat_span){0, R->len};
  } else if (fsdpc__jinja_has_generation(t->jinja)) {
    chat_out G = {0};
    st = fsdpc__chat_render_variant(t, msgs, nmsg, ctx, NULL, o->add_generation_prompt,
                                    CHAT_WANT_GEN, &G, err);
    fsdpc_jinja_span *gen = G.gen;
    size_t n_gen = G.n_gen;
    if (st == FSDPC_OK && n_gen != n_asst)
      st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: %zu {%% generation %%} blocks for %zu assistant messages; cannot "
                       "tell which block is which turn",
                       t->origin, n_gen, n_asst);
    chat_field *f = NULL;
    size_t nf = 0, cap = 0;
    for (size_t i = 0, k = 0; i < nmsg && st == FSDPC_OK; i++) {
      const cJSON *mi = fsdpc__chat_msg_at(msgs, i);
      if (!fsdpc__chat_is_assistant(mi))
        continue;
      size_t trained = 0;
      for (size_t q = 0; q < ntr; q++)
        trained |= idx[q] == i;
      if (trained && !o->train_on_reasoning) {
        nf = 0;
        if (fsdpc__chat_fields_of(msgs, i, &f, &nf, &cap) < 0)
          st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "chat render: out of memory");
        else
          st = fsdpc__chat_locate(t, msgs, nmsg, ctx, o->add_generation_prompt, R->text, R->len, f,
                                  nf, err);
        for (size_t j = 0; j < nf && st == FSDPC_OK; j++)
          if (f[j].kind == CF_REASONING && f[j].located == -1)
            st = refuse(&m, i, "its reasoning cannot be placed in the rendered text");
      }
      if (trained && st == FSDPC_OK)
        add_span(&m, f, o->train_on_reasoning ? 0 : nf, gen[k].begin, gen[k].end, sp, &ns);
      k++;
    }
    free(f);
    fsdpc__chat_out_free(&G);
  } else if (ntr) {
    st = field_mask(&m, idx, ntr, sp, &ns);
  }
  for (size_t k = 1; k < ns && st == FSDPC_OK; k++)
    if (sp[k].begin < sp[k - 1].end)
      st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: assistant spans overlap or are out of order; the template renders "
                       "turns out of order",
                       t->origin);
  free(idx);
  if (st != FSDPC_OK) {
    free(sp);
    return st;
  }
  *spans = sp;
  *n_spans = ns;
  return FSDPC_OK;
}
