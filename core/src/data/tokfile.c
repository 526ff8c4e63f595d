/* Token file reader: mmap plus complete validation on open, so that the
 * loader can index the arrays without further checks. The writer lives in
 * tokfile_writer.c; the byte layout is described in tokfile.h. */
#define _GNU_SOURCE
#include "data/tokfile.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/crc32.h"

static void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++)
    v |= (uint32_t)p[i] << (8 * i);
  return v;
}
static uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

void fsdpc__tokfile_header_encode(const fsdpc_tokfile_header *h,
                                  uint8_t out[FSDPC_TOKFILE_HEADER_BYTES]) {
  memset(out, 0, FSDPC_TOKFILE_HEADER_BYTES);
  memcpy(out, h->magic, 8);
  put_u32(out + 8, h->version);
  put_u32(out + 12, h->token_bytes);
  put_u32(out + 16, h->vocab_size);
  put_u32(out + 20, h->eos_id);
  put_u32(out + 24, h->flags);
  put_u32(out + 28, h->header_crc);
  put_u64(out + 32, h->n_tokens);
  put_u64(out + 40, h->n_docs);
  put_u32(out + 48, h->payload_crc);
  for (int i = 0; i < 3; i++)
    put_u32(out + 52 + 4 * i, h->reserved[i]);
}

void fsdpc__tokfile_header_decode(const uint8_t in[FSDPC_TOKFILE_HEADER_BYTES],
                                  fsdpc_tokfile_header *h) {
  memcpy(h->magic, in, 8);
  h->version = get_u32(in + 8);
  h->token_bytes = get_u32(in + 12);
  h->vocab_size = get_u32(in + 16);
  h->eos_id = get_u32(in + 20);
  h->flags = get_u32(in + 24);
  h->header_crc = get_u32(in + 28);
  h->n_tokens = get_u64(in + 32);
  h->n_docs = get_u64(in + 40);
  h->payload_crc = get_u32(in + 48);
  for (int i = 0; i < 3; i++)
    h->reserved[i] = get_u32(in + 52 + 4 * i);
}

uint32_t fsdpc__tokfile_header_crc(const uint8_t in[FSDPC_TOKFILE_HEADER_BYTES]) {
  uint8_t tmp[FSDPC_TOKFILE_HEADER_BYTES];
  memcpy(tmp, in, sizeof tmp);
  put_u32(tmp + 28, 0);
  return fsdpc__crc32(0, tmp, sizeof tmp);
}

static int host_is_little_endian(void) {
  const uint16_t one = 1;
  return *(const uint8_t *)&one == 1;
}

/* Checks the header fields and computes where each array starts. */
static fsdpc_status check_header(const char *path, const fsdpc_tokfile_header *h,
                                 uint64_t file_bytes, uint64_t *offsets_at, uint64_t *mask_at,
                                 fsdpc_err *err) {
  if (h->token_bytes != 2 && h->token_bytes != 4)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: bad header: token width %" PRIu32 " bytes (expected 2 or 4)", path,
                       h->token_bytes);
  if (h->vocab_size == 0 || (h->token_bytes == 2 && h->vocab_size > 65536u))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: bad header: vocab_size %" PRIu32 " does not fit %" PRIu32
                       "-byte tokens",
                       path, h->vocab_size, h->token_bytes);
  if (h->eos_id >= h->vocab_size)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: bad header: eos_id %" PRIu32 " is not below vocab_size %" PRIu32, path,
                       h->eos_id, h->vocab_size);
  if (h->flags & ~FSDPC_TOKFILE_KNOWN_FLAGS)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: bad header: unknown flags 0x%" PRIx32 " (written by a newer fsdpc?)",
                       path, h->flags);
  /* Sizes in 64-bit with overflow checks: a corrupt count must not wrap. */
  uint64_t tok_bytes, off_bytes, expected;
  int ovf = __builtin_mul_overflow(h->n_tokens, (uint64_t)h->token_bytes, &tok_bytes);
  ovf |= __builtin_add_overflow(tok_bytes, (uint64_t)7, &tok_bytes);
  tok_bytes &= ~(uint64_t)7;
  ovf |= h->n_docs == UINT64_MAX;
  ovf |= __builtin_mul_overflow(h->n_docs + 1, (uint64_t)8, &off_bytes);
  ovf |= __builtin_add_overflow((uint64_t)FSDPC_TOKFILE_HEADER_BYTES, tok_bytes, offsets_at);
  ovf |= __builtin_add_overflow(*offsets_at, off_bytes, mask_at);
  uint64_t mask_bytes =
      (h->flags & FSDPC_TOKFILE_HAS_MASK) ? h->n_tokens / 8 + (h->n_tokens % 8 != 0) : 0;
  ovf |= __builtin_add_overflow(*mask_at, mask_bytes, &expected);
  if (ovf || expected > file_bytes)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: truncated: header (%" PRIu64 " tokens, %" PRIu64
                       " documents) needs %" PRIu64 "%s bytes, file has %" PRIu64,
                       path, h->n_tokens, h->n_docs, ovf ? UINT64_MAX : expected, ovf ? "+" : "",
                       file_bytes);
  if (expected < file_bytes)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: %" PRIu64 " unexpected trailing bytes (header accounts for %" PRIu64
                       " of %" PRIu64 ")",
                       path, file_bytes - expected, expected, file_bytes);
  return FSDPC_OK;
}

