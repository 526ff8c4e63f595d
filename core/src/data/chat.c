/* Chat templates: loading from a model folder, rendering a conversation and
 * deriving the assistant target spans (see chat.h for the rule).
 *
 * The spans come from renders of the same conversation, not from knowledge
 * of any one template: (1) the content of assistant message i is located
 * by rendering the conversation again with that content replaced by a
 * sentinel and diffing (the only difference must be the content, trimmed
 * or not, against the sentinel); (2) its end-of-turn text is what the
 * template emits after the content both when the conversation ends there
 * and when it goes on (the common prefix of the two tails), without the
 * trailing whitespace that separates turns, extended to the eos token when
 * the tail starts with it. Prefix renders must agree with the full render,
 * or the conversation is refused. */
#include "data/chat.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/fileio.h"
#include "template/jinja.h"

#define MAX_TEMPLATE_FILE ((size_t)64 << 20)

struct fsdpc_chat_template {
  fsdpc_jinja *jinja;
  char *origin;
  char *bos, *eos, *unk, *pad;
  time_t now;
  uint64_t max_steps;
  size_t max_output;
};

static int file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A special token: a string, or an AddedToken object {content: ...}. */
static char *token_text(const cJSON *cfg, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
  if (cJSON_IsObject(v))
    v = cJSON_GetObjectItemCaseSensitive(v, "content");
  return cJSON_IsString(v) ? strdup(v->valuestring) : NULL;
}

static fsdpc_status read_file(const char *path, char **out, size_t *len, fsdpc_err *err) {
  if (fsdpc__read_small_file(path, MAX_TEMPLATE_FILE, out, len) != 0)
    return fsdpc__fail(err, errno == ENOENT ? FSDPC_INVALID_USAGE : FSDPC_SYSTEM_ERROR,
                       "%s: cannot read: %s", path, strerror(errno));
  return FSDPC_OK;
}

