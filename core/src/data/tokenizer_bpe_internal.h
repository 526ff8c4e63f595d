/* Hugging Face tokenizer.json BPE tokenizer: the in-memory tables shared by
 * the loader (tokenizer_bpe_load.c), the maps (tokenizer_bpe_map.c) and the
 * encoder/decoder (tokenizer_bpe.c).
 *
 * Token strings are kept as the raw bytes they stand for: in byte-level
 * files (GPT-2, Llama 3) the loader undoes the bytes-to-unicode mapping once,
 * so encode hashes raw byte slices and decode concatenates raw bytes. */
#ifndef FSDPC_DATA_TOKENIZER_BPE_INTERNAL_H
#define FSDPC_DATA_TOKENIZER_BPE_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>

#include "data/tokenizer.h"

/* ---- maps (tokenizer_bpe_map.c) ---------------------------------------- */

/* Byte string -> id, open addressing with linear probing. The strings live
 * in the tokenizer's arena; the map stores ids and compares through it. */
typedef struct bpe_str_map {
  int32_t *slots; /* (mask+1), -1 = empty */
  uint32_t mask;  /* capacity - 1, capacity a power of two */
} bpe_str_map;

/* (left id, right id) -> (rank, merged id). */
typedef struct bpe_merge_slot {
  uint64_t key; /* left << 32 | right; UINT64_MAX = empty */
  int32_t rank;
  int32_t new_id;
} bpe_merge_slot;

typedef struct bpe_merge_map {
  bpe_merge_slot *slots; /* (mask+1) */
  uint32_t mask;
  int64_t count;
} bpe_merge_map;

struct bpe;
uint64_t fsdpc__bpe_hash_bytes(const char *s, size_t n);
/* Capacity for n entries at load <= 1/2. Returns 0 on out-of-memory. */
int fsdpc__bpe_str_map_init(bpe_str_map *m, int64_t n);
/* Inserts id (whose bytes are already in b's arena) into b->vocab. Returns
 * the id already stored under the same bytes, or -1 if the bytes were new. */
int32_t fsdpc__bpe_str_map_put(struct bpe *b, int32_t id);
/* Id of the vocab token whose bytes are s (n), or -1. */
int32_t fsdpc__bpe_str_map_get(const struct bpe *b, const char *s, size_t n);
void fsdpc__bpe_str_map_free(bpe_str_map *m);

int fsdpc__bpe_merge_map_init(bpe_merge_map *m, int64_t n);
/* Returns 0 if (left, right) was already present (then the new rank replaces it). */
int fsdpc__bpe_merge_map_put(bpe_merge_map *m, int32_t left, int32_t right, int32_t rank,
                             int32_t new_id);
/* Returns the slot or NULL. */
static inline const bpe_merge_slot *fsdpc__bpe_merge_map_get(const bpe_merge_map *m, int32_t left,
                                                             int32_t right) {
  uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
  uint64_t h = key * UINT64_C(0x9E3779B97F4A7C15);
  for (uint32_t i = (uint32_t)(h >> 32) & m->mask;; i = (i + 1) & m->mask) {
    const bpe_merge_slot *s = &m->slots[i];
    if (s->key == key)
      return s;
    if (s->key == UINT64_MAX)
      return NULL;
  }
}
void fsdpc__bpe_merge_map_free(bpe_merge_map *m);

/* ---- the tokenizer ----------------------------------------------------- */

typedef enum bpe_mode {
  BPE_BYTE_LEVEL,   /* GPT-2 / Llama 3 / Qwen2: regex split + bytes-to-unicode */
  BPE_SENTENCEPIECE /* Llama 2 / Mistral: " " -> U+2581, prepend U+2581, byte fallback */
} bpe_mode;

/* When a SentencePiece-style piece gets a leading U+2581. */
typedef enum bpe_prepend {
  BPE_PREPEND_NEVER,
  BPE_PREPEND_ALWAYS, /* every piece between added tokens */
  BPE_PREPEND_FIRST   /* only the piece that starts the text */
} bpe_prepend;

typedef struct bpe_added {
  char *content; /* raw bytes as in the JSON (added tokens are not byte-level mapped) */
  int32_t len;
  int32_t id;
  int32_t special;
} bpe_added;

