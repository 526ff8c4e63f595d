/* Tokenizer interface: a table of function pointers (ggml-backend style) so
 * that the byte tokenizer here and a Hugging Face BPE tokenizer later
 * (tokenizer.json via cJSON, pre-split via PCRE2) are interchangeable.
 *
 * Ids are int32_t. encode() never adds BOS/EOS: documents in a token file
 * are stored bare and the loader inserts EOS between them. decode() writes
 * nothing for special tokens (BOS/EOS/PAD) and fails on an id outside the
 * vocabulary. */
#ifndef FSDPC_DATA_TOKENIZER_H
#define FSDPC_DATA_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

typedef struct fsdpc_tokenizer fsdpc_tokenizer;

typedef struct fsdpc_tokenizer_vtable {
  const char *name; /* "byte", "bpe" */
  /* Encodes text (len bytes, any bytes incl. NUL) into ids (cap). Writes the
   * number of ids to *n_out; if cap is too small, fails with INVALID_USAGE
   * and *n_out is the capacity needed. */
  fsdpc_status (*encode)(const fsdpc_tokenizer *tok, const char *text, size_t len, int32_t *ids,
                         int64_t cap, int64_t *n_out, fsdpc_err *err);
  /* Decodes ids (n) into out (cap bytes, not NUL-terminated). Writes the byte
   * count to *len_out; if cap is too small, fails and *len_out is the size
   * needed. */
  fsdpc_status (*decode)(const fsdpc_tokenizer *tok, const int32_t *ids, int64_t n, char *out,
                         size_t cap, size_t *len_out, fsdpc_err *err);
  int32_t (*bos)(const fsdpc_tokenizer *tok); /* -1 if none */
  int32_t (*eos)(const fsdpc_tokenizer *tok);
  int32_t (*pad)(const fsdpc_tokenizer *tok);        /* (optional) NULL = none */
  int32_t (*vocab_size)(const fsdpc_tokenizer *tok); /* ids are < vocab_size */
  /* (optional) Upper bound on ids per input byte; NULL means 1. Lets callers
   * size the encode buffer without a retry. */
  int32_t (*max_ids_per_byte)(const fsdpc_tokenizer *tok);
  void (*destroy)(fsdpc_tokenizer *tok);
  /* (optional) Encodes into malloc'd ids and, if offsets is non-NULL,
   * malloc'd byte ranges [begin, end) of text, one per id. NULL: the wrapper
   * encodes and gives each id the whole text's range (only the byte
   * tokenizer, whose wrapper gives exact ranges, leaves it NULL). */
  fsdpc_status (*encode_offsets)(const fsdpc_tokenizer *tok, const char *text, size_t len,
                                 int32_t **ids, size_t (**offsets)[2], int64_t *n, fsdpc_err *err);
  int (*adds_bos)(const fsdpc_tokenizer *tok);                        /* (optional) NULL = 0 */
  int (*adds_eos)(const fsdpc_tokenizer *tok);                        /* (optional) NULL = 0 */
  int32_t (*token_id)(const fsdpc_tokenizer *tok, const char *token); /* (optional) */
  const char *(*token_str)(const fsdpc_tokenizer *tok, int32_t id);   /* (optional) */
} fsdpc_tokenizer_vtable;

struct fsdpc_tokenizer {
  const fsdpc_tokenizer_vtable *vt;
  void *impl; /* owned by the implementation */
};

/* Wrappers: callers use these, never the table, so optional members are
 * checked in one place. */
fsdpc_status fsdpc__tokenizer_encode(const fsdpc_tokenizer *tok, const char *text, size_t len,
                                     int32_t *ids, int64_t cap, int64_t *n_out, fsdpc_err *err);
/* Encodes into a malloc'd array the caller frees. */
fsdpc_status fsdpc__tokenizer_encode_alloc(const fsdpc_tokenizer *tok, const char *text, size_t len,
                                           int32_t **ids_out, int64_t *n_out, fsdpc_err *err);
fsdpc_status fsdpc__tokenizer_decode(const fsdpc_tokenizer *tok, const int32_t *ids, int64_t n,
                                     char *out, size_t cap, size_t *len_out, fsdpc_err *err);
int32_t fsdpc__tokenizer_bos(const fsdpc_tokenizer *tok);
int32_t fsdpc__tokenizer_eos(const fsdpc_tokenizer *tok);
int32_t fsdpc__tokenizer_pad(const fsdpc_tokenizer *tok);
int32_t fsdpc__tokenizer_vocab_size(const fsdpc_tokenizer *tok);
const char *fsdpc__tokenizer_name(const fsdpc_tokenizer *tok);
void fsdpc__tokenizer_destroy(fsdpc_tokenizer *tok); /* NULL is a no-op */

/* Byte-level tokenizer (tokenizer_byte.c): ids 0..255 are the bytes
 * themselves, then BOS = 256, EOS = 257, PAD = 258; vocab_size 259. A model
 * may use a larger vocab (e.g. 320, rounded for kernels); ids 259.. are
 * never produced and are refused by decode. */
#define FSDPC_BYTE_BOS 256
#define FSDPC_BYTE_EOS 257
#define FSDPC_BYTE_PAD 258
#define FSDPC_BYTE_VOCAB 259
fsdpc_status fsdpc__tokenizer_byte_create(fsdpc_tokenizer **out, fsdpc_err *err);

/* Hugging Face tokenizer.json BPE tokenizer (tokenizer_bpe*.c, docs/data.md):
 * byte-level files (GPT-2, Llama 3: Split regex + ByteLevel) and Llama 2's
 * SentencePiece-converted files (byte fallback). Anything else is refused
 * with one line naming the file and the component. */
