/* Generation for a batch of prompts: one prefill, then one decoder step per
 * new token for every row together; a row stops at an EOS id, at a stop
 * string or at max_new_tokens, and its text streams as it grows. */
#include <stdlib.h>
#include <string.h>

#include "data/rng.h"
#include "infer/infer.h"

typedef struct row {
  int32_t *ids, *top_ids;
  float *top_vals;
  int n, done;
  char *text; /* decoded ids so far */
  size_t text_len, cap, shown;
  const char *reason;
  uint64_t rng;
} row;

void fsdpc__gen_results_free(fsdpc_gen_result *r, int n) {
  for (int i = 0; r && i < n; i++) {
    free(r[i].ids);
    free(r[i].text);
    free(r[i].top_ids);
    free(r[i].top_vals);
  }
  free(r);
}

/* The k highest (id, logit) pairs of x (V), highest first, lowest id on
 * ties (k is small: insertion into a sorted list). */
static void top_k(const float *x, int V, int k, int32_t *ids, float *vals) {
  int n = 0;
  for (int v = 0; v < V; v++) {
    if (n == k && !(x[v] > vals[k - 1]))
      continue;
    int j = n < k ? n++ : k - 1;
    while (j > 0 && x[v] > vals[j - 1]) {
      vals[j] = vals[j - 1];
      ids[j] = ids[j - 1];
      j--;
    }
    vals[j] = x[v];
    ids[j] = v;
  }
}

/* Decodes the row's ids into r->text (ids the tokenizer lacks, such as a
 * padded vocabulary, are left out). */
static fsdpc_status redecode(const fsdpc_tokenizer *tok, row *r, fsdpc_err *err) {
  int32_t vs = fsdpc__tokenizer_vocab_size(tok);
  int32_t *ok = malloc(((size_t)r->n + 1) * sizeof *ok);
  if (!ok)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  int k = 0;
  for (int i = 0; i < r->n; i++)
    if (r->ids[i] >= 0 && r->ids[i] < vs)
      ok[k++] = r->ids[i];
  size_t need = 0;
  fsdpc_status st = FSDPC_OK;
  for (;;) {
    st = fsdpc__tokenizer_decode(tok, ok, k, r->text, r->cap ? r->cap - 1 : 0, &need, err);
    if (st == FSDPC_OK)
      break;
    if (need + 1 <= r->cap)
      break; /* failed for another reason */
    char *t = realloc(r->text, need + 64);
    if (!t) {
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
      break;
    }
    r->text = t;
    r->cap = need + 64;
  }
  free(ok);
  if (st == FSDPC_OK) {
    r->text_len = need;
    r->text[need] = '\0';
  }
  return st;
}

/* Cuts the text at the first stop string; 1 when one was found. */
static int cut_at_stop(row *r, const fsdpc_gen_opts *g) {
  size_t at = r->text_len;
  for (int i = 0; i < g->n_stop; i++) {
    const char *p = g->stop[i][0] ? strstr(r->text, g->stop[i]) : NULL;
    if (p && (size_t)(p - r->text) < at)
      at = (size_t)(p - r->text);
  }
  if (at == r->text_len)
    return 0;
  r->text_len = at;
  r->text[at] = '\0';
  return 1;
}

/* Streams what is safe to show: not the bytes that could start a stop
 * string, nor an incomplete UTF-8 sequence, until the row is done. */
static void stream(row *r, int b, const fsdpc_gen_opts *g) {
  if (!g->on_text)
    return;
  size_t upto = r->text_len;
  if (!r->done) {
    size_t hold = 0;
    for (int i = 0; i < g->n_stop; i++) {
      size_t l = strlen(g->stop[i]);
      if (l > hold + 1)
        hold = l - 1;
    }
    upto = upto > hold ? upto - hold : 0;
    size_t k = upto; /* back to a UTF-8 character boundary */
    while (k > r->shown && ((unsigned char)r->text[k - 1] & 0xC0) == 0x80)
      k--;
    if (k > r->shown && ((unsigned char)r->text[k - 1] & 0xC0) == 0xC0)
      upto = k - 1;
  }
  if (upto > r->shown) {
    g->on_text(g->cb_ctx, b, r->text + r->shown, upto - r->shown);
    r->shown = upto;
  }
}

static int is_eos(const fsdpc_gen_opts *g, int32_t t) {
  for (int i = 0; i < g->n_eos; i++)
    if (g->eos[i] == t)
      return 1;
  return 0;
}

