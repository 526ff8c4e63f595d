/* Issue 43 item 5: log.dir/metrics.jsonl is never written through a link
 * fsdpc did not make (at its own name, at the NAME.tmp the resume trimming
 * used, or a hard link), a FIFO there is refused instead of hanging, the
 * trimming moves what it does not understand aside instead of deleting it,
 * and strings read back from the file are escaped. Every test failed before
 * the fix (the FIFO one by hanging: alarm() turns that into a failure). */
#define _GNU_SOURCE
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "obs/metrics.h"

static char dir[] = "/tmp/fsdpc-logdir.XXXXXX";
static char metrics[300], victim[300];
static const char victim_text[] = "the victim's own contents\n";

static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

static char *get(const char *path) {
  static char buf[8192];
  FILE *f = fopen(path, "r");
  if (!f)
    return NULL;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static fsdpc_status open_run(int64_t resumed_from, fsdpc_err *err) {
  fsdpc_run_record rr = {.config = "c.yaml", .resumed_from = resumed_from, .world = 1};
  char id[64];
  FILE *f = NULL;
  fsdpc_status st = fsdpc__metrics_open(dir, &rr, id, sizeof id, &f, err);
  if (f)
    fclose(f);
  return st;
}

static void setup(void) {
  strcpy(dir, "/tmp/fsdpc-logdir.XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(metrics, sizeof metrics, "%s/metrics.jsonl", dir);
  snprintf(victim, sizeof victim, "%s/victim.txt", dir);
  put(victim, victim_text);
  alarm(20); /* a blocking open of a FIFO must fail the test, not hang it */
}

static void teardown(void) {
  alarm(0);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(cmd), 0);
}

#define START0 "{\"event\":\"start\",\"run_id\":\"a\",\"resumed_from\":0,\"world\":1}\n"
#define STEP(n) "{\"step\":" #n ",\"loss\":1.5}\n"

START_TEST(link_at_metrics_jsonl_is_refused) {
  ck_assert_int_eq(symlink(victim, metrics), 0);
  fsdpc_err err = {0};
  ck_assert_int_ne(open_run(0, &err), FSDPC_OK);
  ck_assert_ptr_nonnull(strstr(err.msg, "symbolic link"));
  ck_assert_str_eq(get(victim), victim_text);
}
END_TEST

START_TEST(link_at_the_old_tmp_name_is_not_followed) {
  /* a resume from step 1 trims step 2: the file is rewritten */
  put(metrics, START0 STEP(1) STEP(2));
  char tmp[400];
  snprintf(tmp, sizeof tmp, "%s.tmp", metrics);
  ck_assert_int_eq(symlink(victim, tmp), 0);
  fsdpc_err err = {0};
  ck_assert_int_eq(open_run(1, &err), FSDPC_OK);
  ck_assert_str_eq(get(victim), victim_text);
  const char *t = get(metrics);
  ck_assert_ptr_null(strstr(t, "\"step\":2"));
  ck_assert_ptr_nonnull(strstr(t, "\"resumed_from\":1"));
}
END_TEST

START_TEST(fifo_is_refused_without_blocking) {
  ck_assert_int_eq(mkfifo(metrics, 0644), 0);
  fsdpc_err err = {0};
  ck_assert_int_ne(open_run(0, &err), FSDPC_OK);
  ck_assert_ptr_nonnull(strstr(err.msg, "not a regular file"));
}
END_TEST

START_TEST(hard_link_is_never_written) {
  /* a hard link to a file of records: nothing to trim, so appending is refused */
  put(victim, START0 STEP(1));
  ck_assert_int_eq(link(victim, metrics), 0);
  fsdpc_err err = {0};
  ck_assert_int_ne(open_run(0, &err), FSDPC_OK);
  ck_assert_ptr_nonnull(strstr(err.msg, "hard links"));
  ck_assert_str_eq(get(victim), START0 STEP(1));
  /* to another file: the trimming's rename gives metrics.jsonl a file of its own */
  unlink(metrics);
  put(victim, victim_text);
  ck_assert_int_eq(link(victim, metrics), 0);
  ck_assert_int_eq(open_run(0, &err), FSDPC_OK);
  ck_assert_str_eq(get(victim), victim_text);
}
END_TEST

START_TEST(trimming_moves_what_it_does_not_understand_aside) {
  put(metrics, START0 STEP(1) "a note someone wrote\n" STEP(2) STEP(3) "{\"step\":4,\"lo");
  fsdpc_err err = {0};
  ck_assert_int_eq(open_run(2, &err), FSDPC_OK);
  const char *t = get(metrics);
  ck_assert_ptr_null(strstr(t, "a note"));
  ck_assert_ptr_null(strstr(t, "\"step\":3"));
  ck_assert_ptr_nonnull(strstr(t, "\"step\":2"));
  char aside[400];
  snprintf(aside, sizeof aside, "%s/metrics.unparsed.txt", dir);
  const char *a = get(aside);
  ck_assert_ptr_nonnull(a);
  ck_assert_ptr_nonnull(strstr(a, "a note someone wrote\n"));
  ck_assert_ptr_nonnull(strstr(a, "{\"step\":4,\"lo\n"));
  ck_assert_ptr_nonnull(strstr(a, "metrics.jsonl line 3"));
}
END_TEST

START_TEST(run_id_from_the_file_is_escaped) {
  put(metrics, "{\"event\":\"start\",\"run_id\":\"x\\u001b[2J\\ny\",\"resumed_from\":0}\n" STEP(1));
  fsdpc_metrics_run r;
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__metrics_read(dir, &r, &err), FSDPC_OK);
  ck_assert_ptr_null(strchr(r.run_id, '\x1b'));
  ck_assert_ptr_null(strchr(r.run_id, '\n'));
  ck_assert_str_eq(r.run_id, "x\\x1b[2J\\ny");
  fsdpc__metrics_run_free(&r);
}
END_TEST

int main(void) {
  Suite *s = suite_create("logdir");
  TCase *tc = tcase_create("metrics");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, link_at_metrics_jsonl_is_refused);
  tcase_add_test(tc, link_at_the_old_tmp_name_is_not_followed);
  tcase_add_test(tc, fifo_is_refused_without_blocking);
  tcase_add_test(tc, hard_link_is_never_written);
  tcase_add_test(tc, trimming_moves_what_it_does_not_understand_aside);
  tcase_add_test(tc, run_id_from_the_file_is_escaped);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
