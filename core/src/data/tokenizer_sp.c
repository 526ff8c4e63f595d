/* SentencePiece tokenizer.model through libsentencepiece (the C++ lives in
 * tokenizer_sp_shim.cc), for model folders that ship no tokenizer.json.
 *
 * As transformers' slow Llama tokenizer: the added tokens of
 * tokenizer_config.json's added_tokens_decoder are cut out of the text first
 * (leftmost, longest), and each piece between them is encoded by
 * SentencePiece on its own. Ids at or past the model's size are added tokens
 * only. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/tokenizer_bpe_internal.h"
#include "data/tokenizer_sp_shim.h"

#define MAX_MODEL_BYTES (256u << 20)
#define MAX_ADDED_ID (1 << 26)

typedef struct sp_added {
  char *content;
  size_t len;
  int32_t id;
} sp_added;

typedef struct sp_tok {
  fsdpc_spm *m;
  char *path;
  int32_t size;       /* SentencePiece pieces */
  int32_t vocab_size; /* 1 + largest id, added tokens included */
  int32_t bos, eos, pad;
  int32_t adds_bos, adds_eos;
  /* tokenizer_class LlamaTokenizer: transformers 5's Metaspace instead of
   * the model's dummy prefix (which is then switched off): a "▁" before a
   * piece between added tokens that does not start with a space, for every
   * piece (SP_PREPEND_ALWAYS, legacy: true), only the text's first
   * (SP_PREPEND_FIRST) or none. SP_PREPEND_MODEL: the model's own rule. */
  enum { SP_PREPEND_MODEL, SP_PREPEND_NEVER, SP_PREPEND_ALWAYS, SP_PREPEND_FIRST } prepend;
  sp_added *added; /* longest first */
  int32_t n_added;
  /* added[by_first[first_start[c] .. first_start[c + 1])] start with byte c,
   * longest first: encode tries only the candidates for the byte at hand. */
  int32_t *by_first;
  int32_t first_start[257];
} sp_tok;

static void sp_free(sp_tok *t) {
  if (!t)
    return;
  fsdpc__spm_free(t->m);
  for (int32_t i = 0; i < t->n_added; i++)
    free(t->added[i].content);
  free(t->added);
  free(t->by_first);
  free(t->path);
  free(t);
}

static fsdpc_status index_added(sp_tok *t, fsdpc_err *err) {
  t->by_first = malloc((size_t)(t->n_added ? t->n_added : 1) * sizeof *t->by_first);
  if (!t->by_first)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", t->path);
  int32_t k = 0;
  for (int c = 0; c < 256; c++) {
    t->first_start[c] = k;
    for (int32_t i = 0; i < t->n_added; i++) /* added is sorted longest first */
      if ((unsigned char)t->added[i].content[0] == c)
        t->by_first[k++] = i;
  }
  t->first_start[256] = k;
  return FSDPC_OK;
}

/* Reads a regular file of at most max bytes (anything else is refused
 * before a blocking read: EINVAL). */
static char *slurp(const char *path, size_t max, size_t *len) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > max) {
    close(fd);
    errno = EINVAL;
    return NULL;
  }
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    close(fd);
    return NULL;
  }
  char *buf = malloc((size_t)st.st_size + 1);
  size_t n = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
  int bad = !buf || ferror(f) || n != (size_t)st.st_size;
  fclose(f);
  if (bad) {
    free(buf);
    errno = buf ? EIO : ENOMEM;
    return NULL;
  }
  buf[n] = '\0';
  *len = n;
  return buf;
}

static int by_len_desc(const void *a, const void *b) {
  const sp_added *x = a, *y = b;
  return x->len < y->len ? 1 : x->len > y->len ? -1 : 0;
}

