/* Synthetic datasets: every document decodes to its task's exact format with
 * a correct answer, the loss mask covers exactly the answer, and generation
 * is deterministic in the seed. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "data/synth.h"
#include "data/tokenizer.h"
#include "data/tokfile.h"
#include "data_testutil.h"

/* Writes task with n docs and returns the opened file. */
static fsdpc_tokfile *synth(int32_t task, int64_t n, uint64_t seed, int32_t mask,
                            const char *name) {
  fsdpc_synth_opts o;
  fsdpc__synth_opts_default(&o);
  o.task = task, o.n_docs = n, o.seed = seed, o.mask_prompt = mask;
  char path[512];
  tmp_path(path, sizeof path, name);
  fsdpc_err err = {0};
  int64_t n_tokens = -1;
  ck_assert_msg(fsdpc__synth_write(&o, path, &n_tokens, &err) == FSDPC_OK, "%s", err.msg);
  fsdpc_tokfile *tf;
  ck_assert_msg(fsdpc__tokfile_open(path, &tf, &err) == FSDPC_OK, "%s", err.msg);
  ck_assert_int_eq(fsdpc__tokfile_n_tokens(tf), n_tokens);
  ck_assert_int_eq(fsdpc__tokfile_n_docs(tf), n);
  ck_assert_uint_eq(tf->hdr.vocab_size, FSDPC_BYTE_VOCAB);
  ck_assert_uint_eq(tf->hdr.eos_id, FSDPC_BYTE_EOS);
  unlink(path);
  return tf;
}

/* Decodes document d into text (NUL-terminated); ctx_len = number of leading
 * tokens with mask 0, and checks the mask is exactly "0...0 1...1". */
static void doc_text(const fsdpc_tokfile *tf, int64_t d, char *text, size_t cap, int64_t *ctx_len) {
  int64_t s = (int64_t)tf->offsets[d], n = (int64_t)tf->offsets[d + 1] - s;
  ck_assert_int_lt(n, (int64_t)cap);
  int32_t ids[256];
  fsdpc__tokfile_read(tf, s, n, ids);
  fsdpc_tokenizer *tok;
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__tokenizer_byte_create(&tok, &err), FSDPC_OK);
  size_t len;
  ck_assert_int_eq(fsdpc__tokenizer_decode(tok, ids, n, text, cap - 1, &len, &err), FSDPC_OK);
  fsdpc__tokenizer_destroy(tok);
  ck_assert_uint_eq(len, (size_t)n); /* no specials inside documents */
  text[len] = '\0';
  int64_t k = 0;
  while (k < n && !fsdpc__tokfile_mask(tf, s + k))
    k++;
  for (int64_t i = k; i < n; i++)
    ck_assert(fsdpc__tokfile_mask(tf, s + i));
  *ctx_len = k;
}

START_TEST(arith_is_correct_sums) {
  fsdpc_tokfile *tf = synth(FSDPC_SYNTH_ARITH, 3000, 5, -1, "arith.tok");
  ck_assert_ptr_null(tf->mask); /* arith trains on every token by default */
  int seen_max = 0, seen_zero = 0;
  for (int64_t d = 0; d < 3000; d++) {
    char text[64], nl;
    int64_t ctx;
    int a, b, c, used = 0;
    doc_text(tf, d, text, sizeof text, &ctx);
    ck_assert_int_eq(ctx, 0);
    ck_assert_msg(sscanf(text, "%d+%d=%d%c%n", &a, &b, &c, &nl, &used) == 4, "doc '%s'", text);
    ck_assert_int_eq(used, (int)strlen(text));
    ck_assert_int_eq(nl, '\n');
    ck_assert_int_eq(a + b, c);
    ck_assert(a >= 0 && a <= 20 && b >= 0 && b <= 20);
    seen_max |= a == 20 || b == 20;
    seen_zero |= a == 0 || b == 0;
  }
  ck_assert(seen_max && seen_zero);
  /* "A few hundred thousand tokens" at the default --n of 30000. */
  fsdpc__tokfile_close(tf);
}
END_TEST

START_TEST(qa_masks_prompt_trains_answer) {
  fsdpc_tokfile *tf = synth(FSDPC_SYNTH_QA, 500, 9, -1, "qa.tok");
  ck_assert_ptr_nonnull(tf->mask);
  int32_t n_facts;
  const fsdpc_synth_fact *facts = fsdpc__synth_qa_facts(&n_facts);
  ck_assert_int_ge(n_facts, 30);
  int *used = calloc((size_t)n_facts, sizeof *used);
  for (int64_t d = 0; d < 500; d++) {
    char text[256], want[256];
    int64_t ctx;
    doc_text(tf, d, text, sizeof text, &ctx);
    int found = 0;
    for (int32_t f = 0; f < n_facts && !found; f++) {
      snprintf(want, sizeof want, "Q: %s\nA: %s\n", facts[f].question, facts[f].answer);
      if (strcmp(text, want) == 0) {
        found = 1, used[f]++;
        /* Context is exactly "Q: ...\nA: "; the answer and newline are targets. */
        ck_assert_int_eq(ctx, (int64_t)(strlen(facts[f].question) + 7));
      }
    }
    ck_assert_msg(found, "doc %lld is not a known fact: '%s'", (long long)d, text);
  }
  int distinct = 0;
  for (int32_t f = 0; f < n_facts; f++)
    distinct += used[f] > 0;
  ck_assert_int_gt(distinct, n_facts / 2);
  free(used);
  fsdpc__tokfile_close(tf);
}
END_TEST

