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
 *    template writes there both when the conversation ends with the turn
 *    and when it goes on (the next message, or a probe message), without
 *    the whitespace between turns. A template that ignores
 *    add_generation_prompt must write the same there either way (else its
 *    end-of-turn cannot be told from the next turn's header: the original
 *    Llama 3 template, Llama Guard). A continuation the template refuses is
 *    refused too; nothing falls back to a guess.
 * 4. Reasoning is cut out when not trained: from the start through the
 *    field after it.
 * Templates with {% generation %} blocks use their blocks (block k is
 * assistant message k). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/chat_internal.h"

static const char SENT_A = '\x01', SENT_B = '\x02';

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
  const char *R;
  size_t nR;
  int agp_ignored; /* -1 unknown, 0 the template honours add_generation_prompt, 1 ignores it */
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
    char *A = NULL;
    size_t nA = 0;
    fsdpc_err perr = {0};
    fsdpc_status st =
        fsdpc__chat_render_variant(m->t, m->msgs, m->nmsg, m->ctx, NULL,
                                   !m->o->add_generation_prompt, &A, &nA, NULL, NULL, &perr);
    if (st == FSDPC_SYSTEM_ERROR)
      return fsdpc__fail(m->err, st, "%s", perr.msg);
    m->agp_ignored = st == FSDPC_OK && nA == m->nR && memcmp(A, m->R, nA) == 0;
    free(A);
  }
  *out = m->agp_ignored;
  return FSDPC_OK;
}

/* The text after field `anchor` of message i in a variant of the
 * conversation (k messages, `extra` appended), with message i's fields
 * replaced by sentinels. *tail points into *buf (malloc'd). found = 0 when
 * the variant does not render the anchor; rc != OK when it cannot render. */
static fsdpc_status tail_after(mctx *m, const chat_field *fi, size_t nfi, size_t anchor, size_t k,
                               const cJSON *extra, char **buf, const char **tail, size_t *ntail,
                               int *found, fsdpc_err *perr) {
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
    snprintf(xs + 32 * j, 32, "%cfsdpc-t%zu%c", SENT_A, j, SENT_B);
    if (fi[j].located != 1)
      continue;
    rp[nr] = &fi[j];
    wp[nr++] = xs + 32 * j;
  }
  chat_variant v = {rp, wp, nr, extra};
  size_t nb = 0;
  *found = 0;
  fsdpc_status st =
      fsdpc__chat_render_variant(m->t, m->msgs, k, m->ctx, &v, 0, buf, &nb, NULL, NULL, perr);
  if (st == FSDPC_OK) {
    const char *X = xs + 32 * anchor, *hit = NULL;
    size_t nX = strlen(X);
    for (size_t q = 0; q + nX <= nb; q++)
      if ((*buf)[q] == SENT_A && memcmp(*buf + q, X, nX) == 0) {
        if (hit) { /* rendered twice: no single tail */
          hit = NULL;
          break;
        }
        hit = *buf + q;
      }
    if (hit) {
      *found = 1;
      *tail = hit + nX;
      *ntail = nb - (size_t)(hit + nX - *buf);
    }
  }
  free(rp), free(wp), free(xs);
  return st;
}

/* A message that continues the conversation after message i: a user
 * message, or (second try) a tool result answering its first tool call. */
static cJSON *probe_message(const cJSON *mi, int kind) {
  cJSON *p = cJSON_CreateObject();
  if (!p)
    return NULL;
  int ok = 1;
  if (kind == 0) {
    ok = cJSON_AddStringToObject(p, "role", "user") &&
         cJSON_AddStringToObject(p, "content", "fsdpc probe");
  } else {
    const cJSON *tc = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(mi, "tool_calls"), 0);
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(tc, "id");
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(cJSON_IsObject(fn) ? fn : tc, "name");
    ok = cJSON_AddStringToObject(p, "role", "tool") &&
         cJSON_AddStringToObject(p, "content", "fsdpc probe") &&
         (!cJSON_IsString(id) || cJSON_AddStringToObject(p, "tool_call_id", id->valuestring)) &&
         (!cJSON_IsString(nm) || cJSON_AddStringToObject(p, "name", nm->valuestring));
  }
  if (!ok) {
    cJSON_Delete(p);
    return NULL;
  }
  return p;
}

/* The end of message i's target: the end of its anchor field plus the
 * end-of-turn text (see the file comment, 3). */
