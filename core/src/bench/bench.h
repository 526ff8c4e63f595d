/* fsdpc bench: A/B benchmarking of config variants.
 *
 * A bench file names a base config, overrides for every variant and a
 * matrix of axes (any config key); the variants are the cartesian product.
 * Each run of a variant is a fresh `fsdpc train` (fresh processes) with its
 * own log.dir; runs are interleaved across variants (A B C A B C ...) so
 * that machine drift hits all alike. Warm-up steps are excluded from the
 * timings. A variant that fails is a row that says why.
 *
 *   spec.c    the bench file -> variants
 *   run.c     one run: spawn, wait (with a timeout), read its logs
 *   output.c  aggregate, table, CSV, JSON, baseline rows
 *   chart.c   the chart (SVG; PNG when built with cairo) */
#ifndef FSDPC_BENCH_BENCH_H
#define FSDPC_BENCH_BENCH_H

#include <stdio.h>

#include "fsdp/engine.h"
#include "plan/plan.h"
#include "util/err.h"
#include "util/mem.h"

typedef struct fsdpc_bench_variant {
  char name[128];
  char **overrides; /* "key=value" for this variant's axes (owned) */
  int n_overrides;
} fsdpc_bench_variant;

typedef struct fsdpc_bench_spec {
  char *path; /* the bench file */
  char *title;
  char *base; /* base config, relative to the bench file's folder */
  char **set; /* overrides for every variant (owned) */
  int n_set;
  fsdpc_bench_variant *variants;
  int n_variants;
  int nproc_per_node, warmup_steps, steps, repeats, timeout_s;
  double peak_tflops; /* per device (dense, compute dtype); 0 = MFU not reported */
  char *out_dir;      /* "" = out/bench/<file stem> */
  char *baseline;     /* "" = none */
} fsdpc_bench_spec;

/* Reads and checks a bench file; one-line errors name file:line:col. */
fsdpc_status fsdpc__bench_spec_load(const char *path, fsdpc_bench_spec **out, fsdpc_err *err);
void fsdpc__bench_spec_destroy(fsdpc_bench_spec *s);
/* Appends an override for every variant (from the command line). */
fsdpc_status fsdpc__bench_spec_add_set(fsdpc_bench_spec *s, const char *kv, fsdpc_err *err);

/* What one run measured. */
typedef struct fsdpc_bench_run {
  int ok;
  char reason[1024]; /* why it failed (one line) */
  int world;
  double *step_s, *comm_s; /* (n_steps) measured steps, warm-up excluded */
  int n_steps;
  double tokens_per_step, final_loss, wall_s;
  fsdpc_comm_bytes comm;                           /* bytes of the last step (rank 0) */
  int64_t peak[FSDPC_MEM_NCAT], total_peak;        /* max over ranks */
  int64_t rss_peak;                                /* max over ranks */
  int64_t reserved;                                /* -1 = not reported (CPU) */
  uint64_t shard_params, shard_grads, shard_optim; /* rank 0's engine accounting */
} fsdpc_bench_run;

typedef struct fsdpc_bench_run_opts {
  const char *exe;              /* the fsdpc executable */
  const char *config;           /* base config path */
  const char *const *overrides; /* set + variant + forced */
  int n_overrides;
  int nproc_per_node;
  int warmup_steps;
  int timeout_s;
  const char *log_dir;
} fsdpc_bench_run_opts;

/* Runs `fsdpc train` and reads its logs. A failing run is returned with
 * ok = 0 and a reason; only a bench-side problem is an error. */
fsdpc_status fsdpc__bench_run(const fsdpc_bench_run_opts *o, fsdpc_bench_run *out, fsdpc_err *err);
void fsdpc__bench_run_free(fsdpc_bench_run *r);

/* One row of the result: a variant over its repeats. */
typedef struct fsdpc_bench_row {
  char name[128];
  int ok, baseline; /* baseline: a row read from --baseline */
  char reason[1024];
  int world, repeats;
  double step_med, step_min, step_max;
  int n_samples;
  double tok_s, tok_s_rank, flops_per_token, tflops_rank, mfu;  /* mfu NAN = unknown */
  int64_t peak[FSDPC_MEM_NCAT], total_peak, rss_peak, reserved; /* -1 = unknown */
  uint64_t shard_params, shard_grads, shard_optim;
  fsdpc_comm_bytes comm;
  double comm_s_med, final_loss;
  int have_plan;
  fsdpc_plan_mem plan;
  char axes[512]; /* the variant's overrides, space separated */
} fsdpc_bench_row;

/* Pools the runs of one variant into a row (median and min-max of every
 * measured step of every run; memory is the max over runs). */
void fsdpc__bench_row_from_runs(fsdpc_bench_row *row, const fsdpc_bench_run *runs, int n_runs,
                                double peak_tflops);

/* Reads baseline rows: a bench.json of `fsdpc bench`, or JSON lines of
 * bench/torch_fsdp2_baseline.py (optionally prefixed "RESULT "). */
fsdpc_status fsdpc__bench_read_baseline(const char *path, double peak_tflops,
                                        fsdpc_bench_row **rows, int *n, fsdpc_err *err);

void fsdpc__bench_print_table(FILE *f, const fsdpc_bench_spec *s, const fsdpc_bench_row *rows,
                              int n);
fsdpc_status fsdpc__bench_write_csv(const char *path, const fsdpc_bench_row *rows, int n,
                                    fsdpc_err *err);
fsdpc_status fsdpc__bench_write_json(const char *path, const fsdpc_bench_spec *s,
                                     const fsdpc_bench_row *rows, int n, fsdpc_err *err);

/* Writes the chart (throughput and peak memory per variant) through cairo as
 * SVG, and as PNG when png_path is non-NULL. A build without cairo writes
 * neither and succeeds; *written says whether the chart was written. */
fsdpc_status fsdpc__bench_chart(const char *svg_path, const char *png_path, const char *title,
                                const fsdpc_bench_row *rows, int n, int *written, fsdpc_err *err);

/* The whole bench of fsdpc_bench (driver.c): the file and a's settings,
 * the planned memory of each variant, the runs, the table and files.
 * *failed: variants that failed. */
fsdpc_status fsdpc__bench_drive(const fsdpc_bench_args *a, int32_t *failed, fsdpc_err *err);

#endif