START_TEST(copy_and_reverse) {
  int32_t tasks[] = {FSDPC_SYNTH_COPY, FSDPC_SYNTH_REVERSE};
  for (int t = 0; t < 2; t++) {
    fsdpc_tokfile *tf = synth(tasks[t], 400, 3, 1, "copy.tok"); /* --mask-prompt */
    ck_assert_ptr_nonnull(tf->mask);
    const char *verb = t ? "reverse " : "copy ";
    for (int64_t d = 0; d < 400; d++) {
      char text[256];
      int64_t ctx;
      doc_text(tf, d, text, sizeof text, &ctx);
      ck_assert_msg(strncmp(text, verb, strlen(verb)) == 0, "'%s'", text);
      char *src = text + strlen(verb), *arrow = strstr(src, " -> ");
      ck_assert_ptr_nonnull(arrow);
      size_t n = (size_t)(arrow - src);
      ck_assert(n >= 1 && n <= 6);
      char *dst = arrow + 4;
      ck_assert_uint_eq(strlen(dst), n + 1);
      ck_assert_int_eq(dst[n], '\n');
      for (size_t i = 0; i < n; i++) {
        ck_assert(src[i] >= 'a' && src[i] <= 'z');
        ck_assert_int_eq(dst[i], t ? src[n - 1 - i] : src[i]);
      }
      ck_assert_int_eq(ctx, (int64_t)(dst - text));
    }
    fsdpc__tokfile_close(tf);
  }
}
END_TEST

/* --task codes: `code "XYZ" = "XYZ"\n` or `code "XYZ": {"name": "code",
 * "value": "XYZ"}\n`, both kinds, the code one of the tools task's (the
 * k-th letter from the k-th set), never a held-out one; every letter of
 * every place occurs. */
START_TEST(codes_repeat_a_tools_code) {
  fsdpc_tokfile *tf = synth(FSDPC_SYNTH_CODES, 600, 0, -1, "codes.tok");
  ck_assert_ptr_null(tf->mask); /* loss on every token by default */
  int seen[3][256] = {{0}}, records = 0;
  for (int64_t d = 0; d < 600; d++) {
    char text[256], want[2][64];
    int64_t ctx;
    doc_text(tf, d, text, sizeof text, &ctx);
    char code[4] = {0};
    memcpy(code, text + 6, 3);
    snprintf(want[0], sizeof want[0], "code \"%s\" = \"%s\"\n", code, code);
    snprintf(want[1], sizeof want[1], "code \"%s\": {\"name\": \"code\", \"value\": \"%s\"}\n",
             code, code);
    int record = strcmp(text, want[1]) == 0;
    ck_assert_msg(record || strcmp(text, want[0]) == 0, "'%s'", text);
    records += record;
    ck_assert_msg(!fsdpc__synth_tools_held_out(code), "held-out code %s", code);
    for (int k = 0; k < 3; k++) {
      ck_assert_ptr_nonnull(strchr(k == 0 ? "BCDFGJ" : k == 1 ? "KLMNOE" : "PQRSUV", code[k]));
      seen[k][(unsigned char)code[k]] = 1;
    }
  }
  ck_assert(records > 200 && records < 400);
  for (int k = 0; k < 3; k++) {
    int n = 0;
    for (int c = 0; c < 256; c++)
      n += seen[k][c];
    ck_assert_int_eq(n, 6);
  }
  fsdpc__tokfile_close(tf);
}
END_TEST

START_TEST(deterministic_in_seed) {
  fsdpc_synth_opts o;
  fsdpc__synth_opts_default(&o);
  o.task = FSDPC_SYNTH_ARITH, o.n_docs = 200;
  char p1[512], p2[512], p3[512];
  tmp_path(p1, sizeof p1, "s1.tok");
  tmp_path(p2, sizeof p2, "s2.tok");
  tmp_path(p3, sizeof p3, "s3.tok");
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__synth_write(&o, p1, NULL, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc__synth_write(&o, p2, NULL, &err), FSDPC_OK);
  o.seed = 2;
  ck_assert_int_eq(fsdpc__synth_write(&o, p3, NULL, &err), FSDPC_OK);
  size_t n1, n2, n3;
  unsigned char *b1 = slurp(p1, &n1), *b2 = slurp(p2, &n2), *b3 = slurp(p3, &n3);
  ck_assert(n1 == n2 && memcmp(b1, b2, n1) == 0);
  ck_assert(n1 != n3 || memcmp(b1, b3, n1) != 0);
  free(b1), free(b2), free(b3);
  unlink(p1), unlink(p2), unlink(p3);
}
END_TEST

