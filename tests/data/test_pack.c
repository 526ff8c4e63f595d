/* Whole-example packing (data.packing: examples / none) and the window
 * stream of an "examples" token file: every example lands whole in exactly
 * one row (or is counted as truncated/dropped), labels never cross an
 * example, padding is masked, doc ids separate examples, and the counts the
 * loader reports agree with the rows it serves. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/loader.h"
#include "data/tokfile.h"
#include "data_testutil.h"

/* Document d has length len_of(d) and token i of it is (d*7 + i) % 250;
 * its mask is 1 on the second half. */
static int64_t len_of(int64_t d) {
  return 1 + (d * 37) % 23;
}
static int32_t tok_of(int64_t d, int64_t i) {
  return (int32_t)((d * 7 + i) % 250);
}
static int mask_of(int64_t d, int64_t i) {
  return i >= len_of(d) / 2;
}

static void write_file(const char *path, int64_t D, int examples_flag) {
  fsdpc_err err = {0};
  fsdpc_tokfile_writer *w;
  int32_t flags = FSDPC_TOKFILE_HAS_MASK | (examples_flag ? FSDPC_TOKFILE_EXAMPLES : 0);
  ck_assert_msg(fsdpc__tokfile_writer_create(path, 259, 257, flags, &w, &err) == FSDPC_OK, "%s",
                err.msg);
  for (int64_t d = 0; d < D; d++) {
    int32_t ids[64];
    uint8_t m[64];
    for (int64_t i = 0; i < len_of(d); i++)
      ids[i] = tok_of(d, i), m[i] = (uint8_t)mask_of(d, i);
    ck_assert_int_eq(fsdpc__tokfile_writer_add_doc(w, ids, m, len_of(d), &err), FSDPC_OK);
  }
  ck_assert_int_eq(fsdpc__tokfile_writer_finish(w, &err), FSDPC_OK);
  fsdpc__tokfile_writer_destroy(w);
}

static fsdpc_loader *make(const fsdpc_tokfile *tf, int32_t T, int packing, int drop,
                          int64_t buffer) {
  fsdpc_loader_opts o;
  fsdpc__loader_opts_default(&o);
  o.seq_len = T, o.global_batch = 1, o.seed = 3, o.packing = packing, o.overlong_drop = drop;
  o.pack_buffer = buffer;
  fsdpc_err err = {0};
  fsdpc_loader *l;
  ck_assert_msg(fsdpc__loader_create(tf, &o, &l, &err) == FSDPC_OK, "%s", err.msg);
  return l;
}

/* Walks every row: identifies each example by its first token pattern and
 * checks it whole, labels inside it only, padding masked. */
static void check_rows(const fsdpc_tokfile *tf, int32_t T, int packing, int drop, int sep) {
  int64_t D = fsdpc__tokfile_n_docs(tf);
  fsdpc_loader *l = make(tf, T, packing, drop, 50);
  int64_t W = fsdpc__loader_total_windows(l);
  int32_t *tok = malloc((size_t)T * 4), *lab = malloc((size_t)T * 4), *doc = malloc((size_t)T * 4);
  int *seen = calloc((size_t)D, sizeof *seen);
  int64_t targets = 0, placed = 0, truncated = 0;
  fsdpc_err err = {0};
  for (int64_t k = 0; k < W; k++) {
    ck_assert_int_eq(fsdpc__loader_window(l, k, tok, lab, doc, &err), FSDPC_OK);
    int32_t j = 0, local = 0;
    int64_t in_row = 0;
    while (j < T) {
      ck_assert_int_eq(doc[j], local);
      int32_t start = j;
      while (j < T && doc[j] == local)
        j++;
      int32_t n = j - start;
      /* find the document: tokens are (d*7 + i) % 250 with the right length */
      int64_t found = -1;
      for (int64_t d = 0; d < D && found < 0; d++) {
        int64_t e = len_of(d) + sep;
        if (seen[d] || (e != n && !(e > T && n == T)))
          continue;
        int ok = 1;
        for (int32_t i = 0; i < n && ok; i++)
          ok = tok[start + i] == (i < len_of(d) ? tok_of(d, i) : 257);
        if (ok)
          found = d;
      }
      if (found < 0) { /* must be padding: the rest of the row */
        ck_assert_int_eq(j, T);
        for (int32_t i = start; i < T; i++)
          ck_assert_int_eq(lab[i], FSDPC_IGNORE_INDEX);
        break;
      }
      seen[found] = 1;
      placed++;
      truncated += len_of(found) + sep > T;
      for (int32_t i = 0; i < n; i++) {
        int32_t want = FSDPC_IGNORE_INDEX;
        if (i + 1 < n) {
          int64_t nx = i + 1;
          int tgt = nx < len_of(found) ? mask_of(found, nx) : 1;
          if (tgt)
            want = tok[start + i + 1];
        }
        ck_assert_msg(lab[start + i] == want,
                      "T %d packing %d drop %d row %lld doc %lld i %d n %d: label %d, want %d", T,
                      packing, drop, (long long)k, (long long)found, i, n, lab[start + i], want);
        targets += want != FSDPC_IGNORE_INDEX;
      }
      local++;
      in_row++;
      if (packing == FSDPC_PACK_NONE)
        ck_assert_int_le(in_row, 1);
    }
    ck_assert_int_ge(in_row, 1);
  }
  int64_t dropped = 0;
  for (int64_t d = 0; d < D; d++)
    if (!seen[d]) {
      ck_assert_msg(len_of(d) + sep > T && drop, "document %lld was not placed", (long long)d);
      dropped++;
    }
  fsdpc_loader_stats st;
  fsdpc__loader_stats(l, &st);
  ck_assert_int_eq(st.examples, placed);
  ck_assert_int_eq(st.dropped, dropped);
  ck_assert_int_eq(st.truncated, truncated);
  ck_assert_int_eq(st.target_tokens, targets);
  int64_t count = 0, sum = 0;
  for (int64_t s = 0; s < fsdpc__loader_steps_per_epoch(l); s++) {
    ck_assert_int_eq(fsdpc__loader_count_labels(l, s, 1, &count, &err), FSDPC_OK);
    sum += count;
  }
  ck_assert_int_eq(sum, targets);
  free(tok), free(lab), free(doc), free(seen);
  fsdpc__loader_destroy(l);
}