fsdpc_status fsdpc__chat_template_load(const char *model_dir, const char *template_file,
                                       const char *name, fsdpc_chat_template **out,
                                       fsdpc_err *err) {
  *out = NULL;
  fsdpc_status st = FSDPC_OK;
  fsdpc_chat_template *t = calloc(1, sizeof *t);
  char *cfg_path = model_dir ? fsdpc__path_join(model_dir, "tokenizer_config.json") : NULL;
  char *jinja_path = model_dir ? fsdpc__path_join(model_dir, "chat_template.jinja") : NULL;
  char *cfg_text = NULL, *src = NULL;
  size_t cfg_len = 0, src_len = 0;
  cJSON *cfg = NULL;
  if (!t || (model_dir && (!cfg_path || !jinja_path))) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "chat template: out of memory");
    goto done;
  }
  if (!model_dir && !template_file) {
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "chat template: give a model folder or a template file");
    goto done;
  }
  if (cfg_path && file_exists(cfg_path)) {
    if ((st = read_file(cfg_path, &cfg_text, &cfg_len, err)) != FSDPC_OK)
      goto done;
    cfg = cJSON_ParseWithLength(cfg_text, cfg_len);
    if (!cJSON_IsObject(cfg)) {
      st =
          fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: not a JSON object (bad JSON near byte %zu)",
                      cfg_path, cJSON_GetErrorPtr() ? (size_t)(cJSON_GetErrorPtr() - cfg_text) : 0);
      goto done;
    }
    t->bos = token_text(cfg, "bos_token");
    t->eos = token_text(cfg, "eos_token");
    t->unk = token_text(cfg, "unk_token");
    t->pad = token_text(cfg, "pad_token");
  }
  char origin[4200];
  if (template_file) {
    if ((st = read_file(template_file, &src, &src_len, err)) != FSDPC_OK)
      goto done;
    snprintf(origin, sizeof origin, "%s", template_file);
  } else if ((!name || !strcmp(name, "default")) && file_exists(jinja_path)) {
    if ((st = read_file(jinja_path, &src, &src_len, err)) != FSDPC_OK)
      goto done;
    snprintf(origin, sizeof origin, "%s", jinja_path);
  } else {
    const cJSON *ct = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "chat_template") : NULL;
    const char *text = NULL;
    if (cJSON_IsString(ct)) {
      if (name && strcmp(name, "default") != 0) {
        st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: chat_template is a single template; there is no template named "
                         "'%s' (leave the name out)",
                         cfg_path, name);
        goto done;
      }
      text = ct->valuestring;
      snprintf(origin, sizeof origin, "%s:chat_template", cfg_path);
    } else if (cJSON_IsArray(ct)) {
      const cJSON *only = NULL, *it;
      int count = 0;
      char names[512] = "";
      cJSON_ArrayForEach(it, ct) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
        const cJSON *tp = cJSON_GetObjectItemCaseSensitive(it, "template");
        if (!cJSON_IsString(nm) || !cJSON_IsString(tp)) {
          st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                           "%s: chat_template list entry %d is not {name, template} strings",
                           cfg_path, count);
          goto done;
        }
        count++;
        only = it;
        size_t l = strlen(names);
        snprintf(names + l, sizeof names - l, "%s%s", l ? ", " : "", nm->valuestring);
        if (!strcmp(nm->valuestring, name ? name : "default")) {
          text = tp->valuestring;
          snprintf(origin, sizeof origin, "%s:chat_template[%s]", cfg_path, nm->valuestring);
        }
      }
      if (!text && !name && count == 1) {
        text = cJSON_GetObjectItemCaseSensitive(only, "template")->valuestring;
        snprintf(origin, sizeof origin, "%s:chat_template[%s]", cfg_path,
                 cJSON_GetObjectItemCaseSensitive(only, "name")->valuestring);
      }
      if (!text) {
        st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: no chat template named '%s' (it has: %s); name one of them", cfg_path,
                         name ? name : "default", names);
        goto done;
      }
    } else {
      st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: no chat template (neither chat_template in tokenizer_config.json "
                       "nor chat_template.jinja); give a .jinja file with data.chat_template",
                       model_dir);
      goto done;
    }
    src_len = strlen(text);
    src = strdup(text);
    if (!src) {
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "chat template: out of memory");
      goto done;
    }
  }
  t->origin = strdup(origin);
  if (!t->origin) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "chat template: out of memory");
    goto done;
  }
  st = fsdpc__jinja_parse(src, src_len, origin, &t->jinja, err);
done:
  cJSON_Delete(cfg);
  free(cfg_text);
  free(src);
  free(cfg_path);
  free(jinja_path);
  if (st != FSDPC_OK) {
    fsdpc__chat_template_destroy(t);
    return st;
  }
  *out = t;
  return FSDPC_OK;
}

void fsdpc__chat_template_destroy(fsdpc_chat_template *t) {
  if (!t)
    return;
  fsdpc__jinja_destroy(t->jinja);
  free(t->origin);
  free(t->bos);
  free(t->eos);
  free(t->unk);
  free(t->pad);
  free(t);
}

void fsdpc__chat_template_set_time(fsdpc_chat_template *t, time_t now) {
  t->now = now;
}
void fsdpc__chat_template_set_limits(fsdpc_chat_template *t, uint64_t max_steps,
                                     size_t max_output) {
  t->max_steps = max_steps;
  t->max_output = max_output;
}

fsdpc_status fsdpc__chat_template_from_string(const char *src, size_t len, const char *origin,
                                              const char *bos, const char *eos,
                                              fsdpc_chat_template **out, fsdpc_err *err) {
  *out = NULL;
  fsdpc_chat_template *t = calloc(1, sizeof *t);
  if (!t || !(t->origin = strdup(origin ? origin : "chat_template")) ||
      (bos && !(t->bos = strdup(bos))) || (eos && !(t->eos = strdup(eos)))) {
    fsdpc__chat_template_destroy(t);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "chat template: out of memory");
  }
  fsdpc_status st = fsdpc__jinja_parse(src, len, t->origin, &t->jinja, err);
  if (st != FSDPC_OK) {
    fsdpc__chat_template_destroy(t);
    return st;
  }
  *out = t;
  return FSDPC_OK;
}
const char *fsdpc__chat_template_origin(const fsdpc_chat_template *t) {
  return t->origin;
}
const char *fsdpc__chat_template_bos(const fsdpc_chat_template *t) {
  return t->bos;
}
const char *fsdpc__chat_template_eos(const fsdpc_chat_template *t) {
  return t->eos;
}

