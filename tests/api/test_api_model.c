/* What fsdpc eval, generate, convert, metrics, plot and bench do, through
 * libfsdpc.so alone: a tiny model trained here, then evaluated, generated
 * from (greedy is deterministic; a stop string cuts the text), converted,
 * its metrics summarised and plotted, and a bench file planned (dry run). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <fsdpc/fsdpc.h>

#include "api_test.h"

static char tmpdir[256], data[512], ckdir[600], logdir[600], cfgpath[600];

static const char *yaml = "model: {vocab_size: 259, hidden_size: 32, intermediate_size: 64,\n"
                          "        num_hidden_layers: 2, num_attention_heads: 4,\n"
                          "        num_key_value_heads: 2, max_position_embeddings: 64}\n"
                          "data: {seq_len: 32, eval_fraction: 0.05}\n"
                          "attention: {impl: naive}\n"
                          "train: {micro_batch_size: 2, threads: 1, max_steps: 4,\n"
                          "        eval_batches: 3, generate_prompts: []}\n"
                          "checkpoint: {final_dtype: fp32}\n"
                          "log: {progress: off, level: warn}\n";

/* The model every test uses: trained once, in the first test's process. */
static void train_once(void) {
  static int done;
  if (done++)
    return;
  char o1[700], o2[700], o3[700];
  snprintf(o1, sizeof o1, "data.train=%s", data);
  snprintf(o2, sizeof o2, "checkpoint.dir=%s", ckdir);
  snprintf(o3, sizeof o3, "log.dir=%s", logdir);
  const char *ov[] = {o1, o2, o3};
  fsdpc_config *c = NULL;
  fsdpc_err err = {0};
  ck_assert_msg(fsdpc_config_parse(yaml, "tiny.yaml", ov, 3, &c, &err) == FSDPC_OK, "%s", err.msg);
  fsdpc_trainer *t = NULL;
  ck_assert_msg(fsdpc_trainer_create(c, &t, &err) == FSDPC_OK, "%s", err.msg);
  ck_assert_msg(fsdpc_trainer_run(t, 0, NULL, NULL, &err) == FSDPC_OK, "%s", err.msg);
  fsdpc_trainer_destroy(t);
  fsdpc_config_destroy(c);
}

START_TEST(eval_and_generate) {
  train_once();
  char final[700];
  snprintf(final, sizeof final, "%s/final", ckdir);
  fsdpc_err err = {0};
  /* eval of the final model on the training file, three batches (the run
   * held out part of it: data.eval is the file itself here) */
  const char *ov[] = {"train.eval_batches=3", "data.eval_fraction=0"};
  char elog[700];
  snprintf(elog, sizeof elog, "%s/eval-log", tmpdir);
  fsdpc_eval_args ea = {.struct_size = sizeof ea,
                        .model = final,
                        .data = data,
                        .log_dir = elog,
                        .overrides = ov,
                        .n_overrides = 2};
  fsdpc_config *c = NULL;
  ck_assert_msg(fsdpc_eval_config(&ea, &c, &err) == FSDPC_OK, "%s", err.msg);
  fsdpc_eval_result r = {.struct_size = sizeof r};
  ck_assert_msg(fsdpc_evaluate(c, &r, &err) == FSDPC_OK, "%s", err.msg);
  ck_assert(isfinite(r.loss) && r.tokens > 0 && r.batches > 0 && r.world_size == 1);
  ck_assert_int_eq(r.sequences, 3 * 2); /* three whole batches of micro_batch_size 2 */
  ck_assert(r.token_accuracy >= 0 && r.token_accuracy <= 1);
  ck_assert(fabs(r.perplexity - exp(r.loss)) < 1e-9 * r.perplexity);
  ck_assert_int_gt(r.peak_device_bytes, 0);
  fsdpc_config_destroy(c);
  ea.model = "/nonexistent/model";
  ck_assert_int_eq(fsdpc_eval_config(&ea, &c, &err), FSDPC_INVALID_USAGE);
  ck_assert_msg(strstr(err.msg, "no such model folder"), "%s", err.msg);

  fsdpc_model_args ma = {.struct_size = sizeof ma, .dir = final, .device = "cpu"};
  fsdpc_model *m = NULL;
  ck_assert_msg(fsdpc_model_load(&ma, &m, &err) == FSDPC_OK, "%s", err.msg);
  fsdpc_prompt_args pa = {.struct_size = sizeof pa};
  int32_t *ids = NULL, n = 0;
  ck_assert_int_eq(fsdpc_model_prompt(m, &pa, "Q: capital of France?\nA:", NULL, &ids, &n, &err),
                   FSDPC_OK);
  ck_assert_int_eq(n, 25); /* EOS first (packed byte data), then the 24 bytes */
  ck_assert_int_eq(ids[0], 257);
  pa.chat = 1; /* the byte tokenizer has no chat template */
  int32_t *cid = NULL, cn = 0;
  ck_assert_int_eq(fsdpc_model_prompt(m, &pa, "hi", NULL, &cid, &cn, &err), FSDPC_INVALID_USAGE);
  const int32_t *prompts[2] = {ids, ids};
  int32_t lens[2] = {n, n};
  fsdpc_generate_args ga = {.struct_size = sizeof ga, .max_new_tokens = 6, .ignore_eos = 1};
  fsdpc_generation *g = NULL;
  ck_assert_msg(fsdpc_generate(m, prompts, lens, 2, &ga, &g, &err) == FSDPC_OK, "%s", err.msg);
  ck_assert_int_eq(g[0].n_ids, 6);
  ck_assert_str_eq(g[0].stop_reason, "length");
  ck_assert_str_eq(g[0].text, g[1].text); /* greedy: the same prompt, the same text */
  ck_assert_mem_eq(g[0].ids, g[1].ids, 6 * sizeof(int32_t));
  char first[8] = {g[0].text[0], 0};
  fsdpc_generations_free(g, 2);
  if (first[0]) { /* a stop string: the text cut before it */
    const char *stop[] = {first};
    ga.stop = stop;
    ga.n_stop = 1;
    ck_assert_int_eq(fsdpc_generate(m, prompts, lens, 1, &ga, &g, &err), FSDPC_OK);
    ck_assert_str_eq(g[0].stop_reason, "stop");
    ck_assert_str_eq(g[0].text, "");
    fsdpc_generations_free(g, 1);
  }
  ck_assert_int_gt(fsdpc_model_peak_bytes(m), 0);
  fsdpc_free(ids);
  fsdpc_model_destroy(m);
}
END_TEST

