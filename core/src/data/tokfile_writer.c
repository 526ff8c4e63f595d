/* Token file writer: streams tokens to a private temporary file beside PATH
 * (util/fs.h: created O_EXCL | O_NOFOLLOW, so never through a planted link),
 * keeps the document offsets and mask bits in memory (8 bytes per document,
 * 1 bit per token), and on finish writes them plus the header, then renames
 * the file into place. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/crc32.h"
#include "data/tokfile.h"
#include "util/fs.h"

struct fsdpc_tokfile_writer {
  char *path;
  fsdpc_out_file out; /* the temporary file and its target */
  FILE *f;            /* over out.fd */
  fsdpc_tokfile_header hdr;
  uint32_t crc; /* running CRC-32 of the payload written so far */
  uint64_t n_tokens;
  uint64_t *offsets; /* (n_docs+1) */
  uint64_t n_docs, offsets_cap;
  uint8_t *mask; /* (mask_cap) bits packed LSB first */
  uint64_t mask_cap;
  int finished;
};

static fsdpc_status put_bytes(fsdpc_tokfile_writer *w, const void *p, size_t n, fsdpc_err *err) {
  if (n && fwrite(p, 1, n, w->f) != n)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: write failed: %s", w->path, strerror(errno));
  w->crc = fsdpc__crc32(w->crc, p, n);
  return FSDPC_OK;
}

fsdpc_status fsdpc__tokfile_writer_create(const char *path, uint32_t vocab_size, uint32_t eos_id,
                                          int32_t with_mask, fsdpc_tokfile_writer **out,
                                          fsdpc_err *err) {
  *out = NULL;
  if (vocab_size == 0 || eos_id >= vocab_size)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: eos_id %" PRIu32 " must be below vocab_size %" PRIu32, path, eos_id,
                       vocab_size);
  fsdpc_status st;
  fsdpc_tokfile_writer *w = calloc(1, sizeof *w);
  if (w)
    w->out.fd = -1;
  if (!w || !(w->path = strdup(path)) || !(w->offsets = calloc(1024, sizeof *w->offsets))) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", path);
    goto fail;
  }
  w->offsets_cap = 1024;
  /* The folder the user named is created; errors name their path, not the
   * temporary file beside it. */
  if ((st = fsdpc__mkdir_parent(path, err)) != FSDPC_OK) {
    fsdpc__err_prefix(err, "%s", path);
    goto fail;
  }
  if ((st = fsdpc__out_create(path, &w->out, err)) != FSDPC_OK)
    goto fail;
  w->f = fdopen(w->out.fd, "wb");
  if (!w->f) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: cannot create: %s", path, strerror(errno));
    goto fail;
  }
  memcpy(w->hdr.magic, FSDPC_TOKFILE_MAGIC, 8);
  w->hdr.version = FSDPC_TOKFILE_VERSION;
  w->hdr.token_bytes = vocab_size <= 65536u ? 2 : 4;
  w->hdr.vocab_size = vocab_size;
  w->hdr.eos_id = eos_id;
  w->hdr.flags = (uint32_t)with_mask & FSDPC_TOKFILE_KNOWN_FLAGS;
  /* Placeholder header; the real one is written by finish(). */
  uint8_t zero[FSDPC_TOKFILE_HEADER_BYTES] = {0};
  if (fwrite(zero, 1, sizeof zero, w->f) != sizeof zero) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: write failed: %s", w->path, strerror(errno));
    goto fail;
  }
  *out = w;
  return FSDPC_OK;
fail:
  fsdpc__tokfile_writer_destroy(w);
  return st;
}

void fsdpc__tokfile_writer_set_tag(fsdpc_tokfile_writer *w, const uint8_t tag[12]) {
  for (int i = 0; i < 3; i++)
    w->hdr.reserved[i] = (uint32_t)tag[4 * i] | (uint32_t)tag[4 * i + 1] << 8 |
                         (uint32_t)tag[4 * i + 2] << 16 | (uint32_t)tag[4 * i + 3] << 24;
}