/* ---- rendering ---- */

/* Renders messages (a cJSON array, borrowed) as transformers does: with the
 * special tokens, add_generation_prompt, tools=None and documents=None. */
static fsdpc_status render_array(const fsdpc_chat_template *t, const cJSON *msgs, int agp,
                                 char **out, size_t *len, fsdpc_jinja_span **gen, size_t *n_gen,
                                 fsdpc_err *err) {
  cJSON *vars = cJSON_CreateObject();
  int ok = vars && cJSON_AddItemReferenceToObject(vars, "messages", (cJSON *)msgs) &&
           cJSON_AddBoolToObject(vars, "add_generation_prompt", agp) &&
           cJSON_AddNullToObject(vars, "tools") && cJSON_AddNullToObject(vars, "documents");
  const char *names[] = {"bos_token", "eos_token", "unk_token", "pad_token"};
  const char *vals[] = {t->bos, t->eos, t->unk, t->pad};
  for (int i = 0; i < 4 && ok; i++)
    if (vals[i])
      ok = cJSON_AddStringToObject(vars, names[i], vals[i]) != NULL;
  if (!ok) {
    cJSON_Delete(vars);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "chat template: out of memory");
  }
  fsdpc_jinja_opts o = {.now = t->now,
                        .max_steps = t->max_steps,
                        .max_output = t->max_output,
                        .gen = gen,
                        .n_gen = n_gen};
  fsdpc_status st = fsdpc__jinja_render_opts(t->jinja, vars, &o, out, len, err);
  cJSON_Delete(vars);
  return st;
}

/* A new array of references to msgs[0..k), where repl[i] (if repl and
 * repl[i] are non-NULL) replaces message i's content, and `extra` appended. */
static cJSON *prefix_array(const cJSON *msgs, size_t k, const char *const *repl,
                           const cJSON *extra) {
  cJSON *arr = cJSON_CreateArray();
  if (!arr)
    return NULL;
  size_t i = 0;
  const cJSON *m;
  cJSON_ArrayForEach(m, msgs) {
    if (i >= k)
      break;
    int ok;
    if (repl && repl[i]) {
      cJSON *copy = cJSON_CreateObject();
      const cJSON *f;
      ok = copy != NULL;
      cJSON_ArrayForEach(f, m) {
        if (!ok)
          break;
        if (!strcmp(f->string, "content"))
          ok = cJSON_AddStringToObject(copy, "content", repl[i]) != NULL;
        else
          ok = cJSON_AddItemReferenceToObject(copy, f->string, (cJSON *)f);
      }
      ok = ok && cJSON_AddItemToArray(arr, copy);
      if (!ok)
        cJSON_Delete(copy);
    } else {
      ok = cJSON_AddItemReferenceToArray(arr, (cJSON *)m);
    }
    if (!ok) {
      cJSON_Delete(arr);
      return NULL;
    }
    i++;
  }
  if (extra && !cJSON_AddItemReferenceToArray(arr, (cJSON *)extra)) {
    cJSON_Delete(arr);
    return NULL;
  }
  return arr;
}

static fsdpc_status render_variant(const fsdpc_chat_template *t, const cJSON *msgs, size_t k,
                                   const char *const *repl, const cJSON *extra, int agp, char **out,
                                   size_t *len, fsdpc_err *err) {
  cJSON *arr = prefix_array(msgs, k, repl, extra);
  if (!arr)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "chat template: out of memory");
  fsdpc_status st = render_array(t, arr, agp, out, len, NULL, NULL, err);
  cJSON_Delete(arr);
  return st;
}

static int is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Python str.strip(): the same whitespace set as the engine's trim. */
static void py_strip(const char *s, size_t n, size_t *b, size_t *e);

