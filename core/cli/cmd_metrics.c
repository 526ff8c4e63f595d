/* fsdpc metrics RUN_DIR...: a summary of each run's metrics.jsonl (its last
 * run, resumes folded in): steps, losses, throughput, memory, restarts
 * (fsdpc_metrics_summary). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "commands.h"

static const char help[] =
    "usage: fsdpc metrics RUN_DIR...\n"
    "\n"
    "Summarises log.dir/metrics.jsonl of each run: the last run in the file, with its\n"
    "resumes folded in (each step once).\n";

static const cli_opt opts[] = {{0}};
const cli_cmd fsdpc__metrics_cmd = {"metrics", help, opts};

static void print_summary(const char *dir, const fsdpc_run_summary *r) {
  printf("%s: run %s, world %d, %d start%s", dir, r->run_id[0] ? r->run_id : "?", r->world,
         r->n_starts, r->n_starts == 1 ? "" : "s");
  if (r->n_starts > 1)
    printf(" (last resumed from step %lld)", (long long)r->last_resumed_from);
  if (r->n_older)
    printf("; %d earlier run%s in the file", r->n_older, r->n_older == 1 ? "" : "s");
  printf("\n  steps logged  %d (step %lld .. %lld)\n", r->n_steps, (long long)r->first_step,
         (long long)r->last_step);
  printf("  loss          first %.4f, last %.4f, min %.4f at step %lld\n", r->first_loss,
         r->last_loss, r->min_loss, (long long)r->min_loss_step);
  if (!isnan(r->last_eval_loss))
    printf("  eval loss     %.4f at step %lld\n", r->last_eval_loss, (long long)r->last_eval_step);
  if (r->tokens_per_s > 0)
    printf("  throughput    %.0f tokens/s mean, %.4f s/step mean\n", r->tokens_per_s, r->step_s);
  if (!isnan(r->last_lr))
    printf("  lr            last %.3e\n", r->last_lr);
  if (r->peak_bytes > 0)
    printf("  peak memory   %.1f MiB (rank 0, tracked)\n", r->peak_bytes / 1048576.0);
}

typedef struct metrics_cli {
  const char **dirs;
  int n;
} metrics_cli;

static int metrics_arg(void *ctx, int id, const char *v) {
  metrics_cli *a = ctx;
  (void)id; /* only positionals: the table has no option */
  a->dirs[a->n++] = v;
  return 1;
}

int fsdpc__cmd_metrics(int argc, char **argv) {
  const cli_cmd *cmd = &fsdpc__metrics_cmd;
  metrics_cli a = {.dirs = calloc((size_t)argc + 1, sizeof(char *))};
  int rc = a.dirs ? cli_parse(cmd, argc, argv, metrics_arg, &a) : 1;
  if (rc < 0 && a.n == 0)
    rc = cli_usage_error(cmd, "which runs? give one or more RUN_DIR");
  /* every run summarised; one that cannot be read makes the exit 1 */
  int failed = 0;
  for (int i = 0; rc < 0 && i < a.n; i++) {
    fsdpc_run_summary s = {.struct_size = sizeof s};
    fsdpc_err err = {0};
    if (fsdpc_metrics_summary(a.dirs[i], &s, &err) == FSDPC_OK)
      print_summary(a.dirs[i], &s);
    else
      failed = cli_fail(cmd, err.msg);
  }
  free(a.dirs);
  return rc >= 0 ? rc : failed;
}