/* added_tokens_decoder: {"32000": {"content": "<pad>", ...}, ...}. */
static fsdpc_status read_added(sp_tok *t, const char *dir, fsdpc_err *err) {
  char path[4200];
  snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
  size_t len;
  char *text = slurp(path, 64u << 20, &len);
  if (!text)
    return errno == ENOENT ? FSDPC_OK
                           : fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: cannot read: %s", path,
                                         errno == EINVAL ? "not a regular file of at most 64 MiB"
                                                         : strerror(errno));
  cJSON *root = cJSON_ParseWithLength(text, len);
  free(text);
  if (!root)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: invalid JSON", path);
  const cJSON *dec = cJSON_GetObjectItemCaseSensitive(root, "added_tokens_decoder"), *it;
  fsdpc_status st = FSDPC_OK;
  int n = cJSON_IsObject(dec) ? cJSON_GetArraySize(dec) : 0;
  t->added = calloc((size_t)(n ? n : 1), sizeof *t->added);
  if (!t->added)
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", path);
  const cJSON *items = cJSON_IsObject(dec) ? dec : NULL;
  cJSON_ArrayForEach(it, items) {
    if (st)
      break;
    char e[96];
    char *end;
    errno = 0;
    long id = strtol(it->string, &end, 10);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(it, "content");
    if (errno || *end || end == it->string || id < 0 || id >= MAX_ADDED_ID) {
      st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: added_tokens_decoder: key '%s' is not an id in [0, %d)", path,
                       fsdpc__tok_esc(e, sizeof e, it->string), MAX_ADDED_ID);
    } else if (!cJSON_IsString(c) || !c->valuestring[0]) {
      st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: added_tokens_decoder: id %ld has no content string", path, id);
    } else {
      sp_added *a = &t->added[t->n_added];
      if (!(a->content = strdup(c->valuestring))) {
        st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", path);
      } else {
        a->len = strlen(a->content);
        a->id = (int32_t)id;
        t->n_added++;
        if (a->id >= t->vocab_size)
          t->vocab_size = a->id + 1;
      }
    }
  }
  cJSON_Delete(root);
  if (!st && t->n_added > 1)
    qsort(t->added, (size_t)t->n_added, sizeof *t->added, by_len_desc);
  return st;
}

/* The model's control and unknown pieces (<s>, </s>, <unk>) are special
 * tokens to transformers, matched in the text as added tokens are. */
static fsdpc_status add_control_pieces(sp_tok *t, fsdpc_err *err) {
  for (int32_t id = 0; id < t->size; id++) {
    if (!fsdpc__spm_is_control(t->m, id))
      continue;
    const char *p = fsdpc__spm_id_piece(t->m, id);
    int known = !p || !*p;
    for (int32_t i = 0; i < t->n_added && !known; i++)
      known = t->added[i].id == id || strcmp(t->added[i].content, p) == 0;
    if (known)
      continue;
    sp_added *na = realloc(t->added, (size_t)(t->n_added + 1) * sizeof *na);
    if (!na)
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", t->path);
    t->added = na;
    if (!(na[t->n_added].content = strdup(p)))
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", t->path);
    na[t->n_added].len = strlen(p);
    na[t->n_added].id = id;
    t->n_added++;
  }
  if (t->n_added > 1)
    qsort(t->added, (size_t)t->n_added, sizeof *t->added, by_len_desc);
  return FSDPC_OK;
}

static int32_t sp_token_id(const fsdpc_tokenizer *tok, const char *s) {
  const sp_tok *t = tok->impl;
  for (int32_t i = 0; i < t->n_added; i++)
    if (strcmp(t->added[i].content, s) == 0)
      return t->added[i].id;
  return fsdpc__spm_piece_id(t->m, s);
}

static const char *sp_token_str(const fsdpc_tokenizer *tok, int32_t id) {
  const sp_tok *t = tok->impl;
  if (id >= 0 && id < t->size && !fsdpc__spm_is_control(t->m, id))
    return fsdpc__spm_id_piece(t->m, id);
  for (int32_t i = 0; i < t->n_added; i++)
    if (t->added[i].id == id)
      return t->added[i].content;
  return fsdpc__spm_id_piece(t->m, id);
}

/* Grows ids/offs to hold need entries. */
static int reserve(int32_t **ids, size_t (**offs)[2], int64_t *cap, int64_t need) {
  if (need <= *cap)
    return 1;
  int64_t c = need * 2;
  int32_t *ni = realloc(*ids, (size_t)c * sizeof *ni);
  if (ni)
    *ids = ni;
  size_t(*no)[2] = ni ? realloc(*offs, (size_t)c * sizeof *no) : NULL;
  if (no)
    *offs = no;
  if (!ni || !no)
    return 0;
  *cap = c;
  return 1;
}

