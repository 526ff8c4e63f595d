/* fsdpc bench BENCH.yaml [key=value ...] [options]
 *
 * Runs every variant of the bench file's matrix in fresh `fsdpc train`
 * processes, repeats interleaved across variants, and writes a table,
 * bench.csv, bench.json and bench.svg (+ bench.png with cairo) with the
 * planner's prediction beside each measurement (fsdpc_bench; docs/bench.md). */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "commands.h"

static const char help[] =
    "usage: fsdpc bench BENCH.yaml [section.key=value ...] [options]\n"
    "\n"
    "Runs each variant of the bench file's matrix (fresh processes, warm-up excluded,\n"
    "repeats interleaved A B C A B C ...) and writes a table, bench.csv, bench.json and\n"
    "bench.svg (bench.png too when built with cairo). Overrides apply to every variant.\n"
    "\n"
    "  --out DIR            output folder (default: the file's `out`, or out/bench/NAME)\n"
    "  --baseline FILE      rows to draw alongside: a bench.json, or JSON lines of\n"
    "                       bench/torch_fsdp2_baseline.py\n"
    "  --repeats R  --steps N  --warmup W  --nproc-per-node P  --timeout S\n"
    "                       override the bench file's values\n"
    "  --dry-run            list the variants and the planner's prediction; run nothing\n";

enum { O_OUT = 256, O_BASELINE, O_REPEATS, O_STEPS, O_WARMUP, O_NPROC, O_TIMEOUT, O_DRY };
static const cli_opt opts[] = {
    {"out", O_OUT, "DIR"},       {"baseline", O_BASELINE, "FILE"}, {"repeats", O_REPEATS, "R"},
    {"steps", O_STEPS, "N"},     {"warmup", O_WARMUP, "W"},        {"nproc-per-node", O_NPROC, "P"},
    {"timeout", O_TIMEOUT, "S"}, {"dry-run", O_DRY, NULL},         {0}};
const cli_cmd fsdpc__bench_cmd = {"bench", help, opts};

typedef struct bench_cli {
  fsdpc_bench_args a;
  const char **sets;
} bench_cli;

static int bench_arg(void *ctx, int id, const char *v) {
  const cli_cmd *cmd = &fsdpc__bench_cmd;
  bench_cli *b = ctx;
  fsdpc_bench_args *a = &b->a;
  switch (id) {
  case O_OUT:
    return (a->out_dir = v) != NULL;
  case O_BASELINE:
    return (a->baseline = v) != NULL;
  case O_REPEATS:
    return cli_i32(cmd, "repeats", v, 1, 1000000, &a->repeats);
  case O_STEPS:
    return cli_i32(cmd, "steps", v, 1, 1000000, &a->steps);
  case O_WARMUP:
    return cli_i32(cmd, "warmup", v, 0, 1000000, &a->warmup);
  case O_NPROC:
    return cli_i32(cmd, "nproc-per-node", v, 1, 1000000, &a->nproc_per_node);
  case O_TIMEOUT:
    return cli_i32(cmd, "timeout", v, 1, 1000000, &a->timeout_s);
  case O_DRY:
    return (a->dry_run = 1);
  default:
    if (!a->path)
      a->path = v;
    else
      b->sets[a->n_sets++] = v;
    return 1;
  }
}

int fsdpc__cmd_bench(int argc, char **argv) {
  const cli_cmd *cmd = &fsdpc__bench_cmd;
  bench_cli b = {.a = {.struct_size = sizeof b.a, .warmup = -1}};
  if (!(b.sets = calloc((size_t)argc + 1, sizeof *b.sets)))
    return 1;
  b.a.sets = b.sets;
  int rc = cli_parse(cmd, argc, argv, bench_arg, &b);
  if (rc < 0 && !b.a.path)
    rc = cli_usage_error(cmd, "missing the bench file");
  if (rc < 0) {
    fsdpc_err err = {0};
    int32_t failed = 0;
    rc = fsdpc_bench(&b.a, &failed, &err) != FSDPC_OK ? cli_fail(cmd, err.msg) : failed ? 1 : 0;
  }
  free(b.sets);
  return rc;
}
