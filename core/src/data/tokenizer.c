/* Tokenizer wrappers: the one place that checks optional vtable members. */
#include "data/tokenizer.h"

#include <stdlib.h>
#include <string.h>

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

int32_t fsdpc__tokenizer_bos(const fsdpc_tokenizer *tok) { return tok->vt->bos(tok); }
int32_t fsdpc__tokenizer_eos(const fsdpc_tokenizer *tok) { return tok->vt->eos(tok); }
int32_t fsdpc__tokenizer_pad(const fsdpc_tokenizer *tok) {
  return tok->vt->pad ? tok->vt->pad(tok) : -1;
}
int32_t fsdpc__tokenizer_vocab_size(const fsdpc_tokenizer *tok) { return tok->vt->vocab_size(tok); }
const char *fsdpc__tokenizer_name(const fsdpc_tokenizer *tok) { return tok->vt->name; }

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
  if (strcmp(path_or_name, "byte") == 0)
    return fsdpc__tokenizer_byte_create(out, err);
  return fsdpc__tokenizer_bpe_create(path_or_name, NULL, out, err);
}