START_TEST(examples_whole_in_rows) {
  char path[512];
  tmp_path(path, sizeof path, "pack.tok");
  write_file(path, 240, 1); /* < 250: documents differ in their first tokens */
  fsdpc_err err = {0};
  fsdpc_tokfile *tf;
  ck_assert_int_eq(fsdpc__tokfile_open(path, &tf, &err), FSDPC_OK);
  int32_t Ts[] = {23, 30, 64};
  for (int t = 0; t < 3; t++) {
    check_rows(tf, Ts[t], FSDPC_PACK_EXAMPLES, 0, 0);
    check_rows(tf, Ts[t], FSDPC_PACK_NONE, 0, 0);
  }
  check_rows(tf, 10, FSDPC_PACK_EXAMPLES, 0, 0); /* many truncated */
  check_rows(tf, 10, FSDPC_PACK_EXAMPLES, 1, 0); /* many dropped */
  fsdpc__tokfile_close(tf);
  unlink(path);
}
END_TEST

START_TEST(plain_file_gets_eos) {
  char path[512];
  tmp_path(path, sizeof path, "pack-plain.tok");
  write_file(path, 200, 0);
  fsdpc_err err = {0};
  fsdpc_tokfile *tf;
  ck_assert_int_eq(fsdpc__tokfile_open(path, &tf, &err), FSDPC_OK);
  check_rows(tf, 40, FSDPC_PACK_EXAMPLES, 0, 1);
  check_rows(tf, 20, FSDPC_PACK_EXAMPLES, 1, 1);
  fsdpc__tokfile_close(tf);
  unlink(path);
}
END_TEST

START_TEST(packing_is_dense_and_seeded) {
  char path[512];
  tmp_path(path, sizeof path, "pack-dense.tok");
  write_file(path, 1000, 1);
  fsdpc_err err = {0};
  fsdpc_tokfile *tf;
  ck_assert_int_eq(fsdpc__tokfile_open(path, &tf, &err), FSDPC_OK);
  fsdpc_loader *a = make(tf, 64, FSDPC_PACK_EXAMPLES, 0, 200);
  fsdpc_loader *b = make(tf, 64, FSDPC_PACK_EXAMPLES, 0, 200);
  fsdpc_loader *n = make(tf, 64, FSDPC_PACK_NONE, 0, 200);
  fsdpc_loader_stats st;
  fsdpc__loader_stats(a, &st);
  /* first-fit decreasing fills rows: within 10% of the tokens / T bound */
  int64_t W = fsdpc__loader_total_windows(a), lower = (st.tokens + 63) / 64;
  ck_assert_int_ge(W, lower);
  ck_assert_int_le(W, lower + lower / 10 + 1);
  ck_assert_int_eq(fsdpc__loader_total_windows(n), 1000);
  int32_t t1[64], t2[64], l1[64], l2[64];
  for (int64_t k = 0; k < W; k++) {
    ck_assert_int_eq(fsdpc__loader_window(a, k, t1, l1, NULL, &err), FSDPC_OK);
    ck_assert_int_eq(fsdpc__loader_window(b, k, t2, l2, NULL, &err), FSDPC_OK);
    ck_assert_int_eq(memcmp(t1, t2, sizeof t1), 0);
    ck_assert_int_eq(memcmp(l1, l2, sizeof l1), 0);
  }
  fsdpc__loader_destroy(a), fsdpc__loader_destroy(b), fsdpc__loader_destroy(n);
  fsdpc__tokfile_close(tf);
  unlink(path);
}
END_TEST