START_TEST(bad_options) {
  fsdpc_err err = {0};
  int32_t task;
  ck_assert_int_eq(fsdpc__synth_task_parse("reverse", &task, &err), FSDPC_OK);
  ck_assert_int_eq(task, FSDPC_SYNTH_REVERSE);
  ck_assert_int_eq(fsdpc__synth_task_parse("sort", &task, &err), FSDPC_INVALID_USAGE);
  ASSERT_ONE_LINE_ERROR(err, "unknown synthetic task 'sort'");
  fsdpc_synth_opts o;
  fsdpc__synth_opts_default(&o);
  o.n_docs = 0;
  ck_assert_int_eq(fsdpc__synth_write(&o, "/tmp/never.tok", NULL, &err), FSDPC_INVALID_USAGE);
  ASSERT_ONE_LINE_ERROR(err, "--n must be >= 1");
  fsdpc__synth_opts_default(&o);
  /* A missing folder is created; one that cannot be is an error naming the
   * user's path (not the temporary file written first). */
  ck_assert_int_ne(fsdpc__synth_write(&o, "/dev/null/sub/x.tok", NULL, &err), FSDPC_OK);
  ASSERT_ONE_LINE_ERROR(err, "/dev/null/sub/x.tok: ", "not a folder");
  ck_assert_ptr_null(strstr(err.msg, ".tmp"));
}
END_TEST

/* --task tools: every line declares both tools; the question ends with a
 * quoted city code whose k-th letter is from the k-th set; the keyword picks the
 * tool; the call's argument is the code; no held-out code occurs, and some
 * codes are held out (the demo's held-out prompts exist). */
START_TEST(tools_copy_the_code) {
  char path[512];
  tmp_path(path, sizeof path, "tools.jsonl");
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc__synth_tools_write(500, 1, path, &err), FSDPC_OK);
  FILE *f = fopen(path, "r");
  ck_assert_ptr_nonnull(f);
  char line[4096];
  int n = 0, traffic = 0;
  while (fgets(line, sizeof line, f)) {
    cJSON *j = cJSON_Parse(line);
    ck_assert_ptr_nonnull(j);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "tools")), 2);
    const cJSON *m = cJSON_GetObjectItem(j, "messages");
    ck_assert_int_eq(cJSON_GetArraySize(m), 4);
    const char *q = cJSON_GetObjectItem(cJSON_GetArrayItem(m, 0), "content")->valuestring;
    const cJSON *fn = cJSON_GetObjectItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(m, 1), "tool_calls"), 0),
        "function");
    const char *tool = cJSON_GetObjectItem(fn, "name")->valuestring;
    const char *code =
        cJSON_GetObjectItem(cJSON_GetObjectItem(fn, "arguments"), "city")->valuestring;
    size_t nq = strlen(q);
    ck_assert_uint_eq(strlen(code), FSDPC_SYNTH_TOOLS_CODE_LEN);
    ck_assert_msg(nq > 6 && q[nq - 6] == '"' && memcmp(q + nq - 5, code, 3) == 0 &&
                      strcmp(q + nq - 2, "\"?") == 0,
                  "%s / %s", q, code);
    ck_assert(!fsdpc__synth_tools_held_out(code));
    int t = strstr(q, "Traffic") || strstr(q, "roads") || strstr(q, "jams");
    ck_assert_str_eq(tool, t ? "get_traffic" : "get_weather");
    ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(m, 2), "name")->valuestring, tool);
    traffic += t;
    n++;
    cJSON_Delete(j);
  }
  fclose(f);
  unlink(path);
  ck_assert_int_eq(n, 500);
  ck_assert(traffic > 150 && traffic < 350);
  ck_assert(fsdpc__synth_tools_held_out("BKP") && fsdpc__synth_tools_held_out("DLS"));
  ck_assert(!fsdpc__synth_tools_held_out("CKP") && !fsdpc__synth_tools_held_out("BK"));
  ck_assert(!fsdpc__synth_tools_held_out("AKP"));
}
END_TEST

int main(void) {
  Suite *s = suite_create("data_synth");
  TCase *tc = tcase_create("synth");
  tcase_add_test(tc, arith_is_correct_sums);
  tcase_add_test(tc, qa_masks_prompt_trains_answer);
  tcase_add_test(tc, copy_and_reverse);
  tcase_add_test(tc, codes_repeat_a_tools_code);
  tcase_add_test(tc, deterministic_in_seed);
  tcase_add_test(tc, bad_options);
  tcase_add_test(tc, tools_copy_the_code);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