static fsdpc_status validate(const fsdpc_chat_template *t, const cJSON *messages, size_t *n,
                             fsdpc_err *err) {
  if (!cJSON_IsArray(messages))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: messages must be a JSON array", t->origin);
  size_t i = 0;
  const cJSON *m;
  cJSON_ArrayForEach(m, messages) {
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
    const cJSON *train = cJSON_GetObjectItemCaseSensitive(m, "train");
    if (!cJSON_IsObject(m))
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "messages[%zu] is not an object", i);
    if (!cJSON_IsString(role))
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "messages[%zu].role is missing or not a string",
                         i);
    if (!cJSON_IsString(content))
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "messages[%zu].content is missing or not a string", i);
    if (train && !cJSON_IsBool(train))
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "messages[%zu].train must be true or false", i);
    i++;
  }
  *n = i;
  return FSDPC_OK;
}

static const cJSON *msg_at(const cJSON *msgs, size_t i) {
  return cJSON_GetArrayItem(msgs, (int)i);
}
static int is_assistant(const cJSON *m) {
  const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
  return cJSON_IsString(r) && !strcmp(r->valuestring, "assistant");
}
static int trainable(const cJSON *m) {
  return is_assistant(m) && !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(m, "train"));
}

static size_t common_prefix(const char *a, size_t na, const char *b, size_t nb) {
  size_t i = 0, n = na < nb ? na : nb;
  while (i < n && a[i] == b[i])
    i++;
  return i;
}

static const char *content_of(const cJSON *msgs, size_t i) {
  return cJSON_GetObjectItemCaseSensitive(msg_at(msgs, i), "content")->valuestring;
}

/* Sentinel delimiters: the sentinel of a content starts and ends with bytes
 * that the content (trimmed or not) does not start or end with, so that
 * the diff of the two renders stops exactly at the content. */
static const char SENT_OPEN[] = {'\x01', '\x03', '\x05', '\x0e'};
static const char SENT_CLOSE[] = {'\x02', '\x04', '\x06', '\x0f'};

static int sentinel_fits(const char *c, int pair) {
  size_t nc = strlen(c), sb, se;
  if (!nc)
    return 1;
  py_strip(c, nc, &sb, &se);
  char o = SENT_OPEN[pair], e = SENT_CLOSE[pair];
  return c[0] != o && c[nc - 1] != e && (se == sb || (c[sb] != o && c[se - 1] != e));
}

/* Whether R[at..) holds content c as rendered (verbatim or stripped); sets *len. */
static int content_at(const char *R, size_t nR, size_t at, const char *c, int stripped,
                      size_t *len) {
  size_t nc = strlen(c), sb = 0, se = nc;
  if (stripped)
    py_strip(c, nc, &sb, &se);
  if (at + (se - sb) > nR || memcmp(R + at, c + sb, se - sb) != 0)
    return 0;
  *len = se - sb;
  return 1;
}

/* The content of assistant message i in R, the exact way: one render with
 * that content replaced by a sentinel, diffed against R. */
static fsdpc_status locate_one(const fsdpc_chat_template *t, const cJSON *msgs, size_t nmsg,
                               size_t i, int agp, const char *R, size_t nR, size_t *cb, size_t *ce,
                               fsdpc_err *err) {
  const char *c = content_of(msgs, i);
  int pair = 0;
  while (pair < 3 && !sentinel_fits(c, pair))
    pair++;
  char X[32];
  snprintf(X, sizeof X, "%cfsdpc-probe%c", SENT_OPEN[pair], SENT_CLOSE[pair]);
  size_t nX = strlen(X);
  const char **repl = calloc(nmsg, sizeof *repl);
  if (!repl)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "chat template: out of memory");
  repl[i] = X;
  char *R2 = NULL;
  size_t nR2;
  fsdpc_status st = render_variant(t, msgs, nmsg, repl, NULL, agp, &R2, &nR2, err);
  free(repl);
  if (st != FSDPC_OK)
    return st;
  size_t lcp = common_prefix(R, nR, R2, nR2), lcs = 0;
  size_t lim = (nR < nR2 ? nR : nR2) - lcp;
  while (lcs < lim && R[nR - 1 - lcs] == R2[nR2 - 1 - lcs])
    lcs++;
  size_t len = 0;
  int ok = nR2 - lcs - lcp == nX && memcmp(R2 + lcp, X, nX) == 0 &&
           ((content_at(R, nR, lcp, c, 0, &len) && lcp + len == nR - lcs) ||
            (content_at(R, nR, lcp, c, 1, &len) && lcp + len == nR - lcs));
  free(R2);
  if (!ok)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: cannot place the content of messages[%zu] in the rendered text (the "
                       "template changes it beyond trimming or uses it twice); use a template "
                       "with {%% generation %%} blocks or train_on all",
                       t->origin, i);
  *cb = lcp;
  *ce = nR - lcs;
  return FSDPC_OK;
}