/* Appends SentencePiece's encoding of text [p0, p1) to ids/offs (n, cap). */
static fsdpc_status encode_piece(const sp_tok *t, const char *text, size_t p0, size_t p1,
                                 int32_t **ids, size_t (**offs)[2], int64_t *n, int64_t *cap,
                                 fsdpc_err *err) {
  if (p1 == p0)
    return FSDPC_OK;
  int32_t *pi;
  size_t(*ps)[2];
  int64_t k;
  char msg[256];
  static const char ms[] = "\xe2\x96\x81"; /* U+2581 */
  int starts_ms = text[p0] == ' ' || (p1 - p0 >= 3 && memcmp(text + p0, ms, 3) == 0);
  size_t shift = 0; /* bytes of "▁" put before the piece */
  char *buf = NULL;
  if ((t->prepend == SP_PREPEND_ALWAYS || (t->prepend == SP_PREPEND_FIRST && p0 == 0)) &&
      !starts_ms) {
    if (!(buf = malloc(p1 - p0 + 3)))
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "sentencepiece tokenizer: out of memory");
    memcpy(buf, ms, 3);
    memcpy(buf + 3, text + p0, p1 - p0);
    shift = 3;
  }
  int rc = buf ? fsdpc__spm_encode(t->m, buf, p1 - p0 + 3, &pi, &ps, &k, msg, sizeof msg)
               : fsdpc__spm_encode(t->m, text + p0, p1 - p0, &pi, &ps, &k, msg, sizeof msg);
  free(buf);
  if (rc != 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: %s", t->path, msg);
  /* The prepended "▁" belongs to the piece's first character, as HF aligns it. */
  for (int64_t i = 0; i < k && shift; i++)
    for (int j = 0; j < 2; j++)
      ps[i][j] = ps[i][j] > shift ? ps[i][j] - shift : 0;
  if (!reserve(ids, offs, cap, *n + k)) {
    free(pi);
    free(ps);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "sentencepiece tokenizer: out of memory");
  }
  for (int64_t i = 0; i < k; i++) {
    (*ids)[*n] = pi[i];
    (*offs)[*n][0] = p0 + ps[i][0];
    (*offs)[*n][1] = p0 + ps[i][1];
    (*n)++;
  }
  free(pi);
  free(ps);
  return FSDPC_OK;
}

static fsdpc_status sp_encode_offsets(const fsdpc_tokenizer *tok, const char *text, size_t len,
                                      int32_t **ids_out, size_t (**offsets)[2], int64_t *n_out,
                                      fsdpc_err *err) {
  const sp_tok *t = tok->impl;
  int64_t n = 0, cap = 64;
  int32_t *ids = malloc((size_t)cap * sizeof *ids);
  size_t(*offs)[2] = malloc((size_t)cap * sizeof *offs);
  fsdpc_status st =
      ids && offs ? FSDPC_OK
                  : fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "sentencepiece tokenizer: out of memory");
  size_t piece = 0;
  for (size_t pos = 0; pos < len && !st;) {
    const sp_added *hit = NULL;
    unsigned char c = (unsigned char)text[pos];
    for (int32_t k = t->first_start[c]; k < t->first_start[c + 1] && !hit; k++) {
      const sp_added *a = &t->added[t->by_first[k]];
      if (a->len <= len - pos && memcmp(text + pos, a->content, a->len) == 0)
        hit = a;
    }
    if (!hit) {
      pos++;
      continue;
    }
    st = encode_piece(t, text, piece, pos, &ids, &offs, &n, &cap, err);
    if (!st && !reserve(&ids, &offs, &cap, n + 1))
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "sentencepiece tokenizer: out of memory");
    if (!st) {
      ids[n] = hit->id;
      offs[n][0] = pos;
      offs[n][1] = pos + hit->len;
      n++;
    }
    pos += hit->len;
    piece = pos;
  }
  if (!st)
    st = encode_piece(t, text, piece, len, &ids, &offs, &n, &cap, err);
  if (st) {
    free(ids);
    free(offs);
    *ids_out = NULL;
    if (offsets)
      *offsets = NULL;
    *n_out = 0;
    return st;
  }
  *ids_out = ids;
  fsdpc__tok_widen_offsets(text, len, offs, n);
  if (offsets)
    *offsets = offs;
  else
    free(offs);
  *n_out = n;
  return FSDPC_OK;
}

