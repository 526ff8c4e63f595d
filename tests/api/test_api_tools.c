/* What the fsdpc commands do, through libfsdpc.so alone (this test links
 * the shared library and includes only <fsdpc/fsdpc.h>): config views,
 * the run plan's file checks, the memory planner, tokenizers, token files
 * and the loader's batches, synthetic data and JSONL preparation, plugins,
 * the launcher and the small services. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fsdpc/fsdpc.h>

#include "api_test.h"

static char tmpdir[256];

static const char *tiny = "model: {vocab_size: 259, hidden_size: 32, intermediate_size: 64,\n"
                          "        num_hidden_layers: 2, num_attention_heads: 4,\n"
                          "        num_key_value_heads: 2, max_position_embeddings: 64}\n"
                          "data: {seq_len: 32}\n"
                          "attention: {impl: naive}\n"
                          "train: {micro_batch_size: 2, threads: 1, max_steps: 6}\n"
                          "log: {progress: off, level: warn}\n";

static fsdpc_config *parse(const char *const *ovr, int n) {
  fsdpc_config *c = NULL;
  fsdpc_err err = {0};
  ck_assert_msg(fsdpc_config_parse(tiny, "tiny.yaml", ovr, n, &c, &err) == FSDPC_OK, "%s", err.msg);
  return c;
}

START_TEST(config_views) {
  fsdpc_config *c = parse(NULL, 0);
  fsdpc_err err = {0};
  char *v = NULL;
  ck_assert_int_eq(fsdpc_config_get(c, "log.level", &v, &err), FSDPC_OK);
  ck_assert_str_eq(v, "warn");
  fsdpc_free(v);
  ck_assert_int_eq(fsdpc_config_get(c, "model.hidden_size", &v, &err), FSDPC_OK);
  ck_assert_str_eq(v, "32");
  fsdpc_free(v);
  ck_assert_int_eq(fsdpc_config_get(c, "log.levle", &v, &err), FSDPC_INVALID_USAGE);
  ck_assert_msg(strstr(err.msg, "did you mean 'log.level'"), "%s", err.msg);
  char *yaml = NULL;
  ck_assert_int_eq(fsdpc_config_dump(c, &yaml, &err), FSDPC_OK);
  ck_assert_msg(strstr(yaml, "hidden_size: 32") && strstr(yaml, "level: warn"), "%s", yaml);
  fsdpc_free(yaml);
  char *md = NULL, *txt = NULL;
  ck_assert_int_eq(fsdpc_config_schema(FSDPC_SCHEMA_MARKDOWN, &md, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc_config_schema(FSDPC_SCHEMA_TEXT, &txt, &err), FSDPC_OK);
  ck_assert(strstr(md, "fsdp.sharding_strategy") && strstr(txt, "fsdp.sharding_strategy"));
  ck_assert(strcmp(md, txt) != 0);
  fsdpc_free(md);
  fsdpc_free(txt);
  ck_assert_int_eq(fsdpc_config_schema(7, &txt, &err), FSDPC_INVALID_USAGE);
  /* the plan's file checks: a data file that is not there */
  const char *ov[] = {"data.train=/nonexistent/d.tok"};
  fsdpc_config *c2 = parse(ov, 1);
  fsdpc_run_plan *p = NULL;
  ck_assert_msg(fsdpc_plan_create(c2, 1, 1, &p, &err) == FSDPC_OK, "%s", err.msg);
  ck_assert_int_eq(fsdpc_plan_check_files(p, &err), FSDPC_INVALID_USAGE);
  ck_assert_msg(strstr(err.msg, "/nonexistent/d.tok"), "%s", err.msg);
  fsdpc_plan_destroy(p);
  fsdpc_config_destroy(c2);
  fsdpc_config_destroy(c);
}
END_TEST

