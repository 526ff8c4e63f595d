/* fsdpc convert SRC DST --to hf|sharded [--dtype fp32|bf16] [--world N]
 * [--strategy S] [--hybrid-shard-size N] [--config CFG] [key=value ...]
 * (fsdpc_convert). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

static const char help[] =
    "usage: fsdpc convert SRC DST --to hf|sharded [options] [section.key=value ...]\n"
    "\n"
    "Converts a checkpoint folder (sharded, or a Hugging Face / full one) into DST.\n"
    "  --to hf|full|sharded   target format (hf = full)\n"
    "  --dtype fp32|bf16      weights of a full (HF) output (default bf16)\n"
    "  --world N              ranks of a sharded output (default 1)\n"
    "  --strategy S           FULL_SHARD (default), SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD\n"
    "  --hybrid-shard-size N  shard group size for HYBRID_SHARD\n"
    "  --config CFG           the run's YAML (default: SRC/config.yaml, else SRC's HF\n"
    "                         config.json with default settings)\n"
    "Every rank of a sharded output reads only its own ranges; a full output holds\n"
    "the model in fp32 once. Optimizer state is not carried over.\n"
    "model.adapter=DIR merges a PEFT LoRA adapter folder into the output.\n";

enum { O_TO = 256, O_DTYPE, O_WORLD, O_STRATEGY, O_HYBRID, O_CONFIG };
static const cli_opt opts[] = {
    {"to", O_TO, "hf|full|sharded"},
    {"dtype", O_DTYPE, "fp32|bf16"},
    {"world", O_WORLD, "N"},
    {"strategy", O_STRATEGY, "FULL_SHARD|SHARD_GRAD_OP|NO_SHARD|HYBRID_SHARD"},
    {"hybrid-shard-size", O_HYBRID, "N"},
    {"config", O_CONFIG, "CFG"},
    {0}};
const cli_cmd fsdpc__convert_cmd = {"convert", help, opts};

static const char *const formats[] = {"hf", "full", "sharded"};
static const char *const dtypes[] = {"fp32", "bf16"};
static const char *const strategies[] = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD"};

typedef struct convert_cli {
  fsdpc_convert_args o;
  const char **ov, *pos[2];
  int npos;
} convert_cli;

static int convert_arg(void *ctx, int id, const char *v) {
  const cli_cmd *cmd = &fsdpc__convert_cmd;
  convert_cli *a = ctx;
  fsdpc_convert_args *o = &a->o;
  switch (id) {
  case O_TO:
    return cli_choice(cmd, "to", v, formats, 3) >= 0 && (o->to = v);
  case O_DTYPE:
    return cli_choice(cmd, "dtype", v, dtypes, 2) >= 0 && (o->dtype = v);
  case O_WORLD:
    return cli_i32(cmd, "world", v, 1, 1 << 20, &o->world);
  case O_STRATEGY:
    return cli_choice(cmd, "strategy", v, strategies, 4) >= 0 && (o->strategy = v);
  case O_HYBRID:
    return cli_i32(cmd, "hybrid-shard-size", v, 1, 1 << 20, &o->hybrid_shard_size);
  case O_CONFIG:
    return (o->config = v) != NULL;
  default:
    if (strchr(v, '='))
      a->ov[o->n_overrides++] = v;
    else if (a->npos < 2)
      a->pos[a->npos++] = v;
    else
      return cli_usage_error(cmd, "unexpected argument '%s'", v) == 0;
    return 1;
  }
}

int fsdpc__cmd_convert(int argc, char **argv) {
  const cli_cmd *cmd = &fsdpc__convert_cmd;
  convert_cli a = {.o = {.struct_size = sizeof a.o}};
  if (!(a.ov = calloc((size_t)argc + 1, sizeof *a.ov)))
    return 1;
  a.o.overrides = a.ov;
  int rc = cli_parse(cmd, argc, argv, convert_arg, &a);
  if (rc < 0 && (a.npos != 2 || !a.o.to))
    rc = cli_usage_error(cmd, "SRC, DST and --to are needed");
  a.o.src = a.pos[0];
  a.o.dst = a.pos[1];
  if (rc < 0) {
    fsdpc_err err = {0};
    fsdpc_set_log_level(FSDPC_LOG_INFO);
    rc = fsdpc_convert(&a.o, &err) == FSDPC_OK ? 0 : cli_fail(cmd, err.msg);
  }
  free(a.ov);
  return rc;
}