/* The window stream of an examples file has no inserted EOS: the stream is
 * the documents back to back. */
START_TEST(examples_file_window_stream) {
  char path[512];
  tmp_path(path, sizeof path, "pack-win.tok");
  write_file(path, 50, 1);
  fsdpc_err err = {0};
  fsdpc_tokfile *tf;
  ck_assert_int_eq(fsdpc__tokfile_open(path, &tf, &err), FSDPC_OK);
  int64_t N = fsdpc__tokfile_n_tokens(tf);
  int32_t *all = malloc((size_t)N * 4);
  uint8_t *m = malloc((size_t)N);
  int64_t p = 0;
  for (int64_t d = 0; d < 50; d++)
    for (int64_t i = 0; i < len_of(d); i++, p++)
      all[p] = tok_of(d, i), m[p] = (uint8_t)mask_of(d, i);
  int32_t T = 7;
  fsdpc_loader *l = make(tf, T, FSDPC_PACK_WINDOW, 0, 1);
  ck_assert_int_eq(fsdpc__loader_total_windows(l), (N - 1) / T);
  int32_t tok[7], lab[7];
  for (int64_t k = 0; k < (N - 1) / T; k++) {
    ck_assert_int_eq(fsdpc__loader_window(l, k, tok, lab, NULL, &err), FSDPC_OK);
    for (int32_t j = 0; j < T; j++) {
      ck_assert_int_eq(tok[j], all[k * T + j]);
      ck_assert_int_eq(lab[j], m[k * T + j + 1] ? all[k * T + j + 1] : FSDPC_IGNORE_INDEX);
    }
  }
  fsdpc__loader_destroy(l);
  free(all), free(m);
  fsdpc__tokfile_close(tf);
  unlink(path);
}
END_TEST

/* Window packing: the target count the loader reports (from mask bits,
 * without reading windows) equals the labels its windows serve. */
START_TEST(window_target_count) {
  char path[512];
  for (int flag = 0; flag < 2; flag++) {
    tmp_path(path, sizeof path, flag ? "win-ex.tok" : "win-plain.tok");
    write_file(path, 120, flag);
    fsdpc_err err = {0};
    fsdpc_tokfile *tf;
    ck_assert_int_eq(fsdpc__tokfile_open(path, &tf, &err), FSDPC_OK);
    int32_t Ts[] = {1, 3, 8, 13, 64};
    for (int t = 0; t < 5; t++) {
      int32_t T = Ts[t];
      fsdpc_loader *l = make(tf, T, FSDPC_PACK_WINDOW, 0, 1);
      int32_t *tok = malloc((size_t)T * 4), *lab = malloc((size_t)T * 4);
      int64_t sum = 0;
      for (int64_t k = 0; k < fsdpc__loader_total_windows(l); k++) {
        ck_assert_int_eq(fsdpc__loader_window(l, k, tok, lab, NULL, &err), FSDPC_OK);
        for (int32_t j = 0; j < T; j++)
          sum += lab[j] != FSDPC_IGNORE_INDEX;
      }
      fsdpc_loader_stats st;
      fsdpc__loader_stats(l, &st);
      ck_assert_msg(st.target_tokens == sum, "flag %d T %d: stats %lld, windows %lld", flag, T,
                    (long long)st.target_tokens, (long long)sum);
      free(tok), free(lab);
      fsdpc__loader_destroy(l);
    }
    fsdpc__tokfile_close(tf);
    unlink(path);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("data_pack");
  TCase *tc = tcase_create("pack");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, examples_whole_in_rows);
  tcase_add_test(tc, plain_file_gets_eos);
  tcase_add_test(tc, packing_is_dense_and_seeded);
  tcase_add_test(tc, examples_file_window_stream);
  tcase_add_test(tc, window_target_count);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
