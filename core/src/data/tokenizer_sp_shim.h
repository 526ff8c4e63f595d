/* The extern "C" face of libsentencepiece (tokenizer_sp_shim.cc). Every
 * call catches every C++ exception and reports failure as a return value
 * with a message in msg (cap bytes); nothing C++ crosses this line. */
#ifndef FSDPC_DATA_TOKENIZER_SP_SHIM_H
#define FSDPC_DATA_TOKENIZER_SP_SHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fsdpc_spm fsdpc_spm;

/* Loads a serialized ModelProto (the bytes of a tokenizer.model). Returns 0
 * and *out, or -1 with msg. */
int fsdpc__spm_load(const char *data, size_t len, fsdpc_spm **out, char *msg, size_t cap);
void fsdpc__spm_free(fsdpc_spm *m); /* NULL is a no-op */
int32_t fsdpc__spm_size(const fsdpc_spm *m);
/* Special ids from the model (-1 if none). */
int32_t fsdpc__spm_bos(const fsdpc_spm *m);
int32_t fsdpc__spm_eos(const fsdpc_spm *m);
int32_t fsdpc__spm_pad(const fsdpc_spm *m);
int32_t fsdpc__spm_unk(const fsdpc_spm *m);
/* Id of a piece, -1 if the vocab lacks it. */
int32_t fsdpc__spm_piece_id(const fsdpc_spm *m, const char *piece);
/* The piece of id (NUL-terminated, owned by the model) or NULL. */
const char *fsdpc__spm_id_piece(const fsdpc_spm *m, int32_t id);
/* 1 if id is a control piece (<s>, </s>) or the unknown piece. */
int fsdpc__spm_is_control(const fsdpc_spm *m, int32_t id);
/* Encodes text; *ids and *spans (byte ranges of text) malloc'd, the caller
 * frees. Returns 0, or -1 with msg. */
int fsdpc__spm_encode(const fsdpc_spm *m, const char *text, size_t len, int32_t **ids,
                      size_t (**spans)[2], int64_t *n, char *msg, size_t cap);
/* Decodes ids (all < size) into malloc'd *out (*len bytes). */
int fsdpc__spm_decode(const fsdpc_spm *m, const int32_t *ids, int64_t n, char **out, size_t *len,
                      char *msg, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
