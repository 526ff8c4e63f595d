/* Where the text fields of assistant messages (content, reasoning, tool
 * call names and string arguments) render in the text, found without
 * knowledge of any one template: render the conversation again with the
 * fields replaced by sentinels and compare.
 *
 * A field is located when the render with its sentinel differs from the
 * real one exactly by the sentinel against the field's text as the
 * template wrote it: verbatim or with whitespace trimmed from either end.
 * A field the template does not render (history reasoning that Qwen3 or
 * DeepSeek-R1 drop) leaves the render unchanged: absent. Anything else (a
 * field transformed or used twice) is unlocatable; the mask decides what
 * that means for its turn. One render with every field replaced settles
 * the common case; a field whose placement is ambiguous there gets a
 * render of its own. */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/chat_internal.h"

/* Sentinel delimiters: pairs of private-use code points (U+E000 + 2p and
 * U+E001 + 2p, three UTF-8 bytes each). No case, not whitespace, kept by
 * json.dumps: a template's trim, upper or tojson leaves them as they are.
 * A pair is used only when neither occurs in the rendered text. */
#define N_PAIRS 11

static void delim(int p, int close, char out[4]) {
  unsigned cp = 0xE000u + 2u * (unsigned)p + (unsigned)close;
  out[0] = (char)(0xE0 | (cp >> 12));
  out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[2] = (char)(0x80 | (cp & 0x3F));
  out[3] = '\0';
}

static int has(const char *s, size_t n, const char *d) {
  return memmem(s, n, d, 3) != NULL;
}

static int add_field(chat_field **f, size_t *nf, size_t *cap, size_t msg, int kind, int k,
                     const cJSON *node) {
  if (!cJSON_IsString(node))
    return 0;
  if (*nf == *cap) {
    size_t nc = *cap ? *cap * 2 : 16;
    chat_field *p = realloc(*f, nc * sizeof *p);
    if (!p)
      return -1;
    *f = p;
    *cap = nc;
  }
  (*f)[(*nf)++] = (chat_field){.msg = msg, .kind = kind, .k = k, .text = node->valuestring};
  return 1;
}

int fsdpc__chat_fields_of(const cJSON *msgs, size_t i, chat_field **f, size_t *nf, size_t *cap) {
  const cJSON *m = fsdpc__chat_msg_at(msgs, i);
  static const char *const rk[] = {"reasoning_content", "reasoning", "thinking"};
  size_t before = *nf;
  int rc = 0;
  for (int k = 0; k < 3 && rc >= 0; k++) {
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, rk[k]);
    if (cJSON_IsString(r) && r->valuestring[0])
      rc = add_field(f, nf, cap, i, CF_REASONING, k, r);
  }
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
  if (cJSON_IsString(c) && c->valuestring[0] && rc >= 0)
    rc = add_field(f, nf, cap, i, CF_CONTENT, 0, c);
  int k = 0;
  for (const cJSON *p = cJSON_IsArray(c) ? c->child : NULL; p && rc >= 0; p = p->next, k++) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "text");
    if (cJSON_IsString(t) && t->valuestring[0])
      rc = add_field(f, nf, cap, i, CF_PART, k, t);
  }
  k = 0;
  const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
  for (const cJSON *tc = cJSON_IsArray(calls) ? calls->child : NULL; tc && rc >= 0;
       tc = tc->next, k++) {
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
    const cJSON *o = cJSON_IsObject(fn) ? fn : tc;
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(o, "name");
    const cJSON *ar = cJSON_GetObjectItemCaseSensitive(o, "arguments");
    if (cJSON_IsString(nm) && nm->valuestring[0])
      rc = add_field(f, nf, cap, i, CF_CALL_NAME, k, nm);
    if (rc >= 0 && cJSON_IsString(ar) && ar->valuestring[0])
      rc = add_field(f, nf, cap, i, CF_CALL_ARGS, k, ar);
  }
  /* nothing written: an empty string content still places the turn */
  if (rc >= 0 && *nf == before && cJSON_IsString(c))
    rc = add_field(f, nf, cap, i, CF_CONTENT, 0, c);
  return rc < 0 ? -1 : (int)(*nf - before);
}

