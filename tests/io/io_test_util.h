/* Helpers for the io tests: scratch directories and hand-made safetensors
 * files (the header is given as JSON text, so tests can write bad ones). */
#ifndef FSDPC_TESTS_IO_UTIL_H
#define FSDPC_TESTS_IO_UTIL_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Makes a fresh directory under the build tree; its path goes into buf. */
static inline char *io_tmpdir(char *buf, size_t cap) {
  snprintf(buf, cap, "%s/tests/io/tmp-XXXXXX", FSDPC_BINARY_DIR);
  ck_assert_ptr_nonnull(mkdtemp(buf));
  return buf;
}

static inline void io_write_bytes(const char *path, const void *data, size_t len) {
  FILE *fp = fopen(path, "wb");
  ck_assert_msg(fp != NULL, "cannot create %s", path);
  ck_assert_uint_eq(fwrite(data, 1, len, fp), len);
  ck_assert_int_eq(fclose(fp), 0);
}

/* 8-byte length (hlen_override if non-zero), the header, then data. */
static inline void io_write_st(const char *path, const char *header, const void *data,
                               size_t data_len, uint64_t hlen_override) {
  size_t hl = strlen(header);
  uint64_t n = hlen_override ? hlen_override : hl;
  size_t total = 8 + hl + data_len;
  unsigned char *buf = malloc(total);
  for (int i = 0; i < 8; i++)
    buf[i] = (unsigned char)(n >> (8 * i));
  memcpy(buf + 8, header, hl);
  if (data_len)
    memcpy(buf + 8 + hl, data, data_len);
  io_write_bytes(path, buf, total);
  free(buf);
}

/* Asserts that msg contains every non-NULL needle and is one line. */
static inline void io_assert_msg(const char *msg, const char *a, const char *b, const char *c) {
  const char *needles[3] = {a, b, c};
  for (int i = 0; i < 3; i++)
    if (needles[i])
      ck_assert_msg(strstr(msg, needles[i]), "'%s' not in: %s", needles[i], msg);
  ck_assert_msg(strchr(msg, '\n') == NULL, "message is not one line: %s", msg);
}

#endif