START_TEST(memory_plan) {
  const char *ov[] = {"fsdp.sharding_strategy=SHARD_GRAD_OP"};
  fsdpc_config *c = parse(ov, 1);
  fsdpc_memplan *mp = NULL;
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc_memplan_create(c, 3, 2, &mp, &err), FSDPC_INVALID_USAGE);
  ck_assert_msg(fsdpc_memplan_create(c, 4, 2, &mp, &err) == FSDPC_OK, "%s", err.msg);
  fsdpc_memplan_info in = {.struct_size = sizeof in};
  fsdpc_memplan_describe(mp, &in);
  ck_assert_int_eq(in.n_rows, 8); /* CPU: 4 strategies x checkpointing on/off */
  ck_assert_int_eq(in.world_size, 4);
  ck_assert_int_gt((int)in.n_params, 0);
  int own = 0;
  for (int i = 0; i < in.n_rows; i++) {
    fsdpc_memplan_row r = {.struct_size = sizeof r};
    ck_assert_int_eq(fsdpc_memplan_row_get(mp, i, &r, &err), FSDPC_OK);
    ck_assert_int_gt(r.total_peak, 0);
    ck_assert_int_ge(r.total_peak, r.peak[FSDPC_MEM_CAT_ACTIVATIONS]);
    ck_assert_str_eq(r.offload, "off");
    if (r.is_config) {
      own++;
      ck_assert_str_eq(r.strategy_name, "SHARD_GRAD_OP");
      ck_assert_str_eq(r.checkpointing, "off");
    }
    if (r.strategy == 3) /* HYBRID_SHARD: groups of the ranks per node */
      ck_assert(r.shard_size == 2 && r.replica_size == 2);
  }
  ck_assert_int_eq(own, 1);
  fsdpc_memplan_row r = {.struct_size = sizeof r};
  ck_assert_int_eq(fsdpc_memplan_row_get(mp, 8, &r, &err), FSDPC_INVALID_USAGE);
  ck_assert_str_eq(fsdpc_mem_category_name(FSDPC_MEM_CAT_COMM), "comm");
  ck_assert_ptr_null(fsdpc_mem_category_name(FSDPC_MEM_CATEGORY_COUNT));
  fsdpc_memplan_destroy(mp);
  fsdpc_config_destroy(c);
}
END_TEST

