/* Token files: a tokenized corpus on disk, read by mmap.
 *
 * Byte layout (all integers little-endian; docs/data.md has the table):
 *
 *   [0, 64)            header (fsdpc_tokfile_header, fields below)
 *   [64, 64+N*W)       tokens: N ids, W = 2 bytes (u16) if vocab_size <= 65536
 *                      else 4 bytes (u32)
 *   zero padding to a multiple of 8
 *   (n_docs+1) * u64   document offsets: doc d is tokens [off[d], off[d+1]);
 *                      off[0] = 0, non-decreasing, off[n_docs] = N
 *   ceil(N/8) bytes    loss mask, only if FSDPC_TOKFILE_HAS_MASK: bit i%8 of
 *                      byte i/8 (LSB first) is 1 when token i is a training
 *                      target, 0 when it is context only (e.g. a prompt)
 *
 * The header carries a CRC-32 of itself (with that field zero) and a CRC-32 of the
 * payload (everything after the header), both checked on open. Documents are
 * stored without EOS; the loader inserts eos_id between them.
 *
 * The writer streams: tokens go to disk as they are appended; only the
 * offsets and mask bits stay in memory until finish(). It writes PATH.tmp and
 * renames it onto PATH, so a crash never leaves a half-written PATH. */
#ifndef FSDPC_DATA_TOKFILE_H
#define FSDPC_DATA_TOKFILE_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define FSDPC_TOKFILE_MAGIC "FSDPCTOK"
#define FSDPC_TOKFILE_VERSION 1u
#define FSDPC_TOKFILE_HEADER_BYTES 64
#define FSDPC_TOKFILE_HAS_MASK 1u /* flags bit 0 */
/* flags bit 1: every document is one whole example (a rendered conversation,
 * an instruction/response pair) that carries its own BOS and end tokens.
 * Written by `fsdpc data prepare`; the loader then inserts no EOS after a
 * document and, with packing "examples" or "none", never splits one.
 * Readers older than this bit refuse the file ("unknown flags"). */
#define FSDPC_TOKFILE_EXAMPLES 2u
/* flags bit 2: documents 2k, 2k+1 are a preference pair (chosen, rejected),
 * trained by a preference objective (loader.h, "Pairs"). */
#define FSDPC_TOKFILE_PAIRS 4u
#define FSDPC_TOKFILE_KNOWN_FLAGS                                                                  \
  (FSDPC_TOKFILE_HAS_MASK | FSDPC_TOKFILE_EXAMPLES | FSDPC_TOKFILE_PAIRS)

typedef struct fsdpc_tokfile_header {
  char magic[8];        /* "FSDPCTOK", no NUL */
  uint32_t version;     /* FSDPC_TOKFILE_VERSION */
  uint32_t token_bytes; /* 2 (u16) or 4 (u32) */
  uint32_t vocab_size;  /* every token id is < vocab_size */
  uint32_t eos_id;      /* < vocab_size */
  uint32_t flags;       /* FSDPC_TOKFILE_HAS_MASK | FSDPC_TOKFILE_EXAMPLES */
  uint32_t header_crc;  /* CRC-32 of the 64 header bytes, this field zero */
  uint64_t n_tokens;    /* N */
  uint64_t n_docs;      /* D */
  uint32_t payload_crc; /* CRC-32 of bytes [64, file end) */
  uint32_t reserved[3]; /* zero; a prepared-data cache file keeps its key's first 12 bytes here */
} fsdpc_tokfile_header;

/* ---- reader ------------------------------------------------------------ */

typedef struct fsdpc_tokfile {
  char *path; /* owned copy, for messages */
  fsdpc_tokfile_header hdr;
  const uint8_t *map; /* whole file, read-only */
  size_t map_bytes;
  const uint8_t *tokens;   /* (N) of token_bytes each */
  const uint64_t *offsets; /* (D+1) */
  const uint8_t *mask;     /* (ceil(N/8)) or NULL when the file has none */
} fsdpc_tokfile;

/* Maps path read-only and validates it completely: size, magic, version,
 * header fields and CRC, payload CRC, offsets (start 0, monotonic, end N) and
 * every token id < vocab_size. On failure err holds one line that starts with
 * the path: "data/x.tok: truncated: header says 1064 bytes, file has 1000". */
