/* The public API through libfsdpc.so alone (this test links the shared
 * library and includes only <fsdpc/fsdpc.h>: an internal call would not
 * link): config errors, run plans at several worlds, a trainer run in
 * pieces with the per-step callback, stopping from the callback, evaluation
 * and the log sink. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fsdpc/fsdpc.h>

#include "api_test.h"

static char tmpdir[256], data[512];

static const char *tiny = "model: {vocab_size: 259, hidden_size: 32, intermediate_size: 64,\n"
                          "        num_hidden_layers: 2, num_attention_heads: 4,\n"
                          "        num_key_value_heads: 2, max_position_embeddings: 64}\n"
                          "data: {seq_len: 32, eval_fraction: 0.05}\n"
                          "attention: {impl: naive}\n"
                          "train: {micro_batch_size: 2, threads: 1, max_steps: 6,\n"
                          "        generate_prompts: []}\n"
                          "log: {progress: off}\n";

static fsdpc_config *parse(const char *const *ovr, int n) {
  fsdpc_config *c = NULL;
  fsdpc_err err = {0};
  ck_assert_msg(fsdpc_config_parse(tiny, "tiny.yaml", ovr, n, &c, &err) == FSDPC_OK, "%s", err.msg);
  return c;
}

START_TEST(config_errors) {
  fsdpc_config *c = NULL;
  fsdpc_err err = {0};
  ck_assert_int_eq(fsdpc_config_parse("model: {vocab_size: -3}\n", "bad.yaml", NULL, 0, &c, &err),
                   FSDPC_INVALID_USAGE);
  ck_assert_ptr_null(c);
  ck_assert_msg(strstr(err.msg, "bad.yaml") && !strchr(err.msg, '\n'), "%s", err.msg);
  const char *ovr[] = {"optim.lr=abc"};
  ck_assert_int_eq(fsdpc_config_parse(tiny, "tiny.yaml", ovr, 1, &c, &err), FSDPC_INVALID_USAGE);
  ck_assert_msg(strstr(err.msg, "optim.lr"), "%s", err.msg);
  ck_assert_int_eq(fsdpc_config_load("/nonexistent/x.yaml", NULL, 0, &c, &err),
                   FSDPC_INVALID_USAGE);
  fsdpc_config_destroy(NULL);
  fsdpc_plan_destroy(NULL);
  fsdpc_trainer_destroy(NULL);
}
END_TEST

START_TEST(plans) {
  const char *hy[] = {"fsdp.sharding_strategy=HYBRID_SHARD"};
  fsdpc_config *c = parse(hy, 1);
  fsdpc_run_plan *p = NULL;
  fsdpc_err err = {0};
  ck_assert_msg(fsdpc_plan_create(c, 4, 2, &p, &err) == FSDPC_OK, "%s", err.msg);
  fsdpc_plan_summary s = {.struct_size = sizeof s};
  ck_assert(fsdpc_plan_summarize(p, &s, &err) == FSDPC_OK);
  ck_assert_int_eq(s.strategy, 3);
  ck_assert_str_eq(s.strategy_name, "HYBRID_SHARD");
  ck_assert_int_eq(s.shard_size, 2); /* the ranks per node */
  ck_assert_int_eq(s.replica_size, 2);
  ck_assert_int_eq(s.global_batch, 8); /* micro 2 x accum 1 x world 4 */
  ck_assert_int_eq(s.grad_accum, 1);
  ck_assert_str_eq(s.attention, "naive");
  ck_assert_int_gt((int)s.n_params, 0);
  /* An older, shorter struct is filled only as far as it goes. */
  unsigned char small[sizeof(fsdpc_plan_summary)];
  memset(small, 0xAB, sizeof small);
  ((fsdpc_plan_summary *)small)->struct_size = 16;
  ck_assert(fsdpc_plan_summarize(p, (fsdpc_plan_summary *)small, &err) == FSDPC_OK);
  ck_assert_uint_eq(((fsdpc_plan_summary *)small)->n_params, s.n_params);
  ck_assert_uint_eq(small[16], 0xAB);
  fsdpc_plan_destroy(p);
  fsdpc_config_destroy(c);

  const char *gb[] = {"train.global_batch_size=8"};
  c = parse(gb, 1);
  ck_assert_int_eq(fsdpc_plan_create(c, 3, 3, &p, &err), FSDPC_INVALID_USAGE);
  ck_assert_msg(strstr(err.msg, "multiple"), "%s", err.msg);
  ck_assert_msg(fsdpc_plan_create(c, 2, 2, &p, &err) == FSDPC_OK, "%s", err.msg);
  s.struct_size = sizeof s;
  fsdpc_plan_summarize(p, &s, &err);
  ck_assert_int_eq(s.grad_accum, 2);
  ck_assert_int_eq(s.shard_size, 2);
  fsdpc_plan_destroy(p);
  fsdpc_config_destroy(c);
}
END_TEST

typedef struct seen {
  int calls, stop_at;
  int64_t last_step;
  double first_loss;
} seen;

static int32_t on_step(void *user, const fsdpc_step_metrics *m) {
  seen *s = user;
  ck_assert_uint_eq(m->struct_size, sizeof *m);
  ck_assert_int_eq(m->step, s->last_step + 1);
  ck_assert_int_eq(m->max_steps, 6);
  ck_assert(isfinite(m->loss) && m->loss > 0 && m->tokens == 2 * 32);
  if (s->calls++ == 0)
    s->first_loss = m->loss;
  s->last_step = m->step;
  return s->calls == s->stop_at;
}

static void count_line(void *user, int32_t level, const char *line) {
  (void)level;
  ck_assert(line && !strchr(line, '\n'));
  (*(int *)user)++;
}

