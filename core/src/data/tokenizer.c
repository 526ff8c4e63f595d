/* Tokenizer wrappers: the one place that checks optional vtable members. */
#include "data/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

fsdpc_status fsdpc__tokenizer_encode(const fsdpc_tokenizer *tok, const char *text, size_t len,
                                     int32_t *ids, int64_t cap, int64_t *n_out, fsdpc_err *err) {
  return tok->vt->encode(tok, text, len, ids, cap, n_out, err);
}

fsdpc_status fsdpc__tokenizer_encode_alloc(const fsdpc_tokenizer *tok, const char *text, size_t len,
                                           int32_t **ids_out, int64_t *n_out, fsdpc_err *err) {
  *ids_out = NULL;
  int64_t per = tok->vt->max_ids_per_byte ? tok->vt->max_ids_per_byte(tok) : 1;
  int64_t cap = (int64_t)len * per;
  int32_t *ids = malloc((size_t)(cap > 0 ? cap : 1) * sizeof *ids);
  if (!ids)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "tokenizer: out of memory");
  fsdpc_status st = tok->vt->encode(tok, text, len, ids, cap, n_out, err);
  if (st != FSDPC_OK) {
    free(ids);
    return st;
  }
  *ids_out = ids;
  return FSDPC_OK;
}

fsdpc_status fsdpc__tokenizer_decode(const fsdpc_tokenizer *tok, const int32_t *ids, int64_t n,
                                     char *out, size_t cap, size_t *len_out, fsdpc_err *err) {
  return tok->vt->decode(tok, ids, n, out, cap, len_out, err);
}

int32_t fsdpc__tokenizer_bos(const fsdpc_tokenizer *tok) {
  return tok->vt->bos(tok);
}
int32_t fsdpc__tokenizer_eos(const fsdpc_tokenizer *tok) {
  return tok->vt->eos(tok);
}
int32_t fsdpc__tokenizer_pad(const fsdpc_tokenizer *tok) {
  return tok->vt->pad ? tok->vt->pad(tok) : -1;
}
int32_t fsdpc__tokenizer_vocab_size(const fsdpc_tokenizer *tok) {
  return tok->vt->vocab_size(tok);
}
const char *fsdpc__tokenizer_name(const fsdpc_tokenizer *tok) {
  return tok->vt->name;
}

void fsdpc__tokenizer_destroy(fsdpc_tokenizer *tok) {
  if (tok)
    tok->vt->destroy(tok);
}

fsdpc_status fsdpc__tokenizer_open(const char *path_or_name, fsdpc_tokenizer **out,
                                   fsdpc_err *err) {
  *out = NULL;
  if (!path_or_name || !*path_or_name)
    return fsdpc__fail(
        err, FSDPC_INVALID_USAGE,
        "tokenizer: expected \"byte\" or a path to a tokenizer.json (or its folder)");
  return fsdpc__tokenizer_load(path_or_name, out, err);
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

fsdpc_status fsdpc__tokenizer_load(const char *path, fsdpc_tokenizer **out, fsdpc_err *err) {
  *out = NULL;
  if (!path || !*path)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "tokenizer: expected \"byte\", a model folder, or a path to a "
                       "tokenizer.json or tokenizer.model");
  if (strcmp(path, "byte") == 0)
    return fsdpc__tokenizer_byte_create(out, err);
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    /* tokenizer.json first, as transformers' fast tokenizers do; a folder
     * with only tokenizer.model goes to SentencePiece. */
    size_t n = strlen(path) + 32;
    char *json = malloc(n), *model = malloc(n);
    if (!json || !model) {
      free(json);
      free(model);
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "tokenizer: out of memory");
    }
    snprintf(json, n, "%s/tokenizer.json", path);
    snprintf(model, n, "%s/tokenizer.model", path);
    struct stat sj, sm;
    int has_json = stat(json, &sj) == 0, has_model = stat(model, &sm) == 0;
    fsdpc_status rc;
    if (!has_json && !has_model)
      rc = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: cannot read tokenizer: the folder has neither tokenizer.json nor "
                       "tokenizer.model (expected a Hugging Face model folder)",
                       path);
    else if (has_json)
      rc = fsdpc__tokenizer_bpe_create(path, NULL, out, err);
    else
      rc = fsdpc__tokenizer_sp_create(model, out, err);
    free(json);
    free(model);
    return rc;
  }
  if (ends_with(path, ".model"))
    return fsdpc__tokenizer_sp_create(path, out, err);
  return fsdpc__tokenizer_bpe_create(path, NULL, out, err);
}

