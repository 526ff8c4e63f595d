/* Issue 43 item 5: log.dir/metrics.jsonl is never written through a link
 * fsdpc did not make (at its own name, at the NAME.tmp the resume trimming
 * used, or a hard link), a FIFO there is refused instead of hanging, the
 * trimming moves what it does not understand aside instead of deleting it,
 * and strings read back from the file are escaped. Every test failed before
 * the fix (the FIFO one by hanging: alarm() turns that into a failure).
 * The second case checks util/fs.h's writers for log, output, cache and
 * checkpoint folders directly: a new file appears whole through a private
 * temporary file, a link at the name is replaced and never followed, a
 * FIFO, device or folder at the name is refused before anything blocks,
 * and appending refuses links, FIFOs and hard-linked files. */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "obs/metrics.h"
#include "util/fs.h"

static char dir[] = "/tmp/fsdpc-logdir.XXXXXX";
static char metrics[300], victim[300], target[300];
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

/* Entries of dir other than the given names. */
static int others(const char *a, const char *b) {
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, a) &&
        strcmp(e->d_name, b))
      n++;
  closedir(d);
  return n;
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
  snprintf(target, sizeof target, "%s/out.json", dir);
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

START_TEST(new_file_appears_whole_and_leaves_nothing) {
  ck_assert_int_eq(fsdpc__write_file_safe(target, "abc\n", 4), 0);
  ck_assert_str_eq(get(target), "abc\n");
  ck_assert_int_eq(others("out.json", "victim.txt"), 0);
  struct stat sb;
  ck_assert_int_eq(stat(target, &sb), 0);
  mode_t um = umask(0);
  umask(um);
  ck_assert_int_eq(sb.st_mode & 0777, 0644 & ~um); /* as open(0644) would make it */
}
END_TEST

START_TEST(link_at_the_name_is_replaced_not_followed) {
  ck_assert_int_eq(symlink(victim, target), 0);
  ck_assert_int_eq(fsdpc__write_file_safe(target, "new\n", 4), 0);
  ck_assert_str_eq(get(victim), victim_text);
  struct stat sb;
  ck_assert_int_eq(lstat(target, &sb), 0);
  ck_assert(S_ISREG(sb.st_mode));
  ck_assert_str_eq(get(target), "new\n");
}
END_TEST

START_TEST(fifo_and_folder_at_the_name_are_refused) {
  ck_assert_int_eq(mkfifo(target, 0644), 0);
  ck_assert_int_eq(fsdpc__write_file_safe(target, "x", 1), -1);
  ck_assert_int_eq(errno, ENOTSUP);
  fsdpc_out_file f;
  fsdpc_err err = {0};
  ck_assert_int_ne(fsdpc__out_create(target, &f, &err), FSDPC_OK);
  ck_assert_ptr_nonnull(strstr(err.msg, "a FIFO"));
  unlink(target);
  ck_assert_int_eq(mkdir(target, 0755), 0);
  ck_assert_int_ne(fsdpc__out_create(target, &f, &err), FSDPC_OK);
  ck_assert_ptr_nonnull(strstr(err.msg, "a folder"));
  ck_assert_int_eq(others("out.json", "victim.txt"), 0);
}
END_TEST

START_TEST(abort_leaves_nothing) {
  fsdpc_out_file f;
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__out_create(target, &f, &err), FSDPC_OK);
  ck_assert_int_eq(write(f.fd, "partial", 7), 7);
  fsdpc__out_abort(&f);
  ck_assert_int_eq(access(target, F_OK), -1);
  ck_assert_int_eq(others("victim.txt", "victim.txt"), 0);
  fsdpc__out_abort(&f); /* twice: a no-op */
}
END_TEST

START_TEST(append_refuses_links_fifos_and_hard_links) {
  int fd = -1;
  fsdpc_err err = {0};
  ck_assert_int_eq(symlink(victim, target), 0);
  ck_assert_int_ne(fsdpc__open_append(target, &fd, &err), FSDPC_OK);
  ck_assert_ptr_nonnull(strstr(err.msg, "symbolic link"));
  unlink(target);
  ck_assert_int_eq(link(victim, target), 0);
  ck_assert_int_ne(fsdpc__open_append(target, &fd, &err), FSDPC_OK);
  ck_assert_ptr_nonnull(strstr(err.msg, "hard links"));
  unlink(target);
  ck_assert_int_eq(mkfifo(target, 0644), 0);
  ck_assert_int_ne(fsdpc__open_append(target, &fd, &err), FSDPC_OK);
  ck_assert_ptr_nonnull(strstr(err.msg, "FIFO"));
  unlink(target);
  ck_assert_int_eq(fsdpc__open_append(target, &fd, &err), FSDPC_OK);
  ck_assert_int_eq(write(fd, "a\n", 2), 2);
  close(fd);
  ck_assert_int_eq(fsdpc__open_append(target, &fd, &err), FSDPC_OK);
  ck_assert_int_eq(write(fd, "b\n", 2), 2);
  close(fd);
  ck_assert_str_eq(get(target), "a\nb\n");
  ck_assert_str_eq(get(victim), victim_text);
}
END_TEST

START_TEST(read_back_refuses_links_and_fifos) {
  ck_assert_int_eq(symlink(victim, target), 0);
  ck_assert_int_eq(fsdpc__open_regular_nofollow(target, 0), -1);
  ck_assert_int_eq(errno, ELOOP);
  int fd = fsdpc__open_regular(target, 0); /* reading a user's link is fine */
  ck_assert_int_ge(fd, 0);
  close(fd);
  unlink(target);
  ck_assert_int_eq(mkfifo(target, 0644), 0);
  ck_assert_int_eq(fsdpc__open_regular_nofollow(target, 0), -2);
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
  TCase *fs = tcase_create("fs");
  tcase_add_checked_fixture(fs, setup, teardown);
  tcase_add_test(fs, new_file_appears_whole_and_leaves_nothing);
  tcase_add_test(fs, link_at_the_name_is_replaced_not_followed);
  tcase_add_test(fs, fifo_and_folder_at_the_name_are_refused);
  tcase_add_test(fs, abort_leaves_nothing);
  tcase_add_test(fs, append_refuses_links_fifos_and_hard_links);
  tcase_add_test(fs, read_back_refuses_links_and_fifos);
  suite_add_tcase(s, fs);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