/* All contents of the m messages idx[] at once: one render with every one
 * replaced by its own numbered sentinel; R must then be the sentinel render
 * with each sentinel replaced by its content (verbatim or stripped).
 * Returns 1 when that holds (cb / ce set), 0 when the exact per-message way
 * must decide, -1 on a render error. */
static int locate_all(const fsdpc_chat_template *t, const cJSON *msgs, size_t nmsg,
                      const size_t *idx, size_t m, int agp, const char *R, size_t nR, size_t *cb,
                      size_t *ce, fsdpc_err *err) {
  int pair = 0;
  for (; pair < 4; pair++) {
    size_t k = 0;
    while (k < m && sentinel_fits(content_of(msgs, idx[k]), pair))
      k++;
    if (k == m)
      break;
  }
  if (pair == 4)
    return 0;
  const char **repl = calloc(nmsg, sizeof *repl);
  char *xs = malloc(m * 32 + 1);
  if (!repl || !xs) {
    free(repl);
    free(xs);
    fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "chat template: out of memory");
    return -1;
  }
  for (size_t k = 0; k < m; k++) {
    snprintf(xs + 32 * k, 32, "%cfsdpc%zu%c", SENT_OPEN[pair], k, SENT_CLOSE[pair]);
    repl[idx[k]] = xs + 32 * k;
  }
  char *R2 = NULL;
  size_t nR2 = 0;
  fsdpc_err perr = {0};
  int found = 0;
  if (render_variant(t, msgs, nmsg, repl, NULL, agp, &R2, &nR2, &perr) == FSDPC_OK) {
    /* R2 = s0 X0 s1 X1 ... sm; R must be s0 c0 s1 c1 ... sm. */
    size_t p2 = 0, p = 0, k = 0;
    for (; k < m; k++) {
      const char *X = xs + 32 * k;
      size_t nX = strlen(X);
      const char *hit = NULL;
      for (size_t q = p2; q + nX <= nR2 && !hit; q++)
        if (R2[q] == X[0] && memcmp(R2 + q, X, nX) == 0)
          hit = R2 + q;
      if (!hit)
        break;
      size_t seg = (size_t)(hit - R2) - p2;
      if (p + seg > nR || memcmp(R + p, R2 + p2, seg) != 0)
        break;
      p += seg;
      p2 += seg + nX;
      /* the next literal segment decides between verbatim and stripped */
      const char *next = k + 1 < m ? xs + 32 * (k + 1) : NULL;
      size_t nseg = next ? 0 : nR2 - p2;
      if (next) {
        const char *h2 = NULL;
        for (size_t q = p2; q + strlen(next) <= nR2 && !h2; q++)
          if (R2[q] == next[0] && memcmp(R2 + q, next, strlen(next)) == 0)
            h2 = R2 + q;
        if (!h2)
          break;
        nseg = (size_t)(h2 - R2) - p2;
      }
      const char *c = content_of(msgs, idx[k]);
      size_t len = 0, lens[2] = {0, 0};
      int fits[2];
      for (int stripped = 0; stripped < 2; stripped++)
        fits[stripped] = content_at(R, nR, p, c, stripped, &lens[stripped]) &&
                         p + lens[stripped] + nseg <= nR &&
                         memcmp(R + p + lens[stripped], R2 + p2, nseg) == 0;
      /* Both readings fitting with different lengths: let the exact way decide. */
      if ((fits[0] && fits[1] && lens[0] != lens[1]) || (!fits[0] && !fits[1]))
        break;
      len = fits[0] ? lens[0] : lens[1];
      cb[k] = p;
      ce[k] = p + len;
      p += len;
    }
    found = k == m && nR - p == nR2 - p2 && memcmp(R + p, R2 + p2, nR - p) == 0;
  }
  free(R2);
  free(repl);
  free(xs);
  return found;
}

