/* log.dir/metrics.jsonl: one JSON object a line, kept across restarts.
 *
 * Writing: every start appends a run record
 *   {"event":"start","run_id":...,"config":...,"config_hash":...,
 *    "resumed_from":K,"world":W,...}
 * and then one object per logged step ({"step":N,"loss":...}). A resume
 * from a checkpoint at step K first drops the step records of the current
 * run (since its last fresh start) that come after K, so that every step
 * appears once; a fresh start (K = 0) keeps older runs above it. Lines that
 * are not JSON records (one cut by a kill) are moved, with a warning, to
 * metrics.unparsed.txt beside it. The file is never opened through a link
 * or as a FIFO or device (util/fs.h): such a metrics.jsonl is refused.
 *
 * Reading: the last run (from its last fresh start) as one series per
 * metric, ordered by step, each step once. */
#ifndef FSDPC_OBS_METRICS_H
#define FSDPC_OBS_METRICS_H

#include <stdint.h>
#include <stdio.h>

#include "util/err.h"

typedef struct fsdpc_run_record {
  const char *config;   /* the config file's path */
  uint64_t config_hash; /* of the resolved config */
  int64_t resumed_from; /* steps done at this start (0: fresh) */
  int world;
  int64_t max_steps, global_batch, tokens_per_step;
} fsdpc_run_record;

/* Opens dir/metrics.jsonl for appending (dir and its parents created),
 * after dropping records a resume replaces, and appends the run record.
 * run_id (cap bytes) receives the new run's id. */
fsdpc_status fsdpc__metrics_open(const char *dir, const fsdpc_run_record *rr, char *run_id,
                                 size_t cap, FILE **out, fsdpc_err *err);

/* One logged step, as metrics.jsonl has it (NAN = absent). */
typedef struct fsdpc_metrics_point {
  int64_t step;
  double loss, eval_loss, lr, grad_norm, tok_s, step_s, tokens, elapsed_s, peak_bytes;
} fsdpc_metrics_point;

typedef struct fsdpc_metrics_run {
  char run_id[64];
  int n_starts;              /* starts in this run (1 + resumes) */
  int64_t last_resumed_from; /* of the last start */
  int n_older;               /* fresh runs before this one in the file */
  int world;
  fsdpc_metrics_point *pts; /* owned, by step */
  int n;
} fsdpc_metrics_run;

/* Reads dir/metrics.jsonl (or a .jsonl file given directly): its last run. */
fsdpc_status fsdpc__metrics_read(const char *dir, fsdpc_metrics_run *out, fsdpc_err *err);
void fsdpc__metrics_run_free(fsdpc_metrics_run *r);

#endif