static fsdpc_status sp_encode(const fsdpc_tokenizer *tok, const char *text, size_t len,
                              int32_t *ids, int64_t cap, int64_t *n_out, fsdpc_err *err) {
  int32_t *all;
  FSDPC_TRY(sp_encode_offsets(tok, text, len, &all, NULL, n_out, err));
  if (*n_out <= cap)
    memcpy(ids, all, (size_t)*n_out * sizeof *ids);
  free(all);
  if (*n_out > cap)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "sentencepiece tokenizer: %zu bytes need %" PRId64
                       " ids, buffer holds %" PRId64,
                       len, *n_out, cap);
  return FSDPC_OK;
}

/* Runs of ordinary SentencePiece ids decode through SentencePiece; BOS,
 * EOS and PAD give nothing; other control pieces ([INST]) and added tokens
 * give their text, as the BPE tokenizer's added tokens do. */
static fsdpc_status sp_decode(const fsdpc_tokenizer *tok, const int32_t *ids, int64_t n, char *out,
                              size_t cap, size_t *len_out, fsdpc_err *err) {
  const sp_tok *t = tok->impl;
  size_t k = 0;
  for (int64_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= t->vocab_size || !sp_token_str(tok, ids[i]))
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "sentencepiece tokenizer: id %" PRId32 " at position %" PRId64
                         " is not in its vocabulary [0, %d)",
                         ids[i], i, t->vocab_size);
#define PLAIN(id) ((id) < t->size && !fsdpc__spm_is_control(t->m, (id)))
  for (int64_t i = 0; i < n;) {
    int64_t j = i + 1;
    const char *s = "";
    size_t l = 0;
    char *dec = NULL;
    if (PLAIN(ids[i])) {
      while (j < n && PLAIN(ids[j]))
        j++;
      char msg[256];
      if (fsdpc__spm_decode(t->m, ids + i, j - i, &dec, &l, msg, sizeof msg) != 0)
        return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: %s", t->path, msg);
      s = dec;
    } else if (ids[i] != t->bos && ids[i] != t->eos && ids[i] != t->pad) {
      s = sp_token_str(tok, ids[i]);
      l = strlen(s);
    }
    if (k + l <= cap)
      memcpy(out + k, s, l);
    k += l;
    free(dec);
    i = j;
  }
#undef PLAIN
  *len_out = k;
  if (k > cap)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "sentencepiece tokenizer: decoding needs %zu bytes, buffer holds %zu", k,
                       cap);
  return FSDPC_OK;
}

static int32_t sp_bos(const fsdpc_tokenizer *tok) {
  return ((const sp_tok *)tok->impl)->bos;
}
static int32_t sp_eos(const fsdpc_tokenizer *tok) {
  return ((const sp_tok *)tok->impl)->eos;
}
static int32_t sp_pad(const fsdpc_tokenizer *tok) {
  return ((const sp_tok *)tok->impl)->pad;
}
static int32_t sp_vocab(const fsdpc_tokenizer *tok) {
  return ((const sp_tok *)tok->impl)->vocab_size;
}
/* A dummy prefix per piece and byte fallback: at most 2 ids per byte + 1. */
static int32_t sp_max_ids_per_byte(const fsdpc_tokenizer *tok) {
  return 3;
}
static int sp_adds_bos(const fsdpc_tokenizer *tok) {
  return ((const sp_tok *)tok->impl)->adds_bos;
}
static int sp_adds_eos(const fsdpc_tokenizer *tok) {
  return ((const sp_tok *)tok->impl)->adds_eos;
}
static void sp_destroy(fsdpc_tokenizer *tok) {
  sp_free(tok->impl);
  free(tok);
}

static const fsdpc_tokenizer_vtable sp_vtable = {
    /* .name             = */ "sentencepiece",
    /* .encode           = */ sp_encode,
    /* .decode           = */ sp_decode,
    /* .bos              = */ sp_bos,
    /* .eos              = */ sp_eos,
    /* .pad              = */ sp_pad,
    /* .vocab_size       = */ sp_vocab,
    /* .max_ids_per_byte = */ sp_max_ids_per_byte,
    /* .destroy          = */ sp_destroy,
    /* .encode_offsets   = */ sp_encode_offsets,
    /* .adds_bos         = */ sp_adds_bos,
    /* .adds_eos         = */ sp_adds_eos,
    /* .token_id         = */ sp_token_id,
    /* .token_str        = */ sp_token_str,
};

