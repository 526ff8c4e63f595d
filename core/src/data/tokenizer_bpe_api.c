/* Hugging Face BPE tokenizer (tokenizer.json): decode, the interface table
 * and creation (tokenizer.json + tokenizer_config.json). Encoding is in
 * tokenizer_bpe.c, loading in tokenizer_bpe_load.c. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/tokenizer_bpe_internal.h"

static fsdpc_status bpe_decode(const fsdpc_tokenizer *tok, const int32_t *ids, int64_t n, char *out,
                               size_t cap, size_t *len_out, fsdpc_err *err) {
  const bpe *b = tok->impl;
  size_t k = 0;
  int sp = b->mode == BPE_SENTENCEPIECE, first = b->prepend != BPE_PREPEND_NEVER;
  /* Writes byte c, counting past cap; SentencePiece's Strip decoder drops
   * one leading space of the whole text. */
#define PUT(c)                                                                                     \
  do {                                                                                             \
    char c_ = (char)(c);                                                                           \
    if (!(sp && first && c_ == ' ')) {                                                             \
      if (k < cap)                                                                                 \
        out[k] = c_;                                                                               \
      k++;                                                                                         \
    }                                                                                              \
    first = 0;                                                                                     \
  } while (0)
  for (int64_t i = 0; i < n; i++) {
    int32_t id = ids[i];
    if (id < 0 || id >= b->vocab_size || b->len[id] < 0)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "bpe tokenizer: id %" PRId32 " at position %" PRId64
                         " is not in its vocabulary [0, %d)",
                         id, i, b->vocab_size);
    if (id == b->bos || id == b->eos || id == b->pad)
      continue;
    const char *s = b->arena + b->off[id];
    int32_t l = b->len[id];
    if (sp && b->fallback_byte[id] >= 0) {
      PUT(b->fallback_byte[id]);
    } else if (sp && !b->is_added[id]) {
      for (int32_t j = 0; j < l; j++) {
        if (j + 3 <= l && memcmp(s + j, "\xe2\x96\x81", 3) == 0) {
          PUT(' ');
          j += 2;
        } else {
          PUT(s[j]);
        }
      }
    } else {
      for (int32_t j = 0; j < l; j++)
        PUT(s[j]);
    }
  }
#undef PUT
  *len_out = k;
  if (k > cap)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "bpe tokenizer: decoding needs %zu bytes, buffer holds %zu", k, cap);
  return FSDPC_OK;
}

static int32_t bpe_bos(const fsdpc_tokenizer *tok) {
  return ((const bpe *)tok->impl)->bos;
}
static int32_t bpe_eos(const fsdpc_tokenizer *tok) {
  return ((const bpe *)tok->impl)->eos;
}
static int32_t bpe_pad(const fsdpc_tokenizer *tok) {
  return ((const bpe *)tok->impl)->pad;
}
static int32_t bpe_vocab(const fsdpc_tokenizer *tok) {
  return ((const bpe *)tok->impl)->vocab_size;
}
/* Byte-level: each id covers at least one (normalized) input byte. SentencePiece adds one
 * "▁" per piece, so at most len + pieces <= 2 * len ids. */
static int32_t bpe_max_ids_per_byte(const fsdpc_tokenizer *tok) {
  const bpe *b = tok->impl;
  /* NFC can lengthen UTF-8 text up to 3 times (Unicode's stability bound). */
  return b->mode == BPE_SENTENCEPIECE ? 2 : b->nfc ? 3 : 1;
}
static int bpe_adds_bos(const fsdpc_tokenizer *tok) {
  return ((const bpe *)tok->impl)->adds_bos;
}
static int bpe_adds_eos(const fsdpc_tokenizer *tok) {
  return ((const bpe *)tok->impl)->adds_eos;
}

/* Added tokens by content, then the vocab as written in the file (for
 * byte-level files "\u0120the"), then the vocab by raw bytes (" the"). */
static int32_t bpe_token_id(const fsdpc_tokenizer *tok, const char *s) {
  const bpe *b = tok->impl;
  int32_t id = fsdpc__bpe_added_find(b, s);
  for (int32_t i = 0; id < 0 && i < b->vocab_size; i++)
    if (b->str[i] && strcmp(b->str[i], s) == 0)
      id = i;
  return id >= 0 ? id : fsdpc__bpe_str_map_get(b, s, strlen(s));
}

static const char *bpe_token_str(const fsdpc_tokenizer *tok, int32_t id) {
  const bpe *b = tok->impl;
  return id >= 0 && id < b->vocab_size ? b->str[id] : NULL;
}

static void bpe_destroy(fsdpc_tokenizer *tok) {
  fsdpc__bpe_free(tok->impl);
  free(tok);
}

static const fsdpc_tokenizer_vtable bpe_vtable = {
    /* .name             = */ "bpe",
    /* .encode           = */ fsdpc__bpe_encode,
    /* .decode           = */ bpe_decode,
    /* .bos              = */ bpe_bos,
    /* .eos              = */ bpe_eos,
    /* .pad              = */ bpe_pad,
    /* .vocab_size       = */ bpe_vocab,
    /* .max_ids_per_byte = */ bpe_max_ids_per_byte,
    /* .destroy          = */ bpe_destroy,
    /* .encode_offsets   = */ fsdpc__bpe_encode_offsets,
    /* .adds_bos         = */ bpe_adds_bos,
    /* .adds_eos         = */ bpe_adds_eos,
    /* .token_id         = */ bpe_token_id,
    /* .token_str        = */ bpe_token_str,
};

void fsdpc__bpe_opts_default(fsdpc_bpe_opts *o) {
  memset(o, 0, sizeof *o);
  o->parse_special = 1;
  o->bos_id = o->eos_id = o->pad_id = FSDPC_BPE_AUTO;
}

