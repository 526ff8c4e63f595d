/* fsdpc metrics RUN_DIR...: a summary of each run's metrics.jsonl (its last
 * run, resumes folded in): steps, losses, throughput, memory, restarts. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "obs/metrics.h"

static void usage(FILE *f) {
  fprintf(f, "usage: fsdpc metrics RUN_DIR... \n"
             "\n"
             "Summarises log.dir/metrics.jsonl of each run: the last run in the file, with its\n"
             "resumes folded in (each step once).\n");
}

static void summary(const char *dir, const fsdpc_metrics_run *r) {
  const fsdpc_metrics_point *p = r->pts, *last = &r->pts[r->n - 1];
  double min_loss = INFINITY, last_eval = NAN, tok = 0, step = 0;
  int64_t min_at = 0, eval_at = 0, nt = 0;
  double peak = 0;
  for (int i = 0; i < r->n; i++) {
    if (p[i].loss < min_loss) {
      min_loss = p[i].loss;
      min_at = p[i].step;
    }
    if (!isnan(p[i].eval_loss)) {
      last_eval = p[i].eval_loss;
      eval_at = p[i].step;
    }
    if (p[i].tok_s > 0 && p[i].step_s > 0) {
      tok += p[i].tok_s;
      step += p[i].step_s;
      nt++;
    }
    if (p[i].peak_bytes > peak)
      peak = p[i].peak_bytes;
  }
  printf("%s: run %s, world %d, %d start%s", dir, r->run_id[0] ? r->run_id : "?", r->world,
         r->n_starts, r->n_starts == 1 ? "" : "s");
  if (r->n_starts > 1)
    printf(" (last resumed from step %lld)", (long long)r->last_resumed_from);
  if (r->n_older)
    printf("; %d earlier run%s in the file", r->n_older, r->n_older == 1 ? "" : "s");
  printf("\n  steps logged  %d (step %lld .. %lld)\n", r->n, (long long)p[0].step,
         (long long)last->step);
  printf("  loss          first %.4f, last %.4f, min %.4f at step %lld\n", p[0].loss, last->loss,
         min_loss, (long long)min_at);
  if (!isnan(last_eval))
    printf("  eval loss     %.4f at step %lld\n", last_eval, (long long)eval_at);
  if (nt)
    printf("  throughput    %.0f tokens/s mean, %.4f s/step mean\n", tok / (double)nt,
           step / (double)nt);
  if (!isnan(last->lr))
    printf("  lr            last %.3e\n", last->lr);
  if (peak > 0)
    printf("  peak memory   %.1f MiB (rank 0, tracked)\n", peak / 1048576.0);
}

int fsdpc__cmd_metrics(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    }
  int code = 0;
  for (int i = 1; i < argc; i++) {
    fsdpc_metrics_run r;
    fsdpc_err err = {0};
    if (fsdpc__metrics_read(argv[i], &r, &err) != FSDPC_OK) {
      fprintf(stderr, "fsdpc metrics: %s\n", err.msg);
      code = 1;
      continue;
    }
    summary(argv[i], &r);
    fsdpc__metrics_run_free(&r);
  }
  return code;
}