/* A special id: the name tokenizer_config.json gives, else the model's. */
static fsdpc_status pick(const sp_tok *t, const fsdpc_tokenizer *tok, const char *what,
                         const char *name, int32_t model_id, int32_t *out, fsdpc_err *err) {
  *out = model_id >= 0 && model_id < t->size ? model_id : -1;
  if (!name)
    return FSDPC_OK;
  *out = sp_token_id(tok, name);
  if (*out < 0) {
    char e[96];
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: %s token '%s' (from tokenizer_config.json) is not in the vocabulary",
                       t->path, what, fsdpc__tok_esc(e, sizeof e, name));
  }
  return FSDPC_OK;
}

/* transformers 5's LlamaTokenizer: reloads the model with its normalizer's
 * add_dummy_prefix off (a NormalizerSpec {add_dummy_prefix: false}
 * appended as ModelProto field 3, which protobuf merges into the model's
 * own) and prepends "▁" itself per legacy / add_prefix_space. */
static fsdpc_status use_metaspace(sp_tok *t, const char *data, size_t len,
                                  const fsdpc__bpe_config_names *n, fsdpc_err *err) {
  static const char no_dummy_prefix[] = "\x1a\x02\x18\x00";
  char *d = malloc(len + 4);
  if (!d)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", t->path);
  memcpy(d, data, len);
  memcpy(d + len, no_dummy_prefix, 4);
  fsdpc_spm *m;
  char msg[512];
  int rc = fsdpc__spm_load(d, len + 4, &m, msg, sizeof msg);
  free(d);
  if (rc != 0) {
    char e[400];
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: %s", t->path,
                       fsdpc__tok_esc(e, sizeof e, msg));
  }
  fsdpc__spm_free(t->m);
  t->m = m;
  t->prepend = n->add_prefix_space == 0 ? SP_PREPEND_NEVER
               : n->legacy == 1         ? SP_PREPEND_ALWAYS
                                        : SP_PREPEND_FIRST;
  return FSDPC_OK;
}

fsdpc_status fsdpc__tokenizer_sp_create(const char *model_path, fsdpc_tokenizer **out,
                                        fsdpc_err *err) {
  *out = NULL;
  size_t len = 0;
  char *data = slurp(model_path, MAX_MODEL_BYTES, &len);
  if (!data)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: cannot read tokenizer: %s", model_path,
                       errno == EINVAL ? "not a regular file of at most 256 MiB" : strerror(errno));
  sp_tok *t = calloc(1, sizeof *t);
  fsdpc_tokenizer *tok = calloc(1, sizeof *tok);
  fsdpc_status st = FSDPC_OK;
  if (!t || !tok || !(t->path = strdup(model_path))) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", model_path);
    goto done;
  }
  char msg[512];
  if (fsdpc__spm_load(data, len, &t->m, msg, sizeof msg) != 0) {
    char e[400];
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: %s", model_path,
                     fsdpc__tok_esc(e, sizeof e, msg));
    goto done;
  }
  t->size = t->vocab_size = fsdpc__spm_size(t->m);
  tok->vt = &sp_vtable;
  tok->impl = t;
  char *dir = strdup(model_path);
  if (!dir) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", model_path);
    goto done;
  }
  char *slash = strrchr(dir, '/');
  if (slash)
    *slash = '\0';
  st = read_added(t, slash ? (*dir ? dir : "/") : ".", err);
  if (!st)
    st = add_control_pieces(t, err);
  if (!st)
    st = index_added(t, err);
  fsdpc__bpe_config_names names = {0};
  if (!st)
    st = fsdpc__bpe_read_config(slash ? (*dir ? dir : "/") : ".", &names, err);
  free(dir);
  if (!st)
    st = pick(t, tok, "BOS", names.bos, fsdpc__spm_bos(t->m), &t->bos, err);
  if (!st)
    st = pick(t, tok, "EOS", names.eos, fsdpc__spm_eos(t->m), &t->eos, err);
  if (!st)
    st = pick(t, tok, "PAD", names.pad, fsdpc__spm_pad(t->m), &t->pad, err);
  /* LlamaTokenizer's defaults: add_bos_token true, add_eos_token false. */
  t->adds_bos = names.add_bos >= 0 ? names.add_bos : t->bos >= 0;
  t->adds_eos = names.add_eos >= 0 ? names.add_eos : 0;
  if (!st && names.llama_class)
    st = use_metaspace(t, data, len, &names, err);
  fsdpc__bpe_config_names_free(&names);
done:
  free(data);
  if (st) {
    sp_free(t);
    free(tok);
    return st;
  }
  *out = tok;
  return FSDPC_OK;
}
