/* Byte-level tokenizer: every byte is its own id (0..255), so any input,
 * including invalid UTF-8 and NUL, round-trips exactly. Specials follow the
 * bytes: BOS 256, EOS 257, PAD 258. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/tokenizer.h"

static fsdpc_status byte_encode(const fsdpc_tokenizer *tok, const char *text, size_t len,
                                int32_t *ids, int64_t cap, int64_t *n_out, fsdpc_err *err) {
  *n_out = (int64_t)len;
  if ((int64_t)len > cap)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "byte tokenizer: %zu bytes need %zu ids, buffer holds %" PRId64, len, len,
                       cap);
  const unsigned char *p = (const unsigned char *)text;
  for (size_t i = 0; i < len; i++)
    ids[i] = p[i];
  return FSDPC_OK;
}

static fsdpc_status byte_decode(const fsdpc_tokenizer *tok, const int32_t *ids, int64_t n,
                                char *out, size_t cap, size_t *len_out, fsdpc_err *err) {
  size_t len = 0;
  for (int64_t i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] >= FSDPC_BYTE_VOCAB)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "byte tokenizer: id %" PRId32 " at position %" PRId64
                         " is not in its vocabulary [0, %d)",
                         ids[i], i, FSDPC_BYTE_VOCAB);
    len += ids[i] < 256;
  }
  *len_out = len;
  if (len > cap)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "byte tokenizer: decoding needs %zu bytes, buffer holds %zu", len, cap);
  size_t k = 0;
  for (int64_t i = 0; i < n; i++)
    if (ids[i] < 256)
      out[k++] = (char)(unsigned char)ids[i];
  return FSDPC_OK;
}

static fsdpc_status byte_encode_offsets(const fsdpc_tokenizer *tok, const char *text, size_t len,
                                        int32_t **ids, size_t (**offsets)[2], int64_t *n,
                                        fsdpc_err *err) {
  *ids = malloc((len ? len : 1) * sizeof **ids);
  if (offsets)
    *offsets = malloc((len ? len : 1) * sizeof **offsets);
  if (!*ids || (offsets && !*offsets)) {
    free(*ids);
    *ids = NULL;
    if (offsets) {
      free(*offsets);
      *offsets = NULL;
    }
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "byte tokenizer: out of memory");
  }
  for (size_t i = 0; i < len; i++) {
    (*ids)[i] = (unsigned char)text[i];
    if (offsets) {
      (*offsets)[i][0] = i;
      (*offsets)[i][1] = i + 1;
    }
  }
  if (offsets) /* a byte of a multi-byte character gets the character's range */
    fsdpc__tok_widen_offsets(text, len, *offsets, (int64_t)len);
  *n = (int64_t)len;
  return FSDPC_OK;
}

/* Display names: printable ASCII bytes as themselves, other bytes as
 * <0xHH> (as SentencePiece's byte tokens), then the specials. */
static char byte_names[FSDPC_BYTE_VOCAB][8];

static void init_names(void) {
  for (int i = 0; i < 256; i++) {
    if (i > 0x20 && i < 0x7f)
      byte_names[i][0] = (char)i;
    else
      snprintf(byte_names[i], sizeof byte_names[i], "<0x%02X>", i);
  }
  strcpy(byte_names[FSDPC_BYTE_BOS], "<bos>");
  strcpy(byte_names[FSDPC_BYTE_EOS], "<eos>");
  strcpy(byte_names[FSDPC_BYTE_PAD], "<pad>");
}

static const char *byte_token_str(const fsdpc_tokenizer *tok, int32_t id) {
  return id >= 0 && id < FSDPC_BYTE_VOCAB ? byte_names[id] : NULL;
}

static int32_t byte_token_id(const fsdpc_tokenizer *tok, const char *s) {
  for (int32_t i = 0; i < FSDPC_BYTE_VOCAB; i++)
    if (strcmp(byte_names[i], s) == 0)
      return i;
  return -1;
}

static int32_t byte_bos(const fsdpc_tokenizer *tok) {
  return FSDPC_BYTE_BOS;
}
static int32_t byte_eos(const fsdpc_tokenizer *tok) {
  return FSDPC_BYTE_EOS;
}
static int32_t byte_pad(const fsdpc_tokenizer *tok) {
  return FSDPC_BYTE_PAD;
}
static int32_t byte_vocab(const fsdpc_tokenizer *tok) {
  return FSDPC_BYTE_VOCAB;
}
static void byte_destroy(fsdpc_tokenizer *tok) {
  free(tok);
}

static const fsdpc_tokenizer_vtable byte_vtable = {
    /* .name             = */ "byte",
    /* .encode           = */ byte_encode,
    /* .decode           = */ byte_decode,
    /* .bos              = */ byte_bos,
    /* .eos              = */ byte_eos,
    /* .pad              = */ byte_pad,
    /* .vocab_size       = */ byte_vocab,
    /* .max_ids_per_byte = */ NULL,
    /* .destroy          = */ byte_destroy,
    /* .encode_offsets   = */ byte_encode_offsets,
    /* .adds_bos         = */ NULL,
    /* .adds_eos         = */ NULL,
    /* .token_id         = */ byte_token_id,
    /* .token_str        = */ byte_token_str,
};

fsdpc_status fsdpc__tokenizer_byte_create(fsdpc_tokenizer **out, fsdpc_err *err) {
  *out = NULL;
  fsdpc_tokenizer *tok = calloc(1, sizeof *tok);
  if (!tok)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "byte tokenizer: out of memory");
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, init_names);
  tok->vt = &byte_vtable;
  *out = tok;
  return FSDPC_OK;
}