typedef struct bpe {
  char *path; /* owned, for messages */
  bpe_mode mode;
  int32_t vocab_size; /* 1 + largest id in the vocab or added tokens */
  int32_t ignore_merges;
  int32_t parse_special;
  int32_t bos, eos, pad; /* -1 = none */
  int32_t unk;           /* -1 = none (SentencePiece mode only) */
  /* SentencePiece mode: Llama 2's normalizer prepends unconditionally;
   * the Metaspace pre-tokenizer (Mistral v0.3) only when the piece does not
   * already start with U+2581 (prepend_if_absent), and may split the piece
   * into words before each U+2581 (split). */
  bpe_prepend prepend;
  int32_t prepend_if_absent;
  int32_t split;
  int32_t nfc; /* byte-level: normalizer NFC (Qwen2) */
  /* add_bos_token / add_eos_token: tokenizer_config.json, else the
   * post_processor's TemplateProcessing; 0 when neither says. */
  int32_t adds_bos, adds_eos;

  /* Token bytes by id: [off[id], off[id] + len[id]) of arena; len -1 = unused. */
  char *arena;
  int64_t arena_len, arena_cap;
  int64_t *off;      /* (vocab_size) */
  int32_t *len;      /* (vocab_size) */
  char **str;        /* (vocab_size) token as written in the file, NUL-terminated; NULL unused */
  uint8_t *is_added; /* (vocab_size) 1 for added tokens (decode skips BOS/EOS/PAD only) */
  bpe_str_map vocab; /* model.vocab only */
  bpe_merge_map merges;
  int32_t byte_id[256];   /* byte-level: id of each single byte; SentencePiece: <0xXX>, -1 none */
  int32_t byte_fallback;  /* SentencePiece: unknown characters become <0xXX> tokens */
  int16_t *fallback_byte; /* (vocab_size) SentencePiece: the byte an <0xXX> id stands for, or -1 */

  /* Added tokens, matched longest first at each position. */
  bpe_added *added;
  int32_t n_added;
  int32_t *first_idx;       /* (n_added) indices into added, grouped by first byte, longest first */
  int32_t first_start[257]; /* first_idx[first_start[b] .. first_start[b+1]) start with byte b */

  pcre2_code *re; /* NULL = no regex split */
  int32_t jit;    /* 1 if re was JIT-compiled */
} bpe;

/* Parses a tokenizer.json (tokenizer_bpe_load.c). On success *out is fully
 * built except bos/eos/pad/parse_special and the adds_* flags from
 * tokenizer_config.json, which the caller sets. */
fsdpc_status fsdpc__bpe_load(const char *path, bpe **out, fsdpc_err *err);
/* The same over a JSON image in memory (path names it in messages). */
fsdpc_status fsdpc__bpe_load_mem(const char *path, const char *text, size_t len, bpe **out,
                                 fsdpc_err *err);
void fsdpc__bpe_free(bpe *b);
/* Adds bytes to the arena as token id's string. */
int fsdpc__bpe_arena_set(bpe *b, int32_t id, const char *s, size_t n);
/* Checks normalizer, pre_tokenizer and decoder (tokenizer_bpe_pipeline.c);
 * sets b->mode, the SentencePiece flags, b->nfc, and the split pattern
 * (*pattern, *literal; NULL = none) for byte-level files. */
struct cJSON;
fsdpc_status fsdpc__bpe_check_pipeline(bpe *b, const struct cJSON *root, const struct cJSON *model,
                                       const char **pattern, int *literal, fsdpc_err *err);
/* adds_bos/adds_eos from the post_processor (TemplateProcessing, alone or
 * in a Sequence). */
void fsdpc__bpe_read_post_processor(bpe *b, const struct cJSON *root);
/* BOS/EOS/PAD/UNK names and add_bos_token/add_eos_token from
 * DIR/tokenizer_config.json ("bos_token": "<s>" or {"content": "<s>", ...});
 * names NULL and flags -1 when the file or the key does not exist. */
typedef struct fsdpc__bpe_config_names {
  char *bos, *eos, *pad, *unk; /* owned */
  int32_t add_bos, add_eos;    /* -1 = not given */
  /* tokenizer_class is LlamaTokenizer(Fast): transformers 5 then rebuilds
   * the SentencePiece pipeline from legacy and add_prefix_space (-1 = not
   * given), whatever the tokenizer.json's normalizer says. */
  int32_t llama_class;
  int32_t legacy, add_prefix_space;
} fsdpc__bpe_config_names;
/* Applies transformers 5's LlamaTokenizer pipeline to a SentencePiece-mode
 * b: no normalizer, Metaspace(prepend_scheme = add_prefix_space (default
 * true) ? (legacy (default false) ? always : first) : never, split false). */
void fsdpc__bpe_apply_llama_class(bpe *b, const fsdpc__bpe_config_names *n);
fsdpc_status fsdpc__bpe_read_config(const char *dir, fsdpc__bpe_config_names *out, fsdpc_err *err);
void fsdpc__bpe_config_names_free(fsdpc__bpe_config_names *n);
/* Encoders (tokenizer_bpe.c), the vtable's encode and encode_offsets. */
fsdpc_status fsdpc__bpe_encode(const fsdpc_tokenizer *tok, const char *text, size_t len,
                               int32_t *ids, int64_t cap, int64_t *n_out, fsdpc_err *err);
fsdpc_status fsdpc__bpe_encode_offsets(const fsdpc_tokenizer *tok, const char *text, size_t len,
                                       int32_t **ids, size_t (**offsets)[2], int64_t *n,
                                       fsdpc_err *err);
/* Id of the added token whose content is s, or -1. */
int32_t fsdpc__bpe_added_find(const bpe *b, const char *s);

#endif
