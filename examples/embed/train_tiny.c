/* Embedding fsdpc: train a tiny Llama in-process through the public API
 * (fsdpc.h), with the library's log lines going to our own sink and one
 * callback per step.
 *
 *   fsdpc data synth --task qa --out qa.tok
 *   ./train_tiny qa.tok [steps] [section.key=value ...]
 *
 * Exit 0 when the run finished and the loss went down. */
#include <fsdpc/fsdpc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const char *tiny_yaml =
    "model: {vocab_size: 259, hidden_size: 64, intermediate_size: 160, num_hidden_layers: 2,\n"
    "        num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 64,\n"
    "        tie_word_embeddings: true}\n"
    "data: {seq_len: 32}\n"
    "attention: {impl: naive}\n"
    "optim: {name: adamw, lr: 3.0e-3}\n"
    "schedule: {name: constant, warmup_steps: 0}\n"
    "train: {micro_batch_size: 8, threads: 1, log_every: 1000}\n"
    "log: {progress: off}\n";

/* Library log lines arrive here instead of on stderr. */
static void sink(void *user, int32_t level, const char *line) {
  int *lines = user;
  (*lines)++;
  printf("[fsdpc %s] %s\n", level <= FSDPC_LOG_WARN ? "warn" : "info", line);
}

typedef struct run_state {
  double first_loss, last_loss;
  int64_t steps;
} run_state;

static int32_t on_step(void *user, const fsdpc_step_metrics *m) {
  run_state *r = user;
  if (r->steps++ == 0)
    r->first_loss = m->loss;
  r->last_loss = m->loss;
  printf("step %lld/%lld loss %.4f lr %.2e grad_norm %.3f (%.3f s)\n", (long long)m->step,
         (long long)m->max_steps, m->loss, m->lr, m->grad_norm, m->step_s);
  return 0; /* non-zero would stop after this step */
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DATA.tok [steps] [section.key=value ...]\n", argv[0]);
    return 2;
  }
  char data[4200], steps[64], logdir[64];
  snprintf(data, sizeof data, "data.train=%s", argv[1]);
  snprintf(steps, sizeof steps, "train.max_steps=%s", argc > 2 ? argv[2] : "30");
  snprintf(logdir, sizeof logdir, "log.dir=%s", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  const char *overrides[64] = {data, steps, logdir};
  int n = 3;
  for (int i = 3; i < argc && n < 64; i++)
    overrides[n++] = argv[i];

  int lines = 0;
  fsdpc_set_log_sink(sink, &lines);
  fsdpc_err err = {0};
  fsdpc_config *cfg = NULL;
  fsdpc_trainer *t = NULL;
  run_state r = {0};
  int code = 1;
  if (fsdpc_config_parse(tiny_yaml, "train_tiny.yaml", overrides, n, &cfg, &err) != FSDPC_OK)
    goto out;
  /* What the run will be, before any weight is read. */
  fsdpc_run_plan *plan = NULL;
  fsdpc_plan_summary ps = {.struct_size = sizeof ps};
  if (fsdpc_plan_create(cfg, 1, 1, &plan, &err) != FSDPC_OK ||
      fsdpc_plan_summarize(plan, &ps, &err) != FSDPC_OK) {
    fsdpc_plan_destroy(plan);
    goto out;
  }
  printf("plan: %.2f M params, %s, shard group %d x %d, batch %lld = %lld x %lld, %d units, "
         "attention %s, optimizer %s\n",
         (double)ps.n_params / 1e6, ps.strategy_name, ps.shard_size, ps.replica_size,
         (long long)ps.global_batch, (long long)ps.micro_batch, (long long)ps.grad_accum,
         ps.n_units, ps.attention, ps.optim);
  fsdpc_plan_destroy(plan);

  if (fsdpc_trainer_create(cfg, &t, &err) != FSDPC_OK)
    goto out;
  if (fsdpc_trainer_run(t, 0, on_step, &r, &err) != FSDPC_OK)
    goto out;
  printf("trained %lld steps in-process: loss %.4f -> %.4f; %d library log lines\n",
         (long long)fsdpc_trainer_step(t), r.first_loss, r.last_loss, lines);
  code = r.steps > 1 && r.last_loss < r.first_loss ? 0 : 3;
out:
  if (err.status != FSDPC_OK)
    fprintf(stderr, "train_tiny: %s: %s\n", fsdpc_status_name(err.status), err.msg);
  fsdpc_trainer_destroy(t);
  fsdpc_config_destroy(cfg);
  return code;
}