#define FSDPC_BPE_AUTO (-2) /* id not given: find it by name */
typedef struct fsdpc_bpe_opts {
  /* 1 (default): special added tokens written in the text (e.g.
   * "<|eot_id|>") become their ids, so chat-formatted training text keeps its
   * control tokens. 0: they are encoded as the plain text they spell.
   * Non-special added tokens are always matched. */
  int32_t parse_special;
  /* BOS/EOS/PAD: an id >= 0 (or -1 for none) wins; else a token name; else
   * the name in tokenizer_config.json beside tokenizer.json; else the first
   * added token named <|begin_of_text|>, <s>, <|startoftext|> (BOS),
   * <|end_of_text|>, </s>, <|endoftext|> (EOS), <pad> (PAD); else none (-1). */
  int32_t bos_id, eos_id, pad_id;                /* FSDPC_BPE_AUTO by default */
  const char *bos_token, *eos_token, *pad_token; /* NULL by default; borrowed */
} fsdpc_bpe_opts;
void fsdpc__bpe_opts_default(fsdpc_bpe_opts *o);
/* path: a tokenizer.json, or a folder holding one. opts NULL = defaults. */
fsdpc_status fsdpc__tokenizer_bpe_create(const char *path, const fsdpc_bpe_opts *opts,
                                         fsdpc_tokenizer **out, fsdpc_err *err);

/* A tokenizer.json image in memory (default options, no
 * tokenizer_config.json); name stands for the file in messages. For the
 * fuzzer and tests. */
fsdpc_status fsdpc__tokenizer_bpe_create_mem(const char *name, const char *json, size_t len,
                                             fsdpc_tokenizer **out, fsdpc_err *err);

/* SentencePiece tokenizer.model through libsentencepiece (tokenizer_sp.c +
 * tokenizer_sp_shim.cc). tokenizer_config.json beside the file gives
 * add_bos_token/add_eos_token, the special token names and
 * added_tokens_decoder (matched in the text before SentencePiece sees it). */
fsdpc_status fsdpc__tokenizer_sp_create(const char *model_path, fsdpc_tokenizer **out,
                                        fsdpc_err *err);

/* Config-free factory: "byte" is the byte tokenizer; anything else is a path
 * to a tokenizer.json or a folder holding one (default BPE options), or a
 * folder with only a tokenizer.model, or a tokenizer.model file: the same as
 * fsdpc__tokenizer_load. */
fsdpc_status fsdpc__tokenizer_open(const char *path_or_name, fsdpc_tokenizer **out, fsdpc_err *err);

/* ---- the model-folder interface (docs/data.md, "Tokenizers") ----------- */

/* Opens the tokenizer of an HF model folder: tokenizer.json (BPE byte-level
 * as Llama 3 / Qwen2, BPE byte-fallback as Llama 2, BPE with Metaspace
 * pre-tokenizer/decoder as Mistral and many Llama-2-family files) or, when
 * the folder ships only tokenizer.model, SentencePiece through
 * libsentencepiece (tokenizer_sp.cc, a C++ shim with an extern "C" face that
 * catches every exception). Reads tokenizer_config.json: add_bos_token /
 * add_eos_token, bos/eos/pad/unk token strings, added_tokens_decoder. Also
 * accepts a path to a tokenizer.json or tokenizer.model file, or "byte". */
fsdpc_status fsdpc__tokenizer_load(const char *path, fsdpc_tokenizer **out, fsdpc_err *err);
/* Encodes text exactly as HF `tokenizer(text, add_special_tokens=False)`
 * does: special/added tokens written in the text become their ids. offsets
 * (optional, may be NULL): for each id, the byte range [begin, end) of text
 * it came from (HF's offset_mapping in bytes; a token covering part of a
 * multi-byte character gets the character's range). ids/offsets malloc'd,
 * caller frees (both NULL when *n is 0 or on failure). */
fsdpc_status fsdpc__tokenizer_encode_offsets(const fsdpc_tokenizer *tok, const char *text,
                                             size_t len, int32_t **ids, size_t (**offsets)[2],
                                             int64_t *n, fsdpc_err *err);
/* add_bos_token / add_eos_token from tokenizer_config.json (or the
 * tokenizer.json post_processor TemplateProcessing), as HF applies with
 * add_special_tokens=True. */
int fsdpc__tokenizer_adds_bos(const fsdpc_tokenizer *tok);
int fsdpc__tokenizer_adds_eos(const fsdpc_tokenizer *tok);
/* Id of a token by its exact string (added/special, or vocab as written in
 * the tokenizer file, e.g. "\u0120the" for byte-level files), -1 if none. */
int32_t fsdpc__tokenizer_token_id(const fsdpc_tokenizer *tok, const char *token);
/* The string of an id for display, as HF convert_ids_to_tokens gives it
 * (special tokens as their text, e.g. "<|eot_id|>"); NULL if out of range.
 * Owned by the tokenizer. The string comes from a file: escape it
 * (fsdpc__tok_esc) before printing it to a terminal. */
const char *fsdpc__tokenizer_token_str(const fsdpc_tokenizer *tok, int32_t id);

/* Widens each [begin, end) of offs (n) to whole UTF-8 characters of text,
 * as HF's character offsets are; an empty range at a character takes that
 * character (SentencePiece gives byte pieces and a dummy prefix no bytes). */
void fsdpc__tok_widen_offsets(const char *text, size_t len, size_t (*offs)[2], int64_t n);

/* Escapes an untrusted string (from a tokenizer or config file) for a
 * one-line message: control bytes, DEL, C1 controls, backslash and invalid
 * UTF-8 become \n, \t, \xHH; cut to cap - 1 bytes with "..." at the end.
 * Returns buf. */
const char *fsdpc__tok_esc(char *buf, size_t cap, const char *s);

#endif
