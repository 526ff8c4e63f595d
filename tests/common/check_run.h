/* The end of a Check test's main(): runs the suite and turns its failures
 * into the exit status ctest reads. */
#ifndef FSDPC_TESTS_CHECK_RUN_H
#define FSDPC_TESTS_CHECK_RUN_H

#include <check.h>

static inline int run_suite(Suite *s) {
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}

#endif
