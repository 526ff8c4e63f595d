/* Helpers shared by the data tests: a per-process scratch directory under
 * the build tree, whole-file read/write, and a one-line-error assertion. */
#ifndef FSDPC_TESTS_DATA_TESTUTIL_H
#define FSDPC_TESTS_DATA_TESTUTIL_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_run.h" /* run_suite */
#include "fsdpc/fsdpc.h"

/* Returns "<build>/data-test-tmp-<pid>-<name>" (static buffer, one per call
 * site is enough for these tests: callers copy it). */
static inline void tmp_path(char *out, size_t cap, const char *name) {
  snprintf(out, cap, "%s/data-test-tmp-%d-%s", FSDPC_BINARY_DIR, (int)getpid(), name);
}

static inline unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc((size_t)n + 1);
  ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return buf;
}

static inline void spit(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  ck_assert_msg(f != NULL, "cannot create %s", path);
  ck_assert_uint_eq(fwrite(data, 1, len, f), len);
  fclose(f);
}

/* The error is set, is one line, and contains every given fragment. */
#define ASSERT_ONE_LINE_ERROR(err, ...)                                                            \
  do {                                                                                             \
    const char *frags_[] = {__VA_ARGS__};                                                          \
    ck_assert_int_ne((err).status, FSDPC_OK);                                                      \
    ck_assert_msg(strchr((err).msg, '\n') == NULL, "multi-line error: %s", (err).msg);             \
    for (size_t k_ = 0; k_ < sizeof frags_ / sizeof frags_[0]; k_++)                               \
      ck_assert_msg(strstr((err).msg, frags_[k_]) != NULL, "error '%s' lacks '%s'", (err).msg,     \
                    frags_[k_]);                                                                   \
  } while (0)

#endif
