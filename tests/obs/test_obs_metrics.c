/* metrics.jsonl trimming and reading, CRC-32C: the parts of obs/ that read
 * files a killed run may have left half-written. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "obs/crc32c.h"
#include "obs/metrics.h"

static char dir[] = "/tmp/fsdpc-obs-unit.XXXXXX";

static void path_of(char *out, size_t cap) {
  snprintf(out, cap, "%s/metrics.jsonl", dir);
}

static void write_file(const char *text) {
  char p[256];
  path_of(p, sizeof p);
  FILE *f = fopen(p, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

static char *read_file(void) {
  char p[256];
  path_of(p, sizeof p);
  FILE *f = fopen(p, "r");
  ck_assert_ptr_nonnull(f);
  static char buf[8192];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p++)
    n++;
  return n;
}

static void start(int64_t resumed_from) {
  fsdpc_run_record rr = {.config = "c.yaml",
                         .config_hash = 0x1234,
                         .resumed_from = resumed_from,
                         .world = 2,
                         .max_steps = 10,
                         .global_batch = 8,
                         .tokens_per_step = 256};
  char id[64];
  FILE *f = NULL;
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__metrics_open(dir, &rr, id, sizeof id, &f, &err), FSDPC_OK);
  ck_assert_ptr_nonnull(f);
  ck_assert_int_gt((int)strlen(id), 10);
  fclose(f);
}

static void setup(void) {
  strcpy(dir, "/tmp/fsdpc-obs-unit.XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
}
static void teardown(void) {
  char p[256];
  path_of(p, sizeof p);
  unlink(p);
  rmdir(dir);
}

#define START0 "{\"event\":\"start\",\"run_id\":\"a\",\"resumed_from\":0,\"world\":1}\n"
#define STEP(n) "{\"step\":" #n ",\"loss\":" #n ".5,\"tokens\":100}\n"

START_TEST(resume_drops_steps_after_checkpoint_and_cut_lines) {
  /* An older run, then the current run killed after step 5 mid-line. */
  write_file(START0 STEP(1) STEP(2) START0 STEP(1) STEP(2) STEP(3) STEP(4)
                 STEP(5) "{\"step\":6,\"lo");
  start(3);
  const char *t = read_file();
  ck_assert_int_eq(count(t, "\"step\":1,"), 2); /* the older run keeps its steps */
  ck_assert_int_eq(count(t, "\"step\":2,"), 2);
  ck_assert_int_eq(count(t, "\"step\":3,"), 1);
  ck_assert_int_eq(count(t, "\"step\":4,"), 0);
  ck_assert_int_eq(count(t, "\"step\":6"), 0);
  ck_assert_int_eq(count(t, "\"resumed_from\":3"), 1);
  ck_assert(t[strlen(t) - 1] == '\n');

  fsdpc_metrics_run r;
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__metrics_read(dir, &r, &err), FSDPC_OK);
  ck_assert_int_eq(r.n, 3);
  ck_assert_int_eq(r.n_starts, 2);
  ck_assert_int_eq(r.n_older, 1);
  ck_assert_int_eq(r.last_resumed_from, 3);
  ck_assert_int_eq(r.world, 2);
  ck_assert(r.pts[2].step == 3 && fabs(r.pts[2].loss - 3.5) < 1e-12);
  ck_assert(isnan(r.pts[0].eval_loss));
  fsdpc__metrics_run_free(&r);
}
END_TEST

START_TEST(fresh_start_appends) {
  write_file(START0 STEP(1) STEP(2));
  start(0);
  const char *t = read_file();
  ck_assert_int_eq(count(t, "\"event\":\"start\""), 2);
  ck_assert_int_eq(count(t, "\"step\":2,"), 1);
  fsdpc_metrics_run r;
  fsdpc_err err = {0};
  /* the new run has no steps yet */
  ck_assert_int_eq(fsdpc__metrics_read(dir, &r, &err), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(err.msg, "no logged steps"));
}
END_TEST

START_TEST(reader_folds_untrimmed_resumes_and_skips_garbage) {
  /* A file written by hand or by an older fsdpc: a resume record without the
   * trimming, and lines that are not JSON. */
  write_file(START0 STEP(1) STEP(2)
                 STEP(3) "not json\n"
                         "{\"event\":\"start\",\"resumed_from\":1}\n" STEP(2) "[1,2]\n" STEP(3));
  fsdpc_metrics_run r;
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__metrics_read(dir, &r, &err), FSDPC_OK);
  ck_assert_int_eq(r.n, 3);
  for (int i = 0; i < 3; i++)
    ck_assert_int_eq(r.pts[i].step, i + 1);
  fsdpc__metrics_run_free(&r);
}
END_TEST

START_TEST(missing_file_names_the_folder) {
  fsdpc_metrics_run r;
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__metrics_read("/nonexistent/run", &r, &err), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent/run: no metrics.jsonl"));
}
END_TEST

START_TEST(crc32c_known_values) {
  ck_assert_uint_eq(fsdpc__crc32c(0, "123456789", 9), 0xE3069283u);
  ck_assert_uint_eq(fsdpc__crc32c(0, "", 0), 0u);
  /* continuing a CRC over chunks equals one pass */
  ck_assert_uint_eq(fsdpc__crc32c(fsdpc__crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
  /* 32 zero bytes: the iSCSI (RFC 3720) test vector */
  unsigned char z[32] = {0};
  ck_assert_uint_eq(fsdpc__crc32c(0, z, 32), 0x8A9136AAu);
}
END_TEST

int main(void) {
  Suite *s = suite_create("obs");
  TCase *tc = tcase_create("metrics");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, resume_drops_steps_after_checkpoint_and_cut_lines);
  tcase_add_test(tc, fresh_start_appends);
  tcase_add_test(tc, reader_folds_untrimmed_resumes_and_skips_garbage);
  tcase_add_test(tc, missing_file_names_the_folder);
  tcase_add_test(tc, crc32c_known_values);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