fsdpc_status fsdpc__tokenizer_encode_offsets(const fsdpc_tokenizer *tok, const char *text,
                                             size_t len, int32_t **ids, size_t (**offsets)[2],
                                             int64_t *n, fsdpc_err *err) {
  *ids = NULL;
  if (offsets)
    *offsets = NULL;
  *n = 0;
  if (tok->vt->encode_offsets)
    return tok->vt->encode_offsets(tok, text, len, ids, offsets, n, err);
  FSDPC_TRY(fsdpc__tokenizer_encode_alloc(tok, text, len, ids, n, err));
  if (offsets) {
    *offsets = malloc((size_t)(*n > 0 ? *n : 1) * sizeof **offsets);
    if (!*offsets) {
      free(*ids);
      *ids = NULL;
      *n = 0;
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "tokenizer: out of memory");
    }
    for (int64_t i = 0; i < *n; i++) {
      (*offsets)[i][0] = 0;
      (*offsets)[i][1] = len;
    }
  }
  return FSDPC_OK;
}

int fsdpc__tokenizer_adds_bos(const fsdpc_tokenizer *tok) {
  return tok->vt->adds_bos ? tok->vt->adds_bos(tok) : 0;
}
int fsdpc__tokenizer_adds_eos(const fsdpc_tokenizer *tok) {
  return tok->vt->adds_eos ? tok->vt->adds_eos(tok) : 0;
}
int32_t fsdpc__tokenizer_token_id(const fsdpc_tokenizer *tok, const char *token) {
  return tok->vt->token_id && token ? tok->vt->token_id(tok, token) : -1;
}
const char *fsdpc__tokenizer_token_str(const fsdpc_tokenizer *tok, int32_t id) {
  return tok->vt->token_str ? tok->vt->token_str(tok, id) : NULL;
}

void fsdpc__tok_widen_offsets(const char *text, size_t len, size_t (*offs)[2], int64_t n) {
  const unsigned char *t = (const unsigned char *)text;
  for (int64_t i = 0; i < n; i++) {
    size_t a = offs[i][0], z = offs[i][1];
    if (a > len)
      a = len;
    if (z > len || z < a)
      z = a;
    while (a > 0 && a < len && (t[a] & 0xc0) == 0x80)
      a--;
    if (z == a && z < len)
      z++;
    while (z < len && (t[z] & 0xc0) == 0x80)
      z++;
    offs[i][0] = a;
    offs[i][1] = z;
  }
}

/* Length of the valid UTF-8 character at s of a code point >= U+00A0 (no
 * C1 controls), or 0. */
static size_t printable_utf8(const unsigned char *s) {
  uint32_t cp;
  size_t l;
  if ((s[0] & 0xe0) == 0xc0)
    cp = s[0] & 0x1f, l = 2;
  else if ((s[0] & 0xf0) == 0xe0)
    cp = s[0] & 0x0f, l = 3;
  else if ((s[0] & 0xf8) == 0xf0)
    cp = s[0] & 0x07, l = 4;
  else
    return 0;
  for (size_t i = 1; i < l; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    cp = cp << 6 | (s[i] & 0x3f);
  }
  static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min_cp[l] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || cp < 0xa0)
    return 0;
  return l;
}

const char *fsdpc__tok_esc(char *buf, size_t cap, const char *s) {
  const unsigned char *p = (const unsigned char *)(s ? s : "(null)");
  size_t k = 0;
  if (cap < 8) {
    if (cap)
      buf[0] = '\0';
    return buf;
  }
  size_t room = cap - 4; /* keeps space for "..." and the NUL */
  while (*p) {
    char tmp[8];
    size_t tl, adv = 1;
    size_t u = *p >= 0x80 ? printable_utf8(p) : 0;
    if (u) {
      memcpy(tmp, p, u);
      tl = adv = u;
    } else if (*p == '\n') {
      memcpy(tmp, "\\n", 2), tl = 2;
    } else if (*p == '\t') {
      memcpy(tmp, "\\t", 2), tl = 2;
    } else if (*p == '\\') {
      memcpy(tmp, "\\\\", 2), tl = 2;
    } else if (*p < 0x20 || *p >= 0x7f) {
      snprintf(tmp, sizeof tmp, "\\x%02x", *p), tl = 4;
    } else {
      tmp[0] = (char)*p, tl = 1;
    }
    if (k + tl > room) {
      memcpy(buf + k, "...", 3);
      k += 3;
      break;
    }
    memcpy(buf + k, tmp, tl);
    k += tl;
    p += adv;
  }
  buf[k] = '\0';
  return buf;
}
