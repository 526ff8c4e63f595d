/* The TensorBoard event file's wire format: the Event field numbers are
 * upstream's (tensorboard/compat/proto/event.proto), decoded here by hand
 * from the bytes fsdpc__tb_open and fsdpc__tb_scalars write. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "obs/tensorboard.h"

static char dir[] = "/tmp/fsdpc-tb-unit.XXXXXX";

static void setup(void) {
  ck_assert_ptr_nonnull(mkdtemp(dir));
}
static void teardown(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(cmd), 0);
  strcpy(dir, "/tmp/fsdpc-tb-unit.XXXXXX");
}

static uint64_t varint(const uint8_t *b, size_t *i) {
  uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    uint8_t x = b[(*i)++];
    v |= (uint64_t)(x & 0x7F) << shift;
    if (!(x & 0x80))
      return v;
  }
}

/* The body of record k (0-based) of the file at path, into buf; its size. */
static size_t record(const char *path, int k, uint8_t *buf, size_t cap) {
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  size_t n = 0;
  for (int r = 0; r <= k; r++) {
    uint8_t head[12], tail[4];
    ck_assert_uint_eq(fread(head, 1, 12, f), 12);
    n = 0;
    for (int i = 0; i < 8; i++)
      n |= (size_t)head[i] << (8 * i);
    ck_assert_uint_le(n, cap);
    ck_assert_uint_eq(fread(buf, 1, n, f), n);
    ck_assert_uint_eq(fread(tail, 1, 4, f), 4);
  }
  fclose(f);
  return n;
}

/* The value of the varint field `want` of the message in b[lo, hi), or of
 * its length-delimited field as [*sub_lo, *sub_hi); fails on a field that
 * is not one of `allowed` (bit i set = field i may appear). */
static int find_field(const uint8_t *b, size_t lo, size_t hi, uint32_t want, uint32_t allowed,
                      uint64_t *value, size_t *sub_lo, size_t *sub_hi) {
  int found = 0;
  for (size_t i = lo; i < hi;) {
    uint64_t key = varint(b, &i);
    uint32_t f = (uint32_t)(key >> 3), wt = (uint32_t)(key & 7);
    ck_assert_msg(f < 32 && (allowed >> f) & 1, "field %u written (not an upstream field here)", f);
    if (wt == 0) {
      uint64_t v = varint(b, &i);
      if (f == want)
        *value = v, found = 1;
    } else if (wt == 1) {
      i += 8;
    } else if (wt == 5) {
      i += 4;
    } else {
      ck_assert_uint_eq(wt, 2);
      size_t n = (size_t)varint(b, &i);
      if (f == want)
        *sub_lo = i, *sub_hi = i + n, found = 1;
      i += n;
    }
  }
  return found;
}

START_TEST(session_log_start_is_field_7) {
  fsdpc_err err = {0};
  fsdpc_tb *tb = NULL;
  ck_assert_int_eq(fsdpc__tb_open(dir, 45, &tb, &err), FSDPC_OK);
  const char *tags[] = {"train/loss"};
  double vals[] = {0.5};
  ck_assert_int_eq(fsdpc__tb_scalars(tb, 46, 0, tags, vals, 1, &err), FSDPC_OK);
  char path[4096];
  snprintf(path, sizeof path, "%s", fsdpc__tb_path(tb));
  fsdpc__tb_close(tb);

  /* Event: 1 wall_time, 2 step, 3 file_version, 5 summary, 7 session_log. */
  const uint32_t event_fields = 1u << 1 | 1u << 2 | 1u << 3 | 1u << 5 | 1u << 7;
  uint8_t buf[4096];
  uint64_t v = 0;
  size_t lo = 0, hi = 0;
  size_t n = record(path, 1, buf, sizeof buf);
  ck_assert_msg(find_field(buf, 0, n, 7, event_fields, &v, &lo, &hi),
                "the second record has no session_log (upstream field 7)");
  uint64_t status = 0;
  ck_assert(find_field(buf, lo, hi, 1, 1u << 1 | 1u << 2 | 1u << 3, &status, &lo, &hi));
  ck_assert_uint_eq(status, 1); /* SessionStatus START */
  uint64_t step = 0;
  ck_assert(find_field(buf, 0, n, 2, event_fields, &step, &lo, &hi));
  ck_assert_uint_eq(step, 46); /* the first step this start trains */

  n = record(path, 2, buf, sizeof buf);
  ck_assert_msg(find_field(buf, 0, n, 5, event_fields, &v, &lo, &hi), "no summary (field 5)");
  ck_assert(find_field(buf, 0, n, 2, event_fields, &step, &lo, &hi));
  ck_assert_uint_eq(step, 46);
}
END_TEST

int main(void) {
  Suite *s = suite_create("tensorboard");
  TCase *tc = tcase_create("wire");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, session_log_start_is_field_7);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
