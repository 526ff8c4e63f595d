/* util/fs.h's writers for log, output, cache and checkpoint folders: a new
 * file appears whole under its name through a private temporary file, a
 * link at the name is replaced and never followed, a planted file at any
 * temporary name is never opened, a FIFO, device or folder at the name is
 * refused before anything blocks, and appending refuses links, FIFOs and
 * hard-linked files. */
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

#include "util/fs.h"

static char dir[] = "/tmp/fsdpc-safe.XXXXXX";
static char target[300], victim[300];
static const char victim_text[] = "victim\n";

static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

static const char *get(const char *path) {
  static char buf[4096];
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

static void setup(void) {
  strcpy(dir, "/tmp/fsdpc-safe.XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(target, sizeof target, "%s/out.json", dir);
  snprintf(victim, sizeof victim, "%s/victim.txt", dir);
  put(victim, victim_text);
  alarm(20);
}

static void teardown(void) {
  alarm(0);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(cmd), 0);
}

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
  Suite *s = suite_create("safe_files");
  TCase *tc = tcase_create("fs");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, new_file_appears_whole_and_leaves_nothing);
  tcase_add_test(tc, link_at_the_name_is_replaced_not_followed);
  tcase_add_test(tc, fifo_and_folder_at_the_name_are_refused);
  tcase_add_test(tc, abort_leaves_nothing);
  tcase_add_test(tc, append_refuses_links_fifos_and_hard_links);
  tcase_add_test(tc, read_back_refuses_links_and_fifos);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