static fsdpc_status check_payload(const fsdpc_tokfile *tf, fsdpc_err *err) {
  const fsdpc_tokfile_header *h = &tf->hdr;
  const char *path = tf->path;
  uint32_t crc = fsdpc__crc32(0, tf->map + FSDPC_TOKFILE_HEADER_BYTES,
                              tf->map_bytes - FSDPC_TOKFILE_HEADER_BYTES);
  if (crc != h->payload_crc)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: checksum mismatch: payload CRC-32 is 0x%08" PRIx32
                       ", header says 0x%08" PRIx32 " (file corrupt; regenerate it)",
                       path, crc, h->payload_crc);
  const uint64_t *off = tf->offsets;
  if (off[0] != 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: bad offsets: document 0 starts at %" PRIu64 ", expected 0", path,
                       off[0]);
  for (uint64_t d = 0; d < h->n_docs; d++)
    if (off[d + 1] < off[d] || off[d + 1] > h->n_tokens)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: offsets out of order: document %" PRIu64 " spans [%" PRIu64
                         ", %" PRIu64 ") of %" PRIu64 " tokens",
                         path, d, off[d], off[d + 1], h->n_tokens);
  if (off[h->n_docs] != h->n_tokens)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "%s: bad offsets: documents end at %" PRIu64 " but the file has %" PRIu64
                       " tokens",
                       path, off[h->n_docs], h->n_tokens);
  int64_t n = (int64_t)h->n_tokens;
  for (int64_t i = 0; i < n; i++) {
    uint32_t t = (uint32_t)fsdpc__tokfile_token(tf, i);
    if (t >= h->vocab_size)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "%s: token id %" PRIu32 " at position %" PRId64
                         " is not below vocab_size %" PRIu32,
                         path, t, i, h->vocab_size);
  }
  return FSDPC_OK;
}

fsdpc_status fsdpc__tokfile_open(const char *path, fsdpc_tokfile **out, fsdpc_err *err) {
  *out = NULL;
  if (!host_is_little_endian())
    return fsdpc__fail(err, FSDPC_UNSUPPORTED,
                       "%s: token files are little-endian and this host is not", path);
  fsdpc_status st;
  fsdpc_tokfile *tf = calloc(1, sizeof *tf);
  if (!tf || !(tf->path = strdup(path))) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: out of memory", path);
    goto fail_alloc;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
  if (fd < 0) {
    st = fsdpc__fail(err, errno == ENOENT ? FSDPC_INVALID_USAGE : FSDPC_SYSTEM_ERROR,
                     "%s: cannot open token file: %s", path, strerror(errno));
    goto fail_alloc;
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: not a regular file", path);
    goto fail_fd;
  }
  if (sb.st_size < FSDPC_TOKFILE_HEADER_BYTES) {
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "%s: truncated: %lld bytes, shorter than the %d-byte header", path,
                     (long long)sb.st_size, FSDPC_TOKFILE_HEADER_BYTES);
    goto fail_fd;
  }
  tf->map_bytes = (size_t)sb.st_size;
  void *map = mmap(NULL, tf->map_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) {
    st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s: mmap failed: %s", path, strerror(errno));
    goto fail_fd;
  }
  close(fd);
  tf->map = map;

  fsdpc_tokfile_header *h = &tf->hdr;
  fsdpc__tokfile_header_decode(tf->map, h);
  if (memcmp(h->magic, FSDPC_TOKFILE_MAGIC, 8) != 0) {
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "%s: bad magic: not an fsdpc token file (make one with `fsdpc data "
                     "tokenize` or `fsdpc data synth`)",
                     path);
    goto fail_map;
  }
  if (h->version != FSDPC_TOKFILE_VERSION) {
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "%s: bad version %" PRIu32 ": this fsdpc reads token file version %u", path,
                     h->version, FSDPC_TOKFILE_VERSION);
    goto fail_map;
  }
  uint32_t hcrc = fsdpc__tokfile_header_crc(tf->map);
  if (hcrc != h->header_crc) {
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "%s: header checksum mismatch: CRC-32 is 0x%08" PRIx32
                     ", header says 0x%08" PRIx32 " (file corrupt; regenerate it)",
                     path, hcrc, h->header_crc);
    goto fail_map;
  }
  uint64_t offsets_at = 0, mask_at = 0;
  if ((st = check_header(path, h, tf->map_bytes, &offsets_at, &mask_at, err)) != FSDPC_OK)
    goto fail_map;
  tf->tokens = tf->map + FSDPC_TOKFILE_HEADER_BYTES;
  /* offsets_at is a multiple of 8 and the map is page aligned. */
  tf->offsets = (const uint64_t *)(const void *)(tf->map + offsets_at);
  tf->mask = (h->flags & FSDPC_TOKFILE_HAS_MASK) ? tf->map + mask_at : NULL;
  if ((st = check_payload(tf, err)) != FSDPC_OK)
    goto fail_map;
  *out = tf;
  return FSDPC_OK;

fail_map:
  munmap((void *)tf->map, tf->map_bytes);
  tf->map = NULL;
  goto fail_alloc;
fail_fd:
  close(fd);
fail_alloc:
  if (tf)
    free(tf->path);
  free(tf);
  return st;
}

void fsdpc__tokfile_close(fsdpc_tokfile *tf) {
  if (!tf)
    return;
  if (tf->map)
    munmap((void *)tf->map, tf->map_bytes);
  free(tf->path);
  free(tf);
}

void fsdpc__tokfile_read(const fsdpc_tokfile *tf, int64_t start, int64_t n, int32_t *out) {
  if (tf->hdr.token_bytes == 2) {
    const uint16_t *t = (const uint16_t *)(const void *)tf->tokens + start;
    for (int64_t i = 0; i < n; i++)
      out[i] = t[i];
  } else {
    const uint32_t *t = (const uint32_t *)(const void *)tf->tokens + start;
    for (int64_t i = 0; i < n; i++)
      out[i] = (int32_t)t[i];
  }
}