fsdpc_status fsdpc__tokfile_writer_append(fsdpc_tokfile_writer *w, const int32_t *tokens,
                                          const uint8_t *mask, int64_t n, fsdpc_err *err) {
  if (w->finished)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: append after finish", w->path);
  if (n < 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: negative token count %" PRId64, w->path, n);
  if (w->hdr.flags & FSDPC_TOKFILE_HAS_MASK) {
    uint64_t need = (w->n_tokens + (uint64_t)n + 7) / 8;
    if (need > w->mask_cap) {
      uint64_t cap = w->mask_cap ? w->mask_cap : 4096;
      while (cap < need)
        cap *= 2;
      uint8_t *m = realloc(w->mask, cap);
      if (!m)
        return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", w->path);
      memset(m + w->mask_cap, 0, cap - w->mask_cap);
      w->mask = m, w->mask_cap = cap;
    }
  }
  /* Validate everything first so that a refused append leaves no trace. */
  for (int64_t i = 0; i < n; i++)
    if (tokens[i] < 0 || (uint32_t)tokens[i] >= w->hdr.vocab_size)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: token id %" PRId32 " is outside the vocabulary [0, %" PRIu32 ")",
                         w->path, tokens[i], w->hdr.vocab_size);
  uint8_t buf[4096];
  size_t fill = 0, width = w->hdr.token_bytes;
  for (int64_t i = 0; i < n; i++) {
    uint32_t t = (uint32_t)tokens[i];
    for (size_t b = 0; b < width; b++)
      buf[fill++] = (uint8_t)(t >> (8 * b));
    if (w->mask && (!mask || mask[i])) {
      uint64_t k = w->n_tokens + (uint64_t)i;
      w->mask[k >> 3] |= (uint8_t)(1u << (k & 7));
    }
    if (fill == sizeof buf) {
      FSDPC_TRY(put_bytes(w, buf, fill, err));
      fill = 0;
    }
  }
  FSDPC_TRY(put_bytes(w, buf, fill, err));
  w->n_tokens += (uint64_t)n;
  return FSDPC_OK;
}

fsdpc_status fsdpc__tokfile_writer_end_doc(fsdpc_tokfile_writer *w, fsdpc_err *err) {
  if (w->finished)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: end_doc after finish", w->path);
  if (w->n_docs + 2 > w->offsets_cap) {
    uint64_t *o = realloc(w->offsets, 2 * w->offsets_cap * sizeof *o);
    if (!o)
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", w->path);
    w->offsets = o, w->offsets_cap *= 2;
  }
  w->offsets[++w->n_docs] = w->n_tokens;
  return FSDPC_OK;
}

fsdpc_status fsdpc__tokfile_writer_add_doc(fsdpc_tokfile_writer *w, const int32_t *tokens,
                                           const uint8_t *mask, int64_t n, fsdpc_err *err) {
  FSDPC_TRY(fsdpc__tokfile_writer_append(w, tokens, mask, n, err));
  return fsdpc__tokfile_writer_end_doc(w, err);
}

fsdpc_status fsdpc__tokfile_writer_finish(fsdpc_tokfile_writer *w, fsdpc_err *err) {
  if (w->finished)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: finished twice", w->path);
  if (w->offsets[w->n_docs] != w->n_tokens)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: %" PRIu64 " tokens appended after the last end_doc", w->path,
                       w->n_tokens - w->offsets[w->n_docs]);
  uint8_t pad[8] = {0};
  size_t tok_bytes = (size_t)(w->n_tokens * w->hdr.token_bytes);
  FSDPC_TRY(put_bytes(w, pad, (8 - tok_bytes % 8) % 8, err));
  /* Offsets are written little-endian byte by byte, independent of the host. */
  for (uint64_t d = 0; d <= w->n_docs; d++) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
      b[i] = (uint8_t)(w->offsets[d] >> (8 * i));
    FSDPC_TRY(put_bytes(w, b, 8, err));
  }
  if (w->hdr.flags & FSDPC_TOKFILE_HAS_MASK)
    FSDPC_TRY(put_bytes(w, w->mask, (size_t)((w->n_tokens + 7) / 8), err));
  w->hdr.n_tokens = w->n_tokens;
  w->hdr.n_docs = w->n_docs;
  w->hdr.payload_crc = w->crc;
  uint8_t hb[FSDPC_TOKFILE_HEADER_BYTES];
  w->hdr.header_crc = 0;
  fsdpc__tokfile_header_encode(&w->hdr, hb);
  w->hdr.header_crc = fsdpc__tokfile_header_crc(hb);
  fsdpc__tokfile_header_encode(&w->hdr, hb);
  if (fseek(w->f, 0, SEEK_SET) != 0 || fwrite(hb, 1, sizeof hb, w->f) != sizeof hb ||
      fflush(w->f) != 0 || fsync(fileno(w->f)) != 0)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: write failed: %s", w->path, strerror(errno));
  int rc = fclose(w->f);
  w->f = NULL;
  w->out.fd = -1; /* closed with the stream */
  if (rc != 0)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: close failed: %s", w->path, strerror(errno));
  FSDPC_TRY(fsdpc__out_commit(&w->out, err));
  w->finished = 1;
  return FSDPC_OK;
}

void fsdpc__tokfile_writer_destroy(fsdpc_tokfile_writer *w) {
  if (!w)
    return;
  if (w->f) {
    fclose(w->f);
    w->out.fd = -1;
  }
  fsdpc__out_abort(&w->out); /* removes the temporary file unless committed */
  free(w->path);
  free(w->offsets);
  free(w->mask);
  free(w);
}