/* A sentinel pair usable for these texts: its bytes appear nowhere in R and
 * do not start or end any field (trimmed or not). -1: none. */
static int pick_pair(const char *R, size_t nR, const chat_field *f, size_t nf) {
  for (int p = 0; p < N_PAIRS; p++) {
    char o[4], c[4];
    delim(p, 0, o);
    delim(p, 1, c);
    if (has(R, nR, o) || has(R, nR, c))
      continue;
    int ok = 1;
    for (size_t i = 0; i < nf && ok; i++) /* a field holding them would blur the diff */
      ok = !has(f[i].text, strlen(f[i].text), o) && !has(f[i].text, strlen(f[i].text), c);
    if (ok)
      return p;
  }
  return -1;
}

/* Whether R[at, at + len) is field text c with whitespace trimmed from its
 * ends (c[a, a + len) for some a with c[0, a) and c[a + len, n) whitespace). */
static int trimmed_at(const char *c, size_t n, const char *R, size_t at, size_t len) {
  size_t lb, le;
  fsdpc__chat_py_strip(c, n, &lb, &le);
  for (size_t a = 0; a <= lb; a++)
    if (a + len >= le && a + len <= n && memcmp(c + a, R + at, len) == 0)
      return 1;
  return 0;
}

static size_t common_prefix(const char *a, size_t na, const char *b, size_t nb) {
  size_t i = 0, n = na < nb ? na : nb;
  while (i < n && a[i] == b[i])
    i++;
  return i;
}

/* One field on its own. Sets f->located: 1 (begin/end set), 0 absent,
 * -1 transformed or repeated. */
static fsdpc_status locate_one(const fsdpc_chat_template *t, const cJSON *msgs, size_t nmsg,
                               const fsdpc_chat_ctx *ctx, int agp, const char *R, size_t nR,
                               chat_field *f, fsdpc_err *err) {
  int p = pick_pair(R, nR, f, 1);
  if (p < 0) {
    f->located = -1;
    return FSDPC_OK;
  }
  char X[32], o[4], c[4];
  delim(p, 0, o);
  delim(p, 1, c);
  snprintf(X, sizeof X, "%sfsdpc%s", o, c);
  size_t nX = strlen(X);
  const chat_field *rp[1] = {f};
  const char *wp[1] = {X};
  chat_variant v = {rp, wp, 1, NULL};
  chat_out ko;
  fsdpc_err perr = {0};
  if (fsdpc__chat_render_variant(t, msgs, nmsg, ctx, &v, agp, 0, &ko, &perr) != FSDPC_OK) {
    /* the template refuses the sentinel (it checks the field's value) */
    if (perr.status == FSDPC_SYSTEM_ERROR)
      return fsdpc__fail(err, perr.status, "%s", perr.msg);
    f->located = -1;
    return FSDPC_OK;
  }
  const char *K = ko.text;
  size_t nK = ko.len;
  size_t lcp = common_prefix(R, nR, K, nK), lcs = 0;
  size_t lim = (nR < nK ? nR : nK) - lcp;
  while (lcs < lim && R[nR - 1 - lcs] == K[nK - 1 - lcs])
    lcs++;
  if (nR == nK && lcp == nR) {
    f->located = 0;
  } else if (nK - lcs - lcp == nX && memcmp(K + lcp, X, nX) == 0 &&
             trimmed_at(f->text, strlen(f->text), R, lcp, nR - lcs - lcp)) {
    f->located = 1;
    f->begin = lcp;
    f->end = nR - lcs;
  } else {
    f->located = -1;
  }
  fsdpc__chat_out_free(&ko);
  return FSDPC_OK;
}

typedef struct occ {
  size_t pos, field;
} occ;