/* The end of the target span of assistant message i whose content ends at
 * ce in R: its end-of-turn text (see the file comment). */
static fsdpc_status turn_end(const fsdpc_chat_template *t, const cJSON *msgs, size_t nmsg, size_t i,
                             int agp, const char *R, size_t nR, size_t ce, size_t *end,
                             fsdpc_err *err) {
  char *B = NULL, *D = NULL;
  size_t nB = 0, nD = 0;
  fsdpc_status st = FSDPC_OK;
  /* The text after the content when the conversation ends with message i
   * (R itself when it does and no generation prompt was added). */
  const char *Bp = R;
  if (i + 1 < nmsg || agp) {
    if ((st = render_variant(t, msgs, i + 1, NULL, NULL, 0, &B, &nB, err)) != FSDPC_OK)
      goto done;
    Bp = B;
  } else {
    nB = nR;
  }
  if (nB < ce || memcmp(Bp, R, ce) != 0) {
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "%s: the conversation up to messages[%zu] renders differently from the "
                     "start of the whole conversation, so its assistant mask cannot be derived; "
                     "use a template with {%% generation %%} blocks or train_on all",
                     t->origin, i);
    goto done;
  }
  const char *tail_end = Bp + ce, *tail_next;
  size_t n_end = nB - ce, n_next;
  if (i + 1 < nmsg) {
    tail_next = R + ce;
    n_next = nR - ce;
  } else {
    /* The conversation ends here: see what the template emits when it goes on. */
    cJSON *probe = cJSON_CreateObject();
    if (!probe || !cJSON_AddStringToObject(probe, "role", "user") ||
        !cJSON_AddStringToObject(probe, "content", "fsdpc probe")) {
      cJSON_Delete(probe);
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "chat template: out of memory");
      goto done;
    }
    fsdpc_err perr = {0};
    fsdpc_status ps = render_variant(t, msgs, i + 1, NULL, probe, 0, &D, &nD, &perr);
    cJSON_Delete(probe);
    if (ps == FSDPC_OK && nD >= ce && memcmp(D, R, ce) == 0) {
      tail_next = D + ce;
      n_next = nD - ce;
    } else {
      tail_next = tail_end; /* the template refuses a continuation: use its ending */
      n_next = n_end;
    }
  }
  size_t eot = common_prefix(tail_end, n_end, tail_next, n_next);
  while (eot > 0 && is_ws(tail_end[eot - 1]))
    eot--;
  if (t->eos && *t->eos) {
    size_t ws = 0, ne = strlen(t->eos);
    while (ws < n_next && is_ws(tail_next[ws]))
      ws++;
    if (eot < ws + ne && n_next >= ws + ne && memcmp(tail_next + ws, t->eos, ne) == 0 &&
        ce + ws + ne <= nR && memcmp(R + ce, tail_next, ws + ne) == 0)
      eot = ws + ne;
  }
  if (ce + eot > nR)
    eot = nR - ce;
  *end = ce + eot;
done:
  free(B);
  free(D);
  return st;
}