START_TEST(tokenizer_and_token_files) {
  fsdpc_err err = {0};
  fsdpc_tokenizer *t = NULL;
  ck_assert_int_eq(fsdpc_tokenizer_open("byte", 0, &t, &err), FSDPC_OK);
  fsdpc_tokenizer_info ti = {.struct_size = sizeof ti};
  fsdpc_tokenizer_describe(t, &ti);
  ck_assert_int_eq(ti.vocab_size, 259);
  ck_assert_str_eq(ti.name, "byte");
  int32_t *ids = NULL;
  int64_t n = 0, *offs = NULL;
  ck_assert_int_eq(fsdpc_tokenizer_encode(t, "hi!", 3, &ids, &n, &offs, &err), FSDPC_OK);
  ck_assert_int_eq(n, 3);
  ck_assert(ids[0] == 'h' && ids[2] == '!' && offs[2] == 1 && offs[3] == 2);
  char *text = NULL;
  size_t len = 0;
  ck_assert_int_eq(fsdpc_tokenizer_decode(t, ids, n, &text, &len, &err), FSDPC_OK);
  ck_assert(len == 3 && strcmp(text, "hi!") == 0);
  fsdpc_free(text);
  int32_t bad = 999;
  ck_assert_int_eq(fsdpc_tokenizer_decode(t, &bad, 1, &text, &len, &err), FSDPC_INVALID_USAGE);
  ck_assert_str_eq(fsdpc_tokenizer_token(t, ti.eos), "<eos>");
  ck_assert_msg(strstr(err.msg, "999"), "%s", err.msg);
  /* a token file: two documents, the second with a mask */
  char path[400];
  snprintf(path, sizeof path, "%s/w.tok", tmpdir);
  fsdpc_tokfile_writer *w = NULL;
  ck_assert_int_eq(
      fsdpc_tokfile_writer_open(path, 259, (uint32_t)ti.eos, FSDPC_TOKFILE_WRITE_MASK, &w, &err),
      FSDPC_OK);
  uint8_t mask[3] = {0, 1, 1};
  ck_assert_int_eq(fsdpc_tokfile_writer_add(w, ids, NULL, n, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc_tokfile_writer_add(w, ids, mask, n, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc_tokfile_writer_finish(w, &err), FSDPC_OK);
  fsdpc_tokfile_writer_destroy(w);
  fsdpc_tokfile *tf = NULL;
  ck_assert_msg(fsdpc_tokfile_open(path, &tf, &err) == FSDPC_OK, "%s", err.msg);
  fsdpc_tokfile_info in = {.struct_size = sizeof in};
  fsdpc_tokfile_describe(tf, &in);
  /* trained on: the mask bits less the stream's first token (nothing predicts it) */
  ck_assert(in.n_docs == 2 && in.n_tokens == 6 && in.has_mask && in.target_tokens == 4);
  uint8_t t0[3], t1[3];
  ck_assert_int_eq(fsdpc_tokfile_doc_targets(tf, 0, 3, t0, &err), FSDPC_OK);
  ck_assert_int_eq(fsdpc_tokfile_doc_targets(tf, 1, 3, t1, &err), FSDPC_OK);
  ck_assert(t0[0] == 0 && t0[1] == 1 && t0[2] == 1 && t1[0] == 0 && t1[1] == 1 && t1[2] == 1);
  ck_assert_int_eq(fsdpc_tokfile_doc_targets(tf, 2, 1, t0, &err), FSDPC_INVALID_USAGE);
  ck_assert(in.vocab_size == 259 && in.min_doc == 3 && in.max_doc == 3);
  int64_t start, dl;
  int32_t got[3];
  uint8_t tg[3];
  ck_assert_int_eq(fsdpc_tokfile_doc(tf, 1, &start, &dl, &err), FSDPC_OK);
  ck_assert(start == 3 && dl == 3);
  ck_assert_int_eq(fsdpc_tokfile_read(tf, start, dl, got, tg, &err), FSDPC_OK);
  ck_assert(got[1] == 'i' && tg[0] == 0 && tg[1] == 1);
  ck_assert_int_eq(fsdpc_tokfile_read(tf, 5, 2, got, NULL, &err), FSDPC_INVALID_USAGE);
  fsdpc_tokfile_close(tf);
  fsdpc_free(ids);
  fsdpc_free(offs);
  fsdpc_tokenizer_destroy(t);
}
END_TEST

START_TEST(synth_batch_prepare) {
  fsdpc_err err = {0};
  char tok[400], jsonl[400], out[400];
  snprintf(tok, sizeof tok, "%s/copy.tok", tmpdir);
  fsdpc_synth_args sa;
  fsdpc_synth_args_init(&sa);
  sa.task = "copy";
  sa.out = tok;
  sa.n = 100;
  fsdpc_synth_result sr = {.struct_size = sizeof sr};
  ck_assert_msg(fsdpc_data_synth(&sa, &sr, &err) == FSDPC_OK, "%s", err.msg);
  ck_assert(sr.examples == 100 && sr.tokens > 100 && !sr.masked && sr.vocab_size == 259);
  sa.task = "sort";
  ck_assert_int_eq(fsdpc_data_synth(&sa, &sr, &err), FSDPC_INVALID_USAGE);
  /* the loader's batch: G rows of T, labels shifted by one */
  fsdpc_tokfile *tf = NULL;
  ck_assert_int_eq(fsdpc_tokfile_open(tok, &tf, &err), FSDPC_OK);
  fsdpc_batch_args ba;
  fsdpc_batch_args_init(&ba);
  ba.seq_len = 16;
  ba.global_batch = 4;
  ba.step = 1;
  fsdpc_batch *b = NULL;
  ck_assert_msg(fsdpc_batch_create(tf, &ba, &b, &err) == FSDPC_OK, "%s", err.msg);
  fsdpc_batch_info bi = {.struct_size = sizeof bi};
  fsdpc_batch_describe(b, &bi);
  ck_assert_str_eq(bi.packing, "window");
  ck_assert(bi.target_labels > 0 && bi.total_windows == bi.split_windows);
  int64_t win;
  const int32_t *ids, *labels, *docs;
  ck_assert_int_eq(fsdpc_batch_row(b, 3, &win, &ids, &labels, &docs, &err), FSDPC_OK);
  ck_assert(win >= 0 && win < bi.total_windows && docs == NULL);
  for (int j = 0; j + 1 < 16; j++)
    ck_assert(labels[j] == -100 || labels[j] == ids[j + 1]);
  ck_assert_int_eq(fsdpc_batch_row(b, 4, &win, &ids, &labels, &docs, &err), FSDPC_INVALID_USAGE);
  fsdpc_batch_destroy(b);
  ba.split = "evl";
  ck_assert_int_eq(fsdpc_batch_create(tf, &ba, &b, &err), FSDPC_INVALID_USAGE);
  ck_assert_msg(strstr(err.msg, "'evl'"), "%s", err.msg);
  fsdpc_tokfile_close(tf);
  /* JSONL prompt/completion: the loss on the completion only */
  snprintf(jsonl, sizeof jsonl, "%s/pc.jsonl", tmpdir);
  snprintf(out, sizeof out, "%s/pc.tok", tmpdir);
  FILE *f = fopen(jsonl, "w");
  ck_assert_ptr_nonnull(f);
  fputs("{\"prompt\": \"2+2=\", \"completion\": \"4\"}\n{\"prompt\": \"1+1=\", \"completion\": "
        "\"2\"}\n",
        f);
  fclose(f);
  fsdpc_prepare_args pa;
  fsdpc_prepare_args_init(&pa);
  const char *in[] = {jsonl};
  pa.inputs = in;
  pa.n_inputs = 1;
  pa.out = out;
  pa.tokenizer = "byte";
  pa.threads = 1;
  fsdpc_prepare_result pr = {.struct_size = sizeof pr};
  ck_assert_msg(fsdpc_data_prepare(&pa, &pr, &err) == FSDPC_OK, "%s", err.msg);
  ck_assert_str_eq(pr.format, "prompt_completion");
  ck_assert(pr.examples == 2 && pr.target_tokens > 0 && pr.target_tokens < pr.tokens);
  pa.format = "chat"; /* the lines are not chat: refused */
  ck_assert_int_ne(fsdpc_data_prepare(&pa, &pr, &err), FSDPC_OK);
}
END_TEST

START_TEST(plugins) {
  fsdpc_plugins *p = NULL;
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc_plugins_open(NULL, 0, &p, &err), FSDPC_OK);
  int n = fsdpc_plugins_count(p), adamw = 0;
  ck_assert_int_gt(n, 0);
  for (int i = 0; i < n; i++) {
    fsdpc_plugin_info in = {.struct_size = sizeof in};
    ck_assert_int_eq(fsdpc_plugins_get(p, i, &in, &err), FSDPC_OK);
    ck_assert_str_eq(in.kind_name, fsdpc_plugin_kind_name(in.kind));
    adamw += in.kind == FSDPC_KIND_OPTIM && strcmp(in.name, "adamw") == 0;
  }
  ck_assert_int_eq(adamw, 1);
  fsdpc_plugin_info in = {.struct_size = sizeof in};
  ck_assert_msg(fsdpc_plugins_find(p, "wrap/transformer", &in, &err) == FSDPC_OK, "%s", err.msg);
  ck_assert(in.n_options > 0 && in.abi_major == 1 && in.kind == FSDPC_KIND_WRAP);
  ck_assert_msg(fsdpc_plugins_find(p, "adamw", &in, &err) == FSDPC_OK, "%s", err.msg);
  ck_assert_int_eq(fsdpc_plugins_find(p, "optimz/adamw", &in, &err), FSDPC_INVALID_USAGE);
  ck_assert_int_eq(fsdpc_plugins_find(p, "lion", &in, &err), FSDPC_UNSUPPORTED);
  ck_assert_int_gt(fsdpc_plugins_searched_count(p), 0);
  ck_assert_ptr_nonnull(fsdpc_plugins_searched(p, 0));
  fsdpc_plugins_destroy(p);
  /* a path the caller names that is not there is a typo: refused */
  const char *paths[] = {"/nonexistent-plugins"};
  p = NULL;
  ck_assert_int_eq(fsdpc_plugins_open(paths, 1, &p, &err), FSDPC_INVALID_USAGE);
  ck_assert_ptr_null(p);
  ck_assert_msg(strstr(err.msg, "/nonexistent-plugins': no such file"), "%s", err.msg);
}
END_TEST

static void keep_line(void *user, int32_t level, const char *line) {
  (void)level;
  snprintf(user, 256, "%s", line);
}

START_TEST(launcher_and_services) {
  /* a line through the logger: the rank prefix and the level's tag */
  char last[256] = "";
  fsdpc_set_log_sink(keep_line, last);
  fsdpc_set_log_rank(3);
  fsdpc_log(FSDPC_LOG_ERROR, "it broke");
  ck_assert_str_eq(last, "[rank 3] error: it broke");
  fsdpc_set_log_rank(-1);
  fsdpc_log(FSDPC_LOG_DEBUG, "dropped"); /* above the level (warn) */
  ck_assert_str_eq(last, "[rank 3] error: it broke");
  fsdpc_set_log_sink(NULL, NULL);

  fsdpc_job_place pl = {.struct_size = sizeof pl};
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc_job_place_detect(&pl, &err), FSDPC_OK);
  ck_assert(pl.rank == 0 && pl.world_size == 1 && strcmp(pl.source, "single") == 0);
  /* two ranks; rank 1 fails: the launcher names it and its exit code */
  const char *argv[] = {"/bin/sh", "-c", "[ \"$RANK\" = 1 ] && exit 3; exit 0", NULL};
  fsdpc_launcher_args la = {
      .struct_size = sizeof la, .nproc_per_node = 2, .nnodes = 1, .argv = argv, .grace_ms = 2000};
  int32_t code = 0;
  ck_assert_int_ne(fsdpc_launch(&la, &code, &err), FSDPC_OK);
  ck_assert_int_eq(code, 3);
  ck_assert_msg(strstr(err.msg, "rank 1"), "%s", err.msg);
  const char *ok[] = {"/bin/sh", "-c", "[ \"$WORLD_SIZE\" = 2 ]", NULL};
  la.argv = ok;
  ck_assert_msg(fsdpc_launch(&la, &code, &err) == FSDPC_OK && code == 0, "%s", err.msg);
  la.node_rank = 1; /* of one node */
  ck_assert_int_eq(fsdpc_launch(&la, &code, &err), FSDPC_INVALID_USAGE);
  const char *cands[] = {"train", "plan", "generate"};
  ck_assert_str_eq(fsdpc_suggest("genrate", cands, 3), "generate");
  ck_assert_ptr_null(fsdpc_suggest("xyzzy", cands, 3));
  char buf[32];
  ck_assert_str_eq(fsdpc_escape(buf, sizeof buf, "a\nb\x1b"), "a\\nb\\x1b");
}
END_TEST