START_TEST(trainer_in_pieces) {
  int lines = 0;
  fsdpc_set_log_sink(count_line, &lines);
  char ddir[600], dtrain[600];
  snprintf(dtrain, sizeof dtrain, "data.train=%s", data);
  snprintf(ddir, sizeof ddir, "log.dir=%s/log", tmpdir);
  const char *ovr[] = {dtrain, ddir};
  fsdpc_config *c = parse(ovr, 2);
  fsdpc_trainer *t = NULL;
  fsdpc_err err = {0};
  ck_assert_msg(fsdpc_trainer_create(c, &t, &err) == FSDPC_OK, "%s", err.msg);
  ck_assert_ptr_nonnull(fsdpc_trainer_plan(t));
  ck_assert_int_eq(fsdpc_trainer_step(t), 0);
  seen s = {.stop_at = 3};
  ck_assert_msg(fsdpc_trainer_run(t, 2, on_step, &s, &err) == FSDPC_OK, "%s", err.msg);
  ck_assert_int_eq(fsdpc_trainer_step(t), 2);
  ck_assert_msg(fsdpc_trainer_run(t, 0, on_step, &s, &err) == FSDPC_OK, "%s", err.msg);
  ck_assert_int_eq(fsdpc_trainer_step(t), 3); /* the callback stopped it */
  double ev = NAN;
  ck_assert_msg(fsdpc_trainer_eval(t, &ev, &err) == FSDPC_OK, "%s", err.msg);
  ck_assert(isfinite(ev) && ev > 0);
  ck_assert_msg(fsdpc_trainer_run(t, 0, NULL, NULL, &err) == FSDPC_OK, "%s", err.msg);
  ck_assert_int_eq(fsdpc_trainer_step(t), 6);
  /* no checkpoint.dir: saving says so */
  ck_assert_int_eq(fsdpc_trainer_save(t, &err), FSDPC_INVALID_USAGE);
  ck_assert_msg(strstr(err.msg, "checkpoint.dir"), "%s", err.msg);
  /* no signal stopped it */
  int32_t saved = -1;
  ck_assert_int_eq(fsdpc_trainer_stop_signal(t, &saved), 0);
  ck_assert_int_eq(saved, 0);
  fsdpc_trainer_destroy(t);
  /* the run record and every step reached metrics.jsonl through the API */
  char mpath[700], line[4096];
  snprintf(mpath, sizeof mpath, "%s/log/metrics.jsonl", tmpdir);
  FILE *mf = fopen(mpath, "r");
  ck_assert_msg(mf != NULL, "no %s", mpath);
  int runs = 0, steps = 0;
  while (fgets(line, sizeof line, mf)) {
    runs += strstr(line, "\"run_id\"") != NULL;
    steps += strstr(line, "\"step\"") != NULL && strstr(line, "\"loss\"") != NULL;
  }
  fclose(mf);
  ck_assert_int_eq(runs, 1);
  ck_assert_int_eq(steps, 6);
  fsdpc_config_destroy(c);
  ck_assert_int_gt(lines, 0); /* the library wrote through the sink */
  fsdpc_set_log_sink(NULL, NULL);
}
END_TEST

/* train.epochs resolves into the trainer's run plan; the config stays as
 * written (a second plan from it still says train.max_steps). */
START_TEST(epochs_resolve_in_the_plan) {
  char dtrain[600], ddir[600];
  snprintf(dtrain, sizeof dtrain, "data.train=%s", data);
  snprintf(ddir, sizeof ddir, "log.dir=%s/log-epochs", tmpdir);
  const char *ovr[] = {dtrain, ddir, "train.epochs=1", "train.eval_every=0"};
  fsdpc_config *c = parse(ovr, 4);
  fsdpc_trainer *t = NULL;
  fsdpc_err err = {0};
  ck_assert_msg(fsdpc_trainer_create(c, &t, &err) == FSDPC_OK, "%s", err.msg);
  fsdpc_plan_summary ps = {.struct_size = sizeof ps};
  ck_assert_int_eq(fsdpc_plan_summarize(fsdpc_trainer_plan(t), &ps, &err), FSDPC_OK);
  ck_assert_int_gt(ps.steps_per_epoch, 6);
  ck_assert_int_eq(ps.max_steps, ps.steps_per_epoch);
  fsdpc_trainer_destroy(t);
  fsdpc_run_plan *p = NULL;
  ck_assert_msg(fsdpc_plan_create(c, 1, 0, &p, &err) == FSDPC_OK, "%s", err.msg);
  fsdpc_plan_summary p2 = {.struct_size = sizeof p2};
  ck_assert_int_eq(fsdpc_plan_summarize(p, &p2, &err), FSDPC_OK);
  ck_assert_int_eq(p2.steps_per_epoch, -1);
  ck_assert_int_eq(p2.max_steps, 6); /* train.max_steps of the config, untouched */
  fsdpc_plan_destroy(p);
  fsdpc_config_destroy(c);
}
END_TEST

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "%s/api-test-XXXXXX", FSDPC_BINARY_DIR);
  if (!mkdtemp(tmpdir))
    return 1;
  snprintf(data, sizeof data, "%s/qa.tok", tmpdir);
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "'%s' data synth --task qa --out '%s' >/dev/null 2>&1", FSDPC_CLI,
           data);
  if (system(cmd) != 0)
    return 1;
  Suite *su = suite_create("api");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, config_errors);
  tcase_add_test(tc, plans);
  tcase_add_test(tc, trainer_in_pieces);
  tcase_add_test(tc, epochs_resolve_in_the_plan);
  suite_add_tcase(su, tc);
  return api_test_run(su, tmpdir, 0);
}
