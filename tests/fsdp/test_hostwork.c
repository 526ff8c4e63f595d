/* The host worker (core/src/fsdp/hostwork.h): fsdpc__hostwork_done says,
 * without blocking, whether a task is done, which the offloaded gather's
 * upload polls while it follows an update (fsdp/offload.c); after a failed
 * task it says done (so a poll never spins forever) and wait returns the
 * failure. A task here blocks until the test releases it. */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>

#include "fsdp/hostwork.h"
#include "util/err.h"

static atomic_int released, ran;

static fsdpc_status task(void *arg, int kind, int unit, fsdpc_err *err) {
  (void)arg;
  (void)unit;
  while (kind == 0 && !atomic_load(&released))
    ; /* held until the test lets it go */
  atomic_fetch_add(&ran, 1);
  if (kind == 2)
    return fsdpc__fail(err, FSDPC_INTERNAL_ERROR, "task failed on purpose");
  return FSDPC_OK;
}

START_TEST(done_without_blocking) {
  fsdpc_hostwork *w = NULL;
  fsdpc_err err = {0};
  atomic_store(&released, 0);
  atomic_store(&ran, 0);
  ck_assert_int_eq(fsdpc__hostwork_create(task, NULL, &w, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__hostwork_done(w, 0), 1); /* no task: done */
  uint64_t s1 = 0, s2 = 0;
  ck_assert_int_eq(fsdpc__hostwork_push(w, 0, 0, &s1, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__hostwork_push(w, 1, 0, &s2, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__hostwork_done(w, s1), 0); /* held */
  ck_assert_int_eq(fsdpc__hostwork_done(w, s2), 0);
  atomic_store(&released, 1);
  ck_assert_int_eq(fsdpc__hostwork_wait(w, s2, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__hostwork_done(w, s1), 1);
  ck_assert_int_eq(fsdpc__hostwork_done(w, s2), 1);
  ck_assert_int_eq(atomic_load(&ran), 2);
  fsdpc__hostwork_destroy(w);
}
END_TEST

START_TEST(done_after_a_failure) {
  fsdpc_hostwork *w = NULL;
  fsdpc_err err = {0};
  atomic_store(&released, 0);
  atomic_store(&ran, 0);
  ck_assert_int_eq(fsdpc__hostwork_create(task, NULL, &w, &err), FSDPC_OK);
  uint64_t s1 = 0, s2 = 0, s3 = 0;
  ck_assert_int_eq(fsdpc__hostwork_push(w, 0, 0, &s1, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__hostwork_push(w, 2, 0, &s2, &err), FSDPC_OK); /* fails */
  ck_assert_int_eq(fsdpc__hostwork_push(w, 1, 0, &s3, &err), FSDPC_OK); /* skipped */
  ck_assert_int_eq(fsdpc__hostwork_done(w, s3), 0);
  atomic_store(&released, 1);
  while (!fsdpc__hostwork_done(w, s3)) /* the poll ends although s3 never runs */
    ;
  ck_assert_int_eq(fsdpc__hostwork_wait(w, s3, &err), FSDPC_INTERNAL_ERROR);
  ck_assert_str_eq(err.msg, "task failed on purpose");
  ck_assert_int_eq(atomic_load(&ran), 2);
  fsdpc__hostwork_destroy(w);
}
END_TEST

int main(void) {
  Suite *s = suite_create("fsdp_hostwork");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, done_without_blocking);
  tcase_add_test(tc, done_after_a_failure);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