fsdpc_status fsdpc__tokfile_open(const char *path, fsdpc_tokfile **out, fsdpc_err *err);
void fsdpc__tokfile_close(fsdpc_tokfile *tf);

static inline int64_t fsdpc__tokfile_n_tokens(const fsdpc_tokfile *tf) {
  return (int64_t)tf->hdr.n_tokens;
}
static inline int64_t fsdpc__tokfile_n_docs(const fsdpc_tokfile *tf) {
  return (int64_t)tf->hdr.n_docs;
}
/* Token i (0 <= i < N). The file is little-endian; open() refuses big-endian
 * hosts, so a plain load is correct. */
static inline int32_t fsdpc__tokfile_token(const fsdpc_tokfile *tf, int64_t i) {
  if (tf->hdr.token_bytes == 2)
    return ((const uint16_t *)(const void *)tf->tokens)[i];
  return (int32_t)((const uint32_t *)(const void *)tf->tokens)[i];
}
/* 1 if token i is a training target (always 1 in a file without a mask). */
static inline int fsdpc__tokfile_mask(const fsdpc_tokfile *tf, int64_t i) {
  return tf->mask ? (tf->mask[i >> 3] >> (i & 7)) & 1 : 1;
}
/* Copies tokens [start, start+n) into out (n). Caller keeps it in range. */
void fsdpc__tokfile_read(const fsdpc_tokfile *tf, int64_t start, int64_t n, int32_t *out);

/* ---- writer ------------------------------------------------------------ */

typedef struct fsdpc_tokfile_writer fsdpc_tokfile_writer;

/* Starts PATH.tmp. with_mask = 1 stores the per-token loss mask (then every
 * append passes one); token width follows vocab_size (u16 up to 65536).
 * with_mask may also carry FSDPC_TOKFILE_EXAMPLES (value 2) to mark the file
 * as whole examples; bit 0 of it still says whether a mask is stored. */
fsdpc_status fsdpc__tokfile_writer_create(const char *path, uint32_t vocab_size, uint32_t eos_id,
                                          int32_t with_mask, fsdpc_tokfile_writer **out,
                                          fsdpc_err *err);
/* Records tag (12 bytes, the prepared-data cache key) in the header's
 * reserved words; readers ignore it, the cache checks it. */
void fsdpc__tokfile_writer_set_tag(fsdpc_tokfile_writer *w, const uint8_t tag[12]);
/* Appends tokens (n) to the current document. mask (n) is 0/1 per token, or
 * NULL for "all targets". Ids must be < vocab_size. */
fsdpc_status fsdpc__tokfile_writer_append(fsdpc_tokfile_writer *w, const int32_t *tokens,
                                          const uint8_t *mask, int64_t n, fsdpc_err *err);
/* Closes the current document (an empty document is allowed). */
fsdpc_status fsdpc__tokfile_writer_end_doc(fsdpc_tokfile_writer *w, fsdpc_err *err);
/* Shorthand: append + end_doc. */
fsdpc_status fsdpc__tokfile_writer_add_doc(fsdpc_tokfile_writer *w, const int32_t *tokens,
                                           const uint8_t *mask, int64_t n, fsdpc_err *err);
/* Writes offsets, mask and header, fsyncs and renames PATH.tmp onto PATH.
 * Tokens appended after the last end_doc are an error. */
fsdpc_status fsdpc__tokfile_writer_finish(fsdpc_tokfile_writer *w, fsdpc_err *err);
/* Frees w; if finish() did not succeed, removes PATH.tmp. NULL is a no-op. */
void fsdpc__tokfile_writer_destroy(fsdpc_tokfile_writer *w);

/* Header (de)serialisation, exposed for tests that forge corrupt files. */
void fsdpc__tokfile_header_encode(const fsdpc_tokfile_header *h,
                                  uint8_t out[FSDPC_TOKFILE_HEADER_BYTES]);
void fsdpc__tokfile_header_decode(const uint8_t in[FSDPC_TOKFILE_HEADER_BYTES],
                                  fsdpc_tokfile_header *h);
/* CRC-32 of an encoded header with its header_crc field taken as 0. */
uint32_t fsdpc__tokfile_header_crc(const uint8_t in[FSDPC_TOKFILE_HEADER_BYTES]);

#endif
