/* What the tests of the public API share: one suite run and the removal of
 * the scratch folder, each counted as a failure when it fails. */
#ifndef FSDPC_TESTS_API_TEST_H
#define FSDPC_TESTS_API_TEST_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

/* Runs su (forked per test unless nofork: tests sharing what an earlier
 * one made), removes tmpdir, and returns main's exit code. */
static inline int api_test_run(Suite *su, const char *tmpdir, int nofork) {
  SRunner *sr = srunner_create(su);
  if (nofork)
    srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0)
    failed++;
  return failed ? 1 : 0;
}

#endif