static void count_recipe(void *user, const char *name, const char *file, const char *about) {
  int *seen = user;
  (void)about;
  seen[0]++;
  if (strcmp(name, "tiny-cpu") == 0 && strstr(file, "tiny-cpu.yaml"))
    seen[1] = 1;
}

START_TEST(recipes) {
  char dir[4096], written[8192], dest[600];
  fsdpc_err err = {0};
  /* from the build tree: the source tree's configs/ */
  ck_assert_msg(fsdpc_recipes_dir(dir, sizeof dir, &err) == FSDPC_OK, "%s", err.msg);
  int seen[2] = {0, 0};
  ck_assert_msg(fsdpc_recipes_list(dir, count_recipe, seen, &err) == FSDPC_OK, "%s", err.msg);
  ck_assert_int_gt(seen[0], 3);
  ck_assert_int_eq(seen[1], 1);
  snprintf(dest, sizeof dest, "%s/mine.yaml", tmpdir);
  ck_assert_msg(fsdpc_recipes_copy(dir, "tiny-cpu", dest, written, sizeof written, &err) ==
                    FSDPC_OK,
                "%s", err.msg);
  ck_assert_str_eq(written, dest);
  fsdpc_config *c = NULL; /* the copy is a config */
  ck_assert_msg(fsdpc_config_load(dest, NULL, 0, &c, &err) == FSDPC_OK, "%s", err.msg);
  fsdpc_config_destroy(c);
  /* never overwrites; an unknown name is refused */
  ck_assert_int_ne(fsdpc_recipes_copy(dir, "tiny-cpu", dest, written, sizeof written, &err),
                   FSDPC_OK);
  ck_assert_int_ne(fsdpc_recipes_copy(dir, "no-such", dest, written, sizeof written, &err),
                   FSDPC_OK);
  ck_assert_msg(strstr(err.msg, "no recipe 'no-such'"), "%s", err.msg);
  ck_assert_int_eq(fsdpc_recipes_list(dir, NULL, NULL, &err), FSDPC_INVALID_USAGE);
}
END_TEST

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "%s/api-tools-XXXXXX", FSDPC_BINARY_DIR);
  if (!mkdtemp(tmpdir))
    return 1;
  fsdpc_set_log_level(FSDPC_LOG_WARN);
  Suite *su = suite_create("api_tools");
  TCase *tc = tcase_create("tools");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, config_views);
  tcase_add_test(tc, memory_plan);
  tcase_add_test(tc, tokenizer_and_token_files);
  tcase_add_test(tc, synth_batch_prepare);
  tcase_add_test(tc, plugins);
  tcase_add_test(tc, launcher_and_services);
  tcase_add_test(tc, recipes);
  suite_add_tcase(su, tc);
  return api_test_run(su, tmpdir, 0);
}