static fsdpc_status turn_end(mctx *m, size_t i, const chat_field *fi, size_t nfi, size_t anchor,
                             size_t *end) {
  char *B = NULL, *D = NULL;
  const char *tb = NULL, *tc = NULL;
  size_t ntb = 0, ntc = 0;
  int found = 0;
  fsdpc_err perr = {0};
  fsdpc_status st = tail_after(m, fi, nfi, anchor, i + 1, NULL, &B, &tb, &ntb, &found, &perr);
  if (st == FSDPC_SYSTEM_ERROR) {
    free(B);
    return fsdpc__fail(m->err, st, "%s", perr.msg);
  }
  if (st != FSDPC_OK || !found) {
    free(B);
    return refuse(m, i,
                  st != FSDPC_OK ? "the template refuses the conversation ending there"
                                 : "the turn renders differently when it ends the "
                                   "conversation");
  }
  if (i + 1 < m->nmsg) {
    tc = m->R + fi[anchor].end;
    ntc = m->nR - fi[anchor].end;
  } else {
    /* the conversation ends here: see what the template writes when it goes on */
    const cJSON *mi = fsdpc__chat_msg_at(m->msgs, i);
    int tries = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(mi, "tool_calls")) > 0 ? 2 : 1;
    found = 0;
    for (int kind = 0; kind < tries && !found; kind++) {
      cJSON *probe = probe_message(mi, kind);
      if (!probe) {
        free(B);
        return fsdpc__fail(m->err, FSDPC_SYSTEM_ERROR, "chat template: out of memory");
      }
      free(D);
      D = NULL;
      fsdpc_err e2 = {0};
      st = tail_after(m, fi, nfi, anchor, i + 1, probe, &D, &tc, &ntc, &found, &e2);
      cJSON_Delete(probe);
      if (st == FSDPC_SYSTEM_ERROR) {
        free(B), free(D);
        return fsdpc__fail(m->err, st, "%s", e2.msg);
      }
    }
    if (!found) {
      free(B), free(D);
      return refuse(m, i,
                    "the template refuses a conversation that goes on after it, so its "
                    "end-of-turn text is unknown");
    }
  }
  size_t eot = rstrip_len(tb, common_prefix(tb, ntb, tc, ntc));
  int ignored = 0;
  if (eot != rstrip_len(tb, ntb)) {
    st = agp_ignored(m, &ignored);
    if (st != FSDPC_OK) {
      free(B), free(D);
      return st;
    }
  }
  if (ignored) {
    free(B), free(D);
    return refuse(m, i,
                  "the template writes text after the turn that differs when the "
                  "conversation goes on, and ignores add_generation_prompt, so its "
                  "end-of-turn text cannot be told from the next turn's header");
  }
  /* "</s>" after whitespace in the text that follows (a template that writes
   * the eos token only between turns) */
  const char *eos = m->t->eos;
  if (eos && *eos && i + 1 < m->nmsg) {
    size_t ws = 0, ne = strlen(eos), l;
    (void)l;
    while (ws < ntc && (tc[ws] == ' ' || tc[ws] == '\n' || tc[ws] == '\t' || tc[ws] == '\r'))
      ws++;
    if (eot < ws + ne && ntc >= ws + ne && memcmp(tc + ws, eos, ne) == 0)
      eot = ws + ne;
  }
  free(B), free(D);
  *end = fi[anchor].end + eot;
  if (*end > m->nR)
    *end = m->nR;
  return FSDPC_OK;
}

/* Where turn i's target starts (see the file comment, 2). */
static fsdpc_status turn_start(mctx *m, size_t i, size_t first, size_t *start) {
  if (i == 0) {
    *start = first;
    return FSDPC_OK;
  }
  char *P = NULL;
  size_t nP = 0;
  fsdpc_err perr = {0};
  fsdpc_status st =
      fsdpc__chat_render_variant(m->t, m->msgs, i, m->ctx, NULL, 1, &P, &nP, NULL, NULL, &perr);
  if (st == FSDPC_SYSTEM_ERROR)
    return fsdpc__fail(m->err, st, "%s", perr.msg);
  if (st != FSDPC_OK)
    return refuse(m, i,
                  "the template refuses the conversation before it with a generation "
                  "prompt");
  size_t h = common_prefix(m->R, m->nR, P, nP);
  free(P);
  if (h == nP && nP > first)
    return refuse(m, i, "its generation prompt runs into its content");
  *start = h == nP ? nP : first;
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
  st = fsdpc__chat_locate(m->t, m->msgs, m->nmsg, m->ctx, m->o->add_generation_prompt, m->R, m->nR,
                          f, nf, m->err);
  size_t prev_end = 0;
  for (size_t k = 0; k < ntr && st == FSDPC_OK; k++) {
    size_t i = idx[k];
    chat_field *fi = f + first_f[k];
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
    if (anchor == (size_t)-1) {
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
    if (st == FSDPC_OK)
      st = turn_start(m, i, first, &b);
    if (st == FSDPC_OK)
      st = turn_end(m, i, fi, nfi, anchor, &e);
    if (st == FSDPC_OK && (b < prev_end || b > e))
      st = refuse(m, i, "its turn overlaps the turn before it in the rendered text");
    if (st == FSDPC_OK) {
      add_span(m, fi, nfi, b, e, sp, ns);
      prev_end = e;
    }
  }
  free(f), free(first_f);
  return st;
}

fsdpc_status fsdpc__chat_mask(const fsdpc_chat_template *t, const cJSON *msgs, size_t nmsg,
                              const fsdpc_chat_ctx *ctx, const fsdpc_chat_opts *o, const char *R,
                              size_t nR, fsdpc_chat_span **spans, size_t *n_spans, fsdpc_err *err) {
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
  mctx m = {t, msgs, nmsg, ctx, o, R, nR, -1, err};
  fsdpc_status st = FSDPC_OK;
  if (o->train_on == FSDPC_TRAIN_ON_ALL) {
    if (nR)
      sp[ns++] = (fsdpc_chat_span){0, nR};
  } else if (fsdpc__jinja_has_generation(t->jinja)) {
    fsdpc_jinja_span *gen = NULL;
    size_t n_gen = 0;
    char *G = NULL;
    st = fsdpc__chat_render_variant(t, msgs, nmsg, ctx, NULL, o->add_generation_prompt, &G, NULL,
                                    &gen, &n_gen, err);
    free(G);
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
          st = fsdpc__chat_locate(t, msgs, nmsg, ctx, o->add_generation_prompt, R, nR, f, nf, err);
        for (size_t j = 0; j < nf && st == FSDPC_OK; j++)
          if (f[j].kind == CF_REASONING && f[j].located == -1)
            st = refuse(&m, i, "its reasoning cannot be placed in the rendered text");
      }
      if (trained && st == FSDPC_OK)
        add_span(&m, f, o->train_on_reasoning ? 0 : nf, gen[k].begin, gen[k].end, sp, &ns);
      k++;
    }
    free(f);
    free(gen);
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
