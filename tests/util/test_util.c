/* Status table, error helpers and memory accounting. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/err.h"
#include "util/fs.h"
#include "util/mem.h"

START_TEST(status_names_are_fixed) {
  ck_assert_int_eq(FSDPC_OK, 0);
  ck_assert_int_eq(FSDPC_INVALID_USAGE, 1);
  ck_assert_int_eq(FSDPC_SYSTEM_ERROR, 2);
  ck_assert_int_eq(FSDPC_INTERNAL_ERROR, 3);
  ck_assert_int_eq(FSDPC_UNSUPPORTED, 4);
  ck_assert_int_eq(FSDPC_TIMEOUT, 5);
  ck_assert_str_eq(fsdpc_status_name(FSDPC_TIMEOUT), "TIMEOUT");
  ck_assert_str_eq(fsdpc_status_name(99), "UNKNOWN_STATUS");
}
END_TEST

START_TEST(fail_and_prefix) {
  fsdpc_err err;
  fsdpc__err_clear(&err);
  ck_assert_int_eq(fsdpc__fail(&err, FSDPC_INVALID_USAGE, "bad %s", "thing"),
                   FSDPC_INVALID_USAGE);
  fsdpc__err_prefix(&err, "cfg.yaml:%d:%d", 3, 7);
  ck_assert_str_eq(err.msg, "cfg.yaml:3:7: bad thing");
  ck_assert_int_eq(err.status, FSDPC_INVALID_USAGE);
}
END_TEST

START_TEST(mem_accounting) {
  fsdpc_mem_stats before, mid, after;
  fsdpc__mem_stats(&before);
  void *p = fsdpc__mem_alloc(FSDPC_MEM_GRADS, 1000);
  ck_assert_ptr_nonnull(p);
  fsdpc__mem_stats(&mid);
  ck_assert_int_eq(mid.current[FSDPC_MEM_GRADS] - before.current[FSDPC_MEM_GRADS], 1000);
  ck_assert_int_ge(mid.peak[FSDPC_MEM_GRADS], mid.current[FSDPC_MEM_GRADS]);
  fsdpc__mem_free(FSDPC_MEM_GRADS, p, 1000);
  fsdpc__mem_stats(&after);
  ck_assert_int_eq(after.current[FSDPC_MEM_GRADS], before.current[FSDPC_MEM_GRADS]);
  ck_assert_int_eq(after.peak[FSDPC_MEM_GRADS], mid.peak[FSDPC_MEM_GRADS]);
  fsdpc__mem_reset_peak();
  fsdpc__mem_stats(&after);
  ck_assert_int_eq(after.peak[FSDPC_MEM_GRADS], after.current[FSDPC_MEM_GRADS]);
}
END_TEST

/* Entries of dir other than . and .. */
static int entries(const char *dir) {
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  closedir(d);
  return n;
}

/* The save-rate probe writes into the folder (or its nearest existing
 * parent, creating nothing) and removes its file. */
START_TEST(write_rate_probe) {
  char dir[] = "/tmp/fsdpc-rate-XXXXXX", sub[64];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  ck_assert_double_gt(fsdpc__write_rate_mib_s(dir, 1 << 20), 0.0);
  snprintf(sub, sizeof sub, "%s/not/yet", dir);
  ck_assert_double_gt(fsdpc__write_rate_mib_s(sub, 1 << 20), 0.0);
  ck_assert_int_eq(entries(dir), 0); /* no probe left, no folder made */
  ck_assert_double_eq(fsdpc__write_rate_mib_s(dir, 0), 0.0);
  ck_assert_double_eq(fsdpc__write_rate_mib_s("/proc/no-such-folder", 1 << 20), 0.0);
  rmdir(dir);
}
END_TEST

int main(void) {
  Suite *s = suite_create("util");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, status_names_are_fixed);
  tcase_add_test(tc, fail_and_prefix);
  tcase_add_test(tc, mem_accounting);
  tcase_add_test(tc, write_rate_probe);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