START_TEST(convert_metrics_plot) {
  train_once();
  fsdpc_err err = {0};
  char final[700], out[700];
  snprintf(final, sizeof final, "%s/final", ckdir);
  snprintf(out, sizeof out, "%s/sharded2", tmpdir);
  fsdpc_convert_args ca = {
      .struct_size = sizeof ca, .src = final, .dst = out, .to = "sharded", .world = 2};
  ck_assert_msg(fsdpc_convert(&ca, &err) == FSDPC_OK, "%s", err.msg);
  struct stat sb;
  ck_assert_int_eq(stat(out, &sb), 0);
  ca.dtype = "fp16";
  ck_assert_int_eq(fsdpc_convert(&ca, &err), FSDPC_INVALID_USAGE);

  fsdpc_run_summary s = {.struct_size = sizeof s};
  ck_assert_msg(fsdpc_metrics_summary(logdir, &s, &err) == FSDPC_OK, "%s", err.msg);
  ck_assert(s.n_steps == 4 && s.first_step == 1 && s.last_step == 4 && s.n_starts == 1);
  ck_assert(s.min_loss <= s.first_loss && isfinite(s.last_loss) && s.world == 1);
  ck_assert_int_eq(fsdpc_metrics_summary("/nonexistent", &s, &err), FSDPC_INVALID_USAGE);

  char svg[700];
  snprintf(svg, sizeof svg, "%s/fig/run.svg", tmpdir);
  const char *dirs[] = {logdir};
  ck_assert_msg(fsdpc_plot(dirs, 1, NULL, svg, &err) == FSDPC_OK, "%s", err.msg);
  ck_assert(stat(svg, &sb) == 0 && sb.st_size > 100);

  /* bench, dry run: every variant listed with its planned memory */
  char bench[700];
  snprintf(bench, sizeof bench, "%s/b.yaml", tmpdir);
  FILE *f = fopen(bench, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f, "base: %s\nmatrix:\n  fsdp.sharding_strategy: [FULL_SHARD, NO_SHARD]\n", cfgpath);
  fclose(f);
  char *report = NULL;
  size_t len = 0;
  FILE *rf = open_memstream(&report, &len);
  fsdpc_bench_args ba = {.struct_size = sizeof ba,
                         .path = bench,
                         .warmup = -1,
                         .dry_run = 1,
                         .report = rf,
                         .progress = rf};
  int32_t failed = -1;
  ck_assert_msg(fsdpc_bench(&ba, &failed, &err) == FSDPC_OK, "%s", err.msg);
  fclose(rf);
  ck_assert_int_eq(failed, 0);
  ck_assert_msg(strstr(report, "FULL_SHARD") && strstr(report, "NO_SHARD") &&
                    strstr(report, "planned peak"),
                "%s", report);
  free(report);
}
END_TEST

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "%s/api-model-XXXXXX", FSDPC_BINARY_DIR);
  if (!mkdtemp(tmpdir))
    return 1;
  snprintf(data, sizeof data, "%s/qa.tok", tmpdir);
  snprintf(ckdir, sizeof ckdir, "%s/ck", tmpdir);
  snprintf(logdir, sizeof logdir, "%s/log", tmpdir);
  snprintf(cfgpath, sizeof cfgpath, "%s/tiny.yaml", tmpdir);
  fsdpc_set_log_level(FSDPC_LOG_WARN);
  fsdpc_synth_args sa;
  fsdpc_synth_args_init(&sa);
  sa.task = "qa";
  sa.out = data;
  fsdpc_err err = {0};
  FILE *f = fopen(cfgpath, "w");
  if (fsdpc_data_synth(&sa, NULL, &err) != FSDPC_OK || !f)
    return 1;
  fprintf(f, "%sdata: {train: %s, seq_len: 32, eval_fraction: 0.05}\n", "", data);
  fputs("model: {vocab_size: 259, hidden_size: 32, intermediate_size: 64,\n"
        "        num_hidden_layers: 2, num_attention_heads: 4,\n"
        "        num_key_value_heads: 2, max_position_embeddings: 64}\n",
        f);
  fclose(f);
  Suite *su = suite_create("api_model");
  TCase *tc = tcase_create("model");
  tcase_set_timeout(tc, 180);
  tcase_add_test(tc, eval_and_generate);
  tcase_add_test(tc, convert_metrics_plot);
  suite_add_tcase(su, tc);
  return api_test_run(su, tmpdir, 1); /* no fork: one model, trained by the first test */
}