static void py_strip(const char *s, size_t n, size_t *b, size_t *e) {
  /* Python whitespace: ASCII \t..\r, \x1c..\x20 and the Unicode spaces. */
  size_t i = 0, j = n;
  while (i < j) {
    size_t l = 0;
    unsigned char c = (unsigned char)s[i];
    if (i < j && ((c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20)))
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

fsdpc_status fsdpc__chat_render(const fsdpc_chat_template *t, const cJSON *messages,
                                int add_generation_prompt, int train_on, char **text,
                                size_t *text_len, fsdpc_chat_span **spans, size_t *n_spans,
                                fsdpc_err *err) {
  *text = NULL;
  if (text_len)
    *text_len = 0;
  if (spans)
    *spans = NULL;
  if (n_spans)
    *n_spans = 0;
  size_t nmsg = 0;
  fsdpc_status st = validate(t, messages, &nmsg, err);
  if (st != FSDPC_OK)
    return st;
  if (train_on < FSDPC_TRAIN_ON_ASSISTANT || train_on > FSDPC_TRAIN_ON_LAST_ASSISTANT)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "chat render: unknown train_on %d", train_on);
  char *R = NULL;
  size_t nR = 0;
  fsdpc_jinja_span *gen = NULL;
  size_t n_gen = 0;
  int use_gen = fsdpc__jinja_has_generation(t->jinja);
  st = render_array(t, messages, add_generation_prompt, &R, &nR, use_gen ? &gen : NULL,
                    use_gen ? &n_gen : NULL, err);
  if (st != FSDPC_OK)
    return st;
  fsdpc_chat_span *sp = NULL;
  size_t ns = 0;
  if (spans) {
    sp = malloc((nmsg + 1) * sizeof *sp);
    if (!sp) {
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "chat render: out of memory");
      goto fail;
    }
    size_t last = (size_t)-1, n_asst = 0;
    for (size_t i = 0; i < nmsg; i++)
      if (is_assistant(msg_at(messages, i))) {
        last = i;
        n_asst++;
      }
    if (train_on == FSDPC_TRAIN_ON_ALL) {
      if (nR) {
        sp[0].begin = 0;
        sp[0].end = nR;
        ns = 1;
      }
    } else if (use_gen) {
      if (n_gen != n_asst) {
        st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: %zu {%% generation %%} blocks for %zu assistant messages; cannot "
                         "tell which block is which turn",
                         t->origin, n_gen, n_asst);
        goto fail;
      }
      size_t k = 0;
      for (size_t i = 0; i < nmsg; i++) {
        const cJSON *m = msg_at(messages, i);
        if (!is_assistant(m))
          continue;
        if (trainable(m) && (train_on == FSDPC_TRAIN_ON_ASSISTANT || i == last) &&
            gen[k].end > gen[k].begin) {
          sp[ns].begin = gen[k].begin;
          sp[ns].end = gen[k].end;
          ns++;
        }
        k++;
      }
    } else {
      size_t *idx = malloc((nmsg + 1) * 3 * sizeof *idx), m = 0;
      if (!idx) {
        st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "chat render: out of memory");
        goto fail;
      }
      size_t *cb = idx + nmsg + 1, *ce = cb + nmsg + 1;
      for (size_t i = 0; i < nmsg; i++)
        if (trainable(msg_at(messages, i)) && (train_on == FSDPC_TRAIN_ON_ASSISTANT || i == last))
          idx[m++] = i;
      int all =
          m ? locate_all(t, messages, nmsg, idx, m, add_generation_prompt, R, nR, cb, ce, err) : 1;
      st = all < 0 ? FSDPC_SYSTEM_ERROR : FSDPC_OK; /* locate_all set the message */
      for (size_t k = 0; k < m && st == FSDPC_OK; k++) {
        if (!all)
          st = locate_one(t, messages, nmsg, idx[k], add_generation_prompt, R, nR, &cb[k], &ce[k],
                          err);
        size_t end = 0;
        if (st == FSDPC_OK)
          st = turn_end(t, messages, nmsg, idx[k], add_generation_prompt, R, nR, ce[k], &end, err);
        if (st == FSDPC_OK && end > cb[k]) {
          sp[ns].begin = cb[k];
          sp[ns].end = end;
          ns++;
        }
      }
      free(idx);
      if (st != FSDPC_OK)
        goto fail;
    }
    for (size_t k = 1; k < ns; k++)
      if (sp[k].begin < sp[k - 1].end) {
        st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: assistant spans overlap or are out of order; the template "
                         "renders turns out of order",
                         t->origin);
        goto fail;
      }
  }
  free(gen);
  *text = R;
  if (text_len)
    *text_len = nR;
  if (spans) {
    *spans = sp;
    *n_spans = ns;
  }
  return FSDPC_OK;
fail:
  free(gen);
  free(sp);
  free(R);
  return st;
}