fsdpc_status fsdpc__generate(const fsdpc_decoder_opts *dopt, const fsdpc_infer_weights *w,
                             const int32_t *const *prompts, const int *lens, int n,
                             const fsdpc_gen_opts *g, fsdpc_gen_result **res, fsdpc_err *err) {
  const fsdpc_model_shape *s = dopt->shape;
  int T = 0;
  for (int i = 0; i < n; i++)
    if (lens[i] > T)
      T = lens[i];
  if (n < 1 || T < 1)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "generate: every prompt needs a token");
  int new_max = g->max_new_tokens;
  if (T + new_max > s->max_pos)
    new_max = s->max_pos - T;
  if (new_max < 1)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "generate: a prompt of %d tokens leaves no room in the model's %d "
                       "positions",
                       T, s->max_pos);
  fsdpc_decoder_opts o = *dopt;
  o.B = n;
  o.max_len = T + new_max;
  fsdpc_decoder *d = NULL;
  FSDPC_TRY(fsdpc__decoder_create(&o, &d, err));
  size_t V = (size_t)s->V;
  int32_t *tokens = calloc((size_t)n * T, sizeof *tokens), *next = calloc((size_t)n, sizeof *next);
  int32_t *pick = calloc((size_t)n, sizeof *pick);
  /* Greedy: the argmax runs where the logits are; only ids come back. */
  int greedy = g->sampling.temperature <= 0.0, K = g->top_logits > 0 ? g->top_logits : 0;
  if (K > s->V)
    K = s->V;
  int dev_pick = greedy && !K; /* else the logits come to the host */
  float *logits = malloc((dev_pick ? 1 : (size_t)n * V) * sizeof(float));
  float *sp = malloc(V * sizeof(float));
  int32_t *si = malloc(V * sizeof(int32_t));
  row *r = calloc((size_t)n, sizeof *r);
  fsdpc_status st = FSDPC_OK;
  if (!tokens || !next || !pick || !logits || !sp || !si || !r) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    goto out;
  }
  for (int b = 0; b < n; b++) {
    memcpy(tokens + (size_t)b * T, prompts[b], (size_t)lens[b] * sizeof(int32_t));
    r[b].cap = 64; /* text is always a string, empty until decoded */
    r[b].text = calloc(r[b].cap, 1);
    size_t nt = K ? ((size_t)new_max + 1) * (size_t)K : 1;
    r[b].top_ids = K ? calloc(nt, sizeof(int32_t)) : NULL;
    r[b].top_vals = K ? calloc(nt, sizeof(float)) : NULL;
    if (!(r[b].ids = malloc((size_t)new_max * sizeof(int32_t))) || !r[b].text ||
        (K && (!r[b].top_ids || !r[b].top_vals))) {
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
      goto out;
    }
    uint64_t x = g->sampling.seed + (uint64_t)(g->first_row + b);
    r[b].rng = fsdpc__splitmix64(&x);
  }
  if ((st = fsdpc__decoder_prefill(d, w, tokens, T, lens, dev_pick ? NULL : logits, err)) !=
      FSDPC_OK)
    goto out;
  if (dev_pick && (st = fsdpc__decoder_greedy(d, pick, err)) != FSDPC_OK)
    goto out;
  int live_text = g->tok && (g->n_stop > 0 || g->on_text);
  for (int step = 0;; step++) {
    int live = 0;
    for (int b = 0; b < n; b++) {
      row *rb = &r[b];
      next[b] = 0;
      if (rb->done)
        continue;
      if (K)
        top_k(logits + (size_t)b * V, s->V, K, rb->top_ids + (size_t)rb->n * K,
              rb->top_vals + (size_t)rb->n * K);
      int32_t t = dev_pick
                      ? pick[b]
                      : fsdpc__sample(logits + (size_t)b * V, s->V, &g->sampling, &rb->rng, sp, si);
      if (is_eos(g, t)) {
        rb->done = 1;
        rb->reason = "eos";
      } else {
        rb->ids[rb->n++] = t;
        next[b] = t;
        /* The text is needed at each step only to find stop strings or to
         * stream; otherwise once, at the end. */
        if (live_text && (st = redecode(g->tok, rb, err)) != FSDPC_OK)
          goto out;
        if (g->tok && cut_at_stop(rb, g)) {
          rb->done = 1;
          rb->reason = "stop";
        } else if (rb->n >= new_max) {
          rb->done = 1;
          rb->reason = "length";
        }
      }
      if (live_text)
        stream(rb, b, g);
      live += !rb->done;
    }
    if (!live)
      break;
    if ((st = fsdpc__decoder_step(d, w, next, dev_pick ? NULL : logits, err)) != FSDPC_OK)
      goto out;
    if (dev_pick && (st = fsdpc__decoder_greedy(d, pick, err)) != FSDPC_OK)
      goto out;
  }
  fsdpc_gen_result *out_r = calloc((size_t)n, sizeof *out_r);
  if (!out_r) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    goto out;
  }
  for (int b = 0; b < n; b++) {
    if (g->tok && !live_text && (st = redecode(g->tok, &r[b], err)) != FSDPC_OK) {
      fsdpc__gen_results_free(out_r, n);
      goto out;
    }
    out_r[b].ids = r[b].ids;
    out_r[b].n_ids = r[b].n;
    out_r[b].text = r[b].text ? r[b].text : strdup("");
    out_r[b].stop_reason = r[b].reason;
    out_r[b].top_ids = r[b].top_ids;
    out_r[b].top_vals = r[b].top_vals;
    r[b].top_ids = NULL;
    r[b].top_vals = NULL;
    r[b].ids = NULL;
    r[b].text = NULL;
  }
  *res = out_r;
out:
  for (int b = 0; r && b < n; b++) {
    free(r[b].ids);
    free(r[b].text);
    free(r[b].top_ids);
    free(r[b].top_vals);
  }
  free(r);
  free(tokens);
  free(next);
  free(pick);
  free(logits);
  free(sp);
  free(si);
  fsdpc__decoder_destroy(d);
  return st;
}