static int by_pos(const void *a, const void *b) {
  const occ *x = a, *y = b;
  return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Every field at once: S is R with each field's sentinel for its text.
 * Returns 1 when R maps onto S exactly (fields located), 0 when the
 * per-field way must decide. */
static int locate_all(const char *R, size_t nR, const char *S, size_t nS, int p, chat_field *f,
                      size_t nf, occ *oc) {
  size_t no = 0;
  char od[4], cd[4];
  delim(p, 0, od);
  delim(p, 1, cd);
  for (size_t i = 0; i + 3 <= nS; i++) {
    if (memcmp(S + i, od, 3) != 0)
      continue;
    size_t j = i + 3, k = 0;
    if (j + 5 > nS || memcmp(S + j, "fsdpc", 5) != 0)
      return 0;
    j += 5;
    while (j < nS && S[j] >= '0' && S[j] <= '9')
      k = k * 10 + (size_t)(S[j++] - '0');
    if (j + 3 > nS || memcmp(S + j, cd, 3) != 0 || k >= nf || f[k].located)
      return 0; /* not ours, or a field rendered twice */
    f[k].located = 1;
    oc[no++] = (occ){i, k};
    i = j + 2;
  }
  qsort(oc, no, sizeof *oc, by_pos);
  size_t r = 0, s = 0;
  for (size_t o = 0; o <= no; o++) {
    size_t lit_end = o < no ? oc[o].pos : nS;
    size_t lit = lit_end - s;
    if (r + lit > nR || memcmp(R + r, S + s, lit) != 0)
      return 0;
    r += lit;
    if (o == no)
      return r == nR;
    /* the field: some trimmed form, then the next literal must follow */
    chat_field *fd = &f[oc[o].field];
    size_t xlen = 11; /* open, "fsdpc", close */
    for (size_t v = oc[o].field; v >= 10; v /= 10)
      xlen++;
    xlen++;
    s = oc[o].pos + xlen;
    size_t next_lit_end = o + 1 < no ? oc[o + 1].pos : nS, nl = next_lit_end - s;
    size_t n = strlen(fd->text), found = (size_t)-1, lb, le;
    fsdpc__chat_py_strip(fd->text, n, &lb, &le);
    /* the candidate lengths: cut a <= lb bytes in front, keep through le */
    for (size_t a = 0; a <= lb; a++)
      for (size_t len = le > a ? le - a : 0; a + len <= n; len++) {
        if (r + len + nl > nR || memcmp(fd->text + a, R + r, len) != 0 ||
            memcmp(R + r + len, S + s, nl) != 0)
          continue;
        if (found != (size_t)-1 && found != len)
          return 0; /* two readings: ambiguous */
        found = len;
      }
    if (found == (size_t)-1)
      return 0;
    fd->begin = r;
    fd->end = r + found;
    r += found;
  }
  return 0;
}

fsdpc_status fsdpc__chat_locate(const fsdpc_chat_template *t, const cJSON *msgs, size_t nmsg,
                                const fsdpc_chat_ctx *ctx, int agp, const char *R, size_t nR,
                                chat_field *f, size_t nf, fsdpc_err *err) {
  if (!nf)
    return FSDPC_OK;
  int p = pick_pair(R, nR, f, nf);
  int done = 0;
  if (p >= 0) {
    const chat_field **rp = malloc(nf * sizeof *rp);
    const char **wp = malloc(nf * sizeof *wp);
    char *xs = malloc(nf * 32);
    occ *oc = malloc(nf * sizeof *oc);
    if (!rp || !wp || !xs || !oc) {
      free(rp), free(wp), free(xs), free(oc);
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "chat template: out of memory");
    }
    char od[4], cd[4];
    delim(p, 0, od);
    delim(p, 1, cd);
    for (size_t i = 0; i < nf; i++) {
      snprintf(xs + 32 * i, 32, "%sfsdpc%zu%s", od, i, cd);
      rp[i] = &f[i];
      wp[i] = xs + 32 * i;
      f[i].located = 0;
    }
    chat_variant v = {rp, wp, nf, NULL};
    chat_out so;
    fsdpc_err perr = {0};
    fsdpc_status st = fsdpc__chat_render_variant(t, msgs, nmsg, ctx, &v, agp, 0, &so, &perr);
    if (st == FSDPC_OK)
      done = locate_all(R, nR, so.text, so.len, p, f, nf, oc);
    fsdpc__chat_out_free(&so);
    free(rp), free(wp), free(xs), free(oc);
    if (st == FSDPC_SYSTEM_ERROR)
      return fsdpc__fail(err, st, "%s", perr.msg);
  }
  for (size_t i = 0; i < nf && !done; i++)
    FSDPC_TRY(locate_one(t, msgs, nmsg, ctx, agp, R, nR, &f[i], err));
  return FSDPC_OK;
}