/* Resolves one special id: an explicit id, else an explicit name, else the
 * name tokenizer_config.json gives, else the first well-known name found. */
static fsdpc_status pick_special(bpe *b, const char *what, int32_t id, const char *name,
                                 const char *cfg_name, const char *const *known, int32_t *out,
                                 fsdpc_err *err) {
  *out = -1;
  if (id != FSDPC_BPE_AUTO) {
    if (id < -1 || id >= b->vocab_size || (id >= 0 && b->len[id] < 0))
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: %s id %" PRId32 " is not in the vocabulary [0, %" PRId32 ")", b->path,
                         what, id, b->vocab_size);
    *out = id;
    return FSDPC_OK;
  }
  const char *want = name ? name : cfg_name;
  if (want) {
    *out = fsdpc__bpe_added_find(b, want);
    if (*out < 0)
      *out = fsdpc__bpe_str_map_get(b, want, strlen(want));
    if (*out < 0) {
      char e[96];
      return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: %s token '%s'%s is not in the vocabulary",
                         b->path, what, fsdpc__tok_esc(e, sizeof e, want),
                         name ? "" : " (from tokenizer_config.json)");
    }
    return FSDPC_OK;
  }
  for (int i = 0; known[i] && *out < 0; i++)
    *out = fsdpc__bpe_added_find(b, known[i]);
  return FSDPC_OK;
}

static fsdpc_status finish(bpe *b, const fsdpc_bpe_opts *opts, const char *dir,
                           fsdpc_tokenizer **out, fsdpc_err *err);

fsdpc_status fsdpc__tokenizer_bpe_create(const char *path, const fsdpc_bpe_opts *opts,
                                         fsdpc_tokenizer **out, fsdpc_err *err) {
  *out = NULL;
  fsdpc_bpe_opts def;
  if (!opts) {
    fsdpc__bpe_opts_default(&def);
    opts = &def;
  }
  /* A folder means its tokenizer.json; tokenizer_config.json beside the file
   * names BOS/EOS/PAD when present (as transformers reads it). */
  size_t plen = strlen(path);
  char *file = malloc(plen + 16), *dir = malloc(plen + 2);
  if (!file || !dir) {
    free(file);
    free(dir);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "bpe tokenizer: out of memory");
  }
  struct stat stt;
  if (stat(path, &stt) == 0 && S_ISDIR(stt.st_mode)) {
    memcpy(dir, path, plen + 1);
    memcpy(file, path, plen);
    memcpy(file + plen, "/tokenizer.json", 16);
  } else {
    memcpy(file, path, plen + 1);
    const char *slash = strrchr(path, '/');
    size_t dlen = !slash ? 0 : slash == path ? 1 : (size_t)(slash - path);
    memcpy(dir, slash ? path : ".", slash ? dlen : 1);
    dir[slash ? dlen : 1] = '\0';
  }
  bpe *b;
  fsdpc_status st = fsdpc__bpe_load(file, &b, err);
  free(file);
  if (!st)
    st = finish(b, opts, dir, out, err);
  free(dir);
  return st;
}

fsdpc_status fsdpc__tokenizer_bpe_create_mem(const char *name, const char *json, size_t len,
                                             fsdpc_tokenizer **out, fsdpc_err *err) {
  *out = NULL;
  fsdpc_bpe_opts def;
  fsdpc__bpe_opts_default(&def);
  bpe *b;
  FSDPC_TRY(fsdpc__bpe_load_mem(name, json, len, &b, err));
  return finish(b, &def, NULL, out, err);
}

/* Completes a loaded tokenizer: options, tokenizer_config.json in dir
 * (NULL: none), BOS/EOS/PAD. Frees b on failure. */
static fsdpc_status finish(bpe *b, const fsdpc_bpe_opts *opts, const char *dir,
                           fsdpc_tokenizer **out, fsdpc_err *err) {
  fsdpc_status st = FSDPC_OK;
  b->parse_special = opts->parse_special;
  fsdpc__bpe_config_names names = {.add_bos = -1, .add_eos = -1};
  if (dir)
    st = fsdpc__bpe_read_config(dir, &names, err);
  static const char *const bos_known[] = {"<|begin_of_text|>", "<s>", "<|startoftext|>", NULL};
  static const char *const eos_known[] = {"<|end_of_text|>", "</s>", "<|endoftext|>", NULL};
  static const char *const pad_known[] = {"<pad>", NULL};
  if (!st)
    st = pick_special(b, "BOS", opts->bos_id, opts->bos_token, names.bos, bos_known, &b->bos, err);
  if (!st)
    st = pick_special(b, "EOS", opts->eos_id, opts->eos_token, names.eos, eos_known, &b->eos, err);
  if (!st)
    st = pick_special(b, "PAD", opts->pad_id, opts->pad_token, names.pad, pad_known, &b->pad, err);
  /* tokenizer_config.json's add_bos_token/add_eos_token win over the
   * post_processor, as transformers' Llama tokenizers rebuild it from them. */
  if (names.add_bos >= 0)
    b->adds_bos = names.add_bos;
  if (names.add_eos >= 0)
    b->adds_eos = names.add_eos;
  if (!st)
    fsdpc__bpe_apply_llama_class(b, &names);
  fsdpc__bpe_config_names_free(&names);
  fsdpc_tokenizer *tok = st ? NULL : calloc(1, sizeof *tok);
  if (!st && !tok)
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "bpe tokenizer: out of memory");
  if (st) {
    fsdpc__bpe_free(b);
    return st;
  }
  tok->vt = &bpe_vtable;
  tok->impl = b;
  *out = tok;
  return FSDPC_OK;
}
